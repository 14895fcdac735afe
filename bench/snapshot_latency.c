/* How long does the heap snapshot of a signal dump take? Holds N live
 * blocks (exact mode: N samples) and has a child send it SIGUSR2 20 times
 * (a signal it sent itself would be its own, not a dump request), each
 * after the previous dump; each dump's summary line says how long the copy
 * took ("snapshot X ms"). Run: bench/snapshot_latency.sh */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

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

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    void **keep = calloc(n, sizeof *keep);
    for (int i = 0; i < n; i++) keep[i] = malloc(32 + i % 64);
    for (int r = 1; r <= 20; r++) {
        pid_t me = getpid(), c = fork();
        if (c == 0) {
            kill(me, SIGUSR2);
            _exit(0);
        }
        waitpid(c, NULL, 0);
        while (status_dumps() < r) {
            struct timespec t = {0, 1000000};
            nanosleep(&t, NULL);
        }
    }
    return 0;
}
