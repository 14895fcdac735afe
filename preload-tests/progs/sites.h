/* Allocation sites of the test programs: each a function of its own, never
 * inlined or cloned, that the tests find by name in the stacks. */
#ifndef HEAPLIVE_TEST_SITES_H
#define HEAPLIVE_TEST_SITES_H
#include <stdlib.h>
#include <string.h>

/* `void *NAME(size_t n)`: malloc(n). */
#define SITE(name) \
    __attribute__((noinline, noclone)) void *name(size_t n) { return malloc(n); }

/* `void *NAME(size_t n)`: malloc(n) with its first `len` bytes (an
 * expression that may use n) set to `byte`. */
#define FILLED_SITE(name, byte, len)                     \
    __attribute__((noinline, noclone)) void *name(size_t n) { \
        void *p = malloc(n);                             \
        if (p) memset(p, byte, len);                     \
        return p;                                        \
    }

#endif
