// bench_merge: `lockstep merge` of many rank shards (issue 31 item 3: 1024 shards within a
// minute). Makes a synthetic run of N ranks (core/synthetic.h), writes each rank as a shard of
// its own in /tmp (the way `lockstep worker` leaves them: one rank, the run's world size), merges
// them with mergeRunFiles in a child process and prints:
//   merge_shards: N   merge_spans: S   merge_<N>_shards_s: T s   merge_peak_rss_mb: P MB
// Usage: bench_merge [--shards N=1024] [--steps S=5] [--dir D] [--keep]
// Each shard is closed the way every run file is (checkpoint and fsync): on a disk that makes
// the shards take ~0.2 s each to write; `--dir /dev/shm/...` makes them in memory.
#include "../bench_child.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/synthetic.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace lockstep::core;

// Rank r of `run` as a run of its own (lanes renumbered from 0, the same strings).
Run shardOf(const Run& run, int32_t r)
{
    Run shard;
    shard.config = run.config;
    shard.strings = run.strings;
    shard.buckets = run.buckets;
    for (const RankInfo& info : run.ranks)
        if (info.rank == r)
            shard.ranks.push_back(info);
    std::map<uint32_t, uint32_t> laneOf;
    for (const Lane& lane : run.lanes)
        if (lane.rank == r) {
            Lane l = lane;
            l.id = LaneId{static_cast<uint32_t>(shard.lanes.size())};
            laneOf[lane.id.v] = l.id.v;
            shard.lanes.push_back(l);
        }
    for (const Span& s : run.spans)
        if (auto it = laneOf.find(s.lane.v); it != laneOf.end()) {
            Span x = s;
            x.lane = LaneId{it->second};
            shard.spans.push_back(x);
        }
    for (const Instant& in : run.instants)
        if (auto it = laneOf.find(in.lane.v); it != laneOf.end()) {
            Instant x = in;
            x.lane = LaneId{it->second};
            shard.instants.push_back(x);
        }
    for (const Step& st : run.steps)
        if (st.rank == r)
            shard.steps.push_back(st);
    shard.normalize();
    return shard;
}

} // namespace

int main(int argc, char** argv)
{
    int shards = 1024, steps = 5;
    bool keep = false;
    std::string dir = "/tmp/lockstep_bench_merge_" + std::to_string(getpid());
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--shards") == 0 && i + 1 < argc)
            shards = std::atoi(argv[++i]);
        else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = std::atoi(argv[++i]);
        else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (std::strcmp(argv[i], "--keep") == 0)
            keep = true;
    }
    std::filesystem::create_directories(dir);
    const auto g0 = std::chrono::steady_clock::now();
    SyntheticParams params;
    params.worldSize = shards;
    params.steps = steps;
    const Run run = makeSyntheticRun(params);
    std::vector<std::string> paths;
    for (int32_t r = 0; r < shards; ++r) {
        paths.push_back(dir + "/rank-" + std::to_string(r) + ".db");
        if (auto s = writeRun(shardOf(run, r), paths.back()); !s) {
            std::fprintf(stderr, "cannot write %s: %s\n", paths.back().c_str(), s.error().message.c_str());
            return 1;
        }
    }
    const double genS = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
    std::printf("merge_shards: %d\n", shards);
    std::printf("merge_steps: %d\n", steps);
    std::printf("merge_spans: %zu\n", run.spans.size());
    std::printf("merge_generate_s: %.2f s\n", genS);
    std::fflush(stdout);

    const std::string out = dir + "/merged.db";
    const auto [msg, status] = lockstep::bench::runInChild([&]() -> std::pair<std::string, int> {
        const auto t0 = std::chrono::steady_clock::now();
        auto stats = mergeRunFiles(paths, out);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        char line[512];
        if (!stats)
            return {"error " + stats.error().message + "\n", 2};
        std::snprintf(line, sizeof line, "ok %.4f %lld %lld\n", s, static_cast<long long>(lockstep::bench::peakRssKb()),
                      static_cast<long long>(stats->spans));
        return {line, 0};
    });
    if (!keep)
        std::filesystem::remove_all(dir);
    double seconds = 0;
    long long rssKb = 0, spans = 0;
    if (std::sscanf(msg.c_str(), "ok %lf %lld %lld", &seconds, &rssKb, &spans) != 3) {
        std::fprintf(stderr, "merge failed: %s (status %d)\n", msg.c_str(), status);
        return 1;
    }
    std::printf("merge_merged_spans: %lld\n", spans);
    std::printf("merge_%d_shards_s: %.2f s\n", shards, seconds);
    std::printf("merge_peak_rss_mb: %.1f MB\n", rssKb / 1024.0);
    return 0;
}
