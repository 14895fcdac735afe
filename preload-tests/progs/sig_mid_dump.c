/* A dump signal that arrives while heaplive's thread is building a slow
 * dump (issue 17): it must be snapshotted at once, not after that dump.
 *
 * The program holds blocks from many distinct call sites (generated into
 * sig_mid_dump_sites.h by the test), so the first dump is slow to
 * symbolize. A child of its sends it the dump signal (what `kill -USR2
 * PID` from outside does), and its own handler,
 * which heaplive runs right after each snapshot, acknowledges each signal
 * through a pipe and notes how many dumps heaplive had finished then
 * (its status file).
 *
 *   hold A; signal 1; wait for ack 1 (snapshot 1 taken; dump 1 is being
 *   built); free A, hold B; signal 2; note whether dump 1 had finished;
 *   wait for ack 2; free B, hold C; wait for dump 2.
 *
 * Prints `conclusive=X dumps_at_ack2=Y latency_us=Z`: conclusive is 1 when
 * dump 1 had not finished after signal 2 was sent; dumps_at_ack2 is the
 * number of dumps finished when the handler ran for signal 2 (0: the
 * snapshot for signal 2 was taken while dump 1 was still being built);
 * latency_us is how long after signal 2 the handler ran (for the bench:
 * an optional argument delays signal 2 by that many microseconds). */
#include "sig_common.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "sig_mid_dump_sites.h"

static int ack_pipe[2];
static volatile int dumps_seen_by_handler = -1;
static volatile long handler_ns;
static volatile int handled;

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* status_dumps with async-signal-safe calls only. */
static int status_dumps_raw(void) {
    char path[64], buf[128];
    snprintf(path, sizeof path, "/tmp/heaplive-%u/%d", (unsigned)geteuid(), (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 6 || memcmp(buf, "dumps ", 6) != 0) return 0;
    buf[n] = 0;
    return atoi(buf + 6);
}

static void on_dump_signal(int sig) {
    (void)sig;
    int saved = errno;
    handled++;
    if (handled == 2) {
        handler_ns = now_ns();
        dumps_seen_by_handler = status_dumps_raw();
    }
    char c = 'a';
    if (write(ack_pipe[1], &c, 1) != 1) _exit(3);
    errno = saved;
}

static void wait_ack(void) {
    char c;
    while (read(ack_pipe[0], &c, 1) != 1) {
        if (errno != EINTR) {
            perror("read ack");
            exit(4);
        }
    }
}

/* When the child sent the signal (a shared page). */
static volatile long *sent_at;

/* A child forked at the start sends the dump signal when told (one byte
 * on `order`) and answers on `done` once it has: from another process, as
 * kill(1) does (a signal the program sent itself would be its own, not a
 * dump request). Forked before any dump: a fork while dump 1 is being
 * built would wait for it (heaplive's fork handlers take its locks). */
static int order[2], done[2];

static void start_signaller(void) {
    if (pipe(order) != 0 || pipe(done) != 0) exit(2);
    pid_t me = getpid(), c = fork();
    if (c < 0) exit(2);
    if (c == 0) {
        close(order[1]);
        close(done[0]);
        char b;
        while (read(order[0], &b, 1) == 1) {
            *sent_at = now_ns();
            syscall(SYS_kill, me, SIGUSR2);
            if (write(done[1], &b, 1) != 1) _exit(1);
        }
        _exit(0);
    }
    close(order[0]);
    close(done[1]);
}

static void dump_signal_from_outside(void) {
    char b = 's';
    if (write(order[1], &b, 1) != 1) exit(4);
    while (read(done[0], &b, 1) != 1) {
        if (errno != EINTR) exit(4);
    }
}

__attribute__((noinline)) static void *keep_a(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
__attribute__((noinline)) static void *keep_b(size_t n) { void *p = malloc(n); memset(p, 2, n); return p; }
__attribute__((noinline)) static void *keep_c(size_t n) { void *p = malloc(n); memset(p, 3, n); return p; }

int main(int argc, char **argv) {
    /* For bench/mid_dump_latency.sh: microseconds to wait before signal 2
     * (how far into dump 1 it lands). */
    long delay_us = argc > 1 ? atol(argv[1]) : 0;
    if (pipe(ack_pipe) != 0) return 2;
    sent_at = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sent_at == MAP_FAILED) return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_dump_signal;
    sigaction(SIGUSR2, &sa, NULL);
    start_signaller();

    hold_all_sites();
    void *a = keep_a(1000000);

    dump_signal_from_outside();
    wait_ack();
    free(a);
    void *b = keep_b(2000000);
    if (delay_us > 0) sleep_ms(delay_us / 1000);
    dump_signal_from_outside();
    long sent = *sent_at;
    int conclusive = status_dumps_raw() == 0;
    wait_ack();
    free(b);
    void *c = keep_c(3000000);
    if (!wait_dumps(2)) return 5;
    printf("conclusive=%d dumps_at_ack2=%d latency_us=%ld\n", conclusive, dumps_seen_by_handler,
           (handler_ns - sent) / 1000);
    free(c);
    close(order[1]);
    while (wait(NULL) < 0 && errno == EINTR) {
    }
    return 0;
}
