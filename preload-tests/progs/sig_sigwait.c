/* A program that waits for SIGUSR2 itself: blocks it, then sends it to
 * itself and takes it with sigwait (argv[1] "sigwait"), sigwaitinfo, or a
 * signalfd, 5 times. Every signal must reach it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void *volatile keep;
int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "sigwait";
    keep = malloc(1000);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int fd = -1;
    if (!strcmp(how, "signalfd")) fd = signalfd(-1, &set, 0);
    int got = 0;
    for (int i = 0; i < 5; i++) {
        kill(getpid(), SIGUSR2);
        if (!strcmp(how, "sigwait")) {
            int sig = 0;
            if (sigwait(&set, &sig) == 0 && sig == SIGUSR2) got++;
        } else if (!strcmp(how, "sigwaitinfo")) {
            siginfo_t si;
            if (sigwaitinfo(&set, &si) == SIGUSR2 && si.si_pid == getpid()) got++;
        } else {
            struct signalfd_siginfo si;
            if (read(fd, &si, sizeof si) == sizeof si && si.ssi_signo == SIGUSR2) got++;
        }
    }
    printf("%s got %d\n", how, got);
    return 0;
}
