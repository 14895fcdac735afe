/* churn: multi-threaded malloc/free churn.
 *
 *   churn THREADS TOTAL_OPS [WINDOW]
 *
 * TOTAL_OPS allocations are split evenly over THREADS threads (strong
 * scaling: the same work whatever the thread count). Each thread keeps a
 * sliding window of WINDOW live objects (default 8192/THREADS, at least 256,
 * so the total live set does not grow with the thread count): every op frees the
 * object in a random slot and allocates a new one there. Sizes: 96% are
 * 16 B..4 KiB (log-uniform), 1% are 64 KiB..1 MiB, the rest 4..64 KiB.
 * 8% of frees are cross-thread: the object is swapped into a shared
 * exchange array and whichever thread swaps it out later frees it. The
 * entry points are mixed: mostly malloc, some calloc, realloc, posix_memalign
 * and aligned_alloc. Every object is touched (first and last bytes). */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XCHG 1024
static _Atomic(void *) exchange[XCHG];
static long ops_per_thread;
static int window; /* per thread; default 8192/THREADS (min 256): the same total live set */
static atomic_ulong checksum;

static inline uint64_t rnd(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static size_t pick_size(uint64_t r) {
    unsigned cls = r % 100;
    r >>= 8;
    double u = (double)(r & 0xffffff) / 0x1000000; /* [0,1) */
    if (cls < 96) return (size_t)(16.0 * __builtin_exp2(u * 8.0));   /* 16 B..4 KiB */
    if (cls < 99) return (size_t)(4096.0 * __builtin_exp2(u * 4.0)); /* 4..64 KiB */
    return (size_t)(65536.0 * __builtin_exp2(u * 4.0));              /* 64 KiB..1 MiB */
}

static void *alloc_one(uint64_t *s, size_t *szp) {
    uint64_t r = rnd(s);
    size_t n = pick_size(r);
    unsigned how = (r >> 40) % 100;
    void *p;
    if (how < 84) p = malloc(n);
    else if (how < 92) p = calloc(1, n);
    else if (how < 96) { p = malloc(n / 2 + 1); p = realloc(p, n); }
    else if (how < 98) { if (posix_memalign(&p, 64, n)) p = NULL; }
    else p = aligned_alloc(32, (n + 31) & ~(size_t)31);
    if (!p) { perror("alloc"); exit(1); }
    ((volatile char *)p)[0] = (char)r;
    ((volatile char *)p)[n - 1] = (char)n;
    *szp = n;
    return p;
}

static void *worker(void *arg) {
    uint64_t s = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1);
    void **slots = calloc(window, sizeof(void *));
    unsigned long sum = 0;
    for (long i = 0; i < ops_per_thread; i++) {
        uint64_t r = rnd(&s);
        int k = r % window;
        void *old = slots[k];
        if (old) {
            if (((r >> 32) & 0xff) < 20) { /* ~8%: hand it to another thread */
                old = atomic_exchange_explicit(&exchange[(r >> 40) % XCHG], old, memory_order_acq_rel);
            }
            if (old) { sum += ((volatile char *)old)[0]; free(old); }
        }
        size_t n;
        slots[k] = alloc_one(&s, &n);
    }
    for (int k = 0; k < window; k++) free(slots[k]);
    free(slots);
    atomic_fetch_add(&checksum, sum);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    long total = argc > 2 ? atol(argv[2]) : 2000000;
    if (threads < 1) threads = 1;
    window = argc > 3 ? atoi(argv[3]) : 8192 / threads;
    if (window < 256) window = 256;
    ops_per_thread = total / threads;
    pthread_t *t = malloc(sizeof(pthread_t) * threads);
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < XCHG; i++) free(atomic_load(&exchange[i]));
    free(t);
    printf("churn threads=%d ops=%ld checksum=%lu\n", threads, total, atomic_load(&checksum));
    return 0;
}
