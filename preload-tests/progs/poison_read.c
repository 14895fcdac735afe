/* Reads memory it must not rely on, on purpose (HEAPLIVE_POISON,
 * services.rs): a new block, a freed one, a calloc'ed one, realloc's new
 * bytes, operator-new-free C++ is not needed here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    volatile unsigned char *a = malloc(64);
    printf("alloc %02x %02x\n", a[0], a[63]);
    unsigned char *b = malloc(64);
    memset(b, 0x11, 64);
    volatile unsigned char *freed = b;
    free(b);
    /* Past the allocator's own words at the start of a free chunk. */
    printf("freed %02x %02x\n", freed[40], freed[63]);
    volatile unsigned char *c = calloc(1, 64);
    printf("calloc %02x\n", c[10]);
    unsigned char *r = malloc(16);
    memset(r, 0x22, 16);
    volatile unsigned char *g = realloc(r, 4096);
    printf("realloc %02x %02x\n", g[15], g[4000]);
    return 0;
}
