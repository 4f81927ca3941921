// bench_db: how fast the run database takes spans and answers window queries.
//
// Writes a 10-million-span run the way the recorder does (8 lanes = 4 ranks x compute/comm,
// one commit per step, a step row in the same transaction as its spans), then asks for the
// spans of one lane in random windows (each about 1000 spans wide: a screenful of timeline)
// and prints the median. Lines are `name: value unit`.
//   bench_db [--spans N] [--file PATH] [--keep]
#include "lockstep/core/run_db.h"

#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace lockstep::core;
using Clock = std::chrono::steady_clock;

namespace {
double secondsSince(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}
// CPU time of this process: on a machine shared with other jobs, wall time measures the
// neighbours too; the CPU rate says what the code costs.
double cpuSeconds()
{
    timespec ts {};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
} // namespace

int main(int argc, char** argv)
{
    int64_t totalSpans = 10'000'000;
    std::string path = "/tmp/lockstep_bench_db.lsrun";
    bool keep = false;
    bool writeOnly = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--spans") && i + 1 < argc)
            totalSpans = std::atoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--file") && i + 1 < argc)
            path = argv[++i];
        else if (!std::strcmp(argv[i], "--keep"))
            keep = true;
        else if (!std::strcmp(argv[i], "--write-only"))
            writeOnly = true;
    }
    constexpr int kRanks = 4;
    constexpr int kLanes = kRanks * 2;
    constexpr int kSpansPerLanePerStep = 625; // 5000 spans per step and commit
    const int64_t steps = std::max<int64_t>(1, totalSpans / (kLanes * kSpansPerLanePerStep));

