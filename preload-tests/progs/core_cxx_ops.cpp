// All 20 replaceable operator new/delete variants, each `new` from its own
// noinline function with its own sizes, run in exact mode by
// preload-tests/core_exact.rs. Each new_* function allocates four blocks of
// sizes base+0..3; block +0 stays live, and blocks +1, +2, +3 are freed
// through the three delete variants that match that new, so a broken
// delete shows up as a leaf whose bytes include base+k.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <new>
#include <string_view>

#define NOINLINE __attribute__((noinline, noclone))

static int failures;
static void check(bool ok, const char *what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) failures++;
}

static void *volatile blk[8][4];
static const std::align_val_t A64{64}, A256{256};

NOINLINE void new_plain(size_t b) { for (int k = 0; k < 4; k++) blk[0][k] = ::operator new(b + k); }
NOINLINE void new_array(size_t b) { for (int k = 0; k < 4; k++) blk[1][k] = ::operator new[](b + k); }
NOINLINE void new_nothrow(size_t b) { for (int k = 0; k < 4; k++) blk[2][k] = ::operator new(b + k, std::nothrow); }
NOINLINE void new_array_nothrow(size_t b) { for (int k = 0; k < 4; k++) blk[3][k] = ::operator new[](b + k, std::nothrow); }
NOINLINE void new_aligned(size_t b) { for (int k = 0; k < 4; k++) blk[4][k] = ::operator new(b + k, A64); }
NOINLINE void new_array_aligned(size_t b) { for (int k = 0; k < 4; k++) blk[5][k] = ::operator new[](b + k, A256); }
NOINLINE void new_aligned_nothrow(size_t b) { for (int k = 0; k < 4; k++) blk[6][k] = ::operator new(b + k, A64, std::nothrow); }
NOINLINE void new_array_aligned_nothrow(size_t b) { for (int k = 0; k < 4; k++) blk[7][k] = ::operator new[](b + k, A256, std::nothrow); }

// The 12 deletes, each used on one block of each matching new.
NOINLINE void del_plain(void *p) { ::operator delete(p); }                                         // _ZdlPv
NOINLINE void del_plain_nothrow(void *p) { ::operator delete(p, std::nothrow); }                  // _ZdlPvRKSt9nothrow_t
NOINLINE void del_plain_sized(void *p, size_t n) { ::operator delete(p, n); }                      // _ZdlPvm
NOINLINE void del_array(void *p) { ::operator delete[](p); }                                       // _ZdaPv
NOINLINE void del_array_nothrow(void *p) { ::operator delete[](p, std::nothrow); }                // _ZdaPvRKSt9nothrow_t
NOINLINE void del_array_sized(void *p, size_t n) { ::operator delete[](p, n); }                    // _ZdaPvm
NOINLINE void del_aligned(void *p) { ::operator delete(p, A64); }                                  // _ZdlPvSt11align_val_t
NOINLINE void del_aligned_nothrow(void *p) { ::operator delete(p, A64, std::nothrow); }           // _ZdlPvSt11align_val_tRKSt9nothrow_t
NOINLINE void del_aligned_sized(void *p, size_t n) { ::operator delete(p, n, A64); }               // _ZdlPvmSt11align_val_t
NOINLINE void del_array_aligned(void *p) { ::operator delete[](p, A256); }                         // _ZdaPvSt11align_val_t
NOINLINE void del_array_aligned_nothrow(void *p) { ::operator delete[](p, A256, std::nothrow); }  // _ZdaPvSt11align_val_tRKSt9nothrow_t
NOINLINE void del_array_aligned_sized(void *p, size_t n) { ::operator delete[](p, n, A256); }      // _ZdaPvmSt11align_val_t

static size_t opaque(size_t n) { __asm__ volatile("" : "+r"(n)); return n; }

NOINLINE void nothrow_impossible() {
    void *p = ::operator new(opaque(SIZE_MAX / 2), std::nothrow);
    check(p == nullptr, "nothrow new of an impossible size returns NULL");
    p = ::operator new[](opaque(SIZE_MAX / 2), std::nothrow);
    check(p == nullptr, "nothrow new[] of an impossible size returns NULL");
    p = ::operator new(opaque(SIZE_MAX / 2), A64, std::nothrow);
    check(p == nullptr, "aligned nothrow new of an impossible size returns NULL");
    p = ::operator new[](opaque(SIZE_MAX / 2), A256, std::nothrow);
    check(p == nullptr, "aligned nothrow new[] of an impossible size returns NULL");
}

NOINLINE void catch_bad_alloc() {
    int caught = 0;
    try { blk[0][0] = ::operator new(opaque(SIZE_MAX / 2)); } catch (const std::bad_alloc &) { caught++; }
    try { blk[0][0] = ::operator new[](opaque(SIZE_MAX / 2)); } catch (const std::bad_alloc &) { caught++; }
    try { blk[0][0] = ::operator new(opaque(SIZE_MAX / 2), A64); } catch (const std::bad_alloc &) { caught++; }
    try { blk[0][0] = ::operator new[](opaque(SIZE_MAX / 2), A256); } catch (const std::bad_alloc &) { caught++; }
    try { blk[0][0] = new char[opaque(SIZE_MAX / 2)]; } catch (const std::bad_alloc &) { caught++; }
    std::printf("caught std::bad_alloc %d times of 5\n", caught);
    check(caught == 5, "every impossible throwing new threw std::bad_alloc");
}

