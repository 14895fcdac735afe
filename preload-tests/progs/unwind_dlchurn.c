/* dlopen/dlclose churn while 8 threads allocate (exact mode): the main
 * thread loads, calls and closes a library ROUNDS times (each call keeps
 * 4,321 bytes from the library); each thread keeps PER_THREAD blocks of
 * 96 bytes and frees as many others of 48 bytes. Prints what it kept.
 *
 * usage: unwind_dlchurn LIBRARY.so ROUNDS PER_THREAD
 */
#include "plugin.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long per_thread;

__attribute__((noinline)) void *thread_alloc(void) { return malloc(96); }

static void *worker(void *arg) {
    (void)arg;
    void *volatile *mine = calloc((size_t)per_thread, sizeof(void *));
    for (long i = 0; i < per_thread; i++) {
        mine[i] = thread_alloc();
        free(malloc(48));
    }
    return (void *)mine; /* the blocks and the array stay live */
}

__attribute__((noinline)) void *churn_plugin(const char *lib) {
    void *h;
    void *p = open_plugin(lib, &h)();
    if (dlclose(h) != 0) exit(4);
    return p;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    long rounds = atol(argv[2]);
    per_thread = atol(argv[3]);
    pthread_t t[8];
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, worker, NULL);
    /* volatile: the compiler must not drop blocks it sees are never read. */
    void *volatile *keep = calloc((size_t)rounds, sizeof(void *));
    for (long r = 0; r < rounds; r++) keep[r] = churn_plugin(argv[1]);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    printf("rounds %ld per_thread %ld\n", rounds, per_thread);
    return 0;
}
