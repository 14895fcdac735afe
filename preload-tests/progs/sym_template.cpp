// A C++ template member that allocates (preload-tests/symbols.rs): its
// name must come out demangled, `Pool<Widget>::grow()`.
#include <cstdio>
#include <cstdlib>

struct Widget {
    char payload[48];
};

template <typename T>
struct Pool {
    T *blocks[32];
    int n = 0;
    __attribute__((noinline)) void grow(int count) {
        blocks[n++] = new T[count];
        asm volatile("" ::: "memory");
    }
};

Pool<Widget> *pool;

int main() {
    pool = new Pool<Widget>();
    for (int i = 0; i < 5; i++)
        pool->grow(1000);
    std::printf("done\n");
    return 0;
}
