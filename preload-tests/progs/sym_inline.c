/* An always_inline function that calls malloc, compiled -O2 -g
 * (preload-tests/symbols.rs): it must show as its own frame. */
#include <stdio.h>
#include <stdlib.h>

void *keep[16];
volatile int sink;

static inline __attribute__((always_inline)) void *inl_alloc(size_t n) {
    sink += 2;
    void *p = malloc(n); /* L_INL_MALLOC */
    sink += 1;
    return p;
}

__attribute__((noinline)) void outer_fn(int k) {
    for (int i = 0; i < k; i++)
        keep[i] = inl_alloc(77777 + i); /* L_OUTER_CALL */
    sink++;
}

int main(void) {
    outer_fn(5);
    printf("done\n");
    return 0;
}
