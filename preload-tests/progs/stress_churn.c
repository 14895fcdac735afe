/* Stress under the preload: 16 threads share 4,096 slots; each step takes a
 * random slot with an atomic exchange and either frees what it held (often
 * allocated by another thread), grows it with realloc (chains across
 * threads), or puts a new block there. At the end the program knows exactly
 * which block is live and which function made it, and prints the truth per
 * site for the test to compare with the exact-mode profile. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#define NOINLINE __attribute__((noinline, noclone))
#define SLOTS 4096
#define THREADS 16
#define STEPS 20000

struct block { uint32_t size; uint32_t site; };  /* header kept in the block */
static struct block *_Atomic slots[SLOTS];

NOINLINE struct block *st_malloc(uint32_t n) { return malloc(n); }
NOINLINE struct block *st_calloc(uint32_t n) { return calloc(1, n); }
NOINLINE struct block *st_realloc(struct block *b, uint32_t n) { return realloc(b, n); }

static uint64_t next(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

static void *worker(void *arg) {
    uint64_t rng = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
    for (int i = 0; i < STEPS; i++) {
        uint64_t r = next(&rng);
        unsigned slot = r % SLOTS;
        struct block *b = atomic_exchange(&slots[slot], NULL);
        unsigned op = (r >> 20) % 8;
        uint32_t n = 16 + (r >> 32) % 3000;
        if (op == 7 && (r >> 40) % 16 == 0) n = 65536 + (r >> 44) % 200000;
        if (b && op < 3) {
            free(b);
            b = NULL;
        } else if (b && op < 6) {
            uint32_t grown = b->size + n;
            struct block *g = st_realloc(b, grown);
            if (g) { g->size = grown; g->site = 3; b = g; }
        } else if (!b) {
            b = (op & 1) ? st_malloc(n) : st_calloc(n);
            if (b) { b->size = n; b->site = (op & 1) ? 1 : 2; }
        }
        if (b) {
            struct block *old = atomic_exchange(&slots[slot], b);
            if (old) free(old);  /* lost a race for the slot: another thread filled it */
        }
    }
    return NULL;
}

int main(void) {
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (long t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    uint64_t by_site[4] = {0};
    for (int i = 0; i < SLOTS; i++) {
        struct block *b = slots[i];
        if (b) by_site[b->site] += b->size;
    }
    printf("st_malloc %llu\nst_calloc %llu\nst_realloc %llu\n", (unsigned long long)by_site[1],
           (unsigned long long)by_site[2], (unsigned long long)by_site[3]);
    return 0;
}
