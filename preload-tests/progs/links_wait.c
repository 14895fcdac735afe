/* preload-tests/links.rs: keeps 1 MiB from links_keep, prints "ready",
 * reads stdin to its end (so that a dump signal can come from outside),
 * then, with the argument "fork", forks a child that keeps 2 MiB of its
 * own from links_child and exits 9 (its exit dump is its own), and prints
 * "child=STATUS"; prints "done" and exits with status 6. Nothing is forked
 * before stdin ends: the first dump of the process is the one the test
 * asks for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sites.h"

void *volatile keep[2];

FILLED_SITE(links_keep, 1, n)

FILLED_SITE(links_child, 2, n)

int main(int argc, char **argv) {
    keep[0] = links_keep(1 << 20);
    printf("ready\n");
    fflush(stdout);
    char b[64];
    while (read(0, b, sizeof b) > 0) {
    }
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t f = fork();
        if (f == 0) {
            keep[1] = links_child(2 << 20);
            exit(9);
        }
        int st = 0, child = -1;
        if (f > 0 && waitpid(f, &st, 0) == f)
            child = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        printf("child=%d\n", child);
    }
    printf("done\n");
    fflush(stdout);
    return 6;
}
