/* A stripped program (preload-tests/symbols.rs): linked -rdynamic, so the
 * exported functions are in .dynsym after `strip --strip-all`; the static
 * hidden_alloc has no symbol at all and lies between exported neighbours. */
#include <stdio.h>
#include <stdlib.h>

void *keep[64];
volatile int sink;

__attribute__((noinline)) void *visible_alloc(size_t n) {
    void *p = malloc(n);
    sink++;
    return p;
}

__attribute__((noinline, used)) static void *hidden_alloc(size_t n) {
    sink += 3;
    void *p = malloc(n);
    sink++;
    return p;
}

__attribute__((noinline)) void *after_hidden(size_t n) {
    void *p = malloc(n);
    sink++;
    return p;
}

__attribute__((noinline)) void calls_hidden(void) {
    for (int i = 0; i < 3; i++)
        keep[i] = hidden_alloc(55555);
    sink++;
}

int main(void) {
    keep[10] = visible_alloc(44444);
    keep[11] = after_hidden(33333);
    calls_hidden();
    printf("done\n");
    return 0;
}
