/* A library a program dlopens after start (preload-tests/other_allocators.rs:
 * another allocator first in LD_PRELOAD). Built twice, with TAG=a and TAG=b:
 * each late_<TAG>_* site keeps its block live, the _freed one gives it back.
 * late_run returns how many blocks it kept. */
#include <stdlib.h>

#ifndef SIZE_STEP
#define SIZE_STEP 0
#endif

#define CAT3(x, y, z) x##_##y##_##z
#define NAME(tag, what) CAT3(late, tag, what)
#define SITE(what) __attribute__((noinline)) void *NAME(TAG, what)

static void *keep[8];

SITE(malloc)(void) { return malloc(30011 + SIZE_STEP); }
SITE(calloc)(void) { return calloc(3, 10007 + SIZE_STEP); }
SITE(origin)(void) { return malloc(100); }
SITE(realloc)(void *p) { return realloc(p, 20023 + SIZE_STEP); }
SITE(freed)(void) { return malloc(7777); }

int late_run(void) {
    keep[0] = NAME(TAG, malloc)();
    keep[1] = NAME(TAG, calloc)();
    keep[2] = NAME(TAG, realloc)(NAME(TAG, origin)());
    free(NAME(TAG, freed)());
    return (keep[0] != 0) + (keep[1] != 0) + (keep[2] != 0);
}
