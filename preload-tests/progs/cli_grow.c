/* Grows one call site on command: each "grow N" line on stdin allocates N
 * bytes at grow_site and answers "ok"; "quit" exits with status 5. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *keep[1000];
static int kept;

__attribute__((noinline)) void *grow_site(size_t n) { return malloc(n); }
__attribute__((noinline)) void *steady_site(size_t n) { return malloc(n); }

int main(void) {
    char line[128];
    keep[kept++] = steady_site(4242);
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready\n");
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "grow ", 5) == 0 && kept < 1000) {
            keep[kept++] = grow_site(strtoul(line + 5, NULL, 10));
            printf("ok\n");
        } else if (strncmp(line, "quit", 4) == 0) {
            return 5;
        }
    }
    return 0;
}
