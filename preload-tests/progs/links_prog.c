/* preload-tests/links.rs: a program whose peak (4 MiB, freed) is above what
 * stays live (1 MiB), that prints one line of its own, calls
 * heaplive_dump(argv[i]) for every argument ("<path> <rc> <errno>" per call)
 * and exits with status 5. */
#include "dump_args.h"
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
    if (dump_args(argc, argv))
        return 3;
    return 5;
}
