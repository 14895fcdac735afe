// cxxchurn: C++ new/delete churn.
//
//   cxxchurn THREADS ITERS
//
// Each thread runs ITERS/THREADS iterations of a mix: scalar new/delete
// (sized delete: GCC passes the size), new[]/delete[], over-aligned types
// (aligned new and sized aligned delete), nothrow new, std::vector growth,
// std::string building and std::map insert/erase, with a sliding window of
// live objects so that objects outlive a single iteration.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

struct Small { std::uint64_t a[3]; virtual ~Small() {} };
struct Medium { char buf[200]; };
struct alignas(64) Line { char b[64]; };
struct alignas(256) Big { char b[1000]; };

static std::uint64_t rnd(std::uint64_t &s) {
    s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
    return s * 2685821657736338717ULL;
}

static std::uint64_t work(long iters, unsigned seed) {
    std::uint64_t s = 0x9E3779B97F4A7C15ULL * (seed + 1), sum = 0;
    const int W = 1024;
    std::vector<std::unique_ptr<Small>> smalls(W);
    std::vector<std::unique_ptr<Line>> lines(W);
    std::vector<std::unique_ptr<char[]>> arrays(W);
    std::vector<std::string> strings(W);
    std::map<std::uint64_t, std::string> m;
    for (long i = 0; i < iters; i++) {
        std::uint64_t r = rnd(s);
        int k = r % W;
        smalls[k].reset(new Small());                       // new / sized delete (virtual dtor)
        lines[k].reset(new Line());                          // aligned new / aligned delete
        arrays[k].reset(new char[16 + (r >> 20) % 2000]);   // new[] / delete[]
        arrays[k][0] = (char)r;
        {
            Medium *m1 = new Medium; m1->buf[0] = (char)r; sum += m1->buf[0]; delete m1;
            Big *b = new Big; b->b[0] = 1; sum += b->b[0]; delete b;
            int *q = new (std::nothrow) int[8]; if (q) { q[0] = 1; sum += q[0]; } delete[] q;
        }
        if ((r >> 8) % 4 == 0) {                             // vector growth
            std::vector<std::uint32_t> v;
            int n = 16 + (r >> 30) % 600;
            for (int j = 0; j < n; j++) v.push_back(j);
            sum += v.back();
        }
        {                                                    // string building
            std::string &str = strings[k];
            str.clear();
            int n = 1 + (r >> 12) % 8;
            for (int j = 0; j < n; j++) str += "heaplive-benchmark-segment-";
            sum += str.size();
        }
        m[(r >> 16) % 20000] = "value-" + std::to_string(r % 100000) + "-padding-to-escape-sso";
        if (m.size() > 4096) m.erase(m.begin());
    }
    return sum + m.size();
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    long iters = argc > 2 ? std::atol(argv[2]) : 300000;
    if (threads < 1) threads = 1;
    std::vector<std::thread> ts;
    std::vector<std::uint64_t> sums(threads);
    for (int t = 0; t < threads; t++)
        ts.emplace_back([&, t] { sums[t] = work(iters / threads, t); });
    for (auto &t : ts) t.join();
    std::uint64_t sum = 0;
    for (auto x : sums) sum += x;
    std::printf("cxxchurn threads=%d iters=%ld sum=%llu\n", threads, iters, (unsigned long long)sum);
}
