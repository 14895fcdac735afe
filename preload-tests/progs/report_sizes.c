/* The size histogram's program (preload-tests/report.rs): one call site,
 * sized_site, allocates SMALL_N blocks of SMALL bytes and BIG_N of BIG
 * bytes and keeps them; other_site holds one block of OTHER bytes. The
 * exit dump (exact mode) then has, for sized_site, SMALL_N samples in the
 * class 32..63 (SMALL_N x SMALL bytes) and BIG_N in 65536..131071. */
#include <stdlib.h>
#include <string.h>
#include "sites.h"

#define SMALL 48
#define SMALL_N 100
#define BIG 100000
#define BIG_N 10
#define OTHER 3000

FILLED_SITE(sized_site, 1, 16)

FILLED_SITE(other_site, 2, 16)

static void *keep[SMALL_N + BIG_N + 1];

int main(void) {
    int k = 0;
    for (int i = 0; i < SMALL_N; i++)
        keep[k++] = sized_site(SMALL);
    for (int i = 0; i < BIG_N; i++)
        keep[k++] = sized_site(BIG);
    keep[k++] = other_site(OTHER);
    return keep[0] == NULL;
}
