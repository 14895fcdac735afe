/* Symbols from separate debug files (preload-tests/symbols.rs): the test
 * splits this program's debug info off (debuglink, build-id directory) and
 * checks names and lines. The markers name the lines the test expects. */
#include <stdio.h>
#include <stdlib.h>

void *keep[64];
volatile int sink;

__attribute__((noinline)) void *split_alloc_a(size_t n) {
    void *p = malloc(n); /* L_MALLOC_A */
    sink++;
    return p;
}

__attribute__((noinline)) void *split_alloc_b(size_t n) {
    void *p = calloc(1, n); /* L_CALLOC_B */
    sink++;
    return p;
}

__attribute__((noinline)) void split_caller(void) {
    for (int i = 0; i < 4; i++)
        keep[i] = split_alloc_a(100000); /* L_CALL_A */
    for (int i = 4; i < 7; i++)
        keep[i] = split_alloc_b(70000); /* L_CALL_B */
    sink++;
}

int main(void) {
    split_caller();
    printf("done\n");
    return 0;
}
