/* Two near-equal peaks with different stacks (issue 28, item 4): site_x
 * holds X blocks of SIZE bytes, frees them, then site_y holds Y blocks
 * (a maximum less than 1/64 above the first), frees half and exits. At
 * the true peak site_x holds 0 and site_y Y * SIZE. Arguments: SIZE X Y. */
#include <stdlib.h>
#include <string.h>

static char *b[1 << 16];

__attribute__((noinline)) static char *site_x(size_t size) {
    char *p = malloc(size);
    if (!p) exit(1);
    memset(p, 1, 64);
    return p;
}

__attribute__((noinline)) static char *site_y(size_t size) {
    char *p = malloc(size);
    if (!p) exit(1);
    memset(p, 2, 64);
    return p;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    size_t size = strtoul(argv[1], 0, 0);
    int x = atoi(argv[2]), y = atoi(argv[3]);
    if (x > 1 << 16 || y > 1 << 16) return 2;
    for (int i = 0; i < x; i++) b[i] = site_x(size);
    for (int i = 0; i < x; i++) free(b[i]);
    for (int i = 0; i < y; i++) b[i] = site_y(size);
    for (int i = 0; i < y / 2; i++) free(b[i]);
    return 0;
}
