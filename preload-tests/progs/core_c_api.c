/* Every C allocation entry point from its own noinline function with its
 * own distinctive size, run in exact mode (HEAPLIVE_SAMPLE_INTERVAL=1) by
 * preload-tests/core_exact.rs, which knows the expected live bytes per
 * leaf function. A C program: it must not have libstdc++ loaded.
 * Prints only facts that are the same with and without the preload, and
 * exits 1 if any check fails. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile keep[64];
static int nkeep;
static int failures;

static void hold(void *p) { keep[nkeep++] = p; }

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (cond) {                                        \
            printf("ok: " __VA_ARGS__);                    \
        } else {                                           \
            printf("FAIL (line %d): ", __LINE__);          \
            printf(__VA_ARGS__);                           \
            failures++;                                    \
        }                                                  \
        putchar('\n');                                     \
    } while (0)

/* Opaque to the optimizer, so huge sizes are not folded at compile time. */
static size_t NOINLINE opaque(size_t n) { __asm__ volatile("" : "+r"(n)); return n; }

NOINLINE void site_malloc(void) { hold(malloc(10001)); }
NOINLINE void site_malloc_freed(void) { void *p = malloc(5555); memset(p, 1, 5555); free(p); }
NOINLINE void site_calloc(void) {
    unsigned char *p = calloc(7, 1429); /* 10003 */
    int zero = 1;
    for (int i = 0; i < 10003; i++) zero &= p[i] == 0;
    CHECK(zero, "calloc memory is zeroed");
    hold(p);
}
NOINLINE void site_calloc_freed(void) { free(calloc(3, 1111)); }

/* realloc grow: the block moves from rg_origin to site_realloc_grow. */
NOINLINE void *rg_origin(void) { return malloc(100); }
NOINLINE void site_realloc_grow(void) {
    char *p = rg_origin();
    memset(p, 'g', 100);
    p = realloc(p, 20011);
    CHECK(p && p[99] == 'g', "realloc grow keeps contents");
    hold(p);
}
/* realloc shrink. */
NOINLINE void *rs_origin(void) { return malloc(30000); }
NOINLINE void site_realloc_shrink(void) { hold(realloc(rs_origin(), 3013)); }
/* A chain through three functions: only the last one holds it. */
NOINLINE void *chain_origin(void) { return malloc(16); }
NOINLINE void *chain_1(void *p) { return realloc(p, 40000); }
NOINLINE void *chain_2(void *p) { return realloc(p, 50); }
NOINLINE void *chain_3(void *p) { return realloc(p, 70007); }
NOINLINE void site_realloc_chain(void) { hold(chain_3(chain_2(chain_1(chain_origin())))); }
/* Many reallocs in place or not, same site: the final size only. */
NOINLINE void *steps_origin(void) { return malloc(1); }
NOINLINE void *site_realloc_steps(void *p, size_t n) { return realloc(p, n); }
NOINLINE void realloc_steps(void) {
    void *p = steps_origin();
    for (size_t n = 2; n <= 9000; n += 7) p = site_realloc_steps(p, n); /* last n = 8997 */
    hold(p);
}
/* realloc(p, 0) frees p on glibc and returns NULL. */
NOINLINE void *r0_origin(void) { return malloc(4444); }
NOINLINE void site_realloc_zero(void) {
    void *p = realloc(r0_origin(), 0);
    CHECK(p == NULL, "realloc(p, 0) returns NULL (glibc frees p)");
    free(p);
}
/* realloc(NULL, n) is malloc. */
NOINLINE void site_realloc_null(void) { hold(realloc(NULL, 6007)); }
/* A failing realloc leaves the block where it was. */
NOINLINE void *rf_origin(void) { return malloc(3333); }
NOINLINE void site_realloc_fail(void) {
    void *p = rf_origin();
    errno = 0;
    void *q = realloc(p, opaque(SIZE_MAX - 4096));
    CHECK(q == NULL && errno == ENOMEM, "realloc to an impossible size fails with ENOMEM (errno %s)",
          errno == ENOMEM ? "ENOMEM" : "other");
    hold(q ? q : p);
}
/* reallocarray: grow, and overflow (p stays live at its origin). */
NOINLINE void *ra_origin(void) { return malloc(100); }
NOINLINE void site_reallocarray(void) { hold(reallocarray(ra_origin(), 13, 777)); /* 10101 */ }
NOINLINE void *ra_ovf_origin(void) { return malloc(2222); }
NOINLINE void site_reallocarray_ovf(void) {
    void *p = ra_ovf_origin();
    errno = 0;
    void *q = reallocarray(p, opaque(SIZE_MAX / 2), 3);
    CHECK(q == NULL && errno == ENOMEM, "reallocarray overflow fails with ENOMEM");
    hold(q ? q : p);
}
NOINLINE void site_reallocarray_null(void) { hold(reallocarray(NULL, 9, 1001)); /* 9009 */ }

