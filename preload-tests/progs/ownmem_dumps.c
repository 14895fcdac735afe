/* heaplive's own memory across repeated dumps of a program whose blocks
 * come from inside libc (its debug info, libc6-dbg, is tens of MiB of
 * DWARF): regcomp, strdup, asprintf, open_memstream. Holds 16 MiB of its
 * own blocks, then calls heaplive_dump() (found with dlsym) 10 times,
 * with new libc call sites between dumps. preload-tests/ownmem.rs reads the
 * dump lines. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile keep[4096];
static int nkeep;

NOINLINE static void own_blocks(void) {
    for (int i = 0; i < 256; i++)
        keep[nkeep++] = calloc(1, 64 << 10);
}

NOINLINE static void libc_blocks(int round) {
    static regex_t re[16];
    regcomp(&re[round], "^(a|b)+[0-9]{2,5}x*$", REG_EXTENDED);
    char *s;
    if (asprintf(&s, "round %d", round) > 0)
        keep[nkeep++] = s;
    keep[nkeep++] = strdup("a string from strdup");
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "%0*d", 1000 * (round + 1), 7);
    fclose(f);
    keep[nkeep++] = buf;
}

int main(void) {
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heaplive_dump");
    own_blocks();
    for (int round = 0; round < 10; round++) {
        libc_blocks(round);
        if (dump && dump(NULL) != 0)
            printf("dump %d failed\n", round);
    }
    printf("done\n");
    return 0;
}
