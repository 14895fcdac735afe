/* A program that uses a signal (argv[1]: USR2, USR1 or RTMIN+N) on itself,
 * step by step, and prints what it sees: a handler run by raise(); a
 * signal blocked, pending, then delivered when unblocked; SA_SIGINFO with
 * kill(getpid()) and sigqueue(); pthread_kill() to another thread;
 * SA_NODEFER and sa_mask; SA_RESETHAND in a child (its second raise kills
 * it); SIG_IGN; and last raise() with SIG_DFL, which ends the process by
 * that signal. Every line must be the same with heaplive as without it,
 * and so must the exit status (issue 32). */
#include "sig_common.h"
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int sig;
static volatile sig_atomic_t count, depth, max_depth;
static volatile int last_code, last_pid, last_uid, last_value, on_target;
static volatile int masked_other, masked_self;
static pthread_t target;
static volatile pid_t target_tid;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void on_plain(int s) {
    if (s == sig) count++;
}

static void on_info(int s, siginfo_t *si, void *ctx) {
    (void)ctx;
    if (s != sig || si->si_signo != sig) return;
    count++;
    last_code = si->si_code;
    last_pid = si->si_pid == getpid();
    last_uid = si->si_uid == getuid();
    last_value = si->si_code == SI_QUEUE ? si->si_value.sival_int : -1;
    on_target = pthread_equal(pthread_self(), target);
}

/* Raises the signal again from inside itself, once: nested with
 * SA_NODEFER, after it returns without. Records the mask it runs with. */
static void on_nested(int s) {
    (void)s;
    count++;
    depth++;
    if (depth > max_depth) max_depth = depth;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    masked_other = sigismember(&cur, SIGWINCH);
    masked_self = sigismember(&cur, sig);
    if (count == 1) raise(sig);
    depth--;
}

static void install(void (*h)(int), void (*hi)(int, siginfo_t *, void *), int flags, int mask_sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (mask_sig) sigaddset(&sa.sa_mask, mask_sig);
    if (hi) {
        sa.sa_sigaction = hi;
        flags |= SA_SIGINFO;
    } else {
        sa.sa_handler = h;
    }
    sa.sa_flags = flags;
    if (sigaction(sig, &sa, NULL) != 0) say("sigaction failed");
}

static const char *code_name(int c) {
    switch (c) {
    case SI_USER: return "SI_USER";
    case SI_QUEUE: return "SI_QUEUE";
    case SI_TKILL: return "SI_TKILL";
    default: return "other";
    }
}

static int pending(void) {
    sigset_t p;
    sigpending(&p);
    return sigismember(&p, sig);
}

static void block(int how) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(how, &s, NULL);
}

static void *waiter(void *arg) {
    (void)arg;
    target_tid = (pid_t)syscall(SYS_gettid);
    sigset_t none;
    sigemptyset(&none);
    while (count == 0) sigsuspend(&none);
    return NULL;
}

