/* The program's own handler for the dump signal: installed with sigaction
 * (SA_SIGINFO) or signal(); it must still run on every dump signal (sent
 * by another process, with that process's si_pid and SI_USER). */
#include "sig_common.h"

static volatile sig_atomic_t count, bad_info;

static void on_usr2(int sig) {
    if (sig == SIGUSR2) count++;
}
static void on_usr2_info(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    if (sig != SIGUSR2 || !si || si->si_signo != SIGUSR2 || si->si_code != SI_USER ||
        si->si_pid == getpid()) bad_info = 1;
    count++;
}

int main(int argc, char **argv) {
    int use_signal = argc > 1 && strcmp(argv[1], "signal") == 0;
    if (use_signal) {
        if (signal(SIGUSR2, on_usr2) == SIG_ERR) return 2;
        void (*back)(int) = signal(SIGUSR2, on_usr2);
        if (back != on_usr2) {
            printf("signal() gave back %p, not the handler\n", (void *)back);
            return 3;
        }
    } else {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_usr2_info;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGUSR2, &sa, NULL) != 0) return 2;
        if (sigaction(SIGUSR2, NULL, &old) != 0 || old.sa_sigaction != on_usr2_info || !(old.sa_flags & SA_SIGINFO)) {
            printf("sigaction read back something else\n");
            return 3;
        }
    }
    int ok = 1;
    for (int i = 1; i <= 5; i++) {
        int before = status_dumps();
        signal_from_outside(SIGUSR2);
        for (int w = 0; w < 200 && count < i; w++) sleep_ms(10);
        ok &= wait_dumps(before + 1);
    }
    printf("handler ran %d times, info %s, dumps %s\n", (int)count, bad_info ? "bad" : "ok", ok ? "ok" : "missing");
    return 0;
}
