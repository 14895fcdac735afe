/* A library the unwinder tests dlopen and dlclose: it allocates from its
 * own frames (a leak of 4,321 bytes per call and a block freed again), so
 * stacks pass through a module that comes and goes. */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void *plugin_inner(size_t n) {
    void *p = malloc(n);
    if (p) memset(p, 1, n);
    return p;
}

__attribute__((noinline)) void *plugin_alloc(void) {
    free(plugin_inner(999));
    return plugin_inner(4321);
}
