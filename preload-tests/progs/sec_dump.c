/* heaplive_dump(argv[i]) for every argument (preload-tests/security.rs):
 * prints one line per call, "<path> <rc> <errno>" (errno 0 on success),
 * with a 1000-byte block live. */
#include "dump_args.h"

void *keep;

int main(int argc, char **argv) {
    keep = malloc(1000);
    if (dump_args(argc, argv))
        return 3;
    return 0;
}
