// core_speed: how fast each CPU core computes right now, measured on all cores at once.
//
// bench/straggler needs an independent witness of the machine: on a virtual machine one vCPU
// can run 20-30% slower than the other for tens of seconds (its host core is shared), and a rank
// that sits there IS late every step though nothing was injected. This probe pins one thread to
// each core, runs the same cache-resident floating-point kernel (a 64x64 matrix product, the
// shape of work the ranks do) on all of them at the same time for a fixed wall time, and prints
// each core's rate and the ratio of the fastest to the slowest:
//   core_speed: core 0 <rate> core 1 <rate> ... ratio <max/min>
// Usage: core_speed [milliseconds (default 300)]
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kN = 64;
volatile double g_sink = 0; // the products' results end here, so the compiler keeps the work

// One 64x64 product per call; returns a value that depends on the result so it is not elided.
double multiply(const std::vector<double>& a, const std::vector<double>& b, std::vector<double>& c)
{
    for (int i = 0; i < kN; ++i)
        for (int j = 0; j < kN; ++j) {
            double s = 0;
            for (int k = 0; k < kN; ++k)
                s += a[i * kN + k] * b[k * kN + j];
            c[i * kN + j] = s;
        }
    return c[(kN + 1) * 7];
}

} // namespace

int main(int argc, char** argv)
{
    const int ms = argc > 1 ? std::atoi(argv[1]) : 300;
    if (ms <= 0) {
        std::fprintf(stderr, "core_speed: the duration must be a positive number of milliseconds\n");
        return 2;
    }
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        std::perror("core_speed: sched_getaffinity");
        return 1;
    }
    std::vector<int> cores;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed))
            cores.push_back(c);

    std::atomic<int> ready{0};
    std::atomic<bool> go{false}, stop{false};
    std::vector<long> products(cores.size(), 0);
    std::vector<double> sums(cores.size(), 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < cores.size(); ++t)
        threads.emplace_back([&, t] {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cores[t], &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            std::vector<double> a(kN * kN), b(kN * kN), c(kN * kN);
            for (int i = 0; i < kN * kN; ++i) {
                a[i] = 1.0 + (i % 7) * 1e-3;
                b[i] = 1.0 - (i % 5) * 1e-3;
            }
            ready.fetch_add(1);
            while (!go.load())
                ;
            long n = 0;
            double s = 0;
            while (!stop.load(std::memory_order_relaxed)) {
                s += multiply(a, b, c);
                ++n;
            }
            products[t] = n;
            sums[t] = s;
        });
    while (ready.load() < static_cast<int>(cores.size()))
        std::this_thread::yield();
    go.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    stop.store(true);
    for (std::thread& th : threads)
        th.join();
    for (double v : sums)
        g_sink = g_sink + v;

    long lo = products.empty() ? 0 : products[0], hi = lo;
    std::printf("core_speed:");
    for (size_t t = 0; t < cores.size(); ++t) {
        // products per second, in thousands
        std::printf(" core %d %.1f", cores[t], products[t] * 1000.0 / ms / 1000.0);
        lo = std::min(lo, products[t]);
        hi = std::max(hi, products[t]);
    }
    std::printf(" ratio %.3f\n", lo > 0 ? static_cast<double>(hi) / lo : 0.0);
    return 0;
}
