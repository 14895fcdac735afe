/* The temporary view's test program (preload-tests/temporary.rs):
 * temporary_site allocates a 64 KiB block and frees it at once, 16,384
 * times (1 GiB in all): temporary allocations (freed before the thread's
 * next allocation). short_site allocates a 64 KiB block, spacer_site a
 * 16-byte block, then both are freed, 4,096 times: short_site's blocks
 * live as briefly but are not temporary (spacer_site allocated in
 * between), spacer_site's are (only a free came between). long_site
 * allocates LONG_N blocks of LONG_SIZE bytes held to exit. No stdio. */
#include <stdlib.h>
#include <string.h>
#include "sites.h"

#define TEMP_SIZE (64u << 10)
#define TEMP_N 16384
#define SHORT_N 4096
#define SPACER_SIZE 16
#define LONG_SIZE ((1u << 20) + 7)
#define LONG_N 64

FILLED_SITE(temporary_site, 1, 16)

FILLED_SITE(short_site, 3, 16)

FILLED_SITE(spacer_site, 4, n)

FILLED_SITE(long_site, 2, 16)

static void *held[LONG_N];

int main(void) {
    for (int i = 0; i < LONG_N; i++)
        held[i] = long_site(LONG_SIZE);
    for (int i = 0; i < TEMP_N; i++) {
        void *p = temporary_site(TEMP_SIZE);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
    for (int i = 0; i < SHORT_N; i++) {
        void *p = short_site(TEMP_SIZE);
        void *q = spacer_site(SPACER_SIZE);
        __asm__ volatile("" : : "r"(p), "r"(q) : "memory");
        free(p);
        free(q);
    }
    return held[LONG_N - 1] == 0;
}
