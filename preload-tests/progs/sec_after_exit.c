/* Work after heaplive's exit dump (preload-tests/security.rs): the
 * program's ELF destructor runs after every atexit handler, heaplive's
 * included; it has the dump signal sent to it from another process (a
 * signal it raised itself would be its own) and sleeps through several periodic
 * intervals. Nothing may be written after the exit dump. */
#include "sig_common.h"
#include <signal.h>
#include <stdlib.h>
#include <time.h>

void *keep;

__attribute__((destructor)) static void late(void) {
    signal_from_outside(SIGUSR2);
    struct timespec ts = {0, 300 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(void) {
    keep = malloc(1000);
    return 0;
}
