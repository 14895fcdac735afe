/* Allocates 2000 bytes at a recursion depth of 300 (deeper than heaplive's
 * 128-frame limit) and 1000 bytes at a depth of 10 (unwind.rs). */
#include <stdlib.h>

void *keep[2];

__attribute__((noinline)) void *recurse(int depth, size_t size) {
    void *p = depth > 0 ? recurse(depth - 1, size) : malloc(size);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return p;
}

int main(void) {
    keep[0] = recurse(300, 2000);
    keep[1] = recurse(10, 1000);
    return 0;
}
