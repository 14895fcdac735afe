/* dumpbench: the time of one heaplive dump (symbolization included).
 *
 *   HEAPLIVE_SAMPLE_INTERVAL=1 LD_PRELOAD=libheaplive.so dumpbench OUTDIR [N_ALLOCS]
 *
 * Makes N_ALLOCS (default 10,000) live allocations of 64..1023 bytes from
 * 1,000 distinct call stacks: stack id = three decimal digits, each picking
 * one of ten distinct functions at its level (30 functions), then a 6-deep
 * recursion, then malloc; so each stack is ~12 frames deep with ~40
 * distinct return addresses to symbolize. Then calls heaplive_dump() twice
 * (first: cold symbolizer caches; second: repeated), timing each with
 * clock_gettime, and prints:
 *   dump1_ms=... dump2_ms=... allocs=... stacks=...  */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")
static volatile unsigned long sink;
static void **keep;
static int nkeep;

NOINLINE static void *leaf(int id, int depth) {
    if (depth > 0) { void *p = leaf(id, depth - 1); BARRIER(); sink++; return p; }
    void *p = malloc(64 + (id * 37) % 960);
    BARRIER();
    return p;
}

typedef void *(*fn)(int);
static fn L1[10], L2[10];

#define L2F(i) NOINLINE static void *l2_##i(int id) { void *p = leaf(id, 6); BARRIER(); sink += i; return p; }
#define L1F(i) NOINLINE static void *l1_##i(int id) { void *p = L2[(id / 100) % 10](id); BARRIER(); sink += i; return p; }
#define L0F(i) NOINLINE static void *l0_##i(int id) { void *p = L1[(id / 10) % 10](id); BARRIER(); sink += i; return p; }
#define TEN(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9)
TEN(L2F) TEN(L1F) TEN(L0F)
static fn L0[10] = {l0_0, l0_1, l0_2, l0_3, l0_4, l0_5, l0_6, l0_7, l0_8, l0_9};
static fn L1[10] = {l1_0, l1_1, l1_2, l1_3, l1_4, l1_5, l1_6, l1_7, l1_8, l1_9};
static fn L2[10] = {l2_0, l2_1, l2_2, l2_3, l2_4, l2_5, l2_6, l2_7, l2_8, l2_9};

static double ms_since(struct timespec *a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a->tv_sec) * 1e3 + (b.tv_nsec - a->tv_nsec) * 1e-6;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    int n = argc > 2 ? atoi(argv[2]) : 10000;
    keep = calloc(n, sizeof(void *));
    for (int i = 0; i < n; i++) { keep[i] = L0[(i % 1000) % 10](i % 1000); nkeep++; }
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heaplive_dump");
    if (!dump) { printf("heaplive_dump not found (not preloaded?)\n"); return 1; }
    char p1[4096], p2[4096];
    snprintf(p1, sizeof p1, "%s/dumpbench.1.folded", dir);
    snprintf(p2, sizeof p2, "%s/dumpbench.2.folded", dir);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int r1 = dump(p1);
    double d1 = ms_since(&t);
    clock_gettime(CLOCK_MONOTONIC, &t);
    int r2 = dump(p2);
    double d2 = ms_since(&t);
    printf("dump1_ms=%.3f dump2_ms=%.3f rc1=%d rc2=%d allocs=%d stacks=1000\n", d1, d2, r1, r2, n);
    for (int i = 0; i < n; i++) free(keep[i]);
    free(keep);
    return 0;
}
