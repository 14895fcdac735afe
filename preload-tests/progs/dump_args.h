/* heaplive_dump(argv[i]) for every argument, one line per call:
 * "<path> <rc> <errno>" (errno 0 on success). For links_prog.c and
 * sec_dump.c. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* 3 when heaplive_dump is not there (no library), else 0 after the calls. */
static int dump_args(int argc, char **argv) {
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
