/* Zend's signal layer (php-fpm workers): its handler for SIGUSR2 defers
 * the signal inside a critical section, and the PHP thread later
 * re-raises it with the default action (SIG_DFL, then kill(getpid())),
 * because the worker's own disposition was SIG_DFL. When the signal was a
 * dump request from another process, that re-raise is the request's and
 * must not end the process (issue 32). */
#include "sig_common.h"

static volatile sig_atomic_t deferred;
static void defer(int s) {
    (void)s;
    deferred = 1;
}

int main(void) {
    static void *volatile keep;
    keep = malloc(100000);
    struct sigaction sa, dfl;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = defer;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    signal_from_outside(SIGUSR2);
    for (int i = 0; i < 2000 && !deferred; i++) sleep_ms(10);
    /* Leaving the critical section: the default action, as Zend does. */
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGUSR2, &dfl, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    kill(getpid(), SIGUSR2);
    sigaction(SIGUSR2, &sa, NULL);
    int dumped = wait_dumps(1);
    printf("handler %d, survived the re-raise, dumped %d\n", (int)deferred, dumped);
    return 0;
}
