// The runtime, tested through the worker processes it ships as (`$LOCKSTEP_CLI worker`, which
// execs lockstep-worker):
//  - exactness: N ranks on B/N samples each end K steps with the parameters one process gets
//    on the full batch B (N = 2, 4; several bucket caps; accumulation; transformer + AdamW;
//    convnet), and every rank holds bit-identical parameters;
//  - fp16/bf16 wire compression stays close to the exact result and keeps replicas identical;
//  - a recorded 2-rank run: every step, span kind, gradient-ready instant and bucket all-reduce
//    is in each shard, with clock offsets, the replica check and every training option recorded;
//  - fault injection at the worker: a crashed rank makes its peer fail fast with a cause and a
//    failed shard that keeps the completed steps; straggler and link emulation show up;
//  - the rendezvous through the launcher's file store (LOCKSTEP_RENDEZVOUS_FILE): no socket;
//  - bad input gives a clear error and a non-zero exit, never a hang.
#include "test_support.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/clock_sync.h"
#include "lockstep/core/run_db.h"
#include "lockstep/job/flags.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>

using namespace lockstep;
using lockstep::test::contains;

namespace {

struct RankResult {
    int exitCode = -1;
    bool finished = false;
    std::string output;
};

// Starts `world` worker processes with torchrun's environment and waits for all of them.
// `extraEnv` goes to every rank (e.g. a rendezvous file instead of MASTER_ADDR/MASTER_PORT).
std::vector<RankResult> runRanks(int world, const std::vector<std::string>& args, int timeoutMs = 90000,
                                 const std::vector<std::string>& extraEnv = {})
{
    const int port = test::freePort();
    std::vector<std::unique_ptr<test::Child>> procs;
    for (int r = 0; r < world; ++r) {
        std::vector<std::string> env;
        if (world > 1) {
            env = test::environment({"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                     "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=" + std::to_string(world),
                                     "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)},
                                    {"LOCKSTEP_RENDEZVOUS_FILE", "LOCKSTEP_SHARD_DIR", "LOCKSTEP_RUN_NAME"});
        } else {
            env = test::environment({}, {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
                                         "SLURM_NTASKS", "LOCKSTEP_RENDEZVOUS_FILE", "LOCKSTEP_SHARD_DIR",
                                         "LOCKSTEP_RUN_NAME"});
        }
        env.insert(env.end(), extraEnv.begin(), extraEnv.end());
        std::vector<std::string> argv{"worker"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--threads", "1"});
        auto p = std::make_unique<test::Child>();
        p->start(test::cliPath(), argv, env);
        procs.push_back(std::move(p));
    }
    std::vector<RankResult> out(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
        out[size_t(r)].finished = procs[size_t(r)]->wait(timeoutMs);
        out[size_t(r)].exitCode = procs[size_t(r)]->exitCode();
        out[size_t(r)].output = procs[size_t(r)]->all();
    }
    return out;
}

std::vector<float> readFloats(const std::string& path)
{
    const std::string b = test::readFile(path);
    std::vector<float> v(b.size() / sizeof(float));
    std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
    return v;
}

std::string dump(const std::string& base, int rank) { return base + ".rank" + std::to_string(rank); }

::testing::AssertionResult allDone(const std::vector<RankResult>& rs)
{
    for (size_t r = 0; r < rs.size(); ++r) {
        if (!rs[r].finished)
            return ::testing::AssertionFailure() << "rank " << r << " hung:\n" << rs[r].output;
        if (rs[r].exitCode != 0)
            return ::testing::AssertionFailure() << "rank " << r << " exit " << rs[r].exitCode << ":\n" << rs[r].output;
        if (!contains(rs[r].output, "LOCKSTEP done rank=" + std::to_string(r)))
            return ::testing::AssertionFailure() << "rank " << r << " never said done:\n" << rs[r].output;
    }
    return ::testing::AssertionSuccess();
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

} // namespace

class Runtime : public ::testing::Test {
protected:
    static void SetUpTestSuite() { ASSERT_TRUE(test::exists(test::cliPath())) << "LOCKSTEP_CLI must name the lockstep binary"; }
};

struct ExactCase {
    const char* name;
    int world;
    std::vector<std::string> model;
    const char* firstBucketMb;
    const char* bucketMb;
    int accumulate;
};

class Exactness : public ::testing::TestWithParam<ExactCase> {};

const std::vector<std::string> kMlp{"--model", "mlp", "--layers", "3", "--width", "48"};

// Caps: one bucket per tensor (tiny), a few buckets, everything in one bucket (defaults).
INSTANTIATE_TEST_SUITE_P(
    Runtime, Exactness,
    ::testing::Values(ExactCase{"mlp_N2_tiny_buckets", 2, kMlp, "0.001", "0.001", 1},
                      ExactCase{"mlp_N2_small_buckets", 2, kMlp, "0.01", "0.02", 1},
                      ExactCase{"mlp_N2_default_buckets", 2, kMlp, "1", "25", 1},
                      ExactCase{"mlp_N4_small_buckets", 4, kMlp, "0.01", "0.02", 1},
                      ExactCase{"mlp_N4_default_buckets", 4, kMlp, "1", "25", 1},
                      ExactCase{"mlp_N2_accumulate_2", 2, kMlp, "0.01", "0.02", 2},
                      ExactCase{"transformer_adamw_N2", 2,
                                {"--model", "transformer", "--layers", "2", "--width", "32", "--heads", "4", "--seq",
                                 "8", "--optimizer", "adamw", "--lr", "0.001"},
                                "0.01", "0.05", 1},
                      ExactCase{"convnet_N2", 2, {"--model", "convnet", "--layers", "1", "--width", "8"}, "0.001",
                                "0.002", 1}),
    [](const ::testing::TestParamInfo<ExactCase>& info) { return std::string(info.param.name); });

// The seeds' identity: averaging the gradients of N shards of a batch equals the gradient of
// the whole batch, so N replicas that start equal (rank 0's broadcast; each rank initializes
// with its own seed) and apply the same update stay equal to one process on the full batch.
TEST_P(Exactness, NRanksEqualOneProcessOnTheFullBatch)
{
    const ExactCase& c = GetParam();
    test::TempDir dir;
    const int perRank = 4;
    std::vector<std::string> common = cat(c.model, {"--steps", "4", "--no-record", "--quiet", "--seed", "7",
                                                    "--dataset-size", "256"});
    if (std::find(c.model.begin(), c.model.end(), "--lr") == c.model.end())
        common = cat(common, {"--lr", "0.05"});
    // Reference: one process, the whole batch (all ranks' micro-batches of a step at once).
    const std::string ref = dir.file("ref.bin");
    ASSERT_TRUE(allDone(runRanks(1, cat(common, {"--batch", std::to_string(perRank * c.world * c.accumulate),
                                                 "--dump-params", ref}))));
    const std::string par = dir.file("par.bin");
    auto rn = runRanks(c.world, cat(common, {"--batch", std::to_string(perRank), "--accumulate",
                                             std::to_string(c.accumulate), "--first-bucket-mb", c.firstBucketMb,
                                             "--bucket-mb", c.bucketMb, "--dump-params", par, "--check-every", "2"}));
    ASSERT_TRUE(allDone(rn));
    const auto expected = readFloats(ref);
    ASSERT_GT(expected.size(), 100u);
    const auto rank0 = readFloats(dump(par, 0));
    ASSERT_EQ(rank0.size(), expected.size());
    double maxDiff = 0, maxAbs = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
        maxDiff = std::max(maxDiff, std::fabs(double(rank0[i]) - double(expected[i])));
        maxAbs = std::max(maxAbs, std::fabs(double(expected[i])));
    }
    EXPECT_LE(maxDiff, 2e-5 * std::max(1.0, maxAbs)) << "max |diff| " << maxDiff;
    for (int r = 1; r < c.world; ++r) {
        const auto other = readFloats(dump(par, r));
        ASSERT_EQ(other.size(), rank0.size());
        EXPECT_EQ(std::memcmp(other.data(), rank0.data(), rank0.size() * sizeof(float)), 0) << "rank " << r << " differs from rank 0";
        EXPECT_FALSE(contains(rn[size_t(r)].output, "drift"));
    }
}

class Compression : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Runtime, Compression, ::testing::Values("fp16", "bf16"));

TEST_P(Compression, CloseToExactAndReplicasIdentical)
{
    const std::string compress = GetParam();
    test::TempDir dir;
    const std::vector<std::string> common{"--model", "mlp", "--layers", "2", "--width", "32", "--steps", "3",
                                          "--no-record", "--quiet", "--dataset-size", "256", "--lr", "0.05"};
    const std::string ref = dir.file("ref.bin");
    ASSERT_TRUE(allDone(runRanks(1, cat(common, {"--batch", "8", "--dump-params", ref}))));
    const std::string par = dir.file("par.bin");
    ASSERT_TRUE(allDone(runRanks(2, cat(common, {"--batch", "4", "--compress", compress, "--first-bucket-mb", "0.002",
                                                 "--bucket-mb", "0.004", "--dump-params", par}))));
    const auto expected = readFloats(ref);
    const auto a = readFloats(dump(par, 0));
    const auto b = readFloats(dump(par, 1));
    ASSERT_EQ(a.size(), expected.size());
    ASSERT_EQ(b.size(), expected.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    double maxDiff = 0;
    for (size_t i = 0; i < a.size(); ++i)
        maxDiff = std::max(maxDiff, std::fabs(double(a[i]) - double(expected[i])));
    // Rounded gradients: close to the exact run, but not equal to it.
    EXPECT_LT(maxDiff, 5e-3) << "max |diff| " << maxDiff;
    EXPECT_GT(maxDiff, 0) << "compression had no effect";
}

TEST_F(Runtime, RecordedShards)
{
    test::TempDir dir;
    const int steps = 5;
    auto rs = runRanks(2, {"--model", "mlp", "--layers", "3", "--width", "64", "--batch", "8", "--steps",
                           std::to_string(steps), "--first-bucket-mb", "0.01", "--bucket-mb", "0.01", "--out-dir",
                           dir.path(), "--run-name", "rt-test", "--check-every", "2", "--lr", "0.02", "--seed", "11"});
    ASSERT_TRUE(allDone(rs));
    for (int r = 0; r < 2; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        EXPECT_TRUE(contains(rs[size_t(r)].output, "LOCKSTEP step=" + std::to_string(steps - 1) + " rank=" + std::to_string(r) + " loss="));
        auto run = core::loadRun(dir.file("rank-" + std::to_string(r) + ".db"));
        ASSERT_TRUE(run.has_value()) << run.error().message;
        EXPECT_EQ(run->config.status, core::RunStatus::Completed);
        EXPECT_EQ(run->config.worldSize, 2);
        EXPECT_EQ(run->config.model, "mlp");
        EXPECT_EQ(run->config.modelArgs, "layers=3 width=64");
        EXPECT_EQ(run->config.backend, "gloo");
        EXPECT_EQ(run->config.firstBucketCapBytes, int64_t(0.01 * 1024 * 1024));
        EXPECT_EQ(run->config.name, "rt-test");
        EXPECT_TRUE(contains(run->config.commandLine, "worker"));
        // Every training option is recorded (the configuration signature needs them all).
        EXPECT_EQ(run->config.extra["lr"], "0.02");
        EXPECT_EQ(run->config.extra["seed"], "11");
        EXPECT_EQ(run->config.extra["micro_batch"], "8");
        EXPECT_EQ(run->config.extra["threads"], "1");
        EXPECT_EQ(run->config.extra["timeout_s"], "30");
        EXPECT_EQ(run->config.extra["dataset_size"], "65536");
        EXPECT_EQ(run->config.extra["check_every"], "2");
        EXPECT_EQ(run->config.extra["momentum"], "0.9");
        EXPECT_EQ(run->config.extra.count("straggler"), 0u); // not injected
        ASSERT_EQ(run->ranks.size(), 1u);
        EXPECT_EQ(run->ranks[0].rank, r);
        // Its host's boot id, and the offset's uncertainty: at least half the kept round trip.
        EXPECT_EQ(run->ranks[0].bootId, core::readBootId());
        EXPECT_EQ(run->ranks[0].bootId.size(), 36u);
        EXPECT_GE(run->ranks[0].clockUncertaintyNs, (run->ranks[0].clockRttNs + 1) / 2);
        if (r == 1) {
            EXPECT_GT(run->ranks[0].clockRttNs, 0);
            EXPECT_GT(run->ranks[0].clockSyncEndNs, run->ranks[0].clockSyncStartNs);
        }
        ASSERT_EQ(int(run->steps.size()), steps);
        // Reverse order, 10 KiB caps: {head.*, layer2.*}, {layer1.*}, {layer0.*} (a 64x64 weight is 16 KiB).
        ASSERT_EQ(run->buckets.size(), 3u);
        int64_t bucketParams = 0;
        for (const auto& b : run->buckets)
            bucketParams += int64_t(b.params.size());
        EXPECT_EQ(bucketParams, 8);
        // The last layer's parameters are in bucket 0 (reverse registration order).
        EXPECT_EQ(run->buckets[0].params[0].rfind("head.", 0), 0u);
        std::map<core::SpanKind, int> kinds;
        std::map<int, int> commPerStep;
        for (const auto& s : run->spans) {
            ++kinds[s.kind];
            EXPECT_GE(s.end, s.start);
            EXPECT_TRUE(s.step >= 0 && s.step < steps);
            if (s.kind == core::SpanKind::Comm) {
                ++commPerStep[s.step];
                ASSERT_TRUE(s.bucket >= 0 && s.bucket < int(run->buckets.size()));
                EXPECT_EQ(s.bytes, run->buckets[size_t(s.bucket)].bytes);
                EXPECT_EQ(run->lanes[s.lane.v].kind, core::LaneKind::Comm);
            }
        }
        EXPECT_EQ(kinds[core::SpanKind::DataLoad], steps);
        EXPECT_EQ(kinds[core::SpanKind::Forward], steps * 4); // layer0..2 + head
        EXPECT_GE(kinds[core::SpanKind::Backward], steps * 4);
        EXPECT_EQ(kinds[core::SpanKind::Wait], steps);
        EXPECT_EQ(kinds[core::SpanKind::Optimizer], steps);
        for (int s = 0; s < steps; ++s)
            EXPECT_EQ(commPerStep[s], int(run->buckets.size()));
        EXPECT_EQ(int(run->instants.size()), steps * 8);
        for (const auto& in : run->instants)
            EXPECT_EQ(in.kind, core::InstantKind::GradReady);
        for (const auto& st : run->steps) {
            EXPECT_GT(st.end, st.start);
            EXPECT_TRUE(std::isfinite(st.loss));
            EXPECT_EQ(st.samples, 8);
            // The training thread's scheduler statistics: on a CPU for part of the step, never
            // more than the step lasted (one thread; 1 ms for the reads' own timing), waiting >= 0.
            EXPECT_GT(st.cpuNs, 0);
            EXPECT_LE(st.cpuNs, st.end - st.start + 1'000'000);
            EXPECT_GE(st.runqNs, 0);
        }
        bool checked = false;
        for (const auto& d : run->diagnostics) {
            if (d.kind == "replica check")
                checked = d.count == 2;
            EXPECT_NE(d.kind, "replica drift");
        }
        EXPECT_TRUE(checked);
    }
    // The merged run analyses: two ranks, every step, buckets with durations.
    const std::string merged = dir.file("run.db");
    auto m = core::mergeRunFiles({dir.file("rank-0.db"), dir.file("rank-1.db")}, merged);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    auto run = core::loadRun(merged);
    ASSERT_TRUE(run.has_value());
    const auto summary = core::summarize(*run);
    EXPECT_EQ(summary.worldSize, 2);
    EXPECT_EQ(summary.steps, steps);
    EXPECT_GT(summary.stepTimeMs, 0);
    EXPECT_GT(summary.commMs, 0);
    EXPECT_GT(summary.computeMs, 0);
    EXPECT_EQ(summary.buckets.size(), run->buckets.size());
}

// The launcher's rendezvous: a FileStore in a private folder, the shard folder and the run name
// from the environment; no MASTER_ADDR/MASTER_PORT at all.
TEST_F(Runtime, RendezvousThroughAFile)
{
    test::TempDir dir;
    const std::vector<std::string> env{"LOCKSTEP_RENDEZVOUS_FILE=" + dir.file("rendezvous"),
                                       "LOCKSTEP_SHARD_DIR=" + dir.path(), "LOCKSTEP_RUN_NAME=by-file"};
    const int world = 2;
    std::vector<std::unique_ptr<test::Child>> procs;
    for (int r = 0; r < world; ++r) {
        auto p = std::make_unique<test::Child>();
        p->start(test::workerPath(), {"--model", "mlp", "--layers", "2", "--width", "32", "--batch", "4", "--steps", "3", "--threads", "1"},
                 test::environment(cat(env, {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=" + std::to_string(r),
                                             "LOCAL_WORLD_SIZE=2"}),
                                   {"MASTER_ADDR", "MASTER_PORT"}));
        procs.push_back(std::move(p));
    }
    for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(procs[size_t(r)]->wait(90000));
        ASSERT_EQ(procs[size_t(r)]->exitCode(), 0) << procs[size_t(r)]->all();
        auto run = core::loadRun(dir.file("rank-" + std::to_string(r) + ".db"));
        ASSERT_TRUE(run.has_value()) << procs[size_t(r)]->all();
        EXPECT_EQ(run->config.name, "by-file");
        EXPECT_EQ(run->config.extra["rendezvous"], "file store in the shard folder");
        EXPECT_EQ(run->steps.size(), 3u);
    }
}

// Ranks started without LOCAL_RANK / LOCAL_WORLD_SIZE (a launcher that sets neither) learn their
// place on the host from every rank's host name, so the startup compute probe's "alone" turns are
// taken one rank at a time (read from each shard's compute_probe_startup), not all at once as
// local rank 0.
TEST_F(Runtime, LocalRanksComeFromHostNamesNotTheEnvironment)
{
    test::TempDir dir;
    const std::vector<std::string> env{"LOCKSTEP_RENDEZVOUS_FILE=" + dir.file("rendezvous"),
                                       "LOCKSTEP_SHARD_DIR=" + dir.path(), "LOCKSTEP_RUN_NAME=no-local"};
    std::vector<std::unique_ptr<test::Child>> procs;
    for (int r = 0; r < 2; ++r) {
        auto p = std::make_unique<test::Child>();
        p->start(test::workerPath(), {"--model", "mlp", "--layers", "2", "--width", "32", "--batch", "4", "--steps", "2", "--threads", "1"},
                 test::environment(cat(env, {"RANK=" + std::to_string(r), "WORLD_SIZE=2"}),
                                   {"MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_LOCALID",
                                    "SLURM_NTASKS_PER_NODE"}));
        procs.push_back(std::move(p));
    }
    for (int r = 0; r < 2; ++r) {
        ASSERT_TRUE(procs[size_t(r)]->wait(90000));
        ASSERT_EQ(procs[size_t(r)]->exitCode(), 0) << procs[size_t(r)]->all();
        auto run = core::loadRun(dir.file("rank-" + std::to_string(r) + ".db"));
        ASSERT_TRUE(run.has_value()) << procs[size_t(r)]->all();
        EXPECT_TRUE(run->config.extra.contains("compute_probe"));
        EXPECT_TRUE(contains(run->config.extra["compute_probe_startup"], "local rank " + std::to_string(r) + " of 2 on its host"))
            << run->config.extra["compute_probe_startup"];
    }
}

// A worker stopped by a signal (a launcher's SIGTERM, Ctrl-C) keeps every step it reported:
// each step line is printed after the step went to the recorder, whose writer may still hold it;
// the worker commits what it holds, marks its shard "stopped by SIG...", and exits 128 + signal.
TEST_F(Runtime, ASignalKeepsEveryReportedStep)
{
    for (const int sig : {SIGTERM, SIGINT}) {
        test::TempDir dir;
        test::Child c;
        ASSERT_TRUE(c.start(test::workerPath(),
                            {"--model", "mlp", "--layers", "2", "--width", "256", "--batch", "16", "--steps", "100000",
                             "--threads", "1", "--out-dir", dir.path()},
                            test::environment({}, {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
                                                   "SLURM_NTASKS", "LOCKSTEP_RENDEZVOUS_FILE", "LOCKSTEP_SHARD_DIR",
                                                   "LOCKSTEP_RUN_NAME"})));
        const auto t0 = std::chrono::steady_clock::now();
        while (!contains(c.out(), "step=20 ") && c.pump(100)
               && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
        }
        ASSERT_TRUE(contains(c.out(), "step=20 ")) << c.all();
        c.kill(sig);
        ASSERT_TRUE(c.wait(30000)) << c.all();
        EXPECT_EQ(c.exitCode(), 128 + sig) << c.all();
        // The last step this rank reported before it stopped.
        int reported = -1;
        for (size_t at = c.out().find("step="); at != std::string::npos; at = c.out().find("step=", at + 1))
            reported = std::max(reported, std::atoi(c.out().c_str() + at + 5));
        ASSERT_GE(reported, 20);
        auto run = core::loadRun(dir.file("rank-0.db"));
        ASSERT_TRUE(run.has_value()) << c.all();
        EXPECT_EQ(run->config.status, core::RunStatus::Failed);
        EXPECT_EQ(run->config.failureCause, std::string("stopped by ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT"));
        std::set<int32_t> steps;
        for (const core::Step& s : run->steps)
            steps.insert(s.step);
        for (int s = 0; s <= reported; ++s)
            EXPECT_TRUE(steps.count(s)) << "step " << s << " of " << reported << " reported steps is missing";
    }
}

TEST_F(Runtime, CrashedPeerFailsFast)
{
    test::TempDir dir;
    auto rs = runRanks(2, {"--model", "mlp", "--layers", "2", "--width", "32", "--batch", "4", "--steps", "50",
                           "--crash", "1:3", "--timeout-s", "20", "--out-dir", dir.path()},
                       60000);
    ASSERT_TRUE(rs[0].finished && rs[1].finished);
    EXPECT_EQ(rs[1].exitCode, 3);
    EXPECT_NE(rs[0].exitCode, 0);
    EXPECT_TRUE(contains(rs[0].output, "LOCKSTEP failed rank=0 cause=step 3: ")) << rs[0].output;
    for (int r = 0; r < 2; ++r) {
        auto run = core::loadRun(dir.file("rank-" + std::to_string(r) + ".db"));
        ASSERT_TRUE(run.has_value()) << run.error().message;
        ASSERT_GE(run->steps.size(), 3u); // steps 0..2 completed on both ranks
        for (int s = 0; s < 3; ++s)
            EXPECT_EQ(run->steps[size_t(s)].step, s);
        if (r == 0) {
            EXPECT_EQ(run->config.status, core::RunStatus::Failed);
            EXPECT_FALSE(run->config.failureCause.empty());
        }
    }
}

TEST_F(Runtime, StragglerAndSlowLink)
{
    test::TempDir dir;
    const std::vector<std::string> common{"--model", "mlp", "--layers", "2", "--width", "64", "--batch", "4", "--steps", "8",
                                          "--warmup", "2", "--first-bucket-mb", "0.01", "--bucket-mb", "0.02"};
    const std::string sdir = dir.file("straggler");
    // 16 steps (14 steady): a run straggler must be late in enough steady steps that chance
    // cannot explain it (core/src/stragglers.cpp), so one stalled step does not hide it.
    std::vector<std::string> longer = common;
    longer[9] = "16"; // --steps
    ASSERT_TRUE(allDone(runRanks(2, cat(longer, {"--straggler", "1:30", "--out-dir", sdir}))));
    ASSERT_TRUE(core::mergeRunFiles({sdir + "/rank-0.db", sdir + "/rank-1.db"}, sdir + "/run.db").has_value());
    auto run = core::loadRun(sdir + "/run.db");
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->config.extra["straggler"], "1:30");
    const auto report = core::stragglers(*run);
    EXPECT_EQ(report.stragglers, std::vector<int32_t>{1});

