/* Helpers shared by the sig_, fork_ and deep_ test programs (and
 * attach_main). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/wait.h>

/* Sleeps `ms` milliseconds even when signals interrupt the sleep. */
static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The number of dumps heaplive reports for this process in its status
 * file, 0 if there is none. */
static int status_dumps(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/heaplive-%u/%d", (unsigned)geteuid(), (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    if (fscanf(f, "dumps %d", &n) != 1) n = 0;
    fclose(f);
    return n;
}

/* Waits (up to 20 s) until heaplive has written at least `n` dumps. */
static int wait_dumps(int n) {
    for (int i = 0; i < 2000; i++) {
        if (status_dumps() >= n) return 1;
        sleep_ms(10);
    }
    fprintf(stderr, "prog: timed out waiting for dump %d (have %d)\n", n, status_dumps());
    return 0;
}

/* Sends this process `sig` from another process (a child that sends it
 * and leaves with _exit: no exit dump of its own), as `kill -USR2 PID`
 * from a shell does, and waits for that child. heaplive takes such a
 * signal as a dump request; one the program sends itself (raise, kill to
 * its own pid) is the program's own (issue 32). */
static void signal_from_outside(int sig) {
    pid_t me = getpid();
    pid_t c = fork();
    if (c == 0) {
        kill(me, sig);
        _exit(0);
    }
    while (c > 0 && waitpid(c, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* Installs `handler` for `sig` with `flags` (SA_RESTART, ...) and an empty
 * mask. */
static void on_signal(int sig, void (*handler)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = flags;
    sigaction(sig, &sa, NULL);
}

/* Blocks `sig` in the calling thread. */
static void block_signal(int sig) {
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, sig);
    sigprocmask(SIG_BLOCK, &m, NULL);
}
