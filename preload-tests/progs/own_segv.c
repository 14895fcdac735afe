/* A program with its own SIGSEGV handler (as a JVM or a crash reporter has):
 * a SIGSEGV it did not cause is a fatal mistake of whoever sent it. Prints
 * "ready", then sleeps until killed; on SIGSEGV prints it and exits 99. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep;
__attribute__((noinline)) void own_segv_alloc(void) { keep = malloc(200000); }

static void on_segv(int sig) {
    (void)sig;
    static const char msg[] = "got SIGSEGV\n";
    if (write(1, msg, sizeof msg - 1) < 0) {}
    _exit(99);
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0) return 2;
    own_segv_alloc();
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
