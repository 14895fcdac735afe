/* A known live total for the sampler's statistical test
 * (preload-tests/sampled.rs): 48 MiB live from site_a and 16 MiB from
 * site_b, in mixed sizes drawn by a fixed LCG (the same every run), with
 * as many bytes again allocated and freed along the way. Prints the exact
 * live bytes per site. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static uint64_t lcg = 0x2545F4914F6CDD1DULL;
static uint64_t next(void) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lcg >> 33;
}

/* site_a: mostly small and medium blocks. */
static const size_t sizes_a[] = {16, 48, 100, 256, 1000, 4096, 30000};
/* site_b: medium and large blocks, up to well above the 512 KiB interval,
 * so that un-biasing s / (1 - exp(-s/R)) matters. */
static const size_t sizes_b[] = {700, 7000, 65536, 200000, 1500000};

NOINLINE void *site_a(size_t n) { return malloc(n); }
NOINLINE void *site_b(size_t n) { return malloc(n); }
NOINLINE void *site_churn(size_t n) { return malloc(n); }

static void *blocks[200000];
static int nblocks;

static uint64_t fill(void *(*site)(size_t), const size_t *sizes, int nsizes, uint64_t target) {
    uint64_t live = 0;
    while (live < target) {
        size_t n = sizes[next() % nsizes];
        n += next() % 16; /* not all the same size */
        if (live + n > target) n = target - live;
        char *p = site(n);
        if (!p) { printf("malloc failed\n"); exit(1); }
        p[0] = 1;
        blocks[nblocks++] = p;
        live += n;
        /* Churn: allocated and freed, must not count. */
        void *q = site_churn(sizes[next() % nsizes]);
        free(q);
    }
    return live;
}

int main(void) {
    uint64_t a = 0, b = 0;
    /* Interleave the sites in 16 rounds. */
    for (int r = 0; r < 16; r++) {
        a += fill(site_a, sizes_a, sizeof sizes_a / sizeof *sizes_a, 3ULL << 20);
        b += fill(site_b, sizes_b, sizeof sizes_b / sizeof *sizes_b, 1ULL << 20);
    }
    printf("site_a %llu\nsite_b %llu\nblocks %d\n", (unsigned long long)a, (unsigned long long)b, nblocks);
    return 0;
}
