/* How long does the heap snapshot of a signal dump take? Holds N live
 * blocks (exact mode: N samples) and has a child send it SIGUSR2 20 times
 * (a signal it sent itself would be its own, not a dump request), each
 * after the previous dump; each dump's summary line says how long the copy
 * took ("snapshot X ms"). Run: bench/snapshot_latency.sh */
/* status_dumps, signal_from_outside, sleep_ms: the test programs' own. */
#include "../preload-tests/progs/sig_common.h"

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    void **keep = calloc(n, sizeof *keep);
    for (int i = 0; i < n; i++) keep[i] = malloc(32 + i % 64);
    for (int r = 1; r <= 20; r++) {
        signal_from_outside(SIGUSR2);
        while (status_dumps() < r) sleep_ms(1);
    }
    return 0;
}
