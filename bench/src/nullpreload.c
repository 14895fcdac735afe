/* nullpreload.so: the do-nothing forwarding interposer, the floor for any
 * LD_PRELOAD malloc wrapper. Every entry point forwards to the next
 * definition (dlsym(RTLD_NEXT)); the only extra work on the hot path is a
 * predictable "resolved yet?" branch. Allocations made while dlsym itself
 * runs (it may calloc) are served from a static bootstrap buffer whose
 * pointers free/realloc/malloc_usable_size recognise. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

static void *(*r_malloc)(size_t);
static void (*r_free)(void *);
static void *(*r_calloc)(size_t, size_t);
static void *(*r_realloc)(void *, size_t);
static void *(*r_memalign)(size_t, size_t);
static int (*r_posix_memalign)(void **, size_t, size_t);
static void *(*r_aligned_alloc)(size_t, size_t);
static void *(*r_valloc)(size_t);
static void *(*r_pvalloc)(size_t);
static size_t (*r_usable)(void *);
/* C++: NULL in a C program (no libstdc++): then fall back to malloc/free. */
static void *(*r_new)(size_t), *(*r_new_a)(size_t);
static void *(*r_new_al)(size_t, size_t), *(*r_new_a_al)(size_t, size_t);
static void *(*r_new_nt)(size_t, const void *), *(*r_new_a_nt)(size_t, const void *);
static void (*r_del)(void *), (*r_del_a)(void *);
static void (*r_del_s)(void *, size_t), (*r_del_a_s)(void *, size_t);
static void (*r_del_al)(void *, size_t), (*r_del_a_al)(void *, size_t);
static void (*r_del_s_al)(void *, size_t, size_t), (*r_del_a_s_al)(void *, size_t, size_t);

static _Alignas(64) char boot[64 * 1024];
static atomic_size_t boot_used;
static atomic_int state; /* 0 = not resolved, 1 = resolving, 2 = done */

static int in_boot(const void *p) {
    return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n) {
    size_t need = ((n + 15) & ~(size_t)15) + 16;
    size_t off = atomic_fetch_add(&boot_used, need);
    if (off + need > sizeof boot) return NULL;
    char *p = boot + off;
    *(size_t *)p = n;
    return memset(p + 16, 0, n);
}

#define SYM(var, name) (*(void **)&var = dlsym(RTLD_NEXT, name))

static void resolve(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&state, &expected, 1)) {
        while (atomic_load(&state) != 2) { /* another thread is resolving */ }
        return;
    }
    int saved = errno;
    SYM(r_malloc, "malloc"); SYM(r_free, "free"); SYM(r_calloc, "calloc");
    SYM(r_realloc, "realloc"); SYM(r_memalign, "memalign");
    SYM(r_posix_memalign, "posix_memalign"); SYM(r_aligned_alloc, "aligned_alloc");
    SYM(r_valloc, "valloc"); SYM(r_pvalloc, "pvalloc"); SYM(r_usable, "malloc_usable_size");
    SYM(r_new, "_Znwm"); SYM(r_new_a, "_Znam");
    SYM(r_new_al, "_ZnwmSt11align_val_t"); SYM(r_new_a_al, "_ZnamSt11align_val_t");
    SYM(r_new_nt, "_ZnwmRKSt9nothrow_t"); SYM(r_new_a_nt, "_ZnamRKSt9nothrow_t");
    SYM(r_del, "_ZdlPv"); SYM(r_del_a, "_ZdaPv");
    SYM(r_del_s, "_ZdlPvm"); SYM(r_del_a_s, "_ZdaPvm");
    SYM(r_del_al, "_ZdlPvSt11align_val_t"); SYM(r_del_a_al, "_ZdaPvSt11align_val_t");
    SYM(r_del_s_al, "_ZdlPvmSt11align_val_t"); SYM(r_del_a_s_al, "_ZdaPvmSt11align_val_t");
    dlerror(); /* do not leave a message for the application */
    errno = saved;
    atomic_store(&state, 2);
}

