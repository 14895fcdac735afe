/* A dump signal sent before the process's first sample (heaplive's thread
 * does not exist yet: the signal waits, blocked): its dump must show the
 * heap at the signal, not the block whose sampling started the thread.
 *
 * Prints `ready PID`, waits for a line on stdin (the test sends the signal
 * first), then allocates 64 MiB at `after_signal` (sampled with
 * probability 1 - e^-128 at the default interval), waits for the first
 * dump, prints `dumped` and exits holding the block. */
#include "sig_common.h"

__attribute__((noinline)) static void *after_signal(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

int main(void) {
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 2;
    void *p = after_signal(64u << 20);
    if (!wait_dumps(1)) return 3;
    printf("dumped\n");
    fflush(stdout);
    /* Still held at exit: the exit dump shows it was sampled. */
    return p == NULL;
}
