// Run summary, per-rank summaries, like-for-like grouping, scaling efficiency, the text / JSON
// / table reports (schema_version 6, docs/report-json.md), escaping, and synthetic runs.
#include "lockstep/core/analysis.h"
#include "lockstep/core/report.h"
#include "lockstep/core/synthetic.h"
#include "run_builder.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace lockstep::core;
namespace core = lockstep::core; // gtest's Test::Run hides core::Run inside TEST bodies
using lockstep::test::RunBuilder;

namespace {
constexpr TimeNs kU = 1000; // 1 µs: the hand-built run below is written in µs

// Two ranks, warm-up 1, steps 0 (warm-up, 5 ms long) and 1..6 (1 ms each). At each step's
// base time, in µs: forward [0,400), backward [400,800), optimizer [900,950); gradients of
// bucket 0 ready at 550 and 580; bucket 0's all-reduce (3 MB): rank 0 [600,900), rank 1
// [700,900). No memory operations (memory and memory-only 0). Per steady (rank, step):
//   C = [0,800) + [900,950) = 850 µs.
//   rank 0: M = 300, C ∩ M = [600,800) = 200, exposed 100, compute-only 650,
//           idle 1000 - (850+300-200) = 50
//   rank 1: M = 200, C ∩ M = [700,800) = 100, exposed 100, compute-only 750, idle 50
// Means over the 12 steady (rank, step): step 1 ms, compute 0.85, comm 0.25, overlapped 0.15,
// exposed 0.1, compute-only 0.7, idle 0.05; overlap ratio = (200+100+200+100) / (300+200+300+200)
// = 0.6. Throughput: 16 samples on rank 0 + 0 recorded on rank 1 (-> batch per rank, 16) = 32
// per step, over 1 ms = 32000 samples/s.
// Bucket 0: ready->launch 20 and 120 µs -> 0.07 ms; duration 300 and 200 -> 0.25 ms; algbw
// 3e6/3e5 = 10 and 3e6/2e5 = 15 GB/s -> 12.5 (busbw equal, N = 2); skew 100 µs = 0.1 ms.
// Rank 1 launches last in every step and makes rank 0 wait 100 µs = 10% of the step (wait =
// mean over the one other rank = 100 µs). Lateness: rank 1 +100 µs, rank 0 -100 µs (MAD 0,
// floor 0): it clears the noise; late in 6 of 6 steady steps: chance 2 x (1/2)^6 = 1/32.
Run handRun(int32_t warmup = 1)
{
    RunBuilder b(2, warmup);
    Run& r = b.run();
    r.config.name = "hand-run";
    r.config.model = "mlp";
    r.config.source = "lockstep";
    r.config.backend = "gloo";
    r.config.device = "cpu";
    r.config.bucketCapBytes = 1 << 20;
    r.config.batchPerRank = 16;
    r.config.status = RunStatus::Completed;
    r.diagnostics.push_back({"replica drift", Severity::Warning, 3, "x"});
    r.diagnostics.push_back({"late end", Severity::Info, 4, "y"});
    b.bucket(0, 3'000'000, {"fc.weight", "fc.bias"});
    for (int32_t rank = 0; rank < 2; ++rank) {
        const auto c = b.lane(rank, LaneKind::Compute);
        const auto m = b.lane(rank, LaneKind::Comm);
        for (int32_t s = 0; s < 7; ++s) {
            const TimeNs t = s == 0 ? 0 : (4000 + 1000 * s) * kU; // step 0 = [0, 5 ms), then 1 ms each
            b.step(rank, s, t, t + (s == 0 ? 5000 : 1000) * kU, rank == 0 ? 16 : 0);
            b.span(c, SpanKind::Forward, t, t + 400 * kU, s);
            b.span(c, SpanKind::Backward, t + 400 * kU, t + 800 * kU, s);
            b.span(c, SpanKind::Optimizer, t + 900 * kU, t + 950 * kU, s);
            b.ready(c, t + 550 * kU, s, 0).ready(c, t + 580 * kU, s, 0);
            const TimeNs launch = t + (rank == 0 ? 600 : 700) * kU;
            b.span(m, SpanKind::Comm, launch, t + 900 * kU, s, 0, 3'000'000);
        }
    }
    return b.build();
}

RunSummary point(const char* name, int32_t n, double throughput, double stepMs)
{
    RunSummary s;
    s.config.name = name;
    s.worldSize = n;
    s.throughput = throughput;
    s.stepTimeMs = stepMs;
    return s;
}

rapidjson::Document parse(const std::string& json)
{
    rapidjson::Document doc;
    doc.Parse(json.c_str(), json.size());
    EXPECT_FALSE(doc.HasParseError()) << json.substr(0, 200);
    return doc;
}
} // namespace

