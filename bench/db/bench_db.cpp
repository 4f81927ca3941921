// bench_db: how fast the run database takes spans and answers window queries.
//
// Writes runs the way the recorder and the importers do (8 lanes = 4 ranks x compute/comm,
// a step row in the same transaction as its spans): first recorder-like, one commit per
// 5000-span step, on 2 M spans; then bulk, 50 000 spans per transaction (import, merge,
// saveRun), on 10 M spans. Then it asks for the spans of one lane in 2000 random windows (each
// about 1000 spans wide: a screenful of timeline) and prints the median, validates and loads.
// Lines are `name: value unit`. Wall-clock rates measure the machine's other jobs too; the
// *_cpu_* lines are this process's CPU time, what the code costs.
//   bench_db [--spans N] [--file PATH] [--keep] [--write-only]
//
// On the development machine (2 cores shared with six other builds, load average ~9), 10 M spans:
//   db_write_cpu_spans_per_s 1.41 M/s (bulk), db_write_step_commits_cpu_spans_per_s 1.29 M/s,
//   wall 0.49 M/s (CPU share ~1/3); db_window_query_ms 0.22 ms median; 419 MiB, 44 bytes/span;
//   validate (quick_check) 3.2 s; load 2.3 s CPU.
// After dur_ns, per-lane seq, skipped re-binds and key-only NOT NULL (run_db.cpp "Second
// round"), 10 M spans, load average ~2.3, two runs: db_write_spans_per_s 1.54-1.55 M/s wall,
//   1.56-1.58 M/s CPU (bulk); step commits 1.46-1.47 M/s wall and CPU; 321 MiB, 33.7 bytes/span;
//   window query 0.24-0.25 ms median; validate 1.1 s; load 2.4 s; db_save_run_spans_per_s
//   (saveRun of the loaded run) 2.22-2.24 M/s.
// Span blocks (schema 6, run_db.cpp "Third round"), 10 M spans, two rounds alternating main's
// build (rows) and this one on the shared machine at load average 7.4-9.5 (other builds running;
// wall rates are mostly the neighbours', so read the CPU lines and the ratios):
//   db_write_spans_per_s           0.19-0.32 -> 2.7-4.5 M/s wall; CPU 1.13-1.25 -> 11.2-11.7 M/s
//   db_write_step_commits          0.12-0.34 -> 1.4-2.1 M/s wall; CPU 0.77-1.23 -> 4.0-6.1 M/s
//   db_bytes_per_span              33.7 -> 8.6 (321.3 -> 82.0 MiB)
//   db_window_query_ms             0.32 -> 0.11-0.12 median, p95 16-19 -> 0.18-0.24
//   db_validate_ms                 7.5-9.6 s -> 0.7-0.8 s
//   db_load_ms                     9.3-30 s -> 2.1-3.9 s wall; CPU 2.9-4.5 s -> 0.6-0.7 s
//   db_save_run_spans_per_s        0.26-0.60 -> 1.0-2.4 M/s wall; CPU 1.7-1.9 -> 8.1-10.9 M/s
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
struct WriteResult {
    int64_t written = 0;
    double wallS = 0;
    double cpuS = 0;
    double closeS = 0;
};

// Writes the first `steps` step batches (8 lanes of 4 ranks, their step rows in the same
// transaction), committing every `stepsPerCommit` steps.
Result<WriteResult> writeRun(const std::string& path, const std::vector<std::vector<Span>>& batches,
                             const std::vector<std::vector<Step>>& stepRows, int64_t steps, int stepsPerCommit)
{
    RunConfig config;
    config.name = "bench";
    config.worldSize = 4;
    auto writer = RunWriter::create(path, config, RunWriter::Mode::Overwrite);
    if (!writer)
        return std::unexpected(writer.error());
    for (int r = 0; r < 4; ++r) {
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
    if (auto r = (*writer)->commit(); !r)
        return std::unexpected(r.error());

    WriteResult out;
    const auto t0 = Clock::now();
    const double cpu0 = cpuSeconds();
    for (int64_t s = 0; s < steps; ++s) {
        for (const Step& st : stepRows[static_cast<size_t>(s)])
            if (auto r = (*writer)->addStep(st); !r)
                return std::unexpected(r.error());
        const auto& b = batches[static_cast<size_t>(s)];
        if (auto r = (*writer)->appendSpans(b); !r)
            return std::unexpected(r.error());
        out.written += static_cast<int64_t>(b.size());
        if ((s + 1) % stepsPerCommit == 0 || s + 1 == steps)
            if (auto r = (*writer)->commit(); !r)
                return std::unexpected(r.error());
    }
    out.wallS = secondsSince(t0);
    out.cpuS = cpuSeconds() - cpu0;
    const auto tc = Clock::now();
    if (auto r = (*writer)->close(); !r)
        return std::unexpected(r.error());
    out.closeS = secondsSince(tc);
    return out;
}
} // namespace

// Long (~155 lines): the benchmark's script, one measurement after another in the order they
// print (write, validate, open, window queries, load, saveRun), each on the file the one before left.
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

    // Recorder-like first (one commit per 5000-span step, on the first 2 M spans), then bulk
    // (50 000 spans per transaction: import, merge, saveRun) on everything.
    const int64_t recorderSteps = std::min<int64_t>(steps, 400);
    auto stepwise = writeRun(path + ".steps", batches, stepRows, recorderSteps, 1);
    if (!stepwise) {
        std::fprintf(stderr, "bench_db: %s\n", stepwise.error().message.c_str());
        return 1;
    }
    std::remove((path + ".steps").c_str());
    auto bulk = writeRun(path, batches, stepRows, steps, 10);
    if (!bulk) {
        std::fprintf(stderr, "bench_db: %s\n", bulk.error().message.c_str());
        return 1;
    }
    batches.clear();
    batches.shrink_to_fit();
    const int64_t written = bulk->written;
    struct stat st {};
    ::stat(path.c_str(), &st);
    std::printf("db_spans: %lld spans\n", static_cast<long long>(written));
    std::printf("db_write_spans_per_s: %.0f spans/s\n", static_cast<double>(written) / bulk->wallS);
    std::printf("db_write_cpu_spans_per_s: %.0f spans/s\n", static_cast<double>(written) / bulk->cpuS);
    std::printf("db_write_incl_close_spans_per_s: %.0f spans/s\n",
                static_cast<double>(written) / (bulk->wallS + bulk->closeS));
    std::printf("db_write_step_commits_spans_per_s: %.0f spans/s\n",
                static_cast<double>(stepwise->written) / stepwise->wallS);
    std::printf("db_write_step_commits_cpu_spans_per_s: %.0f spans/s\n",
                static_cast<double>(stepwise->written) / stepwise->cpuS);
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
    // saveRun (the importers' and merge's way in): the whole run through the same appendSpans.
    const auto ts = Clock::now();
    const double scpu0 = cpuSeconds();
    if (auto s = saveRun(*run, path + ".save", RunWriter::Mode::Overwrite); !s) {
        std::fprintf(stderr, "bench_db: %s\n", s.error().message.c_str());
        return 1;
    }
    std::printf("db_save_run_spans_per_s: %.0f spans/s\n", static_cast<double>(run->spans.size()) / secondsSince(ts));
    std::printf("db_save_run_cpu_spans_per_s: %.0f spans/s\n",
                static_cast<double>(run->spans.size()) / (cpuSeconds() - scpu0));
    std::remove((path + ".save").c_str());
    if (!keep)
        std::remove(path.c_str());
    return 0;
}
