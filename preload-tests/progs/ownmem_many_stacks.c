/* 4,096 distinct stacks (a walk down 12 levels, each level through one of
 * two call sites), a block live on each, then one dump signal.
 * preload-tests/ownmem.rs reads the dump line: heaplive's heap in use is
 * read after the dump gave back its profile (every stack's frames and
 * names), not while it still held it. */
#include "sig_common.h"

static void *volatile keep[4096];
static int next;

#define WALK_LEAF keep[next++] = malloc(64)
#include "walk_stacks.h"

int main(void) {
    for (unsigned p = 0; p < 4096; p++)
        walk(0, p);
    signal_from_outside(SIGUSR2);
    if (!wait_dumps(1))
        return 1;
    printf("done\n");
    return 0;
}