TEST(Summary, HandRun)
{
    const RunAnalysis a = analyze(handRun());
    const RunSummary& s = a.summary;
    EXPECT_EQ(s.config.name, "hand-run");
    EXPECT_EQ(s.worldSize, 2);
    EXPECT_TRUE(s.multiRank);
    EXPECT_EQ(s.window, "host");
    EXPECT_EQ(s.steps, 7);
    EXPECT_EQ(s.steadySteps, 6);
    EXPECT_FALSE(s.steady.fallback);
    EXPECT_DOUBLE_EQ(s.stepTimeMs, 1.0);
    EXPECT_DOUBLE_EQ(s.computeMs, 0.85);
    EXPECT_DOUBLE_EQ(s.commMs, 0.25);
    EXPECT_DOUBLE_EQ(s.memoryMs, 0.0);
    EXPECT_DOUBLE_EQ(s.overlappedMs, 0.15);
    EXPECT_DOUBLE_EQ(s.exposedCommMs, 0.1);
    EXPECT_DOUBLE_EQ(s.computeOnlyMs, 0.7);
    EXPECT_DOUBLE_EQ(s.memoryOnlyMs, 0.0);
    EXPECT_DOUBLE_EQ(s.idleMs, 0.05);
    EXPECT_NEAR(s.computeOnlyMs + s.overlappedMs + s.exposedCommMs + s.memoryOnlyMs + s.idleMs, s.stepTimeMs, 1e-12);
    EXPECT_DOUBLE_EQ(s.overlapRatio, 0.6);
    EXPECT_DOUBLE_EQ(s.throughput, 32000.0);
    EXPECT_EQ(s.stragglers, std::vector<int32_t>{1});
    ASSERT_EQ(s.stragglerWaitMs.size(), 1u);
    EXPECT_DOUBLE_EQ(s.stragglerWaitMs[0], 0.1);
    EXPECT_DOUBLE_EQ(s.straggler.chance, 1.0 / 32.0);
    EXPECT_DOUBLE_EQ(s.straggler.latenessAboveOthersNs, 200.0 * kU);
    EXPECT_EQ(s.spans, 56);
    EXPECT_EQ(s.diagnostics, 7);
    ASSERT_EQ(s.buckets.size(), 1u);
    const BucketSummary& b = s.buckets[0];
    EXPECT_EQ(b.bytes, 3'000'000);
    EXPECT_EQ(b.params, 2);
    EXPECT_EQ(b.paramNames, (std::vector<std::string>{"fc.weight", "fc.bias"}));
    EXPECT_DOUBLE_EQ(b.meanReadyToLaunchMs, 0.07);
    EXPECT_DOUBLE_EQ(b.meanDurationMs, 0.25);
    // bytes / mean duration: 3e6 B / 0.25 ms = 12 GB/s, the bandwidth of the duration shown
    // beside it (the mean of the per-collective ratios would be 12.5); busbw x 2(N-1)/N = x1.
    EXPECT_DOUBLE_EQ(b.meanAlgbwGBps, 12.0);
    EXPECT_DOUBLE_EQ(b.meanBusbwGBps, 12.0);
    EXPECT_DOUBLE_EQ(b.meanSkewMs, 0.1);
    EXPECT_DOUBLE_EQ(b.meanWaitCausedMs, 0.1);
    EXPECT_EQ(b.lateRank, 1);
    // Per rank: rank 0 overlapped 0.2, exposed 0.1, ratio 2/3; rank 1 overlapped 0.1, ratio 0.5;
    // rank 1 was the step straggler in both steady steps and caused 0.1 ms each.
    ASSERT_EQ(a.ranks.size(), 2u);
    EXPECT_DOUBLE_EQ(a.ranks[0].overlappedMs, 0.2);
    EXPECT_DOUBLE_EQ(a.ranks[0].overlapRatio, 2.0 / 3.0);
    EXPECT_DOUBLE_EQ(a.ranks[1].overlappedMs, 0.1);
    EXPECT_DOUBLE_EQ(a.ranks[1].computeOnlyMs, 0.75);
    EXPECT_EQ(a.ranks[1].stepsAsStraggler, 6);
    EXPECT_DOUBLE_EQ(a.ranks[1].meanWaitCausedMs, 0.1);
    EXPECT_DOUBLE_EQ(a.ranks[0].meanWaitCausedMs, 0.0);
}

