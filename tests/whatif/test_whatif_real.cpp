// The what-if model on real recorded runs: two 2-rank runs of a small mlp recorded with
// `$LOCKSTEP_CLI run` (real LibTorch training over gloo on 127.0.0.1) at two bucket caps; the
// model built from the first must lay out the second's buckets exactly as the runtime did, replay
// its own configuration close to what was measured, and drive `lockstep predict` / `advise`.
#include "lockstep/core/analysis.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/whatif.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

using namespace lockstep::core;
namespace core = lockstep::core;
namespace fs = std::filesystem;

namespace {

struct Ran {
    int status = -1;
    std::string out;
    std::string err;
};

std::string quoted(const std::string& s)
{
    std::string q = "'";
    for (char c : s)
        q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

fs::path dir()
{
    const fs::path d = fs::temp_directory_path() / ("lockstep-whatif-real-" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
}

// Runs the lockstep CLI with arguments (no user input reaches the shell: every argument is quoted).
Ran runCli(const std::vector<std::string>& args)
{
    const char* cli = std::getenv("LOCKSTEP_CLI");
    std::string cmd = quoted(cli ? cli : LOCKSTEP_BINARY_DIR "/app/lockstep");
    for (const auto& a : args)
        cmd += " " + quoted(a);
    const fs::path errFile = dir() / "stderr.txt";
    cmd += " 2>" + quoted(errFile.string());
    Ran r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p)
        return r;
    char buf[4096];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        r.out.append(buf, n);
    const int status = pclose(p);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(errFile);
    std::stringstream ss;
    ss << e.rdbuf();
    r.err = ss.str();
    return r;
}

// mlp 4 x 256 (+ head): packing order head.fc.bias 40 B, head.fc.weight 10 KiB, layer3 bias 1 KiB
// and weight 256 KiB, then layers 2, 1, 0 alike. First cap 0.25 MiB: bucket 0 closes with
// layer3.fc.weight (273,448 B >= 262,144). Cap 25 MiB: the other three layers in one bucket;
// cap 0.5 MiB: layers 2 and 1 (526,336 B >= 524,288), then layer 0.
std::string record(const std::string& name, const std::string& bucketMb)
{
    const std::string out = (dir() / name).string();
    const Ran r = runCli({"run", "--nproc", "2", "--model", "mlp", "--layers", "4", "--width", "256", "--batch", "64",
                          "--steps", "14", "--warmup", "2", "--threads", "1", "--bucket-mb", bucketMb,
                          "--first-bucket-mb", "0.25", "--progress", "none", "--force", "--out", out});
    EXPECT_EQ(r.status, 0) << r.err;
    return out;
}

class WhatIfReal : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        s_run25 = record("mlp-25.db", "25");
        s_run05 = record("mlp-05.db", "0.5");
    }
    static void TearDownTestSuite() { fs::remove_all(dir()); }

    static core::Run load(const std::string& path)
    {
        auto run = loadRun(path);
        EXPECT_TRUE(run.has_value()) << (run ? "" : run.error().message);
        return run ? *run : core::Run{};
    }

    static std::string s_run25, s_run05;
};
std::string WhatIfReal::s_run25, WhatIfReal::s_run05;

} // namespace

