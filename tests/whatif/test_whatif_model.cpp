// The what-if model on hand-built runs (hand_run.h): the link fit, the bucket assignment, the
// replay at other caps, world sizes, link speeds and compression, the predicted run as a run
// file, advice, and bad input. Every expected number is derived by hand in the comment beside it.
#include "hand_run.h"

#include "lockstep/core/run_db.h"
#include "lockstep/core/whatif.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unistd.h>

using namespace lockstep::core;
namespace core = lockstep::core;
using whatiftest::HandRun;
using whatiftest::us;

namespace {

constexpr double kUsInMs = 1e-3;

WhatIfModel modelOf(const core::Run& run)
{
    auto m = WhatIfModel::build(run);
    EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message);
    return *m;
}

WhatIfConfig configWith(const WhatIfModel& m, int64_t cap, int64_t first)
{
    WhatIfConfig c = m.recorded();
    c.bucketCapBytes = cap;
    c.firstBucketCapBytes = first;
    return c;
}

Prediction predictOk(const WhatIfModel& m, const WhatIfConfig& c)
{
    auto p = m.predict(c);
    EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
    return p ? *p : Prediction{};
}

bool hasNote(const std::vector<std::string>& notes, const std::string& part)
{
    for (const auto& n : notes)
        if (n.find(part) != std::string::npos)
            return true;
    return false;
}

std::vector<std::vector<std::string>> layoutOf(const core::Run& run)
{
    std::vector<std::vector<std::string>> out;
    for (const Bucket& b : run.buckets)
        out.push_back(b.params);
    return out;
}

std::string tempPath(const std::string& name)
{
    return (std::filesystem::temp_directory_path() / ("lockstep-whatif-" + std::to_string(getpid()) + "-" + name)).string();
}

} // namespace