TEST(Summary, NoStepPastTheWarmupSaysSo)
{
    // Warm-up 10 > 7 steps: every step counts, and the summary says so.
    const RunSummary s = summarize(handRun(10));
    EXPECT_TRUE(s.steady.fallback);
    EXPECT_EQ(s.steadySteps, 7);
    EXPECT_DOUBLE_EQ(s.stepTimeMs, 11.0 / 7.0);
    EXPECT_TRUE(std::isfinite(s.overlapRatio));
    const std::string text = summaryText(s);
    EXPECT_NE(text.find("no step past the warm-up"), std::string::npos) << text;
    EXPECT_NE(text.find("warm-up included"), std::string::npos) << text;
}

TEST(Summary, EmptyRunIsHarmless)
{
    const RunSummary s = summarize(core::Run{});
    EXPECT_EQ(s.steps, 0);
    EXPECT_DOUBLE_EQ(s.stepTimeMs, 0.0);
    EXPECT_TRUE(std::isnan(s.overlapRatio));
    EXPECT_TRUE(s.stragglers.empty());
    // The JSON stays valid with NaN inside (written as null).
    const rapidjson::Document doc = parse(summaryJson(s));
    ASSERT_TRUE(doc.IsObject());
    EXPECT_TRUE(doc["overlap_ratio"].IsNull());
}

TEST(Comparison, SignatureAndGroups)
{
    // Four runs of one mlp at N = 1, 2, 4 and 2 with a smaller per-rank batch; one with a
    // straggler injected; one with another bucket cap. Weak scaling: {N1, N2, N4, N2 cap}
    // differ only in world size / bucket cap... the cap differs for one, so the groups are
    // {0, 1, 2} and {4}; the small batch {3} and the straggler {5} are their own.
    std::vector<RunSummary> runs(6);
    const int32_t worlds[6] = {1, 2, 4, 2, 2, 2};
    for (size_t i = 0; i < runs.size(); ++i) {
        RunConfig c;
        c.model = "mlp";
        c.modelArgs = i == 1 ? "width=512 layers=8" : "layers=8 width=512"; // token order is not a difference
        c.worldSize = worlds[i];
        c.batchPerRank = i == 3 ? 16 : 32;
        c.bucketCapBytes = i == 4 ? (4 << 20) : (25 << 20);
        c.extra["threads"] = "1";
        if (i == 5)
            c.extra["straggler"] = "1:30";
        runs[i].signature = configSignature(c);
        runs[i].worldSize = worlds[i];
        runs[i].multiRank = worlds[i] > 1;
    }
    EXPECT_EQ(comparableGroups(runs, Varied::WorldSizeWeak),
              (std::vector<std::vector<size_t>>{{0, 1, 2}, {3}, {4}, {5}}));
    // Bucket curves vary the cap: runs 1 and 4 (N = 2, batch 32) are one curve; with
    // needsCommunication the 1-rank run 0 adds no point.
    EXPECT_EQ(comparableGroups(runs, Varied::BucketCaps, true),
              (std::vector<std::vector<size_t>>{{1, 4}, {2}, {3}, {5}}));
    EXPECT_EQ(differingFields(runs[1].signature, runs[5].signature), std::vector<std::string>{"straggler"});
    // Strong scaling keeps the global batch: run 3 (N 2 x 16 = 32) is comparable with run 0
    // (N 1 x 32 = 32) but not with run 1 (N 2 x 32 = 64).
    const auto strong = comparableGroups(runs, Varied::WorldSizeStrong);
    EXPECT_NE(std::find(strong.begin(), strong.end(), std::vector<size_t>{0, 3}), strong.end());
}

