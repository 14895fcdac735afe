/* The parent leaks 300,000 bytes, then forks 4 children; child i leaks its
 * own amount in its own function and exits (its exit dump is its own). */
#include "sig_common.h"
#include <sys/wait.h>

static void *volatile keep[8];

__attribute__((noinline)) void parent_leak(void) { keep[0] = malloc(300000); }
__attribute__((noinline)) void child_leak_0(void) { keep[1] = malloc(110000); }
__attribute__((noinline)) void child_leak_1(void) { keep[2] = malloc(220000); }
__attribute__((noinline)) void child_leak_2(void) { keep[3] = malloc(330000); }
__attribute__((noinline)) void child_leak_3(void) { keep[4] = malloc(440000); }

int main(void) {
    parent_leak();
    pid_t pids[4];
    for (int i = 0; i < 4; i++) {
        fflush(stdout);
        pid_t p = fork();
        if (p < 0) {
            perror("fork");
            return 1;
        }
        if (p == 0) {
            switch (i) {
            case 0: child_leak_0(); break;
            case 1: child_leak_1(); break;
            case 2: child_leak_2(); break;
            case 3: child_leak_3(); break;
            }
            exit(0);
        }
        pids[i] = p;
        printf("child %d %d\n", i, (int)p);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "child %d ended badly (status %#x)\n", i, st);
            bad = 1;
        }
    }
    printf("parent %d\n", (int)getpid());
    return bad;
}
