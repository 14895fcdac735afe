/* 1,000 short-lived threads (50 at a time), with cross-thread frees and
 * reallocs, run in exact mode by preload-tests/core_exact.rs. Thread t:
 *   thr_keep        malloc(111), never freed                -> 1000 * 111
 *   thr_cross       malloc(222), freed by thread t+50          (the last 50 stay)
 *   thr_cross_main  calloc(1, 333), freed by main if t is even  (500 stay)
 *   thr_grow_origin malloc(10), realloc'ed to 444 in thr_regrow by thread t+50
 *   thr_freed       malloc(555), freed by the same thread
 * Prints the expected totals; exits 1 if a thread could not start. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))
#define THREADS 1000
#define BATCH 50

static void *volatile keep[THREADS];
static void *volatile cross[THREADS];
static void *volatile cross_main[THREADS];
static void *volatile grow[THREADS];

NOINLINE void *thr_keep(void) { return malloc(111); }
NOINLINE void *thr_cross(void) { return malloc(222); }
NOINLINE void *thr_cross_main(void) { return calloc(1, 333); }
NOINLINE void *thr_grow_origin(void) { return malloc(10); }
NOINLINE void *thr_regrow(void *p) { return realloc(p, 444); }
NOINLINE void thr_freed(void) { char *p = malloc(555); memset(p, 5, 555); free(p); }

static void *body(void *arg) {
    long t = (long)arg;
    keep[t] = thr_keep();
    cross[t] = thr_cross();
    cross_main[t] = thr_cross_main();
    grow[t] = thr_grow_origin();
    thr_freed();
    if (t >= BATCH) {
        /* Blocks of a thread of the previous batch, which has exited. */
        free(cross[t - BATCH]);
        cross[t - BATCH] = NULL;
        grow[t - BATCH] = thr_regrow(grow[t - BATCH]);
    }
    return NULL;
}

int main(void) {
    pthread_t th[BATCH];
    for (long b = 0; b < THREADS; b += BATCH) {
        for (long i = 0; i < BATCH; i++) {
            int r = pthread_create(&th[i], NULL, body, (void *)(b + i));
            if (r != 0) {
                printf("pthread_create failed: %s\n", strerror(r));
                return 1;
            }
        }
        for (long i = 0; i < BATCH; i++) pthread_join(th[i], NULL);
    }
    for (long t = 0; t < THREADS; t += 2) free(cross_main[t]);
    printf("threads %d\n", THREADS);
    printf("expect thr_keep %d\n", THREADS * 111);
    printf("expect thr_cross %d\n", BATCH * 222);
    printf("expect thr_cross_main %d\n", THREADS / 2 * 333);
    printf("expect thr_grow_origin %d\n", BATCH * 10);
    printf("expect thr_regrow %d\n", (THREADS - BATCH) * 444);
    printf("expect thr_freed 0\n");
    return 0;
}