TEST(Comparison, WeakScaling)
{
    // N0 = 1: thr 100, 180, 320 at N = 1, 2, 4 -> E = 1, 180/200 = 0.9, 320/400 = 0.8.
    auto p = scalingEfficiency({point("4", 4, 320, 0), point("1", 1, 100, 0), point("2", 2, 180, 0)},
                               ScalingMode::Weak);
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(p[0].worldSize, 1);
    EXPECT_DOUBLE_EQ(p[0].efficiency, 1.0);
    EXPECT_DOUBLE_EQ(p[1].efficiency, 0.9);
    EXPECT_DOUBLE_EQ(p[2].efficiency, 0.8);
    EXPECT_EQ(p[2].run, 0u);
    // N0 = 2 (no 1-rank run): two baseline runs at N = 2 (190 and 210: mean 200, i.e. 100
    // per rank); N = 4 at 360 -> 360 / (4 · 200 / 2) = 0.9; N = 8 at 640 -> 0.8.
    p = scalingEfficiency({point("8", 8, 640, 0), point("2a", 2, 190, 0), point("4", 4, 360, 0),
                           point("2b", 2, 210, 0)},
                          ScalingMode::Weak);
    ASSERT_EQ(p.size(), 4u);
    EXPECT_EQ(p[0].name, "2a"); // stable among equal world sizes
    EXPECT_DOUBLE_EQ(p[0].efficiency, 0.95);
    EXPECT_DOUBLE_EQ(p[1].efficiency, 1.05);
    EXPECT_DOUBLE_EQ(p[2].efficiency, 0.9);
    EXPECT_DOUBLE_EQ(p[3].efficiency, 0.8);
    // Two configurations are scaled each on its own: a 4-rank run of another model is its own
    // baseline (efficiency 1), not 175% of the mlp's.
    std::vector<RunSummary> mixed = {point("mlp1", 1, 100, 0), point("mlp2", 2, 180, 0), point("tr4", 4, 700, 0)};
    RunConfig other;
    other.model = "transformer";
    mixed[2].signature = configSignature(other);
    p = scalingEfficiency(mixed, ScalingMode::Weak);
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(p[2].name, "tr4");
    EXPECT_EQ(p[2].group, 1);
    EXPECT_DOUBLE_EQ(p[2].efficiency, 1.0);
}

TEST(Comparison, StrongScaling)
{
    // N0 = 1, T(1) = 100 ms: T(2) = 55 -> 100/(55·2) = 0.90909; T(4) = 31.25 -> 100/125 = 0.8.
    auto p = scalingEfficiency({point("1", 1, 0, 100), point("2", 2, 0, 55), point("4", 4, 0, 31.25)},
                               ScalingMode::Strong);
    EXPECT_DOUBLE_EQ(p[0].efficiency, 1.0);
    EXPECT_DOUBLE_EQ(p[1].efficiency, 100.0 / 110.0);
    EXPECT_DOUBLE_EQ(p[2].efficiency, 0.8);
    // N0 = 2, T(2) = 50: T(4) = 31.25 -> 100/125 = 0.8; T(8) = 20 -> 100/160 = 0.625.
    p = scalingEfficiency({point("8", 8, 0, 20), point("4", 4, 0, 31.25), point("2", 2, 0, 50)}, ScalingMode::Strong);
    EXPECT_EQ(p[0].worldSize, 2);
    EXPECT_DOUBLE_EQ(p[0].efficiency, 1.0);
    EXPECT_DOUBLE_EQ(p[1].efficiency, 0.8);
    EXPECT_DOUBLE_EQ(p[2].efficiency, 0.625);
    // A zero step time cannot give an efficiency.
    p = scalingEfficiency({point("1", 1, 0, 100), point("2", 2, 0, 0)}, ScalingMode::Strong);
    EXPECT_TRUE(std::isnan(p[1].efficiency));
    EXPECT_TRUE(scalingEfficiency({}, ScalingMode::Weak).empty());
}

