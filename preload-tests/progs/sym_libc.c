/* libc frames named by Debian's libc6-dbg (preload-tests/symbols.rs): a
 * qsort comparator that allocates, and strdup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *keep[4096];
static int nkeep;
volatile int sink;

__attribute__((noinline)) int cmp_alloc(const void *a, const void *b) {
    if (nkeep < 4096)
        keep[nkeep++] = malloc(24);
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) void sort_some(void) {
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    qsort(v, 64, sizeof v[0], cmp_alloc);
    sink += v[0];
}

char *dups[8];

__attribute__((noinline)) void dup_some(void) {
    for (int i = 0; i < 8; i++)
        dups[i] = strdup("a string that strdup copies, 48 bytes long....");
    sink++;
}

int main(void) {
    sort_some();
    dup_some();
    printf("done %d\n", nkeep);
    return 0;
}
