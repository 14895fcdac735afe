/* Blocked in one kind of wait while dump signals arrive: no wait may end
 * with EINTR (or early). argv[1]: the wait. argv[2]: a stop file; the
 * program waits, call after call, until it exists (pipe: until stdin
 * closes; sigsuspend: until SIGUSR1). Prints "<wait> ok" and exits 0, or
 * names the failure and exits 1. Holds a known block the whole time. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "sig_common.h"

static void *volatile keep;
__attribute__((noinline)) void wait_keep(void) { keep = malloc(424242); }

static volatile sig_atomic_t got_usr1;
static void on_usr1(int s) { (void)s; got_usr1 = 1; }

static int fail(const char *what, int e) {
    printf("%s failed: %s\n", what, strerror(e));
    return 1;
}

static struct timespec in_ms(long ms) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += ms * 1000000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *w = argv[1], *stop = argv[2];
    wait_keep();
    on_signal(SIGUSR1, on_usr1, 0);
    block_signal(SIGUSR1);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    long calls = 0;
    if (!strcmp(w, "pipe")) {
        char b[64];
        for (;;) {
            ssize_t n = read(0, b, sizeof b);
            if (n < 0) return fail("read", errno);
            if (n == 0) break;
        }
    } else if (!strcmp(w, "sigsuspend")) {
        sigset_t none;
        sigemptyset(&none);
        while (!got_usr1) {
            int r = sigsuspend(&none);
            if (r != -1 || errno != EINTR) return fail("sigsuspend", errno);
            if (!got_usr1) {
                printf("sigsuspend returned without SIGUSR1\n");
                return 1;
            }
        }
    } else {
        int ep = epoll_create1(0), pfd[2];
        if (pipe(pfd)) return fail("pipe", errno);
        struct epoll_event ev = {.events = EPOLLIN};
        epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev);
        sem_t sem;
        sem_init(&sem, 0, 0);
        pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
        int fword = 0;
        while (access(stop, F_OK) != 0) {
            calls++;
            if (!strcmp(w, "nanosleep")) {
                struct timespec t = {0, 100000000L};
                if (nanosleep(&t, &t)) return fail("nanosleep", errno);
            } else if (!strcmp(w, "poll")) {
                struct pollfd p = {pfd[0], POLLIN, 0};
                if (poll(&p, 1, 100) < 0) return fail("poll", errno);
            } else if (!strcmp(w, "select")) {
                fd_set r;
                FD_ZERO(&r);
                FD_SET(pfd[0], &r);
                struct timeval tv = {0, 100000};
                if (select(pfd[0] + 1, &r, NULL, NULL, &tv) < 0) return fail("select", errno);
            } else if (!strcmp(w, "epoll")) {
                struct epoll_event out;
                if (epoll_wait(ep, &out, 1, 100) < 0) return fail("epoll_wait", errno);
            } else if (!strcmp(w, "sem")) {
                struct timespec t = in_ms(100);
                if (sem_timedwait(&sem, &t) == 0 || errno != ETIMEDOUT) return fail("sem_timedwait", errno);
            } else if (!strcmp(w, "cond")) {
                struct timespec t = in_ms(100);
                pthread_mutex_lock(&mu);
                int r = pthread_cond_timedwait(&cv, &mu, &t);
                pthread_mutex_unlock(&mu);
                /* Spurious wake-ups are allowed; EINTR is not a valid result. */
                if (r != ETIMEDOUT && r != 0) return fail("pthread_cond_timedwait", r);
            } else if (!strcmp(w, "futex")) {
                struct timespec t = {0, 100000000L};
                long r = syscall(SYS_futex, &fword, FUTEX_WAIT_PRIVATE, 0, &t, NULL, 0);
                if (r == 0 || errno != ETIMEDOUT) return fail("futex", errno);
            } else {
                return 2;
            }
        }
    }
    printf("%s ok\n", w);
    return 0;
}