TEST(WhatIfFit, BusyAndIdleLinkRatesFromTheRunsOwnAllReduces)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    const LinkFit& l = m.link();
    ASSERT_TRUE(l.fitted);
    // Samples: b0 on both ranks 270 - max(200, 210) = 60 µs, all before the last gradient (420):
    // busy; b1 460 - max(420, 270) = 40 µs, all after it: idle. One idle size (2048 B): no
    // latency, idle rate 40 µs / 2048 B. Busy rate: 60 µs for the 1024 B of b0.
    EXPECT_EQ(l.samples, 4);
    EXPECT_EQ(l.busySamples, 2);
    EXPECT_FALSE(l.latencySeparable);
    EXPECT_EQ(l.latencyNs, 0);
    EXPECT_NEAR(l.nsPerByteIdle, 40'000.0 / 2048, 1e-9);
    EXPECT_NEAR(l.nsPerByteBusy, 60'000.0 / 1024, 1e-9);
    // Every launch is at its ready instant: no launch cost.
    EXPECT_NEAR(l.launchNs, 0, 1e-9);
    EXPECT_NEAR(l.launchNsPerByte, 0, 1e-12);
    EXPECT_EQ(m.gradientBytes(), 3072);
    ASSERT_EQ(m.notes().size(), 1u);
    EXPECT_TRUE(hasNote(m.notes(), "latency cannot be told apart"));
}

// The same run with the startup probe (whatif.h, kLinkProbeKey): (1024 B, 12 µs) and
// (4096 B, 18 µs) make a line of 6 µs per 3072 B through 10 µs at 0 B. The run's one idle size
// then gives the rate beyond that latency: (40 µs - 10 µs) / 2048 B; the busy rate b0's 60 µs less
// the latency over its 1024 B.
TEST(WhatIfFit, StartupProbeGivesTheLatencyOneBucketSizeCannot)
{
    core::Run run = HandRun().step(0, 0).build();
    run.config.extra[kLinkProbeKey] = formatLinkProbe({{1024, 12'000}, {4096, 18'000}});
    EXPECT_EQ(run.config.extra[kLinkProbeKey], "1024:12000,4096:18000");
    const WhatIfModel m = modelOf(run);
    const LinkFit& l = m.link();
    ASSERT_TRUE(l.fitted);
    EXPECT_TRUE(l.latencySeparable);
    EXPECT_TRUE(l.latencyFromProbe);
    EXPECT_NEAR(l.latencyNs, 10'000, 1e-6);
    EXPECT_NEAR(l.probeLatencyNs, 10'000, 1e-6);
    EXPECT_NEAR(l.nsPerByteIdle, 30'000.0 / 2048, 1e-9);
    EXPECT_NEAR(l.nsPerByteBusy, 50'000.0 / 1024, 1e-9);
    EXPECT_TRUE(hasNote(m.notes(), "startup probe"));
    EXPECT_FALSE(hasNote(m.notes(), "latency cannot be told apart"));

    // A probe slower than the run's own transfers (48 µs at 0 B against 40 µs for 2 KiB) describes
    // another link or moment: not used, and said.
    run.config.extra[kLinkProbeKey] = "1024:50000,4096:56000";
    const WhatIfModel slow = modelOf(run);
    EXPECT_FALSE(slow.link().latencyFromProbe);
    EXPECT_EQ(slow.link().latencyNs, 0);
    EXPECT_NEAR(slow.link().probeLatencyNs, 48'000, 1e-6);
    EXPECT_TRUE(hasNote(slow.notes(), "exceeds this run's own transfer times"));
    EXPECT_TRUE(hasNote(slow.notes(), "latency cannot be told apart"));

    // A disturbed probe (4 KiB slower than 64 KiB) is not used.
    run.config.extra[kLinkProbeKey] = "1024:30000,4096:18000";
    const WhatIfModel disturbed = modelOf(run);
    EXPECT_FALSE(disturbed.link().latencyFromProbe);
    EXPECT_TRUE(hasNote(disturbed.notes(), "startup probe was disturbed"));

    // An unreadable probe is named, never a failure to model.
    run.config.extra[kLinkProbeKey] = "1024:12000,x";
    const WhatIfModel bad = modelOf(run);
    EXPECT_FALSE(bad.link().latencyFromProbe);
    EXPECT_TRUE(hasNote(bad.notes(), "startup probe is unreadable"));
    EXPECT_FALSE(parseLinkProbe("1024:0").has_value());
    EXPECT_FALSE(parseLinkProbe("1024").has_value());
    ASSERT_TRUE(parseLinkProbe("").has_value());
    EXPECT_TRUE(parseLinkProbe("")->empty());
}

// Three buckets (1, 2 and 3 KiB), every gradient ready at 200 µs on both ranks, so every transfer
// runs after backward: 10 µs of latency then 20 µs per KiB, one after the other:
//   b0 [200, 230), b1 [230, 280), b2 [280, 350); wait [200, 355); optimizer [355, 405).
core::Run idleLinkRun()
{
    core::Run run;
    run.config.name = "idle";
    run.config.worldSize = 2;
    run.config.bucketCapBytes = 1024;
    run.config.firstBucketCapBytes = 1024;
    run.config.warmupSteps = 0;
    run.config.batchPerRank = 8;
    run.config.extra["allreduce"] = "pairwise send/recv exchange (world of 2)";
    run.config.extra[kParamNumelKey] = formatParamNumel({{256}, {512}, {768}});
    const char* names[3] = {"c", "b", "a"};
    for (int32_t b = 0; b < 3; ++b)
        run.buckets.push_back(Bucket{b, 1024 * (b + 1), {names[b]}});
    const TimeNs done[3] = {us(230), us(280), us(350)};
    for (int32_t r = 0; r < 2; ++r) {
        const LaneId compute{static_cast<uint32_t>(2 * r)}, comm{static_cast<uint32_t>(2 * r + 1)};
        RankInfo info;
        info.rank = r;
        run.ranks.push_back(info);
        run.lanes.push_back(Lane{compute, r, LaneKind::Compute, -1, -1, "compute"});
        run.lanes.push_back(Lane{comm, r, LaneKind::Comm, -1, -1, "comm"});
        const auto add = [&](LaneId lane, SpanKind kind, TimeNs a, TimeNs e, int32_t bucket = kNoBucket) {
            run.spans.push_back(Span{a, e, 0, lane, run.strings.intern(spanKindName(kind)), 0, bucket, kind});
        };
        add(compute, SpanKind::Forward, 0, us(100));
        add(compute, SpanKind::Backward, us(100), us(200));
        for (int32_t b = 0; b < 3; ++b) {
            add(comm, SpanKind::Comm, us(200), done[b], b);
            run.instants.push_back(Instant{us(200), compute, run.strings.intern(names[b]), 0, b, InstantKind::GradReady});
        }
        add(compute, SpanKind::Wait, us(200), us(355));
        add(compute, SpanKind::Optimizer, us(355), us(405));
        run.steps.push_back(Step{r, 0, 0, us(405), 1.0, 8});
    }
    run.clocksCorrected = true;
    run.normalize();
    return run;
}

TEST(WhatIfFit, LatencyFromTransfersAfterBackwardOfSeveralSizes)
{
    const WhatIfModel m = modelOf(idleLinkRun());
    const LinkFit& l = m.link();
    ASSERT_TRUE(l.fitted);
    // Medians (1024 B, 30 µs), (2048 B, 50 µs), (3072 B, 70 µs): 10 µs + 20 µs per 1024 B; pairwise
    // is 1 round. Nothing moved during backward: the busy rate is the idle one.
    EXPECT_TRUE(l.latencySeparable);
    EXPECT_NEAR(l.latencyNs, 10'000, 1e-6);
    EXPECT_NEAR(l.nsPerByteIdle, 20'000.0 / 1024, 1e-9);
    EXPECT_NEAR(l.nsPerByteBusy, l.nsPerByteIdle, 1e-12);
    EXPECT_EQ(l.busySamples, 0);
    EXPECT_NEAR(m.replayed().stepTimeMs, 405 * kUsInMs, 1e-9);
    // Cap 25 KiB: b0 = {c}, b1 = {b, a} (5 KiB): b0 [200, 230), b1 230 + 10 + 100 = 340; the wait
    // ends at 345, 10 µs earlier: 395 µs.
    EXPECT_NEAR(predictOk(m, configWith(m, 25 * 1024, 1024)).numbers.stepTimeMs, 395 * kUsInMs, 1e-9);
    // 4 ranks at the recorded caps, gloo's ring: 2(N-1) = 6 rounds of 10 µs and 1.5 x the bytes:
    // b0 200 + 60 + 30 = 290, b1 290 + 60 + 60 = 410, b2 410 + 60 + 90 = 560; the wait ends at
    // 565, 210 µs later: 615 µs.
    WhatIfConfig c = m.recorded();
    c.worldSize = 4;
    EXPECT_NEAR(predictOk(m, c).numbers.stepTimeMs, 615 * kUsInMs, 1e-9);
}

TEST(WhatIfReplay, ComputeScaleStretchesTheTrainingThreadNotTheLink)
{
    // The idle-link run: forward [0, 100), backward [100, 200) readying every gradient at 200,
    // then b0 30 µs, b1 50, b2 70 one after the other, the wait ending 5 µs after the last
    // completion (write-back), the optimizer 50 µs. Nothing moves during backward: no contention.
    const WhatIfModel m = modelOf(idleLinkRun());
    WhatIfConfig c = m.recorded();
    c.computeScale = 0.5;
    // Compute twice as fast: forward [0, 50), backward [50, 100), every gradient ready at 100;
    // the link keeps its costs: b0 [100, 130), b1 [130, 180), b2 [180, 250); the write-back 2.5
    // µs: the wait [100, 252.5); the optimizer 25 µs: the step ends at 277.5 µs.
    Prediction p = predictOk(m, c);
    EXPECT_NEAR(p.numbers.stepTimeMs, 277.5 * kUsInMs, 1e-9);
    EXPECT_EQ(describe(c), "0.001 MiB buckets (first 0.001 MiB), 2 ranks, compute x0.5");
    EXPECT_TRUE(hasNote(p.notes, "compute x0.5"));
    bool sawForward = false, sawWait = false;
    for (const Span& s : p.run.spans) {
        if (s.kind == SpanKind::Forward && s.lane.v == 0) {
            EXPECT_EQ(s.start, 0);
            EXPECT_EQ(s.end, us(50));
            sawForward = true;
        }
        if (s.kind == SpanKind::Wait && s.lane.v == 0) {
            EXPECT_EQ(s.start, us(100));
            EXPECT_EQ(s.end, us(252) + 500);
            sawWait = true;
        }
    }
    EXPECT_TRUE(sawForward && sawWait);
    // Compute half as fast: gradients at 400; b0 [400, 430), b1 [430, 480), b2 [480, 550); the
    // write-back 10 µs, the optimizer 100 µs: 660 µs.
    c.computeScale = 2;
    EXPECT_NEAR(predictOk(m, c).numbers.stepTimeMs, 660 * kUsInMs, 1e-9);
    // x1 is the recorded replay itself.
    c.computeScale = 1;
    EXPECT_NEAR(predictOk(m, c).numbers.stepTimeMs, 405 * kUsInMs, 1e-9);
    EXPECT_TRUE(predictOk(m, c).notes.empty());
}

TEST(WhatIfReplay, RecordedConfigurationReproducesTheRecording)
{
    const core::Run run = HandRun().step(0, 0).build();
    const WhatIfModel m = modelOf(run);
    // The fit is exact on this run, so the replay is the recording: 515 µs on both ranks.
    EXPECT_NEAR(m.measured().stepTimeMs, 515 * kUsInMs, 1e-9);
    EXPECT_NEAR(m.replayed().stepTimeMs, 515 * kUsInMs, 1e-9);
    EXPECT_NEAR(m.selfErrorPct(), 0, 1e-9);
    const Prediction p = predictOk(m, m.recorded());
    EXPECT_EQ(layoutOf(p.run), layoutOf(run));
    ASSERT_EQ(p.run.spans.size(), run.spans.size());
    for (size_t i = 0; i < run.spans.size(); ++i) {
        EXPECT_EQ(p.run.spans[i].start, run.spans[i].start) << i;
        EXPECT_EQ(p.run.spans[i].end, run.spans[i].end) << i;
        EXPECT_EQ(p.run.spans[i].kind, run.spans[i].kind) << i;
    }
}

TEST(WhatIfReplay, SmallerCapSplitsTheLastBucketAndSlowsBackward)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    // Caps 1 KiB (first 1 KiB): b0 = {p0, p1} (1024 B), b1 = {p2} (1024 B reaches the cap),
    // b2 = {p3}. Contention: the link runs 3x slower during backward (60 vs 20 µs per KiB): it
    // works 1/3 of the time beside backward, and that is what backward loses (computeSlowdown
    // min(1/3, 1 - 1/3) = 1/3, whatif_fit.cpp contentionOf). The recorded step had one transfer in
    // backward, b0 [210, 270): in compute time the ready instants are rank 0 150, 200,
    // 300 - 20 = 280, 400 - 20 = 380 (end of backward 380), rank 1 150, 210, 280, 400. The
    // replay, bucket by bucket:
    //   b0: starts max(200, 210) = 210, 1 KiB during backward (60 µs): done 270
    //   b1: p2 at compute 280 = wall 300 on both ranks (after b0's 60 µs cost 20); starts 300,
    //       during backward: done 360
    //   b2: p3 at compute 380 (rank 0) and 400 (rank 1), 20 more behind b1: wall 420 and 440;
    //       starts max(420, 440, 360) = 440, after backward (20 µs): done 460
    // Wait ends at max(end of backward, 460) + 5 = 465 on both ranks: steps of 515 µs, as
    // recorded: each KiB moved beside backward costs backward the 20 µs it costs the link after
    // it (a link this starved takes turns with backward on one CPU), so the overlap gains nothing
    // and costs nothing.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    ASSERT_EQ(p.run.buckets.size(), 3u);
    EXPECT_EQ(p.numbers.buckets, 3);
    EXPECT_EQ(layoutOf(p.run), (std::vector<std::vector<std::string>>{
                                   {"head.bias", "head.weight"}, {"l1.weight"}, {"l0.weight"}}));
    EXPECT_NEAR(m.link().computeSlowdown, 1.0 / 3.0, 1e-12);
    EXPECT_NEAR(p.numbers.stepTimeMs, 515 * kUsInMs, 1e-9);
    for (const Step& s : p.run.steps)
        EXPECT_EQ(s.end - s.start, us(515)) << "rank " << s.rank;
    for (const Span& s : p.run.spans)
        if (s.kind == SpanKind::Wait) {
            EXPECT_EQ(s.start, p.run.lanes[s.lane.v].rank == 0 ? us(420) : us(440));
        }
    // Exposed communication: rank 0's b2 [420, 460) lies after its backward ends at 420 -> 40 µs;
    // rank 1's b2 [440, 460) -> 20 µs; mean 30 µs. Overlapped: rank 0 b0 [200, 270) 70 + b1 60 =
    // 130 of 170; rank 1 b0 [210, 270) 60 + b1 60 = 120 of 140 -> ratio 250 / 310.
    EXPECT_NEAR(p.numbers.exposedCommMs, 30 * kUsInMs, 1e-9);
    EXPECT_NEAR(p.numbers.overlapRatio, 250.0 / 310.0, 1e-9);
    // Throughput: 2 x 16 samples per 515 µs.
    EXPECT_NEAR(p.numbers.throughput, 32 / 515e-6, 1e-6);
    // Ready instants carry the new bucket of their parameter, and the last one stays at the end of
    // backward (420 and 440), not with the wait's end.
    for (const Instant& in : p.run.instants) {
        const std::string& name = p.run.strings.text(in.name);
        const int expected = name == "l1.weight" ? 1 : name == "l0.weight" ? 2 : 0;
        EXPECT_EQ(in.bucket, expected) << name;
        if (name == "l0.weight") {
            EXPECT_EQ(in.ts, p.run.lanes[in.lane.v].rank == 0 ? us(420) : us(440));
        }
    }
}

TEST(WhatIfReplay, ContentionIsBoundedByThePredictionWithBackwardAsRecorded)
{
    // Issue 29: the contention's strength (1/3 here) is read off the link's rates, not off compute,
    // so the prediction above (515 µs) is one end of a bound; the other keeps backward exactly as
    // recorded (phi = 0, the recorded slowdown of b0 [210, 270) stays in it), derived by hand:
    //   b0: starts 210, 1 KiB during backward (the last gradient is rank 1's at 420): done 270
    //   b1: p2 ready at 300 on both ranks; starts 300, during backward: done 360
    //   b2: p3 ready at 400 and 420; starts 420, after backward (20 µs): done 440
    // Waits end at 445, the optimizer's 50 µs follow: 495 µs. The interval (a bucket-cap change,
    // half-width e = the table's row; a one-step recording adds no noise) holds both ends:
    // [495 / (1 + e), 515 / (1 - e)].
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    EXPECT_NEAR(p.numbers.stepTimeMs, 515 * kUsInMs, 1e-9);
    EXPECT_NEAR(p.noContentionStepMs, 495 * kUsInMs, 1e-9);
    // A cap change's interval: its row, never below a repeat's (intervalFor).
    const double e = std::max(heldOutError(ChangeKind::BucketCap).p90AbsPct, heldOutError(ChangeKind::None).p90AbsPct) / 100;
    EXPECT_NEAR(p.interval.halfWidthPct, e * 100, 1e-9);
    EXPECT_NEAR(p.interval.lowMs, 495 * kUsInMs / (1 + e), 1e-9);
    EXPECT_NEAR(p.interval.highMs, 515 * kUsInMs / (1 - e), 1e-9);
    EXPECT_EQ(p.interval.kinds, std::vector<ChangeKind>{ChangeKind::BucketCap});
    bool noted = false;
    for (const std::string& n : p.notes)
        noted = noted || n.find("0.495 ms with backward as recorded") != std::string::npos;
    EXPECT_TRUE(noted);
    // The predicted run file says where a real run is expected.
    EXPECT_NE(p.run.config.extra.count("predicted_interval_ms"), 0u);
    // The recorded configuration has nothing to bound: no second replay, the repeat row alone.
    const Prediction self = predictOk(m, m.recorded());
    EXPECT_TRUE(std::isnan(self.noContentionStepMs));
    EXPECT_NEAR(self.interval.halfWidthPct, heldOutError(ChangeKind::None).p90AbsPct, 1e-9);
}

// Issue 29 (small buckets on CPU gloo): a 25 MiB recording on the loaded 2-core machine moved its
// one small first bucket during backward 6-8 times slower than its last bucket after backward, and
// the contention was read as 1 - idle / busy = 0.83-0.87: backward charged that share of its speed
// for every nanosecond a transfer ran beside it, so 1 MiB caps (every bucket beside backward) came
// out 49-167 % slower than measured, and slower than 25 MiB where they ran faster. A link that slow
// beside backward is waiting for a CPU, not taking one: it works idle / busy of the time, and that
// is all it can take from the training thread (whatif_fit.cpp, contentionOf).
// The hand run with its transfer after backward 0.375 times as long: b1 [420, 435), 15 µs for
// 2 KiB (7.5 µs per KiB); b0 moved 1 KiB in 60 µs during backward: 8 times slower. The link works
// 1/8 of the time beside backward: computeSlowdown min(1/8, 7/8) = 1/8 (7/8 before the fix). The
// recording: the wait ends at 440, the step at 490 µs. In compute time (b0 [210, 270) costs 7.5 µs)
// the ready instants are rank 0 150, 200, 292.5, 392.5 and rank 1 150, 210, 292.5, 412.5. At 1 KiB
// caps:
//   b0: starts 210, during backward: [210, 270)
//   b1: p2 at wall 292.5 + 7.5 = 300; during backward (rank 1's last gradient comes at 427.5):
//       [300, 360)
//   b2: p3 at 392.5 + 15 = 407.5 (rank 0) and 427.5 (rank 1); after backward, 7.5 µs:
//       [427.5, 435)
// The waits end at 440: 490 µs, as recorded (each KiB beside backward cost it the 7.5 µs the link
// spends on it, the time it costs after backward). With 7/8 the same replay put p2 at 300, p3 at
// 452.5 and 472.5, b2 [472.5, 480), the waits' end at 485: 535 µs, 9 % slower than recorded. With
// backward as recorded (the bound): b2 [420, 427.5), 482.5 µs.
TEST(WhatIfReplay, AStarvedLinkTakesFromBackwardOnlyTheTimeItWorks)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0, 1.0, 0.375).build());
    EXPECT_NEAR(m.link().nsPerByteBusy, 60'000.0 / 1024, 1e-9);
    EXPECT_NEAR(m.link().nsPerByteIdle, 15'000.0 / 2048, 1e-9);
    EXPECT_NEAR(m.link().computeSlowdown, 1.0 / 8, 1e-12);
    EXPECT_NEAR(m.measured().stepTimeMs, 490 * kUsInMs, 1e-9);
    EXPECT_NEAR(m.replayed().stepTimeMs, 490 * kUsInMs, 1e-9);
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    ASSERT_EQ(p.run.buckets.size(), 3u);
    EXPECT_NEAR(p.numbers.stepTimeMs, 490 * kUsInMs, 1e-9);
    int waits = 0, lastBuckets = 0;
    for (const Span& s : p.run.spans) {
        if (s.kind == SpanKind::Wait) {
            EXPECT_EQ(s.start, p.run.lanes[s.lane.v].rank == 0 ? us(407.5) : us(427.5));
            ++waits;
        }
        if (s.kind == SpanKind::Comm && s.bucket == 2) {
            EXPECT_EQ(s.end, us(435));
            ++lastBuckets;
        }
    }
    EXPECT_EQ(waits, 2);
    EXPECT_EQ(lastBuckets, 2);
    EXPECT_NEAR(p.noContentionStepMs, 482.5 * kUsInMs, 1e-9);
}

TEST(WhatIfReplay, BucketAssignmentFollowsTheRuntimesRules)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    // First cap 200 B, cap 1500 B: p0 (256 B) reaches the first cap alone; p1 (768) + p2 (1024)
    // = 1792 B reaches 1500 with its last tensor (a bucket may exceed its cap by that tensor);
    // p3 is left over: a last bucket under its cap.
    Prediction p = predictOk(m, configWith(m, 1500, 200));
    EXPECT_EQ(layoutOf(p.run), (std::vector<std::vector<std::string>>{
                                   {"head.bias"}, {"head.weight", "l1.weight"}, {"l0.weight"}}));
    ASSERT_EQ(p.run.buckets.size(), 3u);
    EXPECT_EQ(p.run.buckets[1].bytes, 1792);
    // Cap 500 B: every tensor at least as large as the cap gets a bucket of its own.
    p = predictOk(m, configWith(m, 500, 200));
    EXPECT_EQ(p.run.buckets.size(), 4u);
    // A cap above the whole gradient: the first bucket, then everything else in one.
    p = predictOk(m, configWith(m, 1 << 30, 1024));
    EXPECT_EQ(layoutOf(p.run), (std::vector<std::vector<std::string>>{
                                   {"head.bias", "head.weight"}, {"l1.weight", "l0.weight"}}));
    // The predicted run records its own parameter sizes for the new layout.
    EXPECT_EQ(p.run.config.extra.at(kParamNumelKey), "64,192,256,256");
    // bucketSizes gives the layout without a replay.
    EXPECT_EQ(m.bucketSizes(configWith(m, 1500, 200)), (std::vector<size_t>{1, 2, 1}));
    EXPECT_EQ(m.bucketSizes(m.recorded()), (std::vector<size_t>{2, 2}));
}

TEST(WhatIfReplay, MoreRanksUseTheRingFactors)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = m.recorded();
    c.worldSize = 4;
    // 4 ranks, uncompressed: gloo's ring, 2(N-1) = 6 rounds (of no latency here) and 2(N-1)/N =
    // 1.5 x the bucket sent. Ranks 2 and 3 replay ranks 0 and 1. In compute time (contention,
    // test above) the ready instants are rank 0 150, 200, 280, 380 and rank 1 150, 210, 280, 400.
    //   b0: starts 210, 1536 B during backward at 60 µs per KiB: 90 µs, done 300; backward loses
    //       1/3 of 90 µs: p2 at wall 280 + 30 = 310, p3 at 380 + 30 = 410 (rank 0)
    //   b1: rank 1's p3 at 400 + 30 = 430 (b1's own transfer starts when it is ready: it slows
    //       nobody's backward); starts max(410, 430, 300) = 430, 3072 B after backward at 20 µs
    //       per KiB: done 490
    // Waits end at 490 + 5 = 495 on every rank: steps of 545 µs (30 more than recorded).
    const Prediction p = predictOk(m, c);
    EXPECT_EQ(p.run.ranks.size(), 4u);
    EXPECT_EQ(p.run.config.worldSize, 4);
    EXPECT_NEAR(p.numbers.stepTimeMs, 545 * kUsInMs, 1e-9);
    EXPECT_NEAR(p.numbers.throughput, 4 * 16 / 545e-6, 1e-6);
    EXPECT_TRUE(hasNote(p.notes, "replay recorded ranks"));
    EXPECT_EQ(p.run.config.extra.at("allreduce"), "process group allreduce");
}

TEST(WhatIfReplay, ATransferSlowsTheBackwardThatDecidesItsOwnRate)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    // 4 ranks, first cap 256 B, cap 1536 B: b0 = {p0}, b1 = {p1, p2} (1792 B), b2 = {p3}; 1.5 x
    // the bytes (ring). Compute-time ready instants: rank 0 150, 200, 280, 380; rank 1 150, 210,
    // 280, 400 (tests above). Bucket by bucket:
    //   b0: ready 150 on all ranks; 384 B at the busy rate, 22.5 µs: [150, 172.5)
    //   b1: p2 at 280 + 1/3 x 22.5 = 287.5; 2688 B. Taken as busy throughout it would end at
    //       287.5 + 157.5 = 445, and rank 1's last gradient would come at 400 + 1/3 x (22.5 +
    //       157.5) = 460, after that: busy throughout, [287.5, 445). (Without contention it
    //       would start at 300 and switch to the idle rate at the last gradient, 420.)
    //   b2: p3 at 380 + 1/3 x 172.5 = 437.5 (rank 0, inside b1) and 460 (rank 1); starts 460,
    //       after the last gradient: 1536 B at the idle rate, 30 µs: [460, 490)
    // Waits end at 495: steps of 545 µs.
    WhatIfConfig c = configWith(m, 1536, 256);
    c.worldSize = 4;
    const Prediction p = predictOk(m, c);
    EXPECT_EQ(layoutOf(p.run), (std::vector<std::vector<std::string>>{
                                   {"head.bias"}, {"head.weight", "l1.weight"}, {"l0.weight"}}));
    EXPECT_NEAR(p.numbers.stepTimeMs, 545 * kUsInMs, 1e-9);
    for (const Span& s : p.run.spans)
        if (s.kind == SpanKind::Comm && s.bucket == 2) {
            EXPECT_EQ(s.end, us(490));
        }
}

TEST(WhatIfReplay, OneRankHasNoCommunication)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = m.recorded();
    c.worldSize = 1;
    // Rank 0 alone: no transfer slows its backward (the recorded b0 cost it 20 µs): backward ends
    // at compute time 380; completions at the launches; the wait ends at 380 + 5 = 385, the step
    // at 385 + 50 = 435 µs. No communication to hide: overlap and exposed communication are "not
    // applicable" (docs/design.md), never numbers.
    const Prediction p = predictOk(m, c);
    EXPECT_NEAR(p.numbers.stepTimeMs, 435 * kUsInMs, 1e-9);
    EXPECT_TRUE(std::isnan(p.numbers.overlapRatio));
    EXPECT_TRUE(std::isnan(p.numbers.exposedCommMs));
}

// Both recorded ranks ran on host "h" (hand_run.h). With the startup compute probe (whatif.h,
// kComputeProbeKey) "60000000:80000000:2" - one forward+backward took 60 ms alone and 80 ms with
// both ranks at once - one rank on the host computes at factor(1) = 1 + (60/80 - 1) * (2 - 1) /
// (2 - 1) = 0.75 of its recorded time. Rank 0 alone (OneRankHasNoCommunication): 380 µs of
// compute time up to the end of backward (the recorded b0 transfer cost it 20 µs), now 0.75 * 380
// = 285 µs; no transfers; the write-back 5 * 0.75 = 3.75 µs, the optimizer 50 * 0.75 = 37.5 µs: the
// step ends at 285 + 3.75 + 37.5 = 326.25 µs.
TEST(WhatIfReplay, ComputeProbeScalesFewerRanksOnTheRecordedHost)
{
    core::Run run = HandRun().step(0, 0).build();
    run.config.extra[kComputeProbeKey] = formatComputeProbe({60'000'000, 80'000'000, 2});
    EXPECT_EQ(run.config.extra[kComputeProbeKey], "60000000:80000000:2");
    const WhatIfModel m = modelOf(run);
    WhatIfConfig c = m.recorded();
    c.worldSize = 1;
    Prediction p = predictOk(m, c);
    EXPECT_NEAR(p.hostComputeFactor, 0.75, 1e-12);
    EXPECT_NEAR(p.numbers.stepTimeMs, 326.25 * kUsInMs, 1e-9);
    EXPECT_TRUE(hasNote(p.notes, "the recorded ranks share one host (h): each rank's compute x0.75 with 1 rank on "
                                 "it: the startup probe's forward+backward took 60.0 ms alone and 80.0 ms with 2 "
                                 "ranks at once"));
    EXPECT_FALSE(hasNote(p.notes, "does not predict"));
    // The configuration stays as asked: the factor is the model's, not the user's compute scale.
    EXPECT_EQ(p.config, c);
    EXPECT_EQ(describe(p.config), "0.024 MiB buckets (first 0.001 MiB), 1 rank");
    EXPECT_NE(predictionsJson(m, {p}).find("\"host_compute_factor\":0.75"), std::string::npos);
    // On top of the user's compute scale: x2 * 0.75 = x1.5 -> 1.5 * 435 µs = 652.5 µs (435: the
    // step at x1, OneRankHasNoCommunication).
    c.computeScale = 2;
    p = predictOk(m, c);
    EXPECT_NEAR(p.numbers.stepTimeMs, 652.5 * kUsInMs, 1e-9);
    EXPECT_EQ(describe(p.config), "0.024 MiB buckets (first 0.001 MiB), 1 rank, compute x2");
    // The recorded world size replays as recorded; more ranks than recorded keep the recorded
    // per-rank compute and the old note (the probe measured 1 and 2 ranks only).
    c = m.recorded();
    EXPECT_EQ(predictOk(m, c).hostComputeFactor, 1.0);
    c.worldSize = 4;
    p = predictOk(m, c);
    EXPECT_EQ(p.hostComputeFactor, 1.0);
    EXPECT_TRUE(hasNote(p.notes, "with 4 ranks on it each rank's compute speed changes (cores, memory bandwidth), "
                                 "which the model does not predict"));
}

// The same run without the probe: the old behaviour (435 µs, OneRankHasNoCommunication) and note.
// Ranks on different hosts do not share compute: the probe is ignored, no host note.
TEST(WhatIfReplay, ComputeProbeAbsentOrRanksOnDifferentHosts)
{
    core::Run run = HandRun().step(0, 0).build();
    WhatIfConfig c = modelOf(run).recorded();
    c.worldSize = 1;
    Prediction p = predictOk(modelOf(run), c);
    EXPECT_EQ(p.hostComputeFactor, 1.0);
    EXPECT_NEAR(p.numbers.stepTimeMs, 435 * kUsInMs, 1e-9);
    EXPECT_TRUE(hasNote(p.notes, "the recorded ranks share one host (h): with 1 rank on it each rank's compute "
                                 "speed changes (cores, memory bandwidth), which the model does not predict"));

    run.config.extra[kComputeProbeKey] = "60000000:80000000:2";
    run.ranks[1].host = "h2";
    p = predictOk(modelOf(run), c);
    EXPECT_EQ(p.hostComputeFactor, 1.0);
    EXPECT_NEAR(p.numbers.stepTimeMs, 435 * kUsInMs, 1e-9);
    EXPECT_FALSE(hasNote(p.notes, "share one host"));
    EXPECT_FALSE(hasNote(p.notes, "probe"));
}

// A probe outside sane bounds is clamped or refused, and the note says which; an unreadable one is
// named, never a failure to predict.
TEST(WhatIfReplay, ComputeProbeOutOfBoundsIsClampedOrRefused)
{
    core::Run run = HandRun().step(0, 0).build();
    WhatIfConfig c = modelOf(run).recorded();
    c.worldSize = 1;
    const auto with = [&](const std::string& text) {
        run.config.extra[kComputeProbeKey] = text;
        return predictOk(modelOf(run), c);
    };
    // Together 0.95 of alone: noise, the same speed (factor 1, 435 µs).
    Prediction p = with("80000000:76000000:2");
    EXPECT_EQ(p.hostComputeFactor, 1.0);
    EXPECT_NEAR(p.numbers.stepTimeMs, 435 * kUsInMs, 1e-9);
    EXPECT_TRUE(hasNote(p.notes, "x1.00 with 1 rank on it"));
    EXPECT_TRUE(hasNote(p.notes, "together within noise of alone (x0.95): taken as the same speed"));
    // Together half of alone: a disturbed probe, not used; the old note stays.
    p = with("80000000:40000000:2");
    EXPECT_EQ(p.hostComputeFactor, 1.0);
    EXPECT_TRUE(hasNote(p.notes, "which the model does not predict"));
    EXPECT_TRUE(hasNote(p.notes, "faster together than alone, a disturbed probe, not used"));
    // Together 3 times alone on 2 ranks: more than two ranks taking turns explain: taken as x2,
    // factor 0.5 -> 0.5 * 435 µs = 217.5 µs.
    p = with("10000000:30000000:2");
    EXPECT_NEAR(p.hostComputeFactor, 0.5, 1e-12);
    EXPECT_NEAR(p.numbers.stepTimeMs, 217.5 * kUsInMs, 1e-9);
    EXPECT_TRUE(hasNote(p.notes, "together took x3.00 the time alone, more than 2 ranks taking turns on the cores "
                                 "would (a disturbed probe?): taken as x2"));
    // A probe of another number of ranks than recorded on the host is not used.
    p = with("60000000:80000000:3");
    EXPECT_EQ(p.hostComputeFactor, 1.0);
    EXPECT_TRUE(hasNote(p.notes, "ran 3 ranks at once where 2 ranks were recorded on the host, and was not used"));
    // Malformed text: a note, factor 1.
    for (const char* bad : {"", "x", "60000000:80000000", "60000000:0:2", "-1:5:2", "6:8:1", "6:8:2:9", "6e7:8e7:2"}) {
        p = with(bad);
        EXPECT_EQ(p.hostComputeFactor, 1.0) << bad;
        EXPECT_TRUE(hasNote(p.notes, "the startup compute probe is unreadable (compute_probe: '")) << bad;
        EXPECT_FALSE(parseComputeProbe(bad).has_value()) << bad;
    }
    auto parsed = parseComputeProbe("51000000:71000000:2");
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, (ComputeProbe{51'000'000, 71'000'000, 2}));
}

// A 1-rank recording: the hand run replayed at one rank (OneRankHasNoCommunication: forward 100,
// backward to 380, write-back 5, optimizer 50: steps of 435 µs) taken as recorded, whose startup
// probe ran the rank and a partner process (trainer_torch.cpp, probeComputeWithPartner): 60 ms
// alone, 78 ms together, s(2) = 78 / 60 = 1.3. At 2 ranks on its host each rank's compute is x1.3;
// a 1-rank recording has no link to fit and no emulated link is asked, so communication costs
// nothing and the step is 1.3 * 435 = 565.5 µs. Without the probe: 435 µs and the note that the
// model does not predict the change. 3 ranks: more than the probe ran together, not scaled.
TEST(WhatIfReplay, ComputeProbeWithAPartnerScalesTwoRanksFromOne)
{
    const WhatIfModel two = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = two.recorded();
    c.worldSize = 1;
    core::Run one = predictOk(two, c).run;
    one.config.source.clear(); // taken as a recording
    ASSERT_EQ(one.config.worldSize, 1);
    ASSERT_EQ(one.ranks.size(), 1u);
    ASSERT_EQ(one.ranks[0].host, "h");
    c = modelOf(one).recorded();
    c.worldSize = 2;
    Prediction p = predictOk(modelOf(one), c);
    EXPECT_EQ(p.hostComputeFactor, 1.0);
    EXPECT_NEAR(p.numbers.stepTimeMs, 435 * kUsInMs, 1e-9);
    EXPECT_TRUE(hasNote(p.notes, "the recorded rank's host (h): with 2 ranks on it each rank's compute speed changes "
                                 "(cores, memory bandwidth), which the model does not predict"));
    EXPECT_TRUE(hasNote(p.notes, "rank 1 replays rank 0's compute: one device per rank, per-rank work unchanged"));
    EXPECT_TRUE(hasNote(p.notes, "communication costs nothing (give a link speed to cost it)"));

    one.config.extra[kComputeProbeKey] = "60000000:78000000:2";
    p = predictOk(modelOf(one), c);
    EXPECT_NEAR(p.hostComputeFactor, 1.3, 1e-12);
    EXPECT_NEAR(p.numbers.stepTimeMs, 565.5 * kUsInMs, 1e-9);
    EXPECT_TRUE(hasNote(p.notes, "the recorded rank's host (h): each rank's compute x1.30 with 2 ranks on it: the "
                                 "startup probe's forward+backward took 60.0 ms alone and 78.0 ms with 2 processes "
                                 "at once"));
    EXPECT_FALSE(hasNote(p.notes, "does not predict"));

    c.worldSize = 3;
    p = predictOk(modelOf(one), c);
    EXPECT_EQ(p.hostComputeFactor, 1.0);
    EXPECT_TRUE(hasNote(p.notes, "with 3 ranks on it each rank's compute speed changes (cores, memory bandwidth), "
                                 "which the model does not predict; the startup compute probe measured 2 processes at "
                                 "once, not 3"));
    // --threads 0: the ranks' thread count follows the ranks on the host; the note says so.
    one.config.extra["threads_requested"] = "0";
    c.worldSize = 2;
    p = predictOk(modelOf(one), c);
    EXPECT_TRUE(hasNote(p.notes, "each rank's thread count changes as well (--threads 0: cores / ranks on the host)"));
}

TEST(WhatIfReplay, EmulatedLinkHoldsCompletionsLikeTheRuntime)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = m.recorded();
    c.linkGbps = 0.125;
    // The runtime's pipe: bytes * 8 / 0.125 ns -> 1 KiB = 65.536 µs, 2 KiB = 131.072 µs, from each
    // rank's own launches, serial. Real completions stay 270 and 460.
    //   rank 0: b0 200 + 65.536 = 265.536 (the real 270 is later); b1 max(400, 265.536) + 131.072 =
    //           531.072: the wait ends at 536.072 (71.072 later) -> step 586.072 µs
    //   rank 1: b0 210 + 65.536 = 275.536; b1 max(420, 275.536) + 131.072 = 551.072: the wait ends
    //           at 556.072 (91.072 later) -> step 606.072 µs
    // Mean: 596.072 µs.
    const Prediction p = predictOk(m, c);
    EXPECT_NEAR(p.numbers.stepTimeMs, 596.072 * kUsInMs, 1e-9);
    EXPECT_DOUBLE_EQ(p.run.config.linkGbps, 0.125);
}