#define ENSURE() do { if (UNLIKELY(!r_free)) resolve(); } while (0)
#define BOOTING() (atomic_load_explicit(&state, memory_order_relaxed) == 1)

__attribute__((constructor)) static void init(void) { ENSURE(); }

EXPORT void *malloc(size_t n) {
    if (UNLIKELY(!r_malloc)) { if (BOOTING()) return boot_alloc(n); resolve(); }
    return r_malloc(n);
}
EXPORT void free(void *p) {
    if (UNLIKELY(in_boot(p))) return;
    ENSURE();
    r_free(p);
}
EXPORT void *calloc(size_t a, size_t b) {
    if (UNLIKELY(!r_calloc)) {
        if (BOOTING()) { size_t n; return __builtin_mul_overflow(a, b, &n) ? NULL : boot_alloc(n); }
        resolve();
    }
    return r_calloc(a, b);
}
EXPORT void *realloc(void *p, size_t n) {
    if (UNLIKELY(in_boot(p))) {
        size_t old = *(size_t *)((char *)p - 16);
        void *q = malloc(n);
        if (q) memcpy(q, p, old < n ? old : n);
        return q;
    }
    if (UNLIKELY(!r_realloc)) { if (BOOTING()) return boot_alloc(n); resolve(); }
    return r_realloc(p, n);
}
EXPORT void *memalign(size_t al, size_t n) { ENSURE(); return r_memalign(al, n); }
EXPORT int posix_memalign(void **pp, size_t al, size_t n) { ENSURE(); return r_posix_memalign(pp, al, n); }
EXPORT void *aligned_alloc(size_t al, size_t n) { ENSURE(); return r_aligned_alloc(al, n); }
EXPORT void *valloc(size_t n) { ENSURE(); return r_valloc(n); }
EXPORT void *pvalloc(size_t n) { ENSURE(); return r_pvalloc(n); }
EXPORT size_t malloc_usable_size(void *p) {
    if (UNLIKELY(in_boot(p))) return *(size_t *)((char *)p - 16);
    ENSURE();
    return r_usable(p);
}

/* operator new/delete. The real ones (libstdc++) call malloc/free, which
 * come back through the wrappers above, exactly as in heaplive. */
static void *oom(void) { abort(); }
EXPORT void *_Znwm(size_t n) { ENSURE(); if (r_new) return r_new(n); void *p = malloc(n); return p ? p : oom(); }
EXPORT void *_Znam(size_t n) { ENSURE(); if (r_new_a) return r_new_a(n); void *p = malloc(n); return p ? p : oom(); }
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t al) { ENSURE(); if (r_new_al) return r_new_al(n, al); void *p = NULL; posix_memalign(&p, al, n); return p ? p : oom(); }
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t al) { ENSURE(); if (r_new_a_al) return r_new_a_al(n, al); void *p = NULL; posix_memalign(&p, al, n); return p ? p : oom(); }
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *t) { ENSURE(); return r_new_nt ? r_new_nt(n, t) : malloc(n); }
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *t) { ENSURE(); return r_new_a_nt ? r_new_a_nt(n, t) : malloc(n); }
EXPORT void _ZdlPv(void *p) { ENSURE(); if (r_del) r_del(p); else free(p); }
EXPORT void _ZdaPv(void *p) { ENSURE(); if (r_del_a) r_del_a(p); else free(p); }
EXPORT void _ZdlPvm(void *p, size_t n) { ENSURE(); if (r_del_s) r_del_s(p, n); else free(p); }
EXPORT void _ZdaPvm(void *p, size_t n) { ENSURE(); if (r_del_a_s) r_del_a_s(p, n); else free(p); }
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t al) { ENSURE(); if (r_del_al) r_del_al(p, al); else free(p); }
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t al) { ENSURE(); if (r_del_a_al) r_del_a_al(p, al); else free(p); }
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al) { ENSURE(); if (r_del_s_al) r_del_s_al(p, n, al); else free(p); }
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al) { ENSURE(); if (r_del_a_s_al) r_del_a_s_al(p, n, al); else free(p); }
