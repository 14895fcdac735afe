/* startcost: the start cost of a preload on a process that never samples.
 *
 *   startcost ROUNDS RUNS CMD -- LABEL=PRELOAD ...   (PRELOAD "" = none)
 *
 * Each round runs CMD (e.g. /bin/true) RUNS times under every
 * configuration in turn (interleaved, so drift of the shared machine hits
 * all alike), with posix_spawn and waitpid, and records the mean wall time
 * per run. Prints per configuration the median over rounds in
 * microseconds, and its difference from the first configuration. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        fprintf(stderr, "usage: startcost ROUNDS RUNS CMD -- LABEL=PRELOAD ...\n");
        return 2;
    }
    int rounds = atoi(argv[1]), runs = atoi(argv[2]);
    char *cmd = argv[3];
    int n = argc - 5;
    char **labels = calloc(n, sizeof *labels);
    char ***envs = calloc(n, sizeof *envs);
    double *t = calloc((size_t)n * rounds, sizeof *t);
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
        for (int c = 0; c < n; c++) {
            double t0 = now();
            for (int i = 0; i < runs; i++) {
                pid_t pid;
                if (posix_spawn(&pid, cmd, NULL, NULL, args, envs[c]) != 0) return 1;
                int st;
                waitpid(pid, &st, 0);
            }
            t[c * rounds + r] = (now() - t0) / runs * 1e6;
        }
    double base = 0;
    for (int c = 0; c < n; c++) {
        qsort(t + c * rounds, rounds, sizeof *t, cmp);
        double med = t[c * rounds + rounds / 2];
        if (c == 0) base = med;
        printf("%-20s median %8.1f us per run  (%+.1f us vs %s)\n", labels[c], med, med - base, labels[0]);
    }
    return 0;
}
