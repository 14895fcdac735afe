// A preload that wraps malloc, free, calloc and realloc and forwards each
// to the next definition (dlsym(RTLD_NEXT)), as a profiler does, counting
// calls: put before heaplive in LD_PRELOAD, its calls reach heaplive, which
// must then forward to libc, not back to it
// (preload-tests/other_allocators.rs).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static unsigned long calls;

// dlsym(RTLD_NEXT) allocates when the definition it finds is not in this
// library's dependencies (heaplive's is not): those calls, made while the
// next functions are looked up, are served from a small static buffer.
static _Alignas(16) char boot[64 << 10];
static size_t boot_used;
static int resolving;

static int is_boot(void *p) { return (char *)p >= boot && (char *)p < boot + sizeof boot; }

static void *boot_alloc(size_t n) {
    size_t start = (boot_used + 15) & ~(size_t)15;
    if (n > sizeof boot - start) return NULL;
    boot_used = start + n;
    return boot + start; /* zero: never reused */
}

static int resolve(void) {
    if (next_malloc) return 1;
    if (resolving) return 0;
    resolving = 1;
    next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    resolving = 0;
    return next_malloc != NULL;
}

void *malloc(size_t n) {
    if (!resolve()) return boot_alloc(n);
    calls++;
    return next_malloc(n);
}
void free(void *p) {
    if (is_boot(p) || !resolve()) return;
    next_free(p);
}
void *calloc(size_t n, size_t size) {
    if (!resolve()) return size && n > (size_t)-1 / size ? NULL : boot_alloc(n * size);
    calls++;
    return next_calloc(n, size);
}
void *realloc(void *p, size_t n) {
    if (!resolve() || is_boot(p)) {
        void *q = malloc(n);
        if (q && p) {
            /* a boot block is at most the rest of the buffer */
            size_t old = (size_t)(boot + boot_used - (char *)p);
            memcpy(q, p, old < n ? old : n);
        }
        return q;
    }
    calls++;
    return next_realloc(p, n);
}
