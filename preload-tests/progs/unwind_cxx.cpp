// C++ stacks for the unwinder comparison: allocations while an exception
// is in flight (in destructors run by the unwinder, in the exception's
// own construction, in catch handlers), nested try blocks, std::string and
// std::vector growth. Every block allocated here is kept.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

static std::vector<void *> *kept;

struct Noisy {
    int n;
    explicit Noisy(int n) : n(n) {}
    __attribute__((noinline)) ~Noisy() { kept->push_back(operator new(1000 + n)); }
};

struct BigError : std::runtime_error {
    std::string detail;
    explicit BigError(int i) : std::runtime_error("big"), detail(std::string(200 + i, 'x')) {}
};

__attribute__((noinline)) void thrower(int depth) {
    Noisy guard(depth);
    if (depth == 0) throw BigError(depth);
    thrower(depth - 1);
}

__attribute__((noinline)) void catcher(int i) {
    try {
        thrower(5 + i % 3);
    } catch (const BigError &e) {
        kept->push_back(new std::string(e.detail + "caught"));
        try {
            throw std::out_of_range(std::string(300, 'y'));
        } catch (const std::exception &) {
            kept->push_back(operator new(777));
        }
    }
}

__attribute__((noinline)) void grow(int i) {
    auto *v = new std::vector<long>();
    for (int k = 0; k < 100 + i; k++) v->push_back(k);
    kept->push_back(v);
}

int main() {
    kept = new std::vector<void *>();
    kept->reserve(100000);
    for (int i = 0; i < 50; i++) {
        catcher(i);
        grow(i);
    }
    std::printf("kept %zu\n", kept->size());
    return 0;
}
