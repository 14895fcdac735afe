/* Stacks for the unwinder comparison (HEAPLIVE_UNWIND=check): deep
 * recursion past the frame limit, threads, malloc from a signal handler
 * (raise(), so synchronous), and a dlopen'd library loaded and closed again.
 * Built with and without frame pointers. Every block is kept, with sizes
 * that say where it came from.
 *
 * usage: unwind_mix LIBRARY.so
 */
#include "plugin.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* volatile: the compiler must not drop blocks it sees are never read. */
static void *volatile keep[100000];
static int kept;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void hold(void *p) {
    pthread_mutex_lock(&mu);
    if (kept < 100000) keep[kept++] = p;
    pthread_mutex_unlock(&mu);
}

__attribute__((noinline)) void recurse_alloc(int depth) {
    if (depth == 0) {
        hold(malloc(3001));
        return;
    }
    recurse_alloc(depth - 1);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void shallow_alloc(int i) {
    hold(malloc(40 + i % 7));
}

static void *worker(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < 500; i++) {
        shallow_alloc(i);
        free(malloc(64 + id));
        if (i % 100 == 0) recurse_alloc(20 + (int)id);
    }
    return NULL;
}

__attribute__((noinline)) static void in_handler(int sig) {
    (void)sig;
    hold(malloc(2222));
}

__attribute__((noinline)) void raise_alloc(void) {
    raise(SIGUSR1);
}

__attribute__((noinline)) void call_plugin(const char *lib) {
    void *h;
    hold(open_plugin(lib, &h)());
    dlclose(h);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    signal(SIGUSR1, in_handler);
    for (int i = 0; i < 5; i++) raise_alloc();
    recurse_alloc(10);
    recurse_alloc(300);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 10; i++) call_plugin(argv[1]);
    printf("kept %d\n", kept);
    return 0;
}
