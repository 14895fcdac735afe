/* heaplive_dump(argv[i]) for every argument (preload-tests/security.rs):
 * prints one line per call, "<path> <rc> <errno>" (errno 0 on success),
 * with a 1000-byte block live. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void *keep;

int main(int argc, char **argv) {
    keep = malloc(1000);
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
    return 0;
}