TEST(WhatIfReplay, Fp16SendsHalfTheBytesOverTheRing)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = m.recorded();
    c.compress = "fp16";
    // fp16 on 2 ranks: no pairwise exchange (the runtime's is for uncompressed buckets), a ring:
    // 2 rounds (of no latency), factor 1; half the bytes. b0 (512 B) during backward: 30 µs, done
    // 240, which costs backward 10 µs (20 recorded): rank 0's p3 at compute 380 -> wall 390, rank
    // 1's at 410. b1 (1024 B) starts at 410, after backward: 20 µs, done 430. The waits end at
    // 435 on both ranks: steps of 485 µs.
    const Prediction p = predictOk(m, c);
    EXPECT_NEAR(p.numbers.stepTimeMs, 485 * kUsInMs, 1e-9);
    ASSERT_EQ(p.run.buckets.size(), 2u);
    EXPECT_EQ(p.run.buckets[0].bytes, 512);
    EXPECT_EQ(p.run.buckets[1].bytes, 1024);
    EXPECT_TRUE(hasNote(p.notes, "fp16"));
}

TEST(WhatIfReplay, NextStepStartsAfterThePredictedEndPlusTheRecordedGap)
{
    // Two steps, the second 10 µs after the first ends (recorded start 525).
    const WhatIfModel m = modelOf(HandRun().step(0, 0).step(1, us(525)).build());
    // At 1 KiB caps each step takes 515 µs (test above): step 0 [0, 515), step 1 starts at
    // 515 + 10 = 525 and ends at 1040.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    ASSERT_EQ(p.run.steps.size(), 4u);
    for (const Step& s : p.run.steps) {
        EXPECT_EQ(s.start, s.step == 0 ? 0 : us(525));
        EXPECT_EQ(s.end, s.step == 0 ? us(515) : us(1040));
    }
    EXPECT_NEAR(p.numbers.stepTimeMs, 515 * kUsInMs, 1e-9);
    // Asked for one steady step only (both are steady: no warm-up here), the replay stops after
    // step 0.
    auto one = m.predict(configWith(m, 1024, 1024), PredictOptions{.keepTimeline = true, .maxSteadySteps = 1});
    ASSERT_TRUE(one.has_value());
    ASSERT_EQ(one->run.steps.size(), 2u);
    EXPECT_EQ(one->run.steps[0].step, 0);
    EXPECT_NEAR(one->numbers.stepTimeMs, 515 * kUsInMs, 1e-9);
    EXPECT_EQ(one->run.spans.size(), p.run.spans.size() / 2);
}

