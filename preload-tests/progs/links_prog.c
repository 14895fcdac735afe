/* preload-tests/links.rs: a program whose peak (4 MiB, freed) is above what
 * stays live (1 MiB), that prints one line of its own, calls
 * heaplive_dump(argv[i]) for every argument ("<path> <rc> <errno>" per call)
 * and exits with status 5. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *keep;

__attribute__((noinline)) void *links_big(size_t n) {
    void *p = malloc(n);
    memset(p, 1, n);
    return p;
}

int main(int argc, char **argv) {
    free(links_big(4 << 20));
    keep = links_big(1 << 20);
    printf("program output\n");
    fflush(stdout);
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heaplive_dump");
    if (!dump)
        return 3;
    for (int i = 1; i < argc; i++) {
        errno = 0;
        int rc = dump(argv[i]);
        int e = rc ? errno : 0;
        printf("%s %d %d\n", argv[i], rc, e);
        fflush(stdout);
    }
    return 5;
}
