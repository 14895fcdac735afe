// opcost: the cost of one allocation operation, in nanoseconds.
//
//   opcost [SCALE] [CASE ...]
//
// Each case times a loop of allocate+free pairs and prints one line:
//   case <TAB> threads <TAB> pairs <TAB> cpu ns/pair <TAB> wall s
// where cpu ns/pair is the CPU time of the worker threads
// (CLOCK_THREAD_CPUTIME_ID, summed) over the pairs they made: on a shared,
// oversubscribed machine it does not count time spent waiting for a core.
//
// Cases (each single-threaded, "-t1", and with 4 threads, "-t4", every
// thread making its share of the same total number of pairs):
//   malloc32   p = malloc(32); touch; free(p)
//   malloc4k   p = malloc(4096); touch; free(p)
//   mallocmix  a window of 256 live blocks per thread: free a random slot,
//              malloc a new one there, sizes log-uniform 16 B..4 KiB
//   new32      p = operator new(32); touch; sized operator delete(p, 32)
//              (what `new T; delete p` compiles to)
//   new4k      the same with 4096
//   newmix     mallocmix with operator new / sized operator delete
// SCALE (default 1) multiplies every case's pair count; the defaults take
// about 0.5 s per case on this machine without a preload (a profiler in exact
// mode is run with a smaller SCALE: the result is per pair either way).
// The compiler cannot drop the pairs: every pointer escapes through an empty
// asm statement.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

enum class Api { Malloc, New };
enum class Pattern { Fixed, Mix };

struct Case {
    const char *name;
    Api api;
    Pattern pattern;
    std::size_t size;  // Fixed only
    double pairs;      // total pairs at SCALE 1
};

// Pair counts measured to take about 0.5 s single-threaded without preload.
const Case CASES[] = {
    {"malloc32", Api::Malloc, Pattern::Fixed, 32, 25e6},
    {"malloc4k", Api::Malloc, Pattern::Fixed, 4096, 14e6},
    {"mallocmix", Api::Malloc, Pattern::Mix, 0, 9e6},
    {"new32", Api::New, Pattern::Fixed, 32, 20e6},
    {"new4k", Api::New, Pattern::Fixed, 4096, 10e6},
    {"newmix", Api::New, Pattern::Mix, 0, 8e6},
};

inline void escape(void *p) { asm volatile("" : : "r"(p) : "memory"); }

inline std::uint64_t rnd(std::uint64_t &s) {  // xorshift64*
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ULL;
}

double now(clockid_t c) {
    timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

template <Api A>
inline void *get(std::size_t n) {
    if (A == Api::Malloc) {
        void *p = std::malloc(n);
        if (!p) std::abort();
        return p;
    }
    return ::operator new(n);
}

template <Api A>
inline void put(void *p, std::size_t n) {
    if (A == Api::Malloc)
        std::free(p);
    else
        ::operator delete(p, n);
}

template <Api A>
void fixed(long pairs, std::size_t n) {
    for (long i = 0; i < pairs; i++) {
        void *p = get<A>(n);
        static_cast<volatile char *>(p)[0] = static_cast<char>(i);
        escape(p);
        put<A>(p, n);
    }
}

template <Api A>
void mix(long pairs, unsigned seed) {
    const int W = 256, NS = 4096;
    std::uint64_t s = 0x9E3779B97F4A7C15ULL * (seed + 1);
    // The sizes are drawn before timing starts (no exp2 in the loop).
    std::vector<std::uint32_t> sizes(NS);
    for (auto &z : sizes) {
        double u = static_cast<double>(rnd(s) >> 11) / 9007199254740992.0;
        z = static_cast<std::uint32_t>(16.0 * __builtin_exp2(u * 8.0));
    }
    void *slot[W] = {};
    std::size_t len[W] = {};
    for (long i = 0; i < pairs; i++) {
        std::uint64_t r = rnd(s);
        int k = r % W;
        if (slot[k]) put<A>(slot[k], len[k]);
        std::size_t n = sizes[(r >> 16) % NS];
        void *p = get<A>(n);
        static_cast<volatile char *>(p)[0] = static_cast<char>(r);
        escape(p);
        slot[k] = p;
        len[k] = n;
    }
    for (int k = 0; k < W; k++)
        if (slot[k]) put<A>(slot[k], len[k]);
}

double run_thread(const Case &c, long pairs, unsigned seed) {
    double t0 = now(CLOCK_THREAD_CPUTIME_ID);
    if (c.pattern == Pattern::Fixed) {
        if (c.api == Api::Malloc)
            fixed<Api::Malloc>(pairs, c.size);
        else
            fixed<Api::New>(pairs, c.size);
    } else {
        if (c.api == Api::Malloc)
            mix<Api::Malloc>(pairs, seed);
        else
            mix<Api::New>(pairs, seed);
    }
    return now(CLOCK_THREAD_CPUTIME_ID) - t0;
}

void run_case(const Case &c, int threads, double scale) {
    long per = static_cast<long>(c.pairs * scale / threads);
    if (per < 1) per = 1;
    std::vector<double> cpu(threads);
    double w0 = now(CLOCK_MONOTONIC);
    if (threads == 1) {
        cpu[0] = run_thread(c, per, 0);
    } else {
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; t++)
            ts.emplace_back([&, t] { cpu[t] = run_thread(c, per, t); });
        for (auto &t : ts) t.join();
    }
    double wall = now(CLOCK_MONOTONIC) - w0, sum = 0;
    for (double x : cpu) sum += x;
    std::printf("%s-t%d\t%d\t%ld\t%.2f\t%.3f\n", c.name, threads, threads, per * threads,
                sum * 1e9 / (per * threads), wall);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
    double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
    if (!(scale > 0)) {
        std::fprintf(stderr, "opcost: SCALE must be a positive number, not '%s'\n", argv[1]);
        return 2;
    }
    int found = 0;
    for (const Case &c : CASES) {
        for (int threads : {1, 4}) {
            std::string name = std::string(c.name) + "-t" + std::to_string(threads);
            bool want = argc <= 2;
            for (int i = 2; i < argc; i++)
                if (name == argv[i] || std::strcmp(c.name, argv[i]) == 0) want = true;
            if (!want) continue;
            found++;
            run_case(c, threads, scale);
        }
    }
    if (!found) {
        std::fprintf(stderr, "opcost: no such case\n");
        return 2;
    }
    return 0;
}