    // Generate first, so the timing below is the database alone.
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<int64_t> dur(1'000, 40'000);
    std::uniform_int_distribution<int64_t> gap(0, 5'000);
    std::vector<std::vector<Span>> batches(static_cast<size_t>(steps));
    std::vector<std::vector<Step>> stepRows(static_cast<size_t>(steps));
    std::vector<TimeNs> laneClock(kLanes, 1'700'000'000'000'000'000ll);
    for (int64_t s = 0; s < steps; ++s) {
        auto& b = batches[static_cast<size_t>(s)];
        b.reserve(kLanes * kSpansPerLanePerStep);
        for (int lane = 0; lane < kLanes; ++lane) {
            const TimeNs stepStart = laneClock[lane];
            for (int k = 0; k < kSpansPerLanePerStep; ++k) {
                Span sp;
                sp.lane = LaneId{static_cast<uint32_t>(lane)};
                sp.start = laneClock[lane] + gap(rng);
                sp.end = sp.start + (k == 17 ? 2'000'000 : dur(rng)); // one long span per step
                laneClock[lane] = sp.end;
                sp.kind = lane % 2 ? SpanKind::Comm : SpanKind::Backward;
                sp.name = StringId{static_cast<uint32_t>(1 + k % 50)};
                sp.step = static_cast<int32_t>(s);
                sp.bucket = lane % 2 ? k % 25 : kNoBucket;
                sp.bytes = lane % 2 ? 1 << 20 : 0;
                b.push_back(sp);
            }
            if (lane % 2 == 0)
                stepRows[static_cast<size_t>(s)].push_back(
                    Step{lane / 2, static_cast<int32_t>(s), stepStart, laneClock[lane], 0.5, 32});
        }
        // Lanes interleave the way a recorder's buffers flush: sorted by start across lanes.
        std::sort(b.begin(), b.end(), [](const Span& x, const Span& y) { return x.start < y.start; });
    }

    RunConfig config;
    config.name = "bench";
    config.worldSize = kRanks;
    auto writer = RunWriter::create(path, config, RunWriter::Mode::Overwrite);
    if (!writer) {
        std::fprintf(stderr, "bench_db: %s\n", writer.error().message.c_str());
        return 1;
    }
    for (int r = 0; r < kRanks; ++r) {
        RankInfo rank;
        rank.rank = r;
        rank.host = "localhost";
        (void)(*writer)->addRank(rank);
        Lane lane;
        lane.rank = r;
        lane.name = "compute";
        (void)(*writer)->addLane(lane);
        lane.kind = LaneKind::Comm;
        lane.name = "comm";
        (void)(*writer)->addLane(lane);
    }
    for (int k = 0; k < 50; ++k)
        (void)(*writer)->intern("span name " + std::to_string(k));
    (void)(*writer)->commit();

    const auto t0 = Clock::now();
    const double cpu0 = cpuSeconds();
    int64_t written = 0;
    for (int64_t s = 0; s < steps; ++s) {
        for (const Step& st : stepRows[static_cast<size_t>(s)])
            (void)(*writer)->addStep(st);
        const auto& b = batches[static_cast<size_t>(s)];
        if (auto r = (*writer)->appendSpans(b); !r) {
            std::fprintf(stderr, "bench_db: %s\n", r.error().message.c_str());
            return 1;
        }
        written += static_cast<int64_t>(b.size());
        if (auto r = (*writer)->commit(); !r) {
            std::fprintf(stderr, "bench_db: %s\n", r.error().message.c_str());
            return 1;
        }
    }
    const double writeS = secondsSince(t0);
    const double writeCpuS = cpuSeconds() - cpu0;
    const auto tc = Clock::now();
    if (auto r = (*writer)->close(); !r) {
        std::fprintf(stderr, "bench_db: %s\n", r.error().message.c_str());
        return 1;
    }
    const double closeS = secondsSince(tc);
    writer->reset();
    batches.clear();
    batches.shrink_to_fit();

    struct stat st {};
    ::stat(path.c_str(), &st);
    std::printf("db_spans: %lld spans\n", static_cast<long long>(written));
    std::printf("db_write_spans_per_s: %.0f spans/s\n", static_cast<double>(written) / writeS);
    std::printf("db_write_cpu_spans_per_s: %.0f spans/s\n", static_cast<double>(written) / writeCpuS);
    std::printf("db_write_incl_close_spans_per_s: %.0f spans/s\n", static_cast<double>(written) / (writeS + closeS));
    std::printf("db_file_size: %.1f MiB\n", static_cast<double>(st.st_size) / (1 << 20));
    std::printf("db_bytes_per_span: %.1f bytes\n", static_cast<double>(st.st_size) / static_cast<double>(written));

    if (writeOnly) {
        if (!keep)
            std::remove(path.c_str());
        return 0;
    }
    auto tval = Clock::now();
    if (auto v = validateRunFile(path); !v) {
        std::fprintf(stderr, "bench_db: %s\n", v.error().message.c_str());
        return 1;
    }
    std::printf("db_validate_ms: %.0f ms\n", secondsSince(tval) * 1e3);
    auto tv = Clock::now();
    auto reader = RunReader::open(path);
    if (!reader) {
        std::fprintf(stderr, "bench_db: %s\n", reader.error().message.c_str());
        return 1;
    }
    std::printf("db_open_ms: %.1f ms\n", secondsSince(tv) * 1e3);

    // Windows ~1000 spans wide: 625 spans per lane per step, so 1.6 steps of one lane.
    const TimeNs begin = 1'700'000'000'000'000'000ll;
    const TimeNs end = laneClock[0];
    const TimeNs width = (end - begin) / steps * 16 / 10;
    std::uniform_int_distribution<TimeNs> at(begin, end - width);
    std::uniform_int_distribution<int> laneOf(0, kLanes - 1);
    std::vector<double> ms;
    int64_t got = 0;
    constexpr int kQueries = 2000;
    for (int q = 0; q < kQueries; ++q) {
        const TimeNs w0 = at(rng);
        const auto tq = Clock::now();
        auto spans = (*reader)->spansInWindow(LaneId{static_cast<uint32_t>(laneOf(rng))}, w0, w0 + width);
        ms.push_back(secondsSince(tq) * 1e3);
        if (!spans) {
            std::fprintf(stderr, "bench_db: %s\n", spans.error().message.c_str());
            return 1;
        }
        got += static_cast<int64_t>(spans->size());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("db_window_query_ms: %.3f ms\n", ms[ms.size() / 2]);
    std::printf("db_window_query_p95_ms: %.3f ms\n", ms[ms.size() * 95 / 100]);
    std::printf("db_window_spans_mean: %.0f spans\n", static_cast<double>(got) / kQueries);

    const auto tl = Clock::now();
    const double lcpu0 = cpuSeconds();
    auto run = (*reader)->load();
    if (!run) {
        std::fprintf(stderr, "bench_db: %s\n", run.error().message.c_str());
        return 1;
    }
    std::printf("db_load_ms: %.0f ms\n", secondsSince(tl) * 1e3);
    std::printf("db_load_cpu_ms: %.0f ms\n", (cpuSeconds() - lcpu0) * 1e3);
    std::printf("db_loaded_spans: %zu spans\n", run->spans.size());
    reader->reset();
    if (!keep)
        std::remove(path.c_str());
    return 0;
}
