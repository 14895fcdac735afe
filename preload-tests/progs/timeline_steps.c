/* Grows in steps, then frees (preload-tests/timeline.rs): STEP bytes more
 * at grow_site per step, 5 steps, then all freed; between steps it churns
 * (a 16-byte malloc and its free, over and over) for CHURN_MS by the
 * coarse clock, so that the timeline gets rows at every level. Dumps with
 * heaplive_dump(NULL) after steps 2 and 4. Argument: CHURN_MS (default 60).
 * With a second argument "long" and a path: churns that many ms, then
 * dumps to the path 1,100 times (the ring test: more rows than it holds).
 * No stdio: nothing else allocates. */
#include <stdlib.h>
#include <string.h>
#include "now_ms.h"

int heaplive_dump(const char *path) __attribute__((weak));

#define STEP ((3u << 20) + 7)

__attribute__((noinline)) void *grow_site(size_t n) {
    void *p = malloc(n);
    memset(p, 1, 64);
    return p;
}

static void pair(void) {
    volatile char *p = malloc(16);
    p[0] = 1;
    free((void *)p);
}

/* Pairs for `ms`, and one after: a process that did not run meanwhile
 * (a loaded machine) still samples once when the time is up, so each
 * phase gets a timeline row. */
__attribute__((noinline)) void churn(long ms) {
    long end = now_ms() + ms;
    while (now_ms() < end) pair();
    pair();
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 60;
    if (argc > 3 && strcmp(argv[2], "long") == 0) {
        churn(ms);
        for (int i = 0; i < 1100 && heaplive_dump; i++) heaplive_dump(argv[3]);
        return 0;
    }
    void *held[5];
    churn(ms);
    for (int k = 0; k < 5; k++) {
        held[k] = grow_site(STEP);
        churn(ms);
        if ((k == 1 || k == 3) && heaplive_dump) heaplive_dump(NULL);
    }
    for (int k = 0; k < 5; k++) free(held[k]);
    churn(ms);
    return 0;
}