/* Whether thread `tid` of this process is inside rt_sigsuspend. */
static int in_sigsuspend(pid_t tid) {
    char path[64], buf[64] = {0};
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n > 0 && atoi(buf) == SYS_rt_sigsuspend;
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "USR2";
    if (!strcmp(name, "USR1")) sig = SIGUSR1;
    else if (!strcmp(name, "USR2")) sig = SIGUSR2;
    else if (!strncmp(name, "RTMIN+", 6)) sig = SIGRTMIN + atoi(name + 6);
    else return 2;
    static void *volatile keep;
    keep = malloc(100000);
    /* A step that never ends (a signal that never comes) ends the program
     * by SIGALRM instead: the test sees another status, not a hang. */
    alarm(20);
    int rt = sig >= SIGRTMIN;

    /* 1. raise() runs the handler before it returns. */
    install(on_plain, NULL, 0, 0);
    count = 0;
    raise(sig);
    say("raise: handler ran %d time(s) before raise returned", (int)count);

    /* 2. Blocked: pending, delivered when unblocked (twice raised: once
     * for a standard signal, twice for a real-time one). */
    count = 0;
    block(SIG_BLOCK);
    raise(sig);
    raise(sig);
    say("blocked: handler ran %d, pending %d", (int)count, pending());
    block(SIG_UNBLOCK);
    say("unblocked: handler ran %d (%s), pending %d", (int)count, rt ? "real-time" : "standard", pending());

    /* 3. SA_SIGINFO with kill(getpid()): si_pid, si_uid, SI_USER. */
    install(NULL, on_info, SA_RESTART, 0);
    count = 0;
    kill(getpid(), sig);
    say("kill: ran %d before kill returned, %s, own pid %d, own uid %d", (int)count,
        code_name(last_code), last_pid, last_uid);

    /* 4. The same blocked: pending until unblocked. */
    count = 0;
    block(SIG_BLOCK);
    kill(getpid(), sig);
    say("kill blocked: ran %d, pending %d", (int)count, pending());
    block(SIG_UNBLOCK);
    say("kill unblocked: ran %d, %s, own pid %d", (int)count, code_name(last_code), last_pid);

    /* 5. sigqueue to itself: SI_QUEUE and the value. */
    count = 0;
    union sigval v = {.sival_int = 4242};
    sigqueue(getpid(), sig, v);
    say("sigqueue: ran %d, %s, value %d, own pid %d", (int)count, code_name(last_code),
        last_value, last_pid);

    /* 6. pthread_kill to another thread, waiting in sigsuspend: the
     * handler runs on that thread, with SI_TKILL. */
    count = 0;
    on_target = 0;
    target_tid = 0;
    pthread_create(&target, NULL, waiter, NULL);
    while (target_tid == 0 || !in_sigsuspend(target_tid)) sleep_ms(1);
    pthread_kill(target, sig);
    pthread_join(target, NULL);
    say("pthread_kill: ran %d, on the target thread %d, %s, own pid %d", (int)count, on_target,
        code_name(last_code), last_pid);

    /* 7. sa_mask and SA_NODEFER: a raise from inside the handler. */
    count = depth = max_depth = 0;
    install(on_nested, NULL, 0, SIGWINCH);
    raise(sig);
    say("nested without SA_NODEFER: ran %d, depth %d, mask has SIGWINCH %d, itself %d", (int)count,
        (int)max_depth, masked_other, masked_self);
    count = depth = max_depth = 0;
    install(on_nested, NULL, SA_NODEFER, 0);
    raise(sig);
    say("nested with SA_NODEFER: ran %d, depth %d, mask has itself %d", (int)count, (int)max_depth,
        masked_self);

    /* 8. SA_RESETHAND, in a child: the handler once, then SIG_DFL; the
     * second raise ends the child. */
    pid_t c = fork();
    if (c == 0) {
        count = 0;
        install(on_plain, NULL, SA_RESETHAND, 0);
        raise(sig);
        struct sigaction old;
        sigaction(sig, NULL, &old);
        say("resethand child: ran %d, now %s", (int)count,
            old.sa_handler == SIG_DFL ? "SIG_DFL" : "not SIG_DFL");
        raise(sig);
        say("resethand child: alive after the second raise");
        _exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    if (WIFSIGNALED(st))
        say("resethand child: killed by signal %s", WTERMSIG(st) == sig ? "the same" : "another");
    else
        say("resethand child: exit %d", WEXITSTATUS(st));

    /* 9. SIG_IGN: nothing happens. */
    signal(sig, SIG_IGN);
    raise(sig);
    kill(getpid(), sig);
    say("ignored: alive");

    /* 10. SIG_DFL: the default action ends the process. */
    signal(sig, SIG_DFL);
    say("raise with SIG_DFL");
    raise(sig);
    say("alive after raise with SIG_DFL");
    return 0;
}
