// A worker command for the launcher's tests that is not Lockstep's trainer: proof that the
// launcher runs ANY command per rank (as `lockstep record` does with a user's PyTorch script).
// It reads the environment the launcher promises, writes a real shard through core's RunWriter
// into $LOCKSTEP_SHARD_DIR and speaks the progress protocol. Per step it records one 2 ms compute
// span and one 1 ms all-reduce.
//
//   shard_worker [--steps N] [--fail RANK:STEP] [--die RANK:STEP] [--hang RANK:STEP] [--silent]
//                [--env-out FILE]
//   --fail: that rank prints a `failed` line and exits 1;  --die: it kills itself (SIGKILL) without
//   a word;  --hang: it stops making progress (sleeps);  --silent: no protocol lines at all;
//   --env-out: the rank appends "RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
//   LOCKSTEP_RUN_NAME store-in-shards|store-elsewhere OMP_NUM_THREADS LOCKSTEP_TEST_VAR" to FILE.
#include "lockstep/core/run_db.h"
#include "lockstep/job/progress.h"
#include "lockstep/job/shard_layout.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

using namespace lockstep;

namespace {

std::string env(const char* name)
{
    const char* v = std::getenv(name);
    return v ? v : "";
}

bool rankStep(const char* text, int rank, int* step)
{
    int r = -1, s = -1;
    if (std::sscanf(text, "%d:%d", &r, &s) != 2 || r != rank)
        return false;
    *step = s;
    return true;
}

core::TimeNs now()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

int main(int argc, char** argv)
{
    const int rank = std::atoi(env("RANK").c_str());
    const int world = std::atoi(env("WORLD_SIZE").c_str());
    int steps = 3, failAt = -1, dieAt = -1, hangAt = -1;
    bool silent = false;
    std::string envOut;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char* next = i + 1 < argc ? argv[i + 1] : "";
        if (a == "--steps")
            steps = std::atoi(next), ++i;
        else if (a == "--fail")
            rankStep(next, rank, &failAt), ++i;
        else if (a == "--die")
            rankStep(next, rank, &dieAt), ++i;
        else if (a == "--hang")
            rankStep(next, rank, &hangAt), ++i;
        else if (a == "--env-out")
            envOut = next, ++i;
        else if (a == "--silent")
            silent = true;
    }
    if (!envOut.empty()) {
        std::ofstream f(envOut, std::ios::app);
        f << env("RANK") << ' ' << env("WORLD_SIZE") << ' ' << env("LOCAL_RANK") << ' ' << env("LOCAL_WORLD_SIZE") << ' '
          << env("MASTER_ADDR") << ' ' << env("MASTER_PORT") << ' ' << env("LOCKSTEP_RUN_NAME") << ' '
          << (env("LOCKSTEP_RENDEZVOUS_FILE").starts_with(env("LOCKSTEP_SHARD_DIR")) ? "store-in-shards" : "store-elsewhere")
          << ' ' << (env("OMP_NUM_THREADS").empty() ? "-" : env("OMP_NUM_THREADS")) << ' '
          << (env("LOCKSTEP_TEST_VAR").empty() ? "-" : env("LOCKSTEP_TEST_VAR")) << '\n';
    }
    core::RunConfig config;
    config.name = env("LOCKSTEP_RUN_NAME");
    config.model = "shard_worker";
    config.worldSize = world;
    config.commandLine = "shard_worker";
    auto writer = core::RunWriter::create(job::shardFile(env("LOCKSTEP_SHARD_DIR"), rank), config,
                                          core::RunWriter::Mode::Overwrite);
    if (!writer) {
        std::printf("%s\n", job::failedLine(rank, writer.error().message).c_str());
        return 1;
    }
    core::RunWriter& w = **writer;
    (void)w.addRank(core::RankInfo{.rank = rank, .host = "test"});
    const core::LaneId compute = *w.addLane(core::Lane{.rank = rank, .kind = core::LaneKind::Compute, .name = "compute"});
    const core::LaneId comm = *w.addLane(core::Lane{.rank = rank, .kind = core::LaneKind::Comm, .name = "comm"});
    (void)w.addBucket(core::Bucket{0, 1024, {"w"}});
    const core::StringId fwd = w.intern("forward");
    const core::StringId ar = w.intern("allreduce bucket 0");
    for (int s = 0; s < steps; ++s) {
        if (s == failAt) {
            (void)w.setStatus(core::RunStatus::Failed, "injected failure");
            (void)w.close();
            std::printf("%s\n", job::failedLine(rank, "injected failure at step " + std::to_string(s)).c_str());
            std::fflush(stdout);
            return 1;
        }
        if (s == dieAt) {
            std::fprintf(stderr, "about to die\n");
            kill(getpid(), SIGKILL);
        }
        if (s == hangAt)
            for (;;)
                std::this_thread::sleep_for(std::chrono::seconds(1));
        const core::TimeNs t = now();
        const core::Span spans[] = {
            {t, t + 2'000'000, 0, compute, fwd, s, core::kNoBucket, core::SpanKind::Forward},
            {t + 1'000'000, t + 2'000'000, 1024, comm, ar, s, 0, core::SpanKind::Comm},
        };
        (void)w.appendSpans(spans);
        (void)w.addStep(core::Step{rank, s, t, t + 3'000'000, 1.0 / (s + 1), 4});
        if (auto c = w.commit(); !c) {
            std::printf("%s\n", job::failedLine(rank, c.error().message).c_str());
            return 1;
        }
        if (!silent) {
            std::printf("%s\n", job::stepLine(rank, s, 1.0 / (s + 1), 3.0).c_str());
            std::fflush(stdout);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    (void)w.setStatus(core::RunStatus::Completed);
    if (auto c = w.close(); !c) {
        std::printf("%s\n", job::failedLine(rank, c.error().message).c_str());
        return 1;
    }
    if (!silent)
        std::printf("%s\n", job::doneLine(rank).c_str());
    return 0;
}
