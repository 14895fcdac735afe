/* Work after heaplive's exit dump (preload-tests/security.rs): the
 * program's ELF destructor runs after every atexit handler, heaplive's
 * included; it raises the dump signal and sleeps through several periodic
 * intervals. Nothing may be written after the exit dump. */
#include <signal.h>
#include <stdlib.h>
#include <time.h>

void *keep;

__attribute__((destructor)) static void late(void) {
    raise(SIGUSR2);
    struct timespec ts = {0, 300 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(void) {
    keep = malloc(1000);
    return 0;
}