    const std::string ldir = dir.file("link");
    ASSERT_TRUE(allDone(runRanks(2, cat(common, {"--link-gbps", "0.01", "--out-dir", ldir}))));
    auto slow = core::loadRun(ldir + "/rank-0.db");
    ASSERT_TRUE(slow.has_value());
    EXPECT_EQ(slow->config.linkGbps, 0.01);
    // 0.01 Gbit/s: every bucket of ~10-20 KiB takes >= 8 ms on the emulated link.
    for (const auto& s : slow->spans)
        if (s.kind == core::SpanKind::Comm) {
            EXPECT_GE(s.duration(), static_cast<core::TimeNs>(double(s.bytes) * 8 / 0.01));
        }
}

// The worker runs unchanged under torchrun, whose agent hosts the rendezvous store: the torchrun
// of the PyTorch the worker was built against ($LOCKSTEP_TORCH_PYTHON, set when the suite runs
// against the GPU build's pip PyTorch 2.x; Debian's by default). A 2.x worker cannot join a 1.13
// agent's store: TCPStore's protocol changed between them, as it would for any client.
TEST_F(Runtime, UnderTorchrun)
{
    const char* torchPython = std::getenv("LOCKSTEP_TORCH_PYTHON");
    const std::string python = torchPython && *torchPython ? torchPython : "/usr/bin/python3";
    if (!test::exists(python))
        GTEST_SKIP() << "no " << python << " (Debian's python3-torch) on this machine";
    test::TempDir dir;
    const test::Outcome o = test::run(
        python,
        {"-m", "torch.distributed.run", "--no_python", "--nproc_per_node", "2", "--master_port",
         std::to_string(test::freePort()), "--log_dir", dir.file("logs"), "-r", "1", "-t", "1", test::cliPath(), "worker",
         "--model", "mlp", "--layers", "2", "--width", "32", "--batch", "4", "--steps", "3", "--threads", "1",
         "--out-dir", dir.path()},
        90000, test::environment({}, {"LOCKSTEP_RENDEZVOUS_FILE", "LOCKSTEP_SHARD_DIR", "LOCKSTEP_RUN_NAME"}));
    if (o.exitCode != 0 && contains(o.out + o.err, "No module named torch"))
        GTEST_SKIP() << "Debian's python3-torch is not installed";
    ASSERT_TRUE(o.finished && o.exitCode == 0) << o.describe();
    for (int r = 0; r < 2; ++r) {
        auto run = core::loadRun(dir.file("rank-" + std::to_string(r) + ".db"));
        ASSERT_TRUE(run.has_value()) << o.describe();
        EXPECT_EQ(run->config.status, core::RunStatus::Completed);
        EXPECT_EQ(run->config.worldSize, 2);
        EXPECT_EQ(run->steps.size(), 3u);
        EXPECT_EQ(run->ranks[0].rank, r);
    }
}

