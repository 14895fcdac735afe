/* A library the tests dlopen (with RTLD_DEEPBIND, or to dlclose it). */
#include <stdlib.h>

static void *volatile kept[16];
static int n;

__attribute__((noinline)) void *deep_alloc(size_t size) {
    void *p = malloc(size);
    kept[n++ & 15] = p;
    return p;
}
