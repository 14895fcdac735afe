/* Sends itself argv[1] (USR1, USR2 or RTMIN+N) and waits for the dump.
 * Without heaplive catching it, the default action would end the process. */
#include "sig_common.h"

static void *volatile keep;
__attribute__((noinline)) void custom_leak(void) { keep = malloc(100000); }

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "USR2";
    int sig;
    if (strcmp(s, "USR1") == 0) sig = SIGUSR1;
    else if (strcmp(s, "USR2") == 0) sig = SIGUSR2;
    else if (strncmp(s, "RTMIN+", 6) == 0) sig = SIGRTMIN + atoi(s + 6);
    else return 2;
    custom_leak();
    signal_from_outside(sig);
    int ok = wait_dumps(1);
    printf("alive after signal %d, dumped %d\n", sig, ok);
    return 0;
}
