/* preload-tests/hardening3.rs: keeps 64 blocks in hard3_keep, forks a child
 * that keeps 64 of its own and exits 9, creates a thread, prints
 * "fork=RC errno=E child=STATUS thread=RC" and "ready"; with an argument
 * it then reads stdin to its end (so that a dump signal can come), and
 * exits with status 6. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sites.h"

void *volatile keep[128];

FILLED_SITE(hard3_keep, 1, n)

static void *thread_main(void *a) {
    (void)a;
    keep[127] = hard3_keep(100);
    return 0;
}

int main(int argc, char **argv) {
    for (int i = 0; i < 64; i++)
        keep[i] = hard3_keep(20000 + i);
    fflush(stdout);
    errno = 0;
    pid_t f = fork();
    if (f == 0) {
        for (int i = 64; i < 127; i++)
            keep[i] = hard3_keep(7000 + i);
        exit(9);
    }
    int fe = errno, st = 0, child = -1;
    if (f > 0 && waitpid(f, &st, 0) == f)
        child = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    pthread_t th;
    int tr = pthread_create(&th, 0, thread_main, 0);
    if (tr == 0)
        pthread_join(th, 0);
    printf("fork=%d errno=%d child=%d thread=%d\nready\n", f < 0 ? -1 : 0, f < 0 ? fe : 0, child, tr);
    fflush(stdout);
    if (argc > 1) {
        char b[64];
        while (read(0, b, sizeof b) > 0) {
        }
    }
    return 6;
}