NOINLINE void site_posix_memalign(void) {
    void *p = NULL;
    int r = posix_memalign(&p, 64, 10007);
    CHECK(r == 0 && ((uintptr_t)p & 63) == 0, "posix_memalign(64) aligned");
    hold(p);
}
NOINLINE void site_posix_memalign_freed(void) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, 8888) == 0) free(p);
}
NOINLINE void site_posix_memalign_einval(void) {
    void *p = (void *)1;
    int r = posix_memalign(&p, 3, 100);
    CHECK(r == EINVAL && p == (void *)1, "posix_memalign with a bad alignment gives EINVAL");
}
NOINLINE void site_aligned_alloc(void) {
    void *p = aligned_alloc(256, 10496);
    CHECK(p && ((uintptr_t)p & 255) == 0, "aligned_alloc(256) aligned");
    hold(p);
}
NOINLINE void site_memalign(void) {
    void *p = memalign(128, 10009);
    CHECK(p && ((uintptr_t)p & 127) == 0, "memalign(128) aligned");
    hold(p);
}
NOINLINE void site_valloc(void) {
    void *p = valloc(10011);
    CHECK(p && ((uintptr_t)p & 4095) == 0, "valloc page aligned");
    hold(p);
}
NOINLINE void site_pvalloc(void) {
    void *p = pvalloc(10013);
    CHECK(p && ((uintptr_t)p & 4095) == 0, "pvalloc page aligned");
    hold(p);
}
NOINLINE void site_aligned_freed(void) {
    free(aligned_alloc(64, 640));
    free(memalign(32, 3210));
    free(valloc(777));
    free(pvalloc(778));
}
NOINLINE void site_strdup(void) {
    char s[100];
    memset(s, 's', 99);
    s[99] = 0;
    char *d = strdup(s);
    CHECK(d && strlen(d) == 99, "strdup copies");
    hold(d); /* 100 bytes, leaf __strdup (libc's strdup calls malloc) */
}
NOINLINE void site_usable_size(void) {
    void *p = malloc(1000);
    size_t u = malloc_usable_size(p);
    CHECK(u >= 1000 && u < 1100, "malloc_usable_size(malloc(1000)) = %zu", u);
    CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = 0");
    void *q = realloc(p, 5000);
    u = malloc_usable_size(q);
    CHECK(u >= 5000 && u < 5100, "malloc_usable_size after realloc = %zu", u);
    free(q);
}
NOINLINE void errno_checks(void) {
    errno = 1234;
    void *p = malloc(321);
    CHECK(errno == 1234, "errno kept by malloc (%d)", errno);
    p = realloc(p, 4321);
    CHECK(errno == 1234, "errno kept by realloc (%d)", errno);
    free(p);
    CHECK(errno == 1234, "errno kept by free (%d)", errno);
    p = calloc(3, 5);
    CHECK(errno == 1234, "errno kept by calloc (%d)", errno);
    free(p);
    char *s = strdup("errno");
    CHECK(errno == 1234, "errno kept by strdup (%d)", errno);
    free(s);
    if (posix_memalign(&p, 64, 99) == 0) free(p);
    CHECK(errno == 1234, "errno kept by posix_memalign+free (%d)", errno);
    free(aligned_alloc(64, 128));
    CHECK(errno == 1234, "errno kept by aligned_alloc+free (%d)", errno);

    errno = 0;
    p = malloc(opaque(SIZE_MAX / 2));
    CHECK(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX/2) = NULL with ENOMEM (errno %d)", errno);
    errno = 0;
    p = calloc(opaque(SIZE_MAX / 2), 3);
    CHECK(p == NULL && errno == ENOMEM, "calloc overflow = NULL with ENOMEM (errno %d)", errno);
    errno = 0;
    p = calloc(opaque((size_t)1 << 33), (size_t)1 << 33);
    CHECK(p == NULL && errno == ENOMEM, "calloc(2^33, 2^33) overflow = NULL with ENOMEM (errno %d)", errno);
    errno = 0;
    p = aligned_alloc(64, opaque(SIZE_MAX - 100));
    CHECK(p == NULL && errno == ENOMEM, "aligned_alloc of an impossible size = NULL with ENOMEM");
}
NOINLINE void no_libstdcxx(void) {
    void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(h == NULL, "libstdc++ is not loaded in this C program");
    (void)dlerror(); /* the failed NOLOAD left a message: take it */
}
NOINLINE void many_freed(void) {
    /* 10,000 blocks allocated and freed: none may remain. */
    static void *v[10000];
    for (int i = 0; i < 10000; i++) v[i] = malloc(1 + i % 300);
    for (int i = 0; i < 10000; i += 2) free(v[i]);
    for (int i = 1; i < 10000; i += 2) free(v[i]);
}

int main(void) {
    no_libstdcxx();
    site_malloc();
    site_malloc_freed();
    site_calloc();
    site_calloc_freed();
    site_realloc_grow();
    site_realloc_shrink();
    site_realloc_chain();
    realloc_steps();
    site_realloc_zero();
    site_realloc_null();
    site_realloc_fail();
    site_reallocarray();
    site_reallocarray_ovf();
    site_reallocarray_null();
    site_posix_memalign();
    site_posix_memalign_freed();
    site_posix_memalign_einval();
    site_aligned_alloc();
    site_memalign();
    site_valloc();
    site_pvalloc();
    site_aligned_freed();
    site_strdup();
    site_usable_size();
    errno_checks();
    many_freed();
    /* The program's own successful dl calls leave no message behind. */
    void *sym = dlsym(RTLD_DEFAULT, "printf");
    const char *e = dlerror();
    CHECK(sym != NULL && e == NULL, "dlerror() after a successful dlsym is NULL (%s)", e ? e : "NULL");
    printf("kept %d blocks; %d failures\n", nkeep, failures);
    fflush(stdout);
    return failures ? 1 : 0;
}
