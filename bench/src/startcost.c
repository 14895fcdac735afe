/* startcost: the start cost of a preload on a process that never samples.
 *
 *   startcost ROUNDS RUNS CMD -- LABEL=PRELOAD ...   (PRELOAD "" = none)
 *
 * Each round runs CMD (e.g. /bin/true) RUNS times under every
 * configuration in turn (interleaved, in an order rotated every round, so
 * drift of the shared machine hits all alike), with posix_spawn and wait4,
 * and records per run the mean wall time (spawn to reaped), the mean CPU
 * time of the child (user + system from wait4's rusage: the scheduler's
 * runtime of the child, not of this process) and its minor page faults.
 * Prints per configuration the median over rounds in microseconds, and the
 * difference of each median from the first configuration's. Only the
 * child's environment gets LD_PRELOAD; everything else is inherited. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        fprintf(stderr, "usage: startcost ROUNDS RUNS CMD -- LABEL=PRELOAD ...\n");
        return 2;
    }
    int rounds = atoi(argv[1]), runs = atoi(argv[2]);
    if (rounds < 1 || runs < 1) return 2;
    char *cmd = argv[3];
    int n = argc - 5;
    char **labels = calloc(n, sizeof *labels);
    char ***envs = calloc(n, sizeof *envs);
    double *wall = calloc((size_t)n * rounds, sizeof *wall);
    double *cpu = calloc((size_t)n * rounds, sizeof *cpu);
    double *flt = calloc((size_t)n * rounds, sizeof *flt);
    int ne = 0;
    while (environ[ne]) ne++;
    for (int c = 0; c < n; c++) {
        char *eq = strchr(argv[5 + c], '=');
        if (!eq) return 2;
        labels[c] = strndup(argv[5 + c], eq - argv[5 + c]);
        envs[c] = calloc(ne + 2, sizeof(char *));
        int k = 0;
        for (int i = 0; i < ne; i++)
            if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) envs[c][k++] = environ[i];
        if (eq[1]) {
            char *e;
            if (asprintf(&e, "LD_PRELOAD=%s", eq + 1) < 0) return 2;
            envs[c][k++] = e;
        }
        envs[c][k] = NULL;
    }
    char *args[] = {cmd, NULL};
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < n; j++) {
            int c = (j + r) % n;
            double t0 = now(), us = 0, faults = 0;
            for (int i = 0; i < runs; i++) {
                pid_t pid;
                if (posix_spawn(&pid, cmd, NULL, NULL, args, envs[c]) != 0) return 1;
                int st;
                struct rusage ru;
                if (wait4(pid, &st, 0, &ru) != pid) return 1;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                    fprintf(stderr, "startcost: %s failed under %s\n", cmd, labels[c]);
                    return 1;
                }
                us += ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec +
                      ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
                faults += ru.ru_minflt;
            }
            wall[c * rounds + r] = (now() - t0) / runs * 1e6;
            cpu[c * rounds + r] = us / runs;
            flt[c * rounds + r] = faults / runs;
        }
    double bw = 0, bc = 0, bf = 0;
    printf("%-16s %10s %10s %9s %10s %10s %9s\n", "config", "wall_us", "cpu_us", "faults",
           "d_wall", "d_cpu", "d_faults");
    for (int c = 0; c < n; c++) {
        double w = median(wall + c * rounds, rounds);
        double u = median(cpu + c * rounds, rounds);
        double f = median(flt + c * rounds, rounds);
        if (c == 0) bw = w, bc = u, bf = f;
        printf("%-16s %10.1f %10.1f %9.1f %+10.1f %+10.1f %+9.1f\n", labels[c], w, u, f, w - bw,
               u - bc, f - bf);
    }
    return 0;
}
