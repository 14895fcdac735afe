/* fork() while other threads allocate and free as fast as they can (in
 * exact mode every one of their calls takes the library's locks), and
 * signals arrive: the fork handlers must leave every lock usable in both
 * processes. Each child allocates, frees, allocates again and exits; the
 * parent waits for all of them. A deadlock shows as a hang (the test's
 * timeout). */
#include "sig_common.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

__attribute__((noinline)) void *churn_alloc(size_t n) { return malloc(n); }
__attribute__((noinline)) void *child_keep(size_t n) { return malloc(n); }

static void *churner(void *arg) {
    void *slots[64] = {0};
    unsigned i = (unsigned)(long)arg;
    while (!atomic_load(&stop)) {
        unsigned k = (i * 2654435761u) % 64;
        free(slots[k]);
        slots[k] = churn_alloc(16 + i % 2000);
        i++;
    }
    for (int k = 0; k < 64; k++) free(slots[k]);
    return NULL;
}

int main(void) {
    pthread_t th[4];
    for (long t = 0; t < 4; t++) pthread_create(&th[t], NULL, churner, (void *)t);
    int children = 0, ok = 0;
    for (int f = 0; f < 40; f++) {
        if (f % 10 == 5) signal_from_outside(SIGUSR2);
        pid_t pid = fork();
        if (pid == 0) {
            void *a = child_keep(1000 + f);
            free(child_keep(77));
            void *b = child_keep(2000);
            (void)a; (void)b;
            exit(0);
        }
        if (pid > 0) {
            children++;
            int st;
            if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
        }
        usleep(2000);
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    printf("children %d ok %d\n", children, ok);
    return ok == children ? 0 : 1;
}
