/* 100,000 live malloc(0) blocks (preload-tests/core_exact.rs): in exact
 * mode they are live blocks and count toward HEAPLIVE_WARN_BLOCKS. */
#include <stdlib.h>

void *keep[100000];

int main(void) {
    for (int i = 0; i < 100000; i++)
        keep[i] = malloc(0);
    return 0;
}