TEST(WhatIfReplay, EachStepKeepsItsOwnLinkSpeed)
{
    // Three steps, the last one's link twice as slow: b0 done 330, b1 done 500, step 555 µs
    // (hand_run.h). Per-bucket medians over the six samples each (60, 60, 60, 60, 120, 120 µs and
    // 40 x 4, 80 x 2) are the fast steps': the same rates as before. Step 2's transfers took
    // 2 x 120 + 2 x 80 = 400 µs where the fit says 200: its link runs x2.
    const WhatIfModel m = modelOf(HandRun().step(0, 0).step(1, us(525)).step(2, us(1050), 2.0).build());
    EXPECT_NEAR(m.link().nsPerByteBusy, 60'000.0 / 1024, 1e-9);
    EXPECT_NEAR(m.link().nsPerByteIdle, 40'000.0 / 2048, 1e-9);
    // The replay of the recording is exact: (515 + 515 + 555) / 3.
    EXPECT_NEAR(m.replayed().stepTimeMs, 1585.0 / 3 * kUsInMs, 1e-9);
    // At 1 KiB caps steps 0 and 1 take 515 µs (test above). Step 2 at x2: its recorded transfers
    // [210, 330) and [420, 500) put the ready instants at compute time rank 0 150, 200, 260, 360
    // and rank 1 150, 210, 260, 380 (b0's 120 µs cost backward 1/3 of them). b0 starts 210, 120
    // µs during backward: 330, inside which p2 comes at wall 210 + (260 - 210) / (2/3) = 285; b1
    // starts 330, 1 KiB at 117.1875 ns/B during backward: 450; p3 then comes at 360 + 1/3 x 225 =
    // 435 (rank 0, inside b1) and 380 + 1/3 x 240 = 460 (rank 1); b2 starts 460, 1 KiB after
    // backward at 39.0625 ns/B: 40 µs, 500. The wait ends at 505, the step at 555 µs.
    // Mean (515 + 515 + 555) / 3 = 528.33 µs.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    EXPECT_NEAR(p.numbers.stepTimeMs, 1585.0 / 3 * kUsInMs, 1e-9);
    ASSERT_EQ(p.run.steps.size(), 6u);
    EXPECT_EQ(p.run.steps[2].end - p.run.steps[2].start, us(555));
    EXPECT_NEAR(m.link().stretchHigh, 2.0, 1e-9);
    EXPECT_NEAR(m.link().stretchLow, 1.0, 1e-9);
}

TEST(WhatIfReplay, ALateRankMakesTheOthersWait)
{
    // Rank 1's whole step 60 µs late in rank 0's clock (it started late): its launches come at
    // 270 and 480, its last gradient at 480. The recording follows the same rules: b0 starts at
    // 270, during backward: done 330; b1 starts at 480, after: done 520; waits end at 525.
    HandRun h;
    h.step(0, 0);
    core::Run run = h.run();
    for (Span& s : run.spans) {
        const bool late = s.lane.v >= 2;
        if (s.kind == SpanKind::Comm) {
            s.start += late ? us(60) : 0;
            s.end = s.bucket == 0 ? us(330) : us(520);
        } else if (s.kind == SpanKind::Wait) {
            s.start += late ? us(60) : 0;
            s.end = us(525);
        } else if (s.kind == SpanKind::Optimizer) {
            s.start = us(525), s.end = us(575);
        } else if (late) {
            s.start += us(60), s.end += us(60);
        }
    }
    for (Instant& in : run.instants)
        if (in.lane.v >= 2)
            in.ts += us(60);
    for (Step& st : run.steps) {
        st.start = st.rank == 1 ? us(60) : 0;
        st.end = us(575);
    }
    run.normalize();
    const WhatIfModel m = modelOf(run);
    // The fit sees the same transfers (60 µs for 1 KiB during backward, 40 µs for 2 KiB after).
    EXPECT_NEAR(m.link().nsPerByteBusy, 60'000.0 / 1024, 1e-9);
    EXPECT_NEAR(m.link().nsPerByteIdle, 40'000.0 / 2048, 1e-9);
    // Compute time of the ready instants (recorded transfers [270, 330) and [480, 520); backward
    // loses 1/3 of the time beside them): rank 0 150, 200, 300 - 10 = 290, 400 - 20 = 380; rank 1
    // (from its start at 60) 150, 210, 280, 400.
    // At 1 KiB caps: b0 starts at rank 1's 270, done 330; p2 comes at wall 300 (rank 0: 270 +
    // 20 / (2/3)) and 360 (rank 1: 250 of compute at 330, 30 more); b1 starts max(300, 360, 330) =
    // 360, done 420; p3 comes at 420 (rank 0: 340 at 360, 40 more at 2/3) and 60 + 320 + 80 = 500
    // (rank 1: 320 of compute at 420); b2 starts 500, after backward: done 520. Waits end at 525;
    // rank 0's step [0, 575) = 575 µs, rank 1's [60, 575) = 515 µs: 545 µs, as recorded.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    EXPECT_NEAR(p.numbers.stepTimeMs, 545 * kUsInMs, 1e-9);
}

TEST(WhatIfRecordedLink, HeldCompletionsAreLeftOutOfTheFit)
{
    // The same run recorded with an emulated 0.0625 Gbit/s link (1 KiB = 131.072 µs, 2 KiB =
    // 262.144 µs): the runtime stored the emulated ends as completions, later than the real ones
    // (rank 0: 200 + 131.072 = 331.072 and max(400, 331.072) + 262.144 = 662.144; rank 1: 341.072
    // and 682.144). Every sample is held by the pipe: the real link's time is unknown.
    HandRun h;
    h.step(0, 0);
    core::Run run = h.run();
    run.config.linkGbps = 0.0625;
    for (Span& s : run.spans)
        if (s.kind == SpanKind::Comm) {
            const bool r1 = s.lane.v >= 2;
            s.end = s.bucket == 0 ? (r1 ? 341'072 : 331'072) : (r1 ? 682'144 : 662'144);
        }
    run.normalize();
    const WhatIfModel held = modelOf(run);
    EXPECT_FALSE(held.link().fitted);
    EXPECT_TRUE(hasNote(held.notes(), "held by its emulated link"));
    // A faster emulated link (1 Gbit/s: 8.192 and 16.384 µs) hides nothing: completions at 270 and
    // 460 are later than the pipe's 208.192 / 218.192 and 416.384 / 436.384: all four samples fit.
    run = h.run();
    run.config.linkGbps = 1;
    run.normalize();
    const WhatIfModel fast = modelOf(run);
    ASSERT_TRUE(fast.link().fitted);
    EXPECT_EQ(fast.link().samples, 4);
    EXPECT_NEAR(fast.link().nsPerByteIdle, 40'000.0 / 2048, 1e-9);
}

TEST(WhatIfUnits, WithoutParameterSizesWholeBucketsAreRegrouped)
{
    core::Run run = HandRun().step(0, 0).build();
    run.config.extra.erase(kParamNumelKey);
    const WhatIfModel m = modelOf(run);
    EXPECT_TRUE(hasNote(m.notes(), "not recorded"));
    // The recorded layout is reproduced (each recorded bucket is one unit): the same 515 µs.
    EXPECT_NEAR(m.replayed().stepTimeMs, 515 * kUsInMs, 1e-9);
    // At 1 KiB the units (1024 B and 2048 B) each fill a bucket: the recorded layout again, marked
    // approximate.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    EXPECT_EQ(p.run.buckets.size(), 2u);
    EXPECT_TRUE(hasNote(p.notes, "approximate"));
}

TEST(WhatIfRun, PredictedRunIsMarkedAndRoundTripsThroughARunFile)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).step(1, us(525)).build());
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    EXPECT_TRUE(isPredicted(p.run.config));
    EXPECT_EQ(p.run.config.extra.at("predicted_from"), "hand");
    EXPECT_EQ(p.run.config.bucketCapBytes, 1024);
    const std::string path = tempPath("predicted.db");
    std::filesystem::remove(path);
    ASSERT_TRUE(saveRun(p.run, path, RunWriter::Mode::Overwrite).has_value());
    auto loaded = loadRun(path);
    ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
    EXPECT_TRUE(isPredicted(loaded->config));
    EXPECT_EQ(loaded->spans.size(), p.run.spans.size());
    EXPECT_EQ(loaded->instants.size(), p.run.instants.size());
    EXPECT_EQ(layoutOf(*loaded), layoutOf(p.run));
    const RunSummary s = summarize(*loaded);
    EXPECT_NEAR(s.stepTimeMs, p.numbers.stepTimeMs, 1e-9);
    EXPECT_NEAR(s.exposedCommMs, p.numbers.exposedCommMs, 1e-9);
    // A predicted run can itself be modelled (its parameter sizes travel with it).
    auto again = WhatIfModel::build(*loaded);
    ASSERT_TRUE(again.has_value()) << again.error().message;
    EXPECT_EQ(again->recorded().bucketCapBytes, 1024);
    std::filesystem::remove(path);
}

TEST(WhatIfAdvise, PicksTheFasterCapAndSaysHowSure)
{
    // The hand run with its transfer after backward 1.8 times as long (hand_run.h): b1 [420, 492),
    // the wait ends at 497, the step at 547 µs. The link moves 60 µs per KiB during backward and
    // 36 after it: it works 0.6 of the time beside backward, so backward loses min(0.6, 0.4) = 0.4
    // (less than the 36 µs a KiB costs after backward: here overlap pays). In compute time the
    // ready instants are rank 0 150, 200, 300 - 24 = 276, 400 - 24 = 376 and rank 1 150, 210, 276,
    // 396. Candidates caps 1 KiB and 25 KiB, first caps 1 KiB and 4 KiB: three layouts.
    //  - 1 KiB / 1 KiB, three buckets: b0 [210, 270) during backward; p2 at wall 300 (246 of
    //    compute at 270); b1 [300, 360), during backward (rank 1's last gradient comes at 444);
    //    p3 at 360 + (376 - 312) = 424 (rank 0) and 444 (rank 1); b2 [444, 480) at the idle rate;
    //    waits end at 485: 535 µs.
    //  - the recorded layout: 547 µs (the replay is exact).
    //  - a first cap of 4 KiB, one bucket of all 3072 B: backward runs alone (ends at 376 and
    //    396), the bucket moves after it, [396, 504); waits end at 509: 559 µs.
    const WhatIfModel m = modelOf(HandRun().step(0, 0, 1.0, 1.8).build());
    EXPECT_NEAR(m.link().computeSlowdown, 0.4, 1e-12);
    auto a = advise(m, AdviseOptions{{1024, 25 * 1024}, {1024, 4096}});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    ASSERT_EQ(a->candidates.size(), 3u);
    EXPECT_EQ(a->best.bucketCapBytes, 1024);
    EXPECT_EQ(a->best.firstBucketCapBytes, 1024);
    EXPECT_NEAR(a->predictedBestMs, 535 * kUsInMs, 1e-9);
    EXPECT_NEAR(a->candidates[1].numbers.stepTimeMs, 547 * kUsInMs, 1e-9);
    EXPECT_NEAR(a->candidates[2].numbers.stepTimeMs, 559 * kUsInMs, 1e-9);
    EXPECT_NEAR(a->gainMs, 12 * kUsInMs, 1e-9);
    EXPECT_NEAR(a->gainPct, 12.0 / 547 * 100, 1e-9);
    // The replay of the recorded caps is exact here (error 0), which is a consistency check, not
    // confidence (issue 29): the candidate's interval is a bucket-cap change's held-out error e
    // (this one-step run has no steady-step noise), [535 / (1 + e), 535 / (1 - e)] at least (the
    // prediction with backward as recorded widens it), and a 2.2 % gain is inside it: the
    // recording cannot tell, and says which measurement would.
    EXPECT_NEAR(a->selfErrorPct, 0, 1e-9);
    // A cap change's interval: its row, never below a repeat's (intervalFor).
    const double e = std::max(heldOutError(ChangeKind::BucketCap).p90AbsPct, heldOutError(ChangeKind::None).p90AbsPct) / 100;
    EXPECT_NEAR(a->interval.halfWidthPct, e * 100, 1e-9);
    EXPECT_LE(a->interval.lowMs, 535 * kUsInMs / (1 + e) + 1e-9);
    EXPECT_GE(a->interval.highMs, 535 * kUsInMs / (1 - e) - 1e-9);
    EXPECT_TRUE(a->candidate == a->best);
    EXPECT_NEAR(a->candidateGainPct, 12.0 / 547 * 100, 1e-9);
    EXPECT_TRUE(a->gainWithinError);
    EXPECT_EQ(a->verdict, Advice::Verdict::CannotTell);
    EXPECT_FALSE(a->confident);
    EXPECT_NE(a->confidenceNote.find("inside the model's error for bucket-cap changes"), std::string::npos)
        << a->confidenceNote;
    EXPECT_NE(a->measureHint.find("one short run"), std::string::npos);
    // With only the recorded cap on offer the advice is to keep it, gain 0, nothing to measure.
    a = advise(m, AdviseOptions{{25 * 1024}, {1024}});
    ASSERT_TRUE(a.has_value());
    EXPECT_TRUE(a->best == a->current);
    EXPECT_NEAR(a->gainMs, 0, 1e-12);
    EXPECT_EQ(a->verdict, Advice::Verdict::Keep);
    EXPECT_TRUE(a->measureHint.empty());
    EXPECT_FALSE(a->confident);

    // The one-bucket prediction as a recording of its own: its only transfer, [396, 504), ran
    // after backward, so nothing says the link slows backward (busy rate = idle rate, no
    // contention) nor what a bucket's latency is (one size). Advised from it, 1 KiB caps: b0
    // [210, 246), b1 [276, 312), b2 [396, 432) at 36 µs per KiB; waits end at 437: 487 µs, 72 µs
    // (12.9%) faster than its 559 µs, inside the interval (and with three buckets instead of one
    // and the latency unknown): the recording cannot tell.
    auto one = m.predict(configWith(m, 1024, 4096));
    ASSERT_TRUE(one.has_value());
    const WhatIfModel m1 = modelOf(one->run);
    EXPECT_EQ(m1.link().computeSlowdown, 0);
    a = advise(m1, AdviseOptions{{1024, 25 * 1024}, {1024}});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    EXPECT_EQ(a->best.bucketCapBytes, 1024);
    EXPECT_NEAR(a->predictedBestMs, 487 * kUsInMs, 1e-9);
    EXPECT_NEAR(a->gainMs, 72 * kUsInMs, 1e-9);
    EXPECT_FALSE(a->confident);
    EXPECT_EQ(a->verdict, Advice::Verdict::CannotTell);
    EXPECT_NE(a->confidenceNote.find("12.9% faster"), std::string::npos) << a->confidenceNote;
}

TEST(WhatIfAdvise, AnExactReplayIsNoConfidence)
{
    // The idle-link run (latency 10 µs known): caps 1 KiB (recorded, 3 buckets, 405 µs) against
    // 25 KiB (2 buckets, 395 µs, test above): fewer buckets, 10 µs (2.5%) faster, exact replay
    // (self-error 0). Before issue 29 that was "confident"; the held-out error of a bucket-cap
    // change is far wider than 2.5 %: the recording cannot tell. Nothing moved during backward,
    // so there is no contention to bound: the interval is exactly [395 / (1 + e), 395 / (1 - e)].
    const WhatIfModel m = modelOf(idleLinkRun());
    auto a = advise(m, AdviseOptions{{1024, 25 * 1024}, {1024}});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    EXPECT_EQ(a->best.bucketCapBytes, 25 * 1024);
    EXPECT_NEAR(a->gainMs, 10 * kUsInMs, 1e-9);
    EXPECT_NEAR(a->selfErrorPct, 0, 1e-9);
    // A cap change's interval: its row, never below a repeat's (intervalFor).
    const double e = std::max(heldOutError(ChangeKind::BucketCap).p90AbsPct, heldOutError(ChangeKind::None).p90AbsPct) / 100;
    EXPECT_NEAR(a->interval.lowMs, 395 * kUsInMs / (1 + e), 1e-9);
    EXPECT_NEAR(a->interval.highMs, 395 * kUsInMs / (1 - e), 1e-9);
    EXPECT_EQ(a->verdict, Advice::Verdict::CannotTell);
    EXPECT_FALSE(a->confident);
}

TEST(WhatIfBadInput, RunsTheModelCannotReplayAreRefusedWithAReason)
{
    const auto errorOf = [](const core::Run& run) {
        auto m = WhatIfModel::build(run);
        return m ? std::string() : m.error().message;
    };
    core::Run run = HandRun().step(0, 0).build();
    run.buckets.clear();
    EXPECT_NE(errorOf(run).find("no bucket table"), std::string::npos);

    run = HandRun().step(0, 0).build();
    run.instants.clear();
    EXPECT_NE(errorOf(run).find("no gradient-ready instants"), std::string::npos);

    run = HandRun().step(0, 0).build();
    run.config.extra[kParamNumelKey] = "64,192,256";
    EXPECT_NE(errorOf(run).find("3 parameter sizes but the bucket table has 4"), std::string::npos);
    run.config.extra[kParamNumelKey] = "64,192,256,x";
    EXPECT_NE(errorOf(run).find("'x' is not a positive element count"), std::string::npos);
    run.config.extra[kParamNumelKey] = "64,192,256,300";
    EXPECT_NE(errorOf(run).find("bucket 1 2224 bytes on the wire, the bucket table 2048"), std::string::npos);

    run = HandRun().step(0, 0).build();
    run.lanes.push_back(Lane{LaneId{4}, 0, LaneKind::GpuStream, 0, 7, "stream 7"});
    Span k;
    k.lane = LaneId{4};
    k.kind = SpanKind::Kernel;
    k.start = 0, k.end = 10, k.step = 0;
    run.spans.push_back(k);
    run.normalize();
    EXPECT_NE(errorOf(run).find("GPU stream lanes"), std::string::npos);

    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = m.recorded();
    c.bucketCapBytes = 0;
    EXPECT_FALSE(m.predict(c).has_value());
    c = m.recorded();
    c.compress = "int8";
    EXPECT_FALSE(m.predict(c).has_value());
    for (double k : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
        c = m.recorded();
        c.computeScale = k;
        auto p = m.predict(c);
        ASSERT_FALSE(p.has_value()) << k;
        EXPECT_NE(p.error().message.find("compute scale must be a positive number"), std::string::npos);
    }
}

TEST(WhatIfFormat, ParamNumelRoundTrips)
{
    const std::vector<Bucket> buckets{{0, 0, {"a", "b"}}, {1, 0, {"c"}}};
    const std::string text = formatParamNumel({{3, 4}, {5}});
    EXPECT_EQ(text, "3,4,5");
    auto parsed = parseParamNumel(text, buckets);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, (std::vector<std::vector<int64_t>>{{3, 4}, {5}}));
    EXPECT_FALSE(parseParamNumel("3,,5", buckets).has_value());
    EXPECT_FALSE(parseParamNumel("3,4,-5", buckets).has_value());
    EXPECT_FALSE(parseParamNumel("", buckets).has_value());
}
