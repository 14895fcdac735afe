/* A program that lives with a memory limit of its own (preload-tests/
 * limits.rs, issue #25): sets RLIMIT_AS or RLIMIT_DATA to LIMIT bytes,
 * holds 3,000 blocks (1,000 to 4,000 bytes) from 100 stacks, asks
 * heaplive for a dump (heaplive_dump, when preloaded) and a signal dump
 * (SIGUSR2, waiting up to 5 s for its line in $HEAPLIVE_LOG), replaces its
 * blocks and exits with its own status, 3. A malloc that fails is counted,
 * not fatal: "done F failed" on stdout.
 *
 *   lim_mem as|data LIMIT */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

enum { BLOCKS = 3000 };
static void *volatile keep[BLOCKS];

NOINLINE static void *site(int depth, size_t n) {
    if (depth > 0) {
        void *p = site(depth - 1, n);
        __asm__ volatile("" ::: "memory");
        return p;
    }
    void *p = malloc(n);
    if (p)
        memset(p, 1, n);
    return p;
}

/* Whether the file $HEAPLIVE_LOG has a line about the signal dump. With
 * read(2) into a static buffer: stdio's malloc may fail at the limit. */
static int signal_dump_logged(void) {
    static char text[1 << 16];
    const char *log = getenv("HEAPLIVE_LOG");
    int fd = log ? open(log, O_RDONLY) : -1;
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    text[n > 0 ? n : 0] = 0;
    return strstr(text, "signal dump") != NULL;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    rlim_t limit = strtoull(argv[2], NULL, 10);
    struct rlimit rl = {limit, limit};
    if (setrlimit(strcmp(argv[1], "as") ? RLIMIT_DATA : RLIMIT_AS, &rl) != 0)
        return 2;
    int failed = 0;
    for (int i = 0; i < BLOCKS; i++)
        if (!(keep[i] = site(i % 100, 1000 + i)))
            failed++;
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heaplive_dump");
    if (dump) {
        dump(NULL);
        /* From another process: a signal the program sent itself would be
         * its own (issue 32), not a dump request. */
        pid_t me = getpid(), c = fork();
        if (c == 0) {
            kill(me, SIGUSR2);
            _exit(0);
        }
        while (c > 0 && waitpid(c, NULL, 0) < 0 && errno == EINTR) {
        }
        struct timespec ts = {0, 5000000};
        for (int i = 0; i < 1000 && !signal_dump_logged(); i++)
            nanosleep(&ts, NULL);
    }
    for (int i = 0; i < BLOCKS; i++) {
        free(keep[i]);
        if (!(keep[i] = site(i % 97, 900 + i)))
            failed++;
    }
    printf("done %d failed\n", failed);
    return 3;
}
