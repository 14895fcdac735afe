/* peakchurn: the peak view's worst case (issue 28, item 4). STACKS call
 * stacks (10 levels of two functions: 1024 distinct return-address
 * chains) each allocate a block that stays, then a sawtooth climb: every
 * round allocates two blocks at the next stack and frees one, so that
 * every free is the first decline after a new maximum (before issue 28: a
 * copy of every stack record whenever the maximum grew by 1/64; after: a
 * freeze of the epoch at every such free and a copy-on-write per stack).
 *
 *   peakchurn [ROUNDS] [STACKS]       defaults 200000 1024
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

static void *keep[1 << 20];
static int nkeep;

__attribute__((noinline)) static void *leaf(size_t n) {
    void *p = malloc(n);
    if (!p) exit(1);
    memset(p, 1, 8);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}

__attribute__((noinline)) static void *fa(unsigned bits, int level, size_t n);
__attribute__((noinline)) static void *fb(unsigned bits, int level, size_t n);

__attribute__((noinline)) static void *fa(unsigned bits, int level, size_t n) {
    if (level == 0) return leaf(n);
    void *p = (bits & 1) ? fb(bits >> 1, level - 1, n) : fa(bits >> 1, level - 1, n);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}

__attribute__((noinline)) static void *fb(unsigned bits, int level, size_t n) {
    if (level == 0) return leaf(n);
    void *p = (bits & 1) ? fb(bits >> 1, level - 1, n) : fa(bits >> 1, level - 1, n);
    __asm__ volatile("" ::"r"(p) : "memory");
    return p;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 200000;
    unsigned stacks = argc > 2 ? (unsigned)atoi(argv[2]) : 1024;
    if (stacks == 0 || stacks > 1024 || rounds < 0 || rounds > (1 << 20) - 2048) return 2;
    for (unsigned s = 0; s < stacks; s++) keep[nkeep++] = fa(s, 10, 64);
    for (long r = 0; r < rounds; r++) {
        unsigned s = (unsigned)r % stacks;
        keep[nkeep++] = fa(s, 10, 64);
        void *t = fa(s, 10, 64);
        free(t);
    }
    printf("%d blocks kept\n", nkeep);
    return 0;
}