TEST_F(Runtime, BadInput)
{
    {
        // Refused by the flag table before any training: exit 2 (usage), the flag named.
        const test::Outcome o = test::lockstep({"worker", "--model", "resnet9000"}, 30000);
        EXPECT_EQ(o.exitCode, 2) << o.describe();
        EXPECT_TRUE(contains(o.err, "--model")) << o.describe();
    }
    {
        const test::Outcome o = test::lockstep({"worker", "--straggler", "one:fifty", "--no-record"}, 30000);
        EXPECT_EQ(o.exitCode, 2) << o.describe();
        EXPECT_TRUE(contains(o.err, "--straggler")) << o.describe();
    }
    {
        // A world of two without a rendezvous: a clear failure, no hang.
        const test::Outcome o = test::lockstep(
            {"worker", "--no-record", "--steps", "1"}, 30000,
            test::environment({"WORLD_SIZE=2", "RANK=0"}, {"MASTER_ADDR", "MASTER_PORT", "LOCKSTEP_RENDEZVOUS_FILE"}));
        EXPECT_NE(o.exitCode, 0);
        EXPECT_TRUE(contains(o.out, "LOCKSTEP failed rank=0 cause=")) << o.describe();
        EXPECT_TRUE(contains(o.out, "WORLD_SIZE > 1 needs MASTER_ADDR")) << o.describe();
    }
    {
        // A transformer whose width does not split into heads: refused by the table's rules.
        const test::Outcome o = test::lockstep({"worker", "--model", "transformer", "--width", "30", "--heads", "4", "--no-record"}, 30000);
        EXPECT_EQ(o.exitCode, 2) << o.describe();
        EXPECT_TRUE(contains(o.err, "multiple of --heads")) << o.describe();
    }
    {
        // A rank the world does not have: known only from the environment, refused at setup.
        const test::Outcome o = test::lockstep({"worker", "--straggler", "3:10", "--no-record", "--steps", "1"}, 30000,
                                               test::environment({}, {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                                                      "LOCKSTEP_RENDEZVOUS_FILE"}));
        EXPECT_EQ(o.exitCode, 1) << o.describe();
        EXPECT_TRUE(contains(o.out, "rank 3 does not exist in a world of 1")) << o.describe();
    }
}

// RANK:VALUE parsing (--straggler) is the flag table's.
TEST_F(Runtime, RankValueParsing)
{
    const job::Flag& f = *job::findFlag("--straggler");
    auto v = job::parseFlagValue(f, "1:50");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->rank, 1);
    EXPECT_EQ(v->number, 50.0);
    v = job::parseFlagValue(f, "3:2.5");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->number, 2.5);
    for (const char* bad : {"1", ":5", "a:5", "1:5x", "-1:5"})
        EXPECT_FALSE(job::parseFlagValue(f, bad)) << bad;
}
