/* For `heaplive dump` (preload-tests/adversary25.rs): keeps a block at
 * kept_site, prints "ready PID" and waits for the dump signal; its own
 * handler (which heaplive runs before writing the dump) makes main call
 * exit(0) at once, so the process ends just after its dump: like a worker
 * recycled after a dump. With argument "stay" it waits for stdin's end. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t asked;
static void on_usr2(int sig) {
    (void)sig;
    asked = 1;
}

__attribute__((noinline)) void *kept_site(size_t n) { return malloc(n); }

int main(int argc, char **argv) {
    void *p = kept_site(123457);
    signal(SIGUSR2, on_usr2);
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready %d\n", (int)getpid());
    if (argc > 1 && strcmp(argv[1], "stay") == 0) {
        char buf[64];
        while (fgets(buf, sizeof buf, stdin)) {
        }
    } else {
        while (!asked) usleep(1000);
    }
    printf("bye %p\n", p);
    exit(0);
}
