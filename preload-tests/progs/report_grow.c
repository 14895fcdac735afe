/* The report test's program (preload-tests/report.rs): held_site holds
 * HELD bytes from the start; grow_site adds GROW bytes at each of 4 steps,
 * dumping after each (heaplive_dump(NULL)), so that from the third step on
 * grow_site holds the most; between steps a 16-byte malloc and free churn
 * for CHURN_MS by the coarse clock (rows for the timeline). No stdio. */
#include <stdlib.h>
#include <string.h>
#include "now_ms.h"
#include "sites.h"

int heaplive_dump(const char *path) __attribute__((weak));

#define HELD ((5u << 20) + 11)
#define GROW ((2u << 20) + 13)
#define CHURN_MS 40

FILLED_SITE(held_site, 2, 64)

FILLED_SITE(grow_site, 1, 64)

__attribute__((noinline)) void churn(long ms) {
    long end = now_ms() + ms;
    while (now_ms() < end) {
        volatile char *p = malloc(16);
        p[0] = 1;
        free((void *)p);
    }
}

int main(void) {
    void *keep = held_site(HELD);
    void *grown[4];
    churn(CHURN_MS);
    for (int k = 0; k < 4; k++) {
        grown[k] = grow_site(GROW);
        churn(CHURN_MS);
        if (heaplive_dump) heaplive_dump(NULL);
    }
    churn(CHURN_MS);
    (void)keep;
    (void)grown;
    return 0;
}
