/* heaplive's own memory after the blocks are gone (exact mode): 400,000
 * blocks of 32 bytes live at a first dump signal (the snapshot of
 * heaplive's thread holds one entry per block), all freed, then a second
 * dump signal. preload-tests/ownmem.rs reads both dump lines:
 * heaplive must not keep the first snapshot's buffer (12 MiB) between
 * dumps. */
#include "sig_common.h"

#define N 400000

static void *volatile keep[N];

int main(void) {
    for (int i = 0; i < N; i++)
        keep[i] = malloc(32);
    signal_from_outside(SIGUSR2);
    if (!wait_dumps(1))
        return 1;
    for (int i = 0; i < N; i++)
        free(keep[i]);
    signal_from_outside(SIGUSR2);
    if (!wait_dumps(2))
        return 1;
    printf("done\n");
    return 0;
}