// A handler that gives up after three calls: the failing new calls it
// three times, then throws std::bad_alloc.
static int handler_calls;
static void give_up_after_three() {
    if (++handler_calls == 3) std::set_new_handler(nullptr);
}
// A handler that throws on its first call, as many programs' do.
static int throwing_calls;
static void throw_at_once() {
    throwing_calls++;
    throw std::bad_alloc();
}

NOINLINE void new_handlers() {
    std::set_new_handler(give_up_after_three);
    bool caught = false;
    try { blk[0][0] = ::operator new(opaque(SIZE_MAX / 2)); } catch (const std::bad_alloc &) { caught = true; }
    std::printf("new_handler (gives up after 3) called %d times; bad_alloc caught: %d\n", handler_calls, caught);
    check(handler_calls == 3 && caught, "set_new_handler's handler is called until it gives up");

    std::set_new_handler(throw_at_once);
    caught = false;
    try { blk[0][0] = ::operator new(opaque(SIZE_MAX / 2)); } catch (const std::bad_alloc &) { caught = true; }
    std::printf("throwing new_handler called %d times; bad_alloc caught: %d\n", throwing_calls, caught);
    check(throwing_calls == 1 && caught, "a throwing new_handler is called once per failed new");

    std::set_new_handler(throw_at_once);
    throwing_calls = 0;
    caught = false;
    try { blk[0][0] = ::operator new[](opaque(SIZE_MAX / 2), A256); } catch (const std::bad_alloc &) { caught = true; }
    std::printf("throwing new_handler (aligned new[]) called %d times; bad_alloc caught: %d\n", throwing_calls, caught);
    check(throwing_calls == 1 && caught, "a throwing new_handler is called once per failed aligned new[]");

    // nothrow new calls the handler too, and returns NULL when it throws.
    std::set_new_handler(throw_at_once);
    throwing_calls = 0;
    void *p = ::operator new(opaque(SIZE_MAX / 2), std::nothrow);
    std::printf("nothrow new: handler called %d times, result %s\n", throwing_calls, p ? "non-null" : "NULL");
    check(throwing_calls == 1 && !p, "nothrow new calls a throwing handler once and returns NULL");
    std::set_new_handler(nullptr);
}

NOINLINE void variants() {
    new_plain(2000);
    new_array(2100);
    new_nothrow(2200);
    new_array_nothrow(2300);
    new_aligned(2400);
    new_array_aligned(2500);
    new_aligned_nothrow(2600);
    new_array_aligned_nothrow(2700);
    bool aligned = true;
    for (int k = 0; k < 4; k++) {
        aligned &= ((uintptr_t)blk[4][k] & 63) == 0 && ((uintptr_t)blk[6][k] & 63) == 0;
        aligned &= ((uintptr_t)blk[5][k] & 255) == 0 && ((uintptr_t)blk[7][k] & 255) == 0;
    }
    check(aligned, "aligned new returns aligned blocks");

    // Each new's blocks +1, +2, +3 (blk[i], base 2000 + 100 i) freed by the
    // three deletes that match it.
    struct Deletes {
        int blks[2];
        void (*plain)(void *);
        void (*nothrow)(void *);
        void (*sized)(void *, size_t);
    };
    static const Deletes deletes[] = {
        {{0, 2}, del_plain, del_plain_nothrow, del_plain_sized},                         // plain new
        {{1, 3}, del_array, del_array_nothrow, del_array_sized},                         // array new
        {{4, 6}, del_aligned, del_aligned_nothrow, del_aligned_sized},                   // aligned new
        {{5, 7}, del_array_aligned, del_array_aligned_nothrow, del_array_aligned_sized}, // aligned new[]
    };
    for (const Deletes &d : deletes) {
        for (int i : d.blks) {
            d.plain(blk[i][1]);
            d.nothrow(blk[i][2]);
            d.sized(blk[i][3], 2000 + 100 * i + 3);
        }
    }
}

// One part per run (argv[1]), so that one broken part does not hide the
// others: variants, nothrow, bad_alloc, handlers.
int main(int argc, char **argv) {
    const char *part = argc > 1 ? argv[1] : "";
    std::string_view w(part);
    if (w == "variants") variants();
    else if (w == "nothrow") nothrow_impossible();
    else if (w == "bad_alloc") catch_bad_alloc();
    else if (w == "handlers") new_handlers();
    else { std::printf("unknown part '%s'\n", part); return 2; }
    std::printf("%s: %d failures\n", part, failures);
    return failures ? 1 : 0;
}
