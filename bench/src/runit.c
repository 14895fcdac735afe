/* runit: run one benchmark command and append one TSV line of measurements.
 *
 *   runit OUT.tsv WORKLOAD CONFIG ROUND [-i STDIN] [-o STDOUT] [-e STDERR]
 *         [KEY=VALUE ...] -- CMD ARGS...
 *
 * The KEY=VALUE pairs are put into the child's environment only (runit
 * itself is never preloaded). Measures wall time (CLOCK_MONOTONIC around
 * fork..wait4), user and sys CPU and peak RSS from wait4's rusage (which
 * covers the child and every descendant it waited for; ru_maxrss is the
 * largest single process). Appends:
 *   workload config round wall_s user_s sys_s maxrss_kib status
 * and never fails because the command failed (status is recorded). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void redirect(const char *path, int fd, int flags) {
    if (!path) return;
    int f = open(path, flags, 0644);
    if (f < 0) { perror(path); _exit(126); }
    dup2(f, fd);
    close(f);
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: runit OUT WORKLOAD CONFIG ROUND [-i F] [-o F] [-e F] [K=V ...] -- CMD...\n");
        return 2;
    }
    const char *out = argv[1], *wl = argv[2], *cfg = argv[3], *round = argv[4];
    const char *in_f = NULL, *out_f = NULL, *err_f = NULL;
    int i = 5;
    char *envs[64];
    int nenv = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "-i") && i + 1 < argc) in_f = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out_f = argv[++i];
        else if (!strcmp(argv[i], "-e") && i + 1 < argc) err_f = argv[++i];
        else if (strchr(argv[i], '=') && nenv < 64) envs[nenv++] = argv[i];
        else { fprintf(stderr, "runit: bad argument %s\n", argv[i]); return 2; }
    }
    if (i >= argc - 1) { fprintf(stderr, "runit: no command\n"); return 2; }
    char **cmd = &argv[i + 1];

    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 2; }
    if (pid == 0) {
        for (int k = 0; k < nenv; k++) putenv(envs[k]);
        redirect(in_f, 0, O_RDONLY);
        redirect(out_f, 1, O_WRONLY | O_CREAT | O_TRUNC);
        redirect(err_f, 2, O_WRONLY | O_CREAT | O_APPEND);
        execvp(cmd[0], cmd);
        perror(cmd[0]);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) { perror("wait4"); return 2; }
    }
    double wall = now() - t0;
    double user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
    double sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    int st = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *f = fopen(out, "a");
    if (!f) { perror(out); return 2; }
    fprintf(f, "%s\t%s\t%s\t%.4f\t%.4f\t%.4f\t%ld\t%d\n", wl, cfg, round, wall, user, sys, ru.ru_maxrss, st);
    fclose(f);
    return 0;
}