TEST(Report, OneRankJsonSaysNotApplicableNeverZero)
{
    // One rank, two steps of 20 ns: forward [0,8), a local all-reduce [8,18) of 500 bytes, and no
    // batch size (as an import leaves it). Nothing is communication (M is empty): compute only 8,
    // idle 12 per step; bandwidth, skew, lateness and throughput are not defined: null.
    RunBuilder b(1);
    const auto c = b.lane(0, LaneKind::Compute);
    const auto m = b.lane(0, LaneKind::Comm);
    for (int32_t st = 0; st < 2; ++st) {
        const TimeNs t = 20 * st;
        b.span(c, SpanKind::Forward, t, t + 8, st).span(m, SpanKind::Comm, t + 8, t + 18, st, 0, 500).step(0, st, t, t + 20);
    }
    core::Run run = b.build();
    run.config.batchPerRank = 0;
    const RunAnalysis a = analyze(run);
    const rapidjson::Document o = parse(reportJson(run, a));
    EXPECT_DOUBLE_EQ(o["comm_ms"].GetDouble(), 0.0);
    EXPECT_DOUBLE_EQ(o["compute_only_ms"].GetDouble(), 8e-6);
    EXPECT_DOUBLE_EQ(o["idle_ms"].GetDouble(), 12e-6);
    EXPECT_TRUE(o["exposed_comm_ms"].IsNull());
    EXPECT_TRUE(o["throughput_samples_per_s"].IsNull());
    EXPECT_STREQ(o["straggler"]["not_applicable_reason"].GetString(), "1 rank");
    ASSERT_EQ(o["buckets"].Size(), 1u);
    EXPECT_DOUBLE_EQ(o["buckets"][0]["duration_ms"].GetDouble(), 10e-6);
    EXPECT_TRUE(o["buckets"][0]["algbw_gbps"].IsNull());
    EXPECT_TRUE(o["buckets"][0]["busbw_gbps"].IsNull());
    EXPECT_TRUE(o["buckets"][0]["skew_ms"].IsNull());
    EXPECT_TRUE(o["ranks"][0]["steps_as_straggler"].IsNull());
    for (const auto& row : o["step_breakdown"].GetArray()) {
        EXPECT_TRUE(row["late_rank"].IsNull());
        EXPECT_DOUBLE_EQ(row["compute_only_ms"].GetDouble() + row["memory_only_ms"].GetDouble()
                             + row["idle_ms"].GetDouble(),
                         row["wall_ms"].GetDouble());
    }
    for (const auto& row : o["bucket_steps"].GetArray())
        EXPECT_TRUE(row["skew_ms"].IsNull());
    const std::string text = reportText(run, a);
    for (const char* expected : {"batch per rank unknown", "— (samples per step unknown)", "— (1 rank: not applicable)"})
        EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
}

TEST(Report, CauseIsStatedOnlyForADelayThatMatters)
{
    StragglerEvidence e;
    e.candidate = 1;
    e.cause = StragglerCause::CpuTime;
    e.delayFraction = 0.012; // 0.9 ms of a 75 ms step: no finding to explain
    EXPECT_FALSE(e.causeWorthStating());
    e.straggler = true;
    EXPECT_TRUE(e.causeWorthStating());
    e.straggler = false;
    e.delayFraction = 0.05;
    EXPECT_TRUE(e.causeWorthStating());
    e.cause = StragglerCause::Unknown;
    EXPECT_FALSE(e.causeWorthStating());
}