TEST_F(WhatIfReal, TheRuntimeRecordsParameterSizesThatAddUpToItsBuckets)
{
    const core::Run run = load(s_run25);
    ASSERT_TRUE(run.config.extra.count(kParamNumelKey));
    auto numel = parseParamNumel(run.config.extra.at(kParamNumelKey), run.buckets);
    ASSERT_TRUE(numel.has_value()) << numel.error().message;
    ASSERT_EQ(run.buckets.size(), 2u);
    for (size_t b = 0; b < run.buckets.size(); ++b) {
        int64_t sum = 0;
        for (int64_t n : (*numel)[b])
            sum += n * 4;
        EXPECT_EQ(sum, run.buckets[b].bytes) << "bucket " << b;
    }
    // Bucket 0 as derived above: 40 + 10,240 + 1,024 + 262,144 B.
    EXPECT_EQ(run.buckets[0].bytes, 273'448);
}

TEST_F(WhatIfReal, PredictedLayoutAtAnotherCapIsTheRuntimesOwn)
{
    const core::Run run25 = load(s_run25), run05 = load(s_run05);
    auto m = WhatIfModel::build(run25);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    WhatIfConfig c = m->recorded();
    c.bucketCapBytes = run05.config.bucketCapBytes;
    auto p = m->predict(c);
    ASSERT_TRUE(p.has_value()) << p.error().message;
    ASSERT_EQ(p->run.buckets.size(), run05.buckets.size());
    ASSERT_EQ(run05.buckets.size(), 3u);
    for (size_t b = 0; b < run05.buckets.size(); ++b) {
        EXPECT_EQ(p->run.buckets[b].bytes, run05.buckets[b].bytes) << "bucket " << b;
        EXPECT_EQ(p->run.buckets[b].params, run05.buckets[b].params) << "bucket " << b;
    }
    // And the other way round: the 0.5 MiB run predicts the 25 MiB run's layout.
    auto m05 = WhatIfModel::build(run05);
    ASSERT_TRUE(m05.has_value()) << m05.error().message;
    auto back = m05->predict(m->recorded());
    ASSERT_TRUE(back.has_value());
    ASSERT_EQ(back->run.buckets.size(), run25.buckets.size());
    for (size_t b = 0; b < run25.buckets.size(); ++b)
        EXPECT_EQ(back->run.buckets[b].params, run25.buckets[b].params) << "bucket " << b;
}

// Median over steady steps of the step time averaged over ranks (ms): the statistic bench/whatif
// compares, robust to the few steps that lose the CPU to other processes on a shared machine.
namespace {

// Per (rank, step) of a predicted run: where backward ends (the wait's start) from the step's
// start, the wait, and the compute work up to the end of backward: that wall time less what
// contention took from it (whatif.cpp, essay 5), computeSlowdown x the time a collective was in
// flight during it (from its last launch, after the previous bucket's completion, to its
// completion: the predicted run carries both).
struct RankStepTimes {
    TimeNs toBackwardEnd = 0;
    TimeNs wait = 0;
    double computeWork = 0;
    std::vector<TimeNs> forwardAndData; // durations, in order
};
std::map<std::pair<int32_t, int32_t>, RankStepTimes> rankStepTimes(const core::Run& r, double slowdown)
{
    std::map<std::pair<int32_t, int32_t>, RankStepTimes> out;
    std::map<std::pair<int32_t, int32_t>, TimeNs> lastLaunch; // (step, bucket)
    std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<TimeNs, TimeNs>>> comm; // (rank, step)
    for (const Span& s : r.spans)
        if (s.kind == SpanKind::Comm) {
            TimeNs& l = lastLaunch[{s.step, s.bucket}];
            l = std::max(l, s.start);
        }
    for (const Span& s : r.spans) {
        const int32_t rank = r.lanes[s.lane.v].rank;
        if (s.kind == SpanKind::Comm) {
            auto& v = comm[{rank, s.step}];
            if (static_cast<size_t>(s.bucket) >= v.size())
                v.resize(s.bucket + 1);
            v[s.bucket] = {lastLaunch[{s.step, s.bucket}], s.end};
        } else if (s.kind == SpanKind::Wait) {
            out[{rank, s.step}].wait = s.duration();
        } else if (s.kind == SpanKind::Forward || s.kind == SpanKind::DataLoad) {
            out[{rank, s.step}].forwardAndData.push_back(s.duration());
        }
    }
    for (const Step& st : r.steps) {
        RankStepTimes& t = out[{st.rank, st.step}];
        TimeNs backwardEnd = st.start;
        for (const Span& s : r.spans)
            if (s.kind == SpanKind::Wait && s.step == st.step && r.lanes[s.lane.v].rank == st.rank)
                backwardEnd = s.start;
        t.toBackwardEnd = backwardEnd - st.start;
        double inFlight = 0;
        TimeNs prevDone = st.start;
        for (const auto& [launch, done] : comm[{st.rank, st.step}]) {
            const TimeNs a = std::max({launch, prevDone, st.start}), e = std::min(done, backwardEnd);
            inFlight += static_cast<double>(std::max<TimeNs>(0, e - a));
            prevDone = done;
        }
        t.computeWork = static_cast<double>(t.toBackwardEnd) - slowdown * inFlight;
    }
    return out;
}

} // namespace

TEST_F(WhatIfReal, ReplayKeepsTheComputeWorkAndReDerivesTheRest)
{
    const core::Run run = load(s_run25);
    auto m = WhatIfModel::build(run);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    EXPECT_TRUE(m->link().fitted);
    EXPECT_GT(m->link().samples, 0);
    // The runtime's startup probe: three sizes, each a positive time (whatif.h, kLinkProbeKey).
    ASSERT_TRUE(run.config.extra.contains(kLinkProbeKey));
    auto probe = parseLinkProbe(run.config.extra.at(kLinkProbeKey));
    ASSERT_TRUE(probe.has_value()) << probe.error().message;
    ASSERT_EQ(probe->size(), 3u);
    EXPECT_EQ(probe->front().bytes, 4096);
    EXPECT_EQ(probe->back().bytes, 512 * 1024);
    // Its latency is used, or the model says why not (under a parallel test run's load the probe
    // can read a larger message faster than a smaller one: disturbed, refused).
    bool refused = false;
    for (const std::string& n : m->notes())
        refused = refused || n.find("the startup probe was disturbed") != std::string::npos;
    EXPECT_TRUE(std::isfinite(m->link().probeLatencyNs) || refused) << probe->size();
    // The startup compute probe (whatif.h, kComputeProbeKey): two ranks on this host, each time
    // positive; predicted at one rank, the model uses it or says why not, never fails.
    ASSERT_TRUE(run.config.extra.contains(kComputeProbeKey));
    auto compute = parseComputeProbe(run.config.extra.at(kComputeProbeKey));
    ASSERT_TRUE(compute.has_value()) << compute.error().message;
    EXPECT_GT(compute->aloneNs, 0);
    EXPECT_GT(compute->togetherNs, 0);
    EXPECT_EQ(compute->ranksOnHost, 2);
    {
        WhatIfConfig one = m->recorded();
        one.worldSize = 1;
        auto alone = m->predict(one);
        ASSERT_TRUE(alone.has_value()) << alone.error().message;
        EXPECT_GT(alone->hostComputeFactor, 0);
        EXPECT_LE(alone->hostComputeFactor, 1);
        bool said = false;
        for (const std::string& n : alone->notes)
            said = said || n.find("compute probe") != std::string::npos || n.find("startup probe's forward") != std::string::npos;
        EXPECT_TRUE(said);
    }
    EXPECT_GE(m->link().computeSlowdown, 0);
    EXPECT_LE(m->link().computeSlowdown, kMaxComputeSlowdown);
    for (const std::string& n : m->notes())
        EXPECT_EQ(n.find("not recorded"), std::string::npos) << n;
    auto p = m->predict(m->recorded());
    ASSERT_TRUE(p.has_value());
    ASSERT_EQ(p->run.steps.size(), run.steps.size());
    EXPECT_EQ(p->run.ranks.size(), 2u);
    EXPECT_EQ(p->run.instants.size(), run.instants.size());
    WhatIfConfig small = m->recorded();
    small.bucketCapBytes = small.firstBucketCapBytes = 1 << 18;
    auto q = m->predict(small);
    ASSERT_TRUE(q.has_value());
    ASSERT_GT(q->run.buckets.size(), p->run.buckets.size());
    // Per (rank, step): forward and data loading as recorded, to the nanosecond (no transfer runs
    // beside them); the compute work up to the end of backward the same in the replay of the
    // recorded caps and at 256 KiB caps, which put several times more transfers beside backward
    // (1 µs: a rounding per mapped instant); and a step longer or shorter than recorded by exactly
    // what its backward and its wait are.
    const double phi = m->link().computeSlowdown;
    const auto rec = rankStepTimes(run, phi), pred = rankStepTimes(p->run, phi), other = rankStepTimes(q->run, phi);
    ASSERT_EQ(rec.size(), pred.size());
    ASSERT_EQ(other.size(), pred.size());
    for (size_t i = 0; i < run.steps.size(); ++i) {
        const Step &a = run.steps[i], &b = p->run.steps[i];
        ASSERT_EQ(a.rank, b.rank);
        ASSERT_EQ(a.step, b.step);
        const auto key = std::make_pair(a.rank, a.step);
        const RankStepTimes &ra = rec.at(key), &pb = pred.at(key), &qb = other.at(key);
        EXPECT_EQ(ra.forwardAndData, pb.forwardAndData) << "rank " << a.rank << " step " << a.step;
        EXPECT_EQ(ra.forwardAndData, qb.forwardAndData) << "rank " << a.rank << " step " << a.step;
        EXPECT_NEAR(pb.computeWork, qb.computeWork, 1000) << "rank " << a.rank << " step " << a.step;
        EXPECT_EQ((b.end - b.start) - (a.end - a.start), (pb.wait - ra.wait) + (pb.toBackwardEnd - ra.toBackwardEnd))
            << "rank " << a.rank << " step " << a.step;
    }
    // The replay of the recorded configuration is a consistency check and is reported as one: the
    // self-replay error the model reports is exactly the difference between the replayed timeline,
    // analysed by core like any run, and the recording. How near the two come on a real run is the
    // machine's business and the bench's (bench/whatif), never a timed test's.
    const double measuredMs = core::analyze(run).summary.stepTimeMs;
    const double replayedMs = core::analyze(p->run).summary.stepTimeMs;
    ASSERT_GT(measuredMs, 0);
    EXPECT_NEAR(m->measured().stepTimeMs, measuredMs, 1e-6 * measuredMs);
    EXPECT_NEAR(p->numbers.stepTimeMs, replayedMs, 1e-6 * replayedMs);
    EXPECT_NEAR(m->selfErrorPct(), (replayedMs - measuredMs) / measuredMs * 100, 1e-6);
    EXPECT_TRUE(std::isfinite(m->selfErrorPct()));
}

TEST_F(WhatIfReal, PredictCommandPrintsJsonAndWritesPredictedRuns)
{
    const fs::path outDir = dir() / "predicted";
    const Ran r = runCli({"predict", s_run25, "--bucket-mb", "0.5,25", "--nproc", "2,4", "--json", "--out-dir",
                          outDir.string()});
    ASSERT_EQ(r.status, 0) << r.err;
    rapidjson::Document doc;
    doc.Parse(r.out.c_str());
    ASSERT_FALSE(doc.HasParseError()) << r.out;
    EXPECT_STREQ(doc["schema"].GetString(), "lockstep.whatif/1");
    ASSERT_TRUE(doc["predictions"].IsArray());
    ASSERT_EQ(doc["predictions"].Size(), 4u);
    for (const auto& pred : doc["predictions"].GetArray()) {
        EXPECT_GT(pred["predicted"]["step_time_ms"].GetDouble(), 0);
        EXPECT_TRUE(pred["predicted"]["overlap_ratio"].IsNumber());
        // Every prediction carries its interval (issue 29), around the prediction.
        const double ms = pred["predicted"]["step_time_ms"].GetDouble();
        EXPECT_LT(pred["interval"]["low_ms"].GetDouble(), ms);
        EXPECT_GT(pred["interval"]["high_ms"].GetDouble(), ms);
        EXPECT_GT(pred["interval"]["half_width_pct"].GetDouble(), 0);
        EXPECT_TRUE(pred["interval"]["kinds"].IsArray());
    }
    EXPECT_TRUE(doc["measured"]["step_time_ms"].IsNumber());
    int files = 0;
    for (const auto& entry : fs::directory_iterator(outDir)) {
        if (entry.path().extension() != ".db")
            continue;
        ++files;
        const core::Run run = load(entry.path().string());
        EXPECT_TRUE(isPredicted(run.config)) << entry.path();
        EXPECT_EQ(static_cast<int>(run.ranks.size()), run.config.worldSize);
        EXPECT_EQ(run.buckets.size(), run.config.bucketCapBytes == (1 << 19) ? 3u : 2u) << entry.path();
        EXPECT_GT(summarize(run).stepTimeMs, 0);
        EXPECT_NE(run.config.extra.count("predicted_interval_ms"), 0u) << entry.path();
    }
    EXPECT_EQ(files, 4);
    // Existing files are not overwritten without --force.
    const Ran again = runCli({"predict", s_run25, "--out-dir", outDir.string(), "--bucket-mb", "0.5"});
    EXPECT_NE(again.status, 0);
    EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
}

TEST_F(WhatIfReal, AdviseCommandNamesCapsGainAndConfidence)
{
    const Ran text = runCli({"advise", s_run25, "--bucket-mb", "0.5,25"});
    ASSERT_EQ(text.status, 0) << text.err;
    EXPECT_NE(text.out.find("Advice:"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("consistency check: the model replays it"), std::string::npos) << text.out;
    const Ran r = runCli({"advise", s_run25, "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    rapidjson::Document doc;
    doc.Parse(r.out.c_str());
    ASSERT_FALSE(doc.HasParseError()) << r.out;
    auto m = WhatIfModel::build(load(s_run25));
    ASSERT_TRUE(m.has_value());
    EXPECT_NEAR(doc["self_error_pct"].GetDouble(), m->selfErrorPct(), 1e-9);
    EXPECT_GE(doc["gain_ms"].GetDouble(), 0); // the recorded caps are a candidate
    EXPECT_GT(doc["candidates"].Size(), 1u);
    EXPECT_TRUE(doc["best"]["bucket_cap_bytes"].IsInt64());
    // The verdict (issue 29): a change only when the candidate's whole interval is below the
    // recorded caps' prediction; otherwise what to measure.
    const std::string verdict = doc["verdict"].GetString();
    EXPECT_TRUE(verdict == "change" || verdict == "keep" || verdict == "cannot_tell") << verdict;
    EXPECT_EQ(doc["recommend"].GetBool(), verdict == "change");
    if (verdict == "change") {
        EXPECT_LT(doc["interval"]["high_ms"].GetDouble(), doc["predicted_current_ms"].GetDouble());
    }
    if (verdict == "cannot_tell") {
        EXPECT_NE(std::string(doc["measure_hint"].GetString()), "");
    }
}

// A 1-rank run has no other rank on its host to probe compute beside: with --threads N it starts a
// partner process for the probe (trainer_torch.cpp, probeComputeWithPartner), which exits before
// training; `predict --nproc 2` then scales each rank's compute by the probe (whatif.cpp, "World
// sizes"). With --threads 0 no partner is started and the run says why.
TEST(WhatIfRealOneRank, AOneRankRunProbesComputeWithAPartnerProcess)
{
    const auto recordOne = [](const std::string& name, const std::string& threads) {
        const std::string out = (dir() / name).string();
        const Ran r = runCli({"run", "--nproc", "1", "--model", "mlp", "--layers", "4", "--width", "256", "--batch",
                              "64", "--steps", "4", "--warmup", "1", "--threads", threads, "--progress", "none",
                              "--force", "--out", out});
        EXPECT_EQ(r.status, 0) << r.err;
        auto run = loadRun(out);
        EXPECT_TRUE(run.has_value()) << (run ? "" : run.error().message);
        return run ? *run : core::Run{};
    };
    const core::Run run = recordOne("one.db", "1");
    ASSERT_EQ(run.config.worldSize, 1);
    ASSERT_TRUE(run.config.extra.contains(kComputeProbeKey)) << (run.config.extra.contains("compute_probe_startup") ? run.config.extra.at("compute_probe_startup") : std::string("no compute_probe_startup"));
    auto compute = parseComputeProbe(run.config.extra.at(kComputeProbeKey));
    ASSERT_TRUE(compute.has_value()) << compute.error().message;
    EXPECT_GT(compute->aloneNs, 0);
    EXPECT_GT(compute->togetherNs, 0);
    EXPECT_EQ(compute->ranksOnHost, 2);
    EXPECT_NE(run.config.extra.at("compute_probe_startup").find("with a partner process"), std::string::npos)
        << run.config.extra.at("compute_probe_startup");
    auto m = WhatIfModel::build(run);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    WhatIfConfig two = m->recorded();
    two.worldSize = 2;
    auto p = m->predict(two);
    ASSERT_TRUE(p.has_value()) << p.error().message;
    EXPECT_GE(p->hostComputeFactor, 1.0);
    EXPECT_LE(p->hostComputeFactor, 2.0);
    bool said = false;
    for (const std::string& n : p->notes)
        said = said || n.find("2 processes at once") != std::string::npos;
    EXPECT_TRUE(said);

    const core::Run automatic = recordOne("one-auto.db", "0");
    EXPECT_FALSE(automatic.config.extra.contains(kComputeProbeKey));
    ASSERT_TRUE(automatic.config.extra.contains("compute_probe_startup"));
    EXPECT_EQ(automatic.config.extra.at("compute_probe_startup").rfind("not probed: --threads 0", 0), 0u)
        << automatic.config.extra.at("compute_probe_startup");
    fs::remove(dir() / "one.db");
    fs::remove(dir() / "one-auto.db");
}

TEST(WhatIfCli, BadFilesAndRunsWithoutBucketsFailWithAMessage)
{
    const fs::path text = dir() / "notes.txt";
    std::ofstream(text) << "hello\n";
    Ran r = runCli({"predict", text.string(), "--bucket-mb", "1"});
    EXPECT_NE(r.status, 0);
    EXPECT_TRUE(r.out.empty());
    EXPECT_NE(r.err.find("not a Lockstep run database"), std::string::npos) << r.err;
    r = runCli({"advise", (dir() / "missing.db").string()});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("lockstep:"), std::string::npos) << r.err;

    // A run with steps and spans but no bucket table (as an imported trace): refused, and why.
    core::Run run;
    run.config.name = "imported";
    run.lanes.push_back(Lane{LaneId{0}, 0, LaneKind::Compute, -1, -1, "compute"});
    run.steps.push_back(Step{0, 0, 0, 1000, 1.0, 1});
    const fs::path db = dir() / "nobuckets.db";
    ASSERT_TRUE(saveRun(run, db.string(), RunWriter::Mode::Overwrite).has_value());
    r = runCli({"predict", db.string()});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("no bucket table"), std::string::npos) << r.err;

    r = runCli({"predict", "--help"});
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("--bucket-mb"), std::string::npos);
    r = runCli({"predict", db.string(), "--compress", "int8"});
    EXPECT_NE(r.status, 0);
    fs::remove_all(dir());
}
