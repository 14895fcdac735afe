/* heaplive's writes into a file past RLIMIT_FSIZE and into pipes and FIFOs
 * whose reader went away (preload-tests/limits.rs, issue #25). Holds 400
 * blocks from 100 stacks of different depths (a function with a long name
 * calling itself), so that an exact-mode dump is some 250 KB: more than a
 * pipe holds.
 *
 *   lim_write fsize LIMIT exit     RLIMIT_FSIZE=LIMIT, then exit (dump)
 *   lim_write fsize LIMIT api OUT  ... heaplive_dump(NULL), then the program
 *                                  writes 2*LIMIT bytes to OUT itself
 *   lim_write pipe exit            stdout a pipe whose reader reads one byte
 *                                  and leaves; exit (HEAPLIVE_OUTPUT=/dev/stdout)
 *   lim_write pipe api             ... heaplive_dump("/dev/stdout")
 *   lim_write pipe own             ... then the program writes to stdout
 *   lim_write gone exit            stdout a pipe whose reader is gone already
 *   lim_write fifo PATH            a FIFO whose reader reads one byte and
 *                                  leaves: heaplive_dump(PATH)
 *
 * Reports on stderr ("dump rc errno"); exits 7 (its own status). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile keep[400];

NOINLINE static void *a_function_with_a_long_name_for_a_dump_larger_than_a_pipe(int depth, size_t n) {
    if (depth > 0) {
        void *p = a_function_with_a_long_name_for_a_dump_larger_than_a_pipe(depth - 1, n);
        __asm__ volatile("" ::: "memory");
        return p;
    }
    return malloc(n);
}

static int (*dump)(const char *);

static void api(const char *path) {
    errno = 0;
    int rc = dump(path);
    fprintf(stderr, "dump %d %d\n", rc, rc ? errno : 0);
}

/* In a child: waits (up to 20 s) for the first byte on `fd`, reads it and
 * leaves (_exit: no exit dump of its own). */
static void read_one_and_leave(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    char c;
    poll(&p, 1, 20000);
    if (read(fd, &c, 1) < 0)
        _exit(2);
    _exit(0);
}

/* A child that waits for the first byte on `fd`, reads it and leaves.
 * The parent keeps no read end. */
static pid_t reader(int fd) {
    pid_t pid = fork();
    if (pid == 0)
        read_one_and_leave(fd);
    close(fd);
    return pid;
}

/* stdout becomes a pipe; its reader reads one byte and leaves (or, with
 * `gone`, is closed already). */
static pid_t stdout_pipe(int gone) {
    int fds[2];
    if (pipe(fds) != 0)
        exit(3);
    dup2(fds[1], 1);
    close(fds[1]);
    if (gone) {
        close(fds[0]);
        return 0;
    }
    return reader(fds[0]);
}

int main(int argc, char **argv) {
    dump = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heaplive_dump");
    if (!dump || argc < 3)
        return 3;
    for (int i = 0; i < 400; i++)
        keep[i] = a_function_with_a_long_name_for_a_dump_larger_than_a_pipe(i % 100, 1000 + i);
    const char *mode = argv[1], *what = argv[2];
    if (!strcmp(mode, "fsize")) {
        rlim_t limit = strtoull(what, NULL, 10);
        struct rlimit rl = {limit, limit};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            return 4;
        if (argc > 4 && !strcmp(argv[3], "api")) {
            api(NULL);
            /* The program's own file past the limit: SIGXFSZ as ever. */
            int fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            static char buf[1 << 16];
            for (rlim_t n = 0; fd >= 0 && n < 2 * limit; n += sizeof buf)
                if (write(fd, buf, sizeof buf) < 0)
                    fprintf(stderr, "own write: %s\n", strerror(errno));
        }
    } else if (!strcmp(mode, "pipe") || !strcmp(mode, "gone")) {
        pid_t child = stdout_pipe(!strcmp(mode, "gone"));
        if (!strcmp(what, "api") || !strcmp(what, "own")) {
            api("/dev/stdout");
            waitpid(child, NULL, 0);
        }
        if (!strcmp(what, "own")) {
            /* The program's own write into the dead pipe: SIGPIPE as ever. */
            if (write(1, "x", 1) < 0)
                fprintf(stderr, "own write: %s\n", strerror(errno));
        }
    } else if (!strcmp(mode, "fifo")) {
        if (mkfifo(what, 0600) != 0)
            return 5;
        int sync[2];
        if (pipe(sync) != 0)
            return 3;
        pid_t child = fork();
        if (child == 0) {
            int fd = open(what, O_RDONLY | O_NONBLOCK);
            fcntl(fd, F_SETFL, 0);
            if (write(sync[1], "r", 1) != 1)
                _exit(2);
            read_one_and_leave(fd);
        }
        char c;
        if (read(sync[0], &c, 1) != 1)
            return 6;
        api(what);
        waitpid(child, NULL, 0);
    }
    fprintf(stderr, "main returns\n");
    return 7;
}
