#!/usr/bin/python3
"""Writes the generated inputs of the real-program workloads into OUTDIR:
data.json (for jq) and gccinput.c (for the gcc compile). Deterministic."""
import json, random, sys, os

out = sys.argv[1]
NF = 100  # functions in gccinput.c
NREC = 96000  # records in data.json
# Sized so that each workload runs well over 1 s without a preload (jq
# about 2 s, python3 and gcc about 1.5 s on the 2-CPU bench machine; at
# 40,000 records and 40 functions their medians were 0.6-0.9 s, short
# enough for fixed costs to count). Inputs written with other sizes are
# replaced.
VERSION = f"records={NREC} functions={NF}\n"
vf = os.path.join(out, "inputs.version")
if not os.path.exists(vf) or open(vf).read() != VERSION:
    for name in ("data.json", "gccinput.c", "gccinput.i"):
        if os.path.exists(os.path.join(out, name)):
            os.remove(os.path.join(out, name))
rnd = random.Random(42)
words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]

if not os.path.exists(os.path.join(out, "data.json")):
    recs = []
    for i in range(NREC):
        recs.append({
            "id": i,
            "name": rnd.choice(words) + "-" + str(rnd.randrange(500)),
            "score": rnd.random() * 100,
            "tags": [rnd.choice(words) for _ in range(rnd.randrange(1, 6))],
            "nested": {"a": rnd.randrange(1000), "b": [rnd.randrange(100) for _ in range(3)], "s": "x" * rnd.randrange(40)},
        })
    with open(os.path.join(out, "data.json"), "w") as f:
        json.dump(recs, f)

if not os.path.exists(os.path.join(out, "gccinput.c")):
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", ""]
    for i in range(NF):
        lines.append(f"struct s{i} {{ int a; double b[{1 + i % 7}]; char name[{8 + i % 13}]; }};")
        lines.append(f"static int cmp{i}(const void *x, const void *y) {{ const struct s{i} *p = x, *q = y; return (p->a > q->a) - (p->a < q->a); }}")
        lines.append(f"double f{i}(int n) {{")
        lines.append(f"  struct s{i} *v = calloc(n, sizeof *v); double acc = 0;")
        lines.append(f"  for (int k = 0; k < n; k++) {{ v[k].a = (k * {i + 3}) % 97; for (int j = 0; j < {1 + i % 7}; j++) v[k].b[j] = k * j + {i}; snprintf(v[k].name, sizeof v[k].name, \"n%d\", k); }}")
        lines.append(f"  qsort(v, n, sizeof *v, cmp{i});")
        lines.append(f"  for (int k = 0; k < n; k++) {{ switch (v[k].a % 5) {{ case 0: acc += v[k].b[0]; break; case 1: acc -= strlen(v[k].name); break; case 2: acc *= 1.0001; break; default: acc += k; }} }}")
        lines.append(f"  free(v); return acc;")
        lines.append("}")
    lines.append("int main(void) { double t = 0;")
    for i in range(NF):
        lines.append(f"  t += f{i}({10 + i});")
    lines.append('  printf("%f\\n", t); return 0; }')
    with open(os.path.join(out, "gccinput.c"), "w") as f:
        f.write("\n".join(lines) + "\n")

with open(vf, "w") as f:
    f.write(VERSION)
