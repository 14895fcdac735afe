/* SIG_IGN and SIG_DFL for the dump signal: read back as set, never applied
 * to a dump request (the process survives SIGUSR2 from another process,
 * which is dumped). */
#include "sig_common.h"

static int check(const char *what, void (*want)(int)) {
    struct sigaction old;
    if (sigaction(SIGUSR2, NULL, &old) != 0) {
        printf("%s: sigaction failed\n", what);
        return 0;
    }
    if (old.sa_handler != want) {
        printf("%s: read back %p\n", what, (void *)old.sa_handler);
        return 0;
    }
    return 1;
}

int main(void) {
    int ok = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);

    sa.sa_handler = SIG_IGN;
    ok &= sigaction(SIGUSR2, &sa, NULL) == 0;
    ok &= check("sigaction SIG_IGN", SIG_IGN);
    int before = status_dumps();
    signal_from_outside(SIGUSR2);
    ok &= wait_dumps(before + 1);
    printf("alive after SIG_IGN\n");

    sa.sa_handler = SIG_DFL;
    ok &= sigaction(SIGUSR2, &sa, NULL) == 0;
    ok &= check("sigaction SIG_DFL", SIG_DFL);
    before = status_dumps();
    signal_from_outside(SIGUSR2);
    ok &= wait_dumps(before + 1);
    printf("alive after SIG_DFL\n");

    /* The same through signal(): the previous disposition comes back. */
    void (*prev)(int) = signal(SIGUSR2, SIG_IGN);
    if (prev != SIG_DFL) {
        printf("signal(SIG_IGN) returned %p, not SIG_DFL\n", (void *)prev);
        ok = 0;
    }
    ok &= check("signal SIG_IGN", SIG_IGN);
    /* Its own signal, ignored: nothing happens. */
    raise(SIGUSR2);
    prev = signal(SIGUSR2, SIG_DFL);
    if (prev != SIG_IGN) {
        printf("signal(SIG_DFL) returned %p, not SIG_IGN\n", (void *)prev);
        ok = 0;
    }
    ok &= check("signal SIG_DFL", SIG_DFL);
    before = status_dumps();
    signal_from_outside(SIGUSR2);
    ok &= wait_dumps(before + 1);
    printf("alive after signal(); all %s\n", ok ? "ok" : "BAD");
    return 0;
}
