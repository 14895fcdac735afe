/* The heap peaks at once and then sleeps (issue 26, the exit line's peak
 * time): `once` allocates 64 MiB in 64 KiB blocks, frees them, sleeps
 * 1.5 s and exits; `again` then allocates 64.5 MiB (a maximum less than
 * 1/64 above the first) and frees it before exiting. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void climb(int n) {
    static char *b[2048];
    for (int i = 0; i < n; i++) {
        b[i] = malloc(64 * 1024);
        if (!b[i]) exit(1);
        memset(b[i], 1, 64);
    }
    for (int i = 0; i < n; i++) free(b[i]);
}

int main(int argc, char **argv) {
    int again = argc > 1 && !strcmp(argv[1], "again");
    climb(1024);
    usleep(1500000);
    if (again) climb(1032);
    return 0;
}
