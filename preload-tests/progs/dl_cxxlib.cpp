// A C++ shared library that the C program dl_host.c loads with
// dlopen(RTLD_LOCAL): its operator new binds to the preloaded one while
// RTLD_NEXT from the preload finds no libstdc++.
#include <cstddef>
#include <new>
#include <string>
#include <vector>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile held[16];

NOINLINE void dl_lib_new_object() { held[0] = new char[7777]; }
NOINLINE void dl_lib_new_aligned() { held[1] = ::operator new(6666, std::align_val_t{128}); }
NOINLINE void dl_lib_new_nothrow() { held[2] = ::operator new(5555, std::nothrow); }
NOINLINE void dl_lib_new_freed() {
    char *p = new char[4444];
    p[0] = 1;
    delete[] p;
    void *q = ::operator new(3333, std::align_val_t{64});
    ::operator delete(q, std::align_val_t{64});
}
NOINLINE void dl_lib_vector() {
    // A vector of 1,000 ints grown one by one: only the last buffer (4,096
    // bytes: capacity 1024 * 4) stays live.
    auto *v = new std::vector<int>();  // 24 bytes, leaf dl_lib_vector
    for (int i = 0; i < 1000; i++) v->push_back(i);
    held[3] = v;
}

extern "C" int dl_lib_run() {
    dl_lib_new_object();
    dl_lib_new_aligned();
    dl_lib_new_nothrow();
    dl_lib_new_freed();
    dl_lib_vector();
    return 42;
}
