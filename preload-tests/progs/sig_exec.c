/* Like php-fpm's master on SIGUSR2: the handler sets a flag, the main loop
 * sees it and re-executes the program (same pid). argv[1]: "now" (exec at
 * once), "wait" (exec after heaplive reports the dump), "after" (the new
 * image: just exit). */
#include "sig_common.h"

static volatile sig_atomic_t reload;
static void on_usr2(int sig) {
    (void)sig;
    reload = 1;
}

static void *volatile keep;
__attribute__((noinline)) void exec_leak(void) { keep = malloc(200000); }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "now";
    if (strcmp(mode, "after") == 0) {
        printf("after exec in %d\n", (int)getpid());
        return 0;
    }
    exec_leak();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    printf("before exec in %d\n", (int)getpid());
    fflush(stdout);
    signal_from_outside(SIGUSR2);
    while (!reload) sleep_ms(1);
    if (strcmp(mode, "wait") == 0) wait_dumps(1);
    execl("/proc/self/exe", argv[0], "after", (char *)NULL);
    perror("execl");
    return 1;
}