TEST(Report, JsonGolden)
{
    const core::Run run = handRun();
    const RunAnalysis a = analyze(run);
    const rapidjson::Document o = parse(reportJson(run, a));
    ASSERT_TRUE(o.IsObject());
    const std::set<std::string> expected = {
        "schema", "schema_version", "name", "model", "source", "backend", "device", "status", "failure_cause",
        "world_size", "bucket_cap_bytes", "batch_per_rank", "signature", "config", "steps", "steady_steps", "steady",
        "multi_rank", "window", "step_time_ms", "compute_ms", "comm_ms", "memory_ms", "compute_only_ms",
        "overlapped_ms", "exposed_comm_ms", "bucket_exposed_ms", "memory_only_ms", "idle_ms", "overlap_ratio",
        "throughput_samples_per_s", "stragglers", "straggler_wait_ms", "straggler", "buckets", "spans",
        "diagnostics_total", "device_spans_without_step", "step_time_sd_ms", "overlap_ratio_sd",
        "throughput_sd_samples_per_s", "ranks", "step_breakdown", "step_means", "step_stragglers",
        "bucket_steps", "diagnostics"};
    std::set<std::string> keys;
    for (auto it = o.MemberBegin(); it != o.MemberEnd(); ++it)
        keys.insert(it->name.GetString());
    EXPECT_EQ(keys, expected);
    EXPECT_STREQ(o["schema"].GetString(), "lockstep-report");
    EXPECT_EQ(o["schema_version"].GetInt(), kReportSchemaVersion);
    EXPECT_STREQ(o["name"].GetString(), "hand-run");
    EXPECT_STREQ(o["status"].GetString(), "completed");
    EXPECT_EQ(o["world_size"].GetInt(), 2);
    EXPECT_EQ(o["bucket_cap_bytes"].GetInt64(), 1 << 20);
    EXPECT_EQ(o["steps"].GetInt(), 7);
    EXPECT_EQ(o["steady_steps"].GetInt(), 6);
    EXPECT_STREQ(o["steady"]["rule"].GetString(), "after_warmup");
    EXPECT_EQ(o["steady"]["steps"].Size(), 6u);
    EXPECT_DOUBLE_EQ(o["step_time_ms"].GetDouble(), 1.0);
    EXPECT_DOUBLE_EQ(o["compute_only_ms"].GetDouble(), 0.7);
    EXPECT_DOUBLE_EQ(o["overlap_ratio"].GetDouble(), 0.6);
    EXPECT_DOUBLE_EQ(o["throughput_samples_per_s"].GetDouble(), 32000.0);
    EXPECT_EQ(o["stragglers"].Size(), 1u);
    EXPECT_EQ(o["stragglers"][0].GetInt(), 1);
    EXPECT_TRUE(o["straggler"]["straggler"].GetBool());
    EXPECT_DOUBLE_EQ(o["straggler"]["mean_wait_ms"].GetDouble(), 0.1);
    EXPECT_DOUBLE_EQ(o["straggler"]["confidence"].GetDouble(), 31.0 / 32.0);
    EXPECT_EQ(o["diagnostics_total"].GetInt(), 7);
    const auto& b = o["buckets"][0];
    EXPECT_EQ(b["index"].GetInt(), 0);
    EXPECT_EQ(b["params"].GetInt(), 2);
    EXPECT_STREQ(b["param_names"][0].GetString(), "fc.weight");
    EXPECT_DOUBLE_EQ(b["ready_to_launch_ms"].GetDouble(), 0.07);
    EXPECT_EQ(b["late_rank"].GetInt(), 1);
    // Per rank, per (rank, step), per step straggler, per (step, bucket).
    ASSERT_EQ(o["ranks"].Size(), 2u);
    EXPECT_DOUBLE_EQ(o["ranks"][1]["mean_wait_caused_ms"].GetDouble(), 0.1);
    ASSERT_EQ(o["step_breakdown"].Size(), 14u);
    const auto& r1s2 = o["step_breakdown"][9]; // rank 1, step 2
    EXPECT_EQ(r1s2["rank"].GetInt(), 1);
    EXPECT_EQ(r1s2["step"].GetInt(), 2);
    EXPECT_STREQ(r1s2["window"].GetString(), "host");
    EXPECT_DOUBLE_EQ(r1s2["overlapped_ms"].GetDouble(), 0.1);
    EXPECT_DOUBLE_EQ(r1s2["wait_caused_ms"].GetDouble(), 0.1);
    EXPECT_TRUE(r1s2["late_rank"].GetBool());
    EXPECT_EQ(r1s2["start_ns"].GetInt64(), 6000 * kU);
    ASSERT_EQ(o["step_stragglers"].Size(), 7u);
    EXPECT_EQ(o["step_stragglers"][2]["late_rank"].GetInt(), 1);
    EXPECT_DOUBLE_EQ(o["step_stragglers"][2]["rank_time_lost_ms"].GetDouble(), 0.1);
    ASSERT_EQ(o["bucket_steps"].Size(), 7u);
    const auto& bs = o["bucket_steps"][1];
    EXPECT_DOUBLE_EQ(bs["skew_ms"].GetDouble(), 0.1);
    ASSERT_EQ(bs["ranks"].Size(), 2u);
    EXPECT_EQ(bs["ranks"][1]["launch_ns"].GetInt64(), 5700 * kU);
    EXPECT_EQ(bs["ranks"][1]["ready_ns"].GetInt64(), 5580 * kU);
    EXPECT_EQ(o["diagnostics"].Size(), 2u);
    // The run-level JSON is the top of the full report.
    const rapidjson::Document top = parse(summaryJson(a.summary));
    EXPECT_FALSE(top.HasMember("ranks"));
    EXPECT_EQ(top["schema_version"].GetInt(), kReportSchemaVersion);
}

