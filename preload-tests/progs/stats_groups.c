/* Known truth per call site for the calibration of the per-stack intervals
 * (preload-tests/intervals.rs), at a sample interval R of 64 KiB:
 *
 *   site_tiny    32 B blocks, 96 KiB       (1.5 R: often no sample)
 *   site_small   64 B blocks, 384 KiB      (6 R: a few samples)
 *   site_many    100 B blocks, 2.5 MiB     (40 R)
 *   site_near    32 KiB blocks (R/2), 24
 *   site_big     128 KiB blocks (2 R), 10  (freed before exit: peak only)
 *   site_mixed   48 B to 300 KB blocks, about 1.25 MiB
 *   site_always  4 MiB blocks (64 R, sampled with certainty), 3
 *   site_freed   200 B blocks, 1.25 MiB, all freed (alloc view only)
 *
 * Phase 1 allocates and frees site_freed's blocks; phase 2 only allocates
 * the kept sites (the live total climbs to its maximum); phase 3 frees
 * site_big's blocks (the first decline after the maximum: the peak copy
 * holds every kept site). Prints the exact bytes per site and view. */
#include <stdio.h>
#include <stdlib.h>
#include "sites.h"

SITE(site_tiny)
SITE(site_small)
SITE(site_many)
SITE(site_near)
SITE(site_big)
SITE(site_mixed)
SITE(site_always)
SITE(site_freed)

static void *kept[100000];
static int nkept;

static void keep(void *p) {
    if (!p) {
        printf("malloc failed\n");
        exit(1);
    }
    *(volatile char *)p = 1;
    kept[nkept++] = p;
}

static unsigned long long fill(void *(*site)(size_t), size_t size, unsigned long long total) {
    unsigned long long n = 0;
    for (; n + size <= total; n += size) keep(site(size));
    return n;
}

int main(void) {
    const unsigned long long K = 1024;
    unsigned long long freed = 0;
    for (int i = 0; i < 6400; i++) {
        void *p = site_freed(200);
        *(volatile char *)p = 1;
        free(p);
        freed += 200;
    }
    unsigned long long tiny = fill(site_tiny, 32, 96 * K);
    unsigned long long small = fill(site_small, 64, 384 * K);
    unsigned long long many = fill(site_many, 100, 2560 * K);
    unsigned long long near = fill(site_near, 32 * K, 24 * 32 * K);
    int big_first = nkept;
    unsigned long long big = fill(site_big, 128 * K, 10 * 128 * K);
    int big_end = nkept;
    static const size_t mixed_sizes[] = {48, 1000, 20000, 100000, 300000};
    unsigned long long mixed = 0;
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 5; i++) {
            keep(site_mixed(mixed_sizes[i]));
            mixed += mixed_sizes[i];
        }
    unsigned long long always = fill(site_always, 4096 * K, 3 * 4096 * K);
    for (int i = big_first; i < big_end; i++) free(kept[i]);
    printf("site_tiny %llu %llu %llu\n", tiny, tiny, tiny);
    printf("site_small %llu %llu %llu\n", small, small, small);
    printf("site_many %llu %llu %llu\n", many, many, many);
    printf("site_near %llu %llu %llu\n", near, near, near);
    printf("site_big 0 %llu %llu\n", big, big);
    printf("site_mixed %llu %llu %llu\n", mixed, mixed, mixed);
    printf("site_always %llu %llu %llu\n", always, always, always);
    printf("site_freed 0 %llu 0\n", freed);
    return 0;
}
