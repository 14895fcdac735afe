/* Small signal cases. argv[1]:
 *  resethand  - a one-shot (SA_RESETHAND) handler for SIGUSR2 runs once,
 *               then sigaction reads back SIG_DFL;
 *  closefds   - closes every descriptor from 3 up, makes an eventfd of its
 *               own: 5 dump signals are each dumped, and the eventfd keeps
 *               its events;
 *  ignexec    - ignores SIGUSR2 and execs itself ("ignchild"), which must
 *               read SIG_IGN and survive a SIGUSR2; "ignplain" does the
 *               same with LD_PRELOAD removed from the new image. */
#include "sig_common.h"
#include <sys/eventfd.h>

static volatile sig_atomic_t count;
static void on_usr2(int s) { (void)s; count++; }

extern char **environ;

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "";
    static void *volatile keep;
    keep = malloc(5000);
    if (!strcmp(m, "resethand")) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr2;
        sa.sa_flags = SA_RESETHAND;
        sigaction(SIGUSR2, &sa, NULL);
        signal_from_outside(SIGUSR2);
        for (int i = 0; i < 2000 && count == 0; i++) sleep_ms(10);
        sigaction(SIGUSR2, NULL, &old);
        printf("ran %d, now %s\n", (int)count, old.sa_handler == SIG_DFL ? "SIG_DFL" : "not SIG_DFL");
        return 0;
    }
    if (!strcmp(m, "closefds")) {
        for (int fd = 3; fd < 1024; fd++) close(fd);
        int efd = eventfd(0, EFD_NONBLOCK);
        int ok = 1;
        for (int i = 1; i <= 5; i++) {
            signal_from_outside(SIGUSR2);
            ok &= wait_dumps(i);
        }
        uint64_t v = 7, got = 0;
        if (write(efd, &v, 8) != 8) ok = 0;
        if (read(efd, &got, 8) != 8 || got != 7) ok = 0;
        printf("closefds %s\n", ok ? "ok" : "failed");
        return 0;
    }
    if (!strcmp(m, "ignexec") || !strcmp(m, "ignplainexec")) {
        signal(SIGUSR2, SIG_IGN);
        char *env[] = {"PATH=/usr/bin:/bin", NULL};
        if (!strcmp(m, "ignplainexec"))
            execle("/proc/self/exe", argv[0], "ignchild", (char *)NULL, env);
        else
            execl("/proc/self/exe", argv[0], "ignchild", (char *)NULL);
        perror("exec");
        return 1;
    }
    if (!strcmp(m, "ignchild")) {
        struct sigaction old;
        sigaction(SIGUSR2, NULL, &old);
        printf("child reads %s\n", old.sa_handler == SIG_IGN ? "SIG_IGN" : "not SIG_IGN");
        fflush(stdout);
        signal_from_outside(SIGUSR2);
        sleep_ms(200);
        printf("child alive\n");
        return 0;
    }
    if (!strcmp(m, "failexec")) {
        /* A failed exec must leave the mask and disposition as they were. */
        sigset_t s, cur;
        sigemptyset(&s);
        execl("/nonexistent/prog", "x", (char *)NULL);
        int e = errno;
        sigprocmask(SIG_BLOCK, &s, &cur);
        printf("exec failed with %s, USR2 %s\n", e == ENOENT ? "ENOENT" : "other",
               sigismember(&cur, SIGUSR2) ? "blocked" : "not blocked");
        return 0;
    }
    return 2;
}
