/* 4,096 distinct stacks: walk(0, path) for path < 4096 goes down 12
 * levels, each level through left or right (bit `depth` of `path`), and
 * runs WALK_LEAF (a statement the program defines before including this)
 * at the bottom, in walk itself. For dump_freed_stacks.c and
 * ownmem_many_stacks.c. */

__attribute__((noinline)) static void walk(int depth, unsigned path);

__attribute__((noinline)) static void left(int depth, unsigned path) {
    walk(depth, path);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void right(int depth, unsigned path) {
    walk(depth, path);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void walk(int depth, unsigned path) {
    if (depth == 12) {
        WALK_LEAF;
        return;
    }
    if (path >> depth & 1)
        left(depth + 1, path);
    else
        right(depth + 1, path);
    __asm__ volatile("" ::: "memory");
}
