# The "python3" real-program workload: JSON round trips, dict/list/str churn,
# sorting. Run as /usr/bin/python3 -I pywork.py DATA.json
import json, sys, collections
with open(sys.argv[1]) as f:
    recs = json.load(f)
by = collections.defaultdict(list)
for r in recs:
    by[r["name"]].append(r)
total = 0
for name, rs in by.items():
    rs.sort(key=lambda r: (-r["score"], r["id"]))
    s = json.dumps(rs[:20])
    total += len(json.loads(s))
words = collections.Counter(t for r in recs for t in r["tags"])
text = " ".join(f"{r['name']}:{r['nested']['s']}" for r in recs)
parts = sorted(set(text.split()))
print(total, len(words), len(parts))