TEST(Report, OneRankIsNullAndDash)
{
    // One rank: overlap, exposed and the straggler are not applicable: null in JSON, "—" in text.
    RunBuilder b(1);
    const auto c = b.lane(0, LaneKind::Compute);
    const auto m = b.lane(0, LaneKind::Comm);
    b.span(c, SpanKind::Forward, 0, 60).span(m, SpanKind::Comm, 50, 70, 0, 0, 10).step(0, 0, 0, 100);
    const core::Run run = b.build();
    const RunAnalysis a = analyze(run);
    const rapidjson::Document o = parse(reportJson(run, a));
    EXPECT_TRUE(o["overlap_ratio"].IsNull());
    EXPECT_TRUE(o["exposed_comm_ms"].IsNull());
    EXPECT_TRUE(o["overlapped_ms"].IsNull());
    EXPECT_FALSE(o["straggler"]["applicable"].GetBool());
    EXPECT_TRUE(o["step_breakdown"][0]["overlap_ratio"].IsNull());
    EXPECT_TRUE(o["step_breakdown"][0]["exposed_comm_ms"].IsNull());
    EXPECT_TRUE(o["ranks"][0]["mean_wait_caused_ms"].IsNull());
    const std::string text = reportText(run, a);
    EXPECT_NE(text.find("1 rank: nothing to hide"), std::string::npos) << text;
    EXPECT_NE(text.find("1 rank: not applicable"), std::string::npos) << text;
}

TEST(Report, FailedRunAndEscaping)
{
    RunSummary s;
    s.config.name = "quote\" and \\ backslash \x1b[31mred\x1b[0m";
    s.config.status = RunStatus::Failed;
    s.config.failureCause = "rank 1 died: SIGKILL\nafter step 3";
    s.overlapRatio = std::nan("");
    const rapidjson::Document o = parse(summaryJson(s));
    EXPECT_EQ(std::string(o["name"].GetString()), s.config.name);
    EXPECT_STREQ(o["status"].GetString(), "failed");
    EXPECT_EQ(std::string(o["failure_cause"].GetString()), s.config.failureCause);
    EXPECT_TRUE(o["overlap_ratio"].IsNull());
    // In text, control characters never reach the terminal.
    const std::string text = summaryText(s);
    EXPECT_EQ(text.find('\x1b'), std::string::npos);
    EXPECT_NE(text.find("\\x1b[31mred"), std::string::npos) << text;
    EXPECT_NE(text.find("SIGKILL\\nafter step 3"), std::string::npos) << text;
    // C1 controls (U+009B is a one-byte CSI on some terminals) and invalid UTF-8 too; printable
    // UTF-8 stays as it is.
    EXPECT_EQ(escapeControl("a\xC2\x9B" "b"), "a\\u009bb");
    EXPECT_EQ(escapeControl("\xff"), "\\xff");
    EXPECT_EQ(escapeControl("r\xC3\xA9sum\xC3\xA9 \xE2\x80\x94 ok"), "r\xC3\xA9sum\xC3\xA9 \xE2\x80\x94 ok");
    EXPECT_EQ(escapeControl("a\x7f"), "a\\x7f");
}

