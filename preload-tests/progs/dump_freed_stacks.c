/* 4,096 distinct stacks (a walk down 12 levels, each level through one of
 * two call sites) that each allocate a block and free it at once, then one
 * block kept live from main; the program exits (its exit dump).
 * preload-tests/dump_views.rs reads the dump line and the files. */
#include <stdio.h>
#include <stdlib.h>

static void *volatile sink;

#define WALK_LEAF sink = malloc(64); free(sink)
#include "walk_stacks.h"

__attribute__((noinline)) static void *keep_one(void) { return malloc(777777); }

int main(void) {
    for (unsigned p = 0; p < 4096; p++)
        walk(0, p);
    sink = keep_one();
    printf("done\n");
    return 0;
}