TEST(Report, TextAndTable)
{
    const core::Run run = handRun();
    const RunAnalysis a = analyze(run);
    const std::string text = reportText(run, a);
    for (const char* expected : {"hand-run", "world size 2", "1.00 MiB", "60.0%", "rank 1 is the straggler",
                                 "late in 6 of 6 steady steps", "0.100 ms per step = 10.0%", "0.700 ms",
                                 "12.000", "32000.0 samples/s", "steps 1-6", "replica drift x3"})
        EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;

    RunSummary other = a.summary;
    other.config.name = "other-run";
    other.overlapRatio = std::nan("");
    other.stragglers.clear();
    const std::string table = summaryTable({a.summary, other});
    std::vector<std::string> lines;
    for (size_t pos = 0, next; pos < table.size(); pos = next + 1) {
        next = table.find('\n', pos);
        if (next == std::string::npos)
            next = table.size();
        if (next > pos)
            lines.push_back(table.substr(pos, next - pos));
    }
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_NE(lines[0].find("overlap"), std::string::npos);
    EXPECT_EQ(lines[1].rfind("hand-run", 0), 0u);
    EXPECT_NE(lines[1].find("60.0%"), std::string::npos);
    EXPECT_EQ(lines[2].rfind("other-run", 0), 0u);
    EXPECT_NE(lines[2].find("\xE2\x80\x94"), std::string::npos);
}

TEST(Synthetic, NormalizedAndPlausible)
{
    SyntheticParams p;
    p.worldSize = 3;
    p.steps = 8;
    p.buckets = 3;
    p.backwardSegmentsPerBucket = 2;
    p.stragglerRank = 2;
    p.stragglerDelayNs = 2'000'000; // 20% of the 10 ms step
    const core::Run run = makeSyntheticRun(p);
    EXPECT_EQ(run.lanes.size(), 6u);
    EXPECT_EQ(run.steps.size(), 24u);
    EXPECT_EQ(run.buckets.size(), 3u);
    EXPECT_EQ(run.buckets[1].params.size(), 2u);
    EXPECT_EQ(run.instants.size(), size_t(3 * 8 * 3 * 2)); // ranks × steps × params
    EXPECT_TRUE(std::is_sorted(run.spans.begin(), run.spans.end(), [](const Span& a, const Span& b) {
        return std::tie(a.lane.v, a.start, a.end) < std::tie(b.lane.v, b.start, b.end);
    }));
    for (size_t i = 0; i < run.lanes.size(); ++i)
        EXPECT_EQ(run.lanes[i].id.v, uint32_t(i));
    int comm = 0;
    for (const Span& s : run.spans) {
        EXPECT_GT(s.end, s.start);
        if (s.kind == SpanKind::Comm) {
            ++comm;
            EXPECT_GE(s.bucket, 0);
            EXPECT_GT(s.bytes, 0);
            EXPECT_EQ(run.lanes[s.lane.v].kind, LaneKind::Comm);
        }
    }
    EXPECT_EQ(comm, 3 * 8 * 3);
    // All-reduces overlap backward, the straggler is found, every step has a breakdown.
    const RunSummary s = summarize(run);
    EXPECT_GT(s.overlapRatio, 0.0);
    EXPECT_LE(s.overlapRatio, 1.0);
    EXPECT_EQ(s.stragglers, std::vector<int32_t>{2});
    EXPECT_EQ(stepBreakdown(run).size(), 24u);
    // Deterministic: the same parameters give the same run.
    const core::Run again = makeSyntheticRun(p);
    EXPECT_EQ(again.spans.size(), run.spans.size());
    EXPECT_EQ(again.spans.back().end, run.spans.back().end);
    // Without a straggler nobody is flagged (jitter alone does not clear the evidence).
    p.stragglerRank = -1;
    EXPECT_TRUE(summarize(makeSyntheticRun(p)).stragglers.empty());
}

TEST(Synthetic, RunOfRequestedSize)
{
    const core::Run run = makeSyntheticRunWithSpans(100'000, 2);
    EXPECT_LT(std::abs(static_cast<double>(run.spans.size()) - 100'000.0), 2'000.0);
    EXPECT_EQ(run.config.worldSize, 2);
}
