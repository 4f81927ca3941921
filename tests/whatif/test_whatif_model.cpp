// The what-if model on hand-built runs (hand_run.h): the link fit, the bucket assignment, the
// replay at other caps, world sizes, link speeds and compression, the predicted run as a run
// file, advice, and bad input. Every expected number is derived by hand in the comment beside it.
#include "hand_run.h"

#include "lockstep/core/run_db.h"
#include "lockstep/core/whatif.h"

#include <gtest/gtest.h>

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

TEST(WhatIfFit, LinkAndLaunchCostFromTheRunsOwnAllReduces)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    const LinkFit& l = m.link();
    ASSERT_TRUE(l.fitted);
    EXPECT_TRUE(l.latencySeparable);
    // Service samples: b0 on both ranks 240 - max(200, 210) = 30 µs; b1 470 - max(420, 240) = 50 µs.
    // Line through (1024 B, 30 µs) and (2048 B, 50 µs): 10 µs + 20 µs per 1024 B. Pairwise: 1 round,
    // each rank sends the bucket once -> latency 10 µs per round, 20000 / 1024 ns per byte.
    EXPECT_NEAR(l.latencyNs, 10'000, 1e-6);
    EXPECT_NEAR(l.nsPerByte, 20'000.0 / 1024, 1e-9);
    EXPECT_EQ(l.samples, 4);
    // Every launch is at its ready instant: no launch cost.
    EXPECT_NEAR(l.launchNs, 0, 1e-9);
    EXPECT_NEAR(l.launchNsPerByte, 0, 1e-12);
    EXPECT_EQ(m.gradientBytes(), 3072);
    EXPECT_TRUE(m.notes().empty()) << m.notes().front();
}

TEST(WhatIfReplay, RecordedConfigurationReproducesTheRecording)
{
    const core::Run run = HandRun().step(0, 0).build();
    const WhatIfModel m = modelOf(run);
    // The fit is exact on this run, so the replay is the recording: 525 µs on both ranks.
    EXPECT_NEAR(m.measured().stepTimeMs, 525 * kUsInMs, 1e-9);
    EXPECT_NEAR(m.replayed().stepTimeMs, 525 * kUsInMs, 1e-9);
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

TEST(WhatIfReplay, SmallerCapSplitsTheLastBucketAndShortensTheWait)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    // Caps 1 KiB (first 1 KiB): b0 = {p0, p1} (1024 B), b1 = {p2} (1024 B reaches the cap),
    // b2 = {p3}. Ready: rank 0 200, 300, 400; rank 1 210, 300, 420. Each 1 KiB costs 30 µs.
    //   b0: starts max(200, 210) = 210, done 240
    //   b1: starts max(300, 300, 240) = 300, done 330
    //   b2: starts max(400, 420, 330) = 420, done 450
    // Wait ends at max(end of backward, 450) + 5: rank 0 max(400, 450) + 5 = 455, rank 1
    // max(420, 450) + 5 = 455; the optimizer's 50 µs follow: both ranks end at 505 µs.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    ASSERT_EQ(p.run.buckets.size(), 3u);
    EXPECT_EQ(p.numbers.buckets, 3);
    EXPECT_EQ(layoutOf(p.run), (std::vector<std::vector<std::string>>{
                                   {"head.bias", "head.weight"}, {"l1.weight"}, {"l0.weight"}}));
    EXPECT_NEAR(p.numbers.stepTimeMs, 505 * kUsInMs, 1e-9);
    for (const Step& s : p.run.steps)
        EXPECT_EQ(s.end - s.start, us(505)) << "rank " << s.rank;
    // Exposed communication: rank 0's b2 [400, 450) lies after backward ends at 400 -> 50 µs;
    // rank 1's b2 [420, 450) -> 30 µs; mean 40 µs. Overlapped: rank 0 b0 [200,240) 40 + b1 30 = 70
    // of 120; rank 1 b0 [210,240) 30 + b1 30 = 60 of 90 -> ratio 130 / 210.
    EXPECT_NEAR(p.numbers.exposedCommMs, 40 * kUsInMs, 1e-9);
    EXPECT_NEAR(p.numbers.overlapRatio, 130.0 / 210.0, 1e-9);
    // Throughput: 2 x 16 samples per 505 µs.
    EXPECT_NEAR(p.numbers.throughput, 32 / 505e-6, 1e-6);
    // Ready instants carry the new bucket of their parameter.
    for (const Instant& in : p.run.instants) {
        const std::string& name = p.run.strings.text(in.name);
        const int expected = name == "l1.weight" ? 1 : name == "l0.weight" ? 2 : 0;
        EXPECT_EQ(in.bucket, expected) << name;
    }
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
}

TEST(WhatIfReplay, MoreRanksUseTheRingFactors)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = m.recorded();
    c.worldSize = 4;
    // 4 ranks, uncompressed: gloo's ring, 2(N-1) = 6 rounds and 2(N-1)/N = 1.5 x the bucket sent.
    //   b0 (1 KiB): 6 x 10 + 1.5 x 20 = 90 µs; b1 (2 KiB): 60 + 1.5 x 40 = 120 µs.
    // Ranks 2 and 3 replay ranks 0 and 1. b0 starts max(200, 210) = 210, done 300; b1 starts
    // max(400, 420, 300) = 420, done 540. Wait ends 540 + 5 = 545 on every rank, 70 µs later than
    // recorded: steps end at 525 + 70 = 595 µs.
    const Prediction p = predictOk(m, c);
    EXPECT_EQ(p.run.ranks.size(), 4u);
    EXPECT_EQ(p.run.config.worldSize, 4);
    EXPECT_NEAR(p.numbers.stepTimeMs, 595 * kUsInMs, 1e-9);
    EXPECT_NEAR(p.numbers.throughput, 4 * 16 / 595e-6, 1e-6);
    EXPECT_TRUE(hasNote(p.notes, "replay recorded ranks"));
    EXPECT_EQ(p.run.config.extra.at("allreduce"), "process group allreduce");
}

TEST(WhatIfReplay, OneRankHasNoCommunication)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = m.recorded();
    c.worldSize = 1;
    // Rank 0 alone: completions at the launches (200, 400); the wait is max(400, 400) + 5 = 405,
    // the step ends at 405 + 50 = 455 µs. No communication to overlap: the ratio is not a number.
    const Prediction p = predictOk(m, c);
    EXPECT_NEAR(p.numbers.stepTimeMs, 455 * kUsInMs, 1e-9);
    EXPECT_TRUE(std::isnan(p.numbers.overlapRatio));
    EXPECT_NEAR(p.numbers.exposedCommMs, 0, 1e-12);
}

TEST(WhatIfReplay, EmulatedLinkHoldsCompletionsLikeTheRuntime)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    WhatIfConfig c = m.recorded();
    c.linkGbps = 0.125;
    // The runtime's pipe: bytes * 8 / 0.125 ns -> 1 KiB = 65.536 µs, 2 KiB = 131.072 µs, from each
    // rank's own launches, serial. Real completions stay 240 and 470.
    //   rank 0: b0 200 + 65.536 = 265.536; b1 max(400, 265.536) + 131.072 = 531.072
    //           wait ends 531.072 + 5 = 536.072 (61.072 later) -> step 586.072 µs
    //   rank 1: b0 210 + 65.536 = 275.536; b1 max(420, 275.536) + 131.072 = 551.072
    //           wait ends 556.072 (81.072 later) -> step 606.072 µs
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
    // 2 rounds, factor 1; half the bytes. b0 (512 B): 2 x 10 + 512 x 20000/1024 ns = 30 µs;
    // b1 (1024 B): 20 + 20 = 40 µs. b0 done 210 + 30 = 240; b1 starts 420, done 460. The waits
    // end at 465 on both ranks (10 µs earlier): steps of 515 µs.
    const Prediction p = predictOk(m, c);
    EXPECT_NEAR(p.numbers.stepTimeMs, 515 * kUsInMs, 1e-9);
    ASSERT_EQ(p.run.buckets.size(), 2u);
    EXPECT_EQ(p.run.buckets[0].bytes, 512);
    EXPECT_EQ(p.run.buckets[1].bytes, 1024);
    EXPECT_TRUE(hasNote(p.notes, "fp16"));
}

TEST(WhatIfReplay, NextStepStartsAfterThePredictedEndPlusTheRecordedGap)
{
    // Two steps, the second 10 µs after the first ends (recorded start 535).
    const WhatIfModel m = modelOf(HandRun().step(0, 0).step(1, us(535)).build());
    // At 1 KiB caps each step takes 505 µs (test above): step 0 [0, 505), step 1 starts at
    // 505 + 10 = 515 and ends at 1020.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    ASSERT_EQ(p.run.steps.size(), 4u);
    for (const Step& s : p.run.steps) {
        EXPECT_EQ(s.start, s.step == 0 ? 0 : us(515));
        EXPECT_EQ(s.end, s.step == 0 ? us(505) : us(1020));
    }
    EXPECT_NEAR(p.numbers.stepTimeMs, 505 * kUsInMs, 1e-9);
}

TEST(WhatIfReplay, ALateRankMakesTheOthersWait)
{
    // Rank 1's whole step 60 µs late in rank 0's clock (it started late): its launches come at
    // 270 and 480, so the collectives start there. Recorded completions follow the same rules:
    // b0 270 + 30 = 300, b1 480 + 50 = 530; rank 0's wait [400, 535), rank 1's [480, 535).
    HandRun h;
    h.step(0, 0);
    core::Run run = h.run();
    for (Span& s : run.spans)
        if (s.lane.v >= 2) {
            if (s.kind == SpanKind::Comm) {
                s.start += us(60);
                s.end = s.bucket == 0 ? us(300) : us(530);
            } else if (s.kind == SpanKind::Wait) {
                s.start += us(60);
                s.end = us(535);
            } else if (s.kind == SpanKind::Optimizer) {
                s.start = us(535), s.end = us(585);
            } else {
                s.start += us(60), s.end += us(60);
            }
        } else if (s.kind == SpanKind::Comm) {
            s.end = s.bucket == 0 ? us(300) : us(530);
        } else if (s.kind == SpanKind::Wait) {
            s.end = us(535);
        } else if (s.kind == SpanKind::Optimizer) {
            s.start = us(535), s.end = us(585);
        }
    for (Instant& in : run.instants)
        if (in.lane.v >= 2)
            in.ts += us(60);
    for (Step& st : run.steps) {
        st.start = st.rank == 1 ? us(60) : 0;
        st.end = us(585);
    }
    run.normalize();
    const WhatIfModel m = modelOf(run);
    // The fit sees the same services (30 and 50 µs after the last launch): same link.
    EXPECT_NEAR(m.link().latencyNs, 10'000, 1e-6);
    // At 1 KiB caps: rank 1's readies 210+60 = 270, 360, 480. b0 starts 270, done 300; b1 starts
    // max(300, 360, 300) = 360, done 390; b2 starts max(400, 480, 390) = 480, done 510. Waits end
    // at 515; rank 0's step [0, 565) = 565 µs, rank 1's [60, 565) = 505 µs; mean 535 µs.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    EXPECT_NEAR(p.numbers.stepTimeMs, 535 * kUsInMs, 1e-9);
}

TEST(WhatIfRecordedLink, HeldCompletionsAreLeftOutOfTheFit)
{
    // The same run recorded with an emulated 0.125 Gbit/s link: the runtime stored the emulated
    // ends (rank 0: 265.536 and 531.072; rank 1: 275.536 and 551.072, test above) as completions.
    // Every sample is held by the pipe: the real link's time is unknown.
    HandRun h;
    h.step(0, 0);
    core::Run run = h.run();
    run.config.linkGbps = 0.125;
    for (Span& s : run.spans)
        if (s.kind == SpanKind::Comm) {
            const bool r1 = s.lane.v >= 2;
            s.end = s.bucket == 0 ? (r1 ? 275'536 : 265'536) : (r1 ? 551'072 : 531'072);
        }
    run.normalize();
    const WhatIfModel held = modelOf(run);
    EXPECT_FALSE(held.link().fitted);
    EXPECT_TRUE(hasNote(held.notes(), "held by its emulated link"));
    // A faster emulated link (1 Gbit/s: 8.192 and 16.384 µs) hides nothing: completions at 240 and
    // 470 are later than the pipe's 208.192 / 218.192 and 416.384 / 436.384: all four samples fit.
    run = h.run();
    run.config.linkGbps = 1;
    run.normalize();
    const WhatIfModel fast = modelOf(run);
    ASSERT_TRUE(fast.link().fitted);
    EXPECT_EQ(fast.link().samples, 4);
    EXPECT_NEAR(fast.link().latencyNs, 10'000, 1e-6);
}

TEST(WhatIfUnits, WithoutParameterSizesWholeBucketsAreRegrouped)
{
    core::Run run = HandRun().step(0, 0).build();
    run.config.extra.erase(kParamNumelKey);
    const WhatIfModel m = modelOf(run);
    EXPECT_TRUE(hasNote(m.notes(), "not recorded"));
    // The recorded layout is reproduced (each recorded bucket is one unit): the same 525 µs.
    EXPECT_NEAR(m.replayed().stepTimeMs, 525 * kUsInMs, 1e-9);
    // At 1 KiB the units (1024 B and 2048 B) each fill a bucket: the recorded layout again, marked
    // approximate.
    const Prediction p = predictOk(m, configWith(m, 1024, 1024));
    EXPECT_EQ(p.run.buckets.size(), 2u);
    EXPECT_TRUE(hasNote(p.notes, "approximate"));
}

TEST(WhatIfRun, PredictedRunIsMarkedAndRoundTripsThroughARunFile)
{
    const WhatIfModel m = modelOf(HandRun().step(0, 0).step(1, us(535)).build());
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
    const WhatIfModel m = modelOf(HandRun().step(0, 0).build());
    // Candidates 1 KiB and 25 KiB (first 1 KiB): 505 µs against the recorded 525 µs (tests above).
    auto a = advise(m, AdviseOptions{{1024, 25 * 1024}, {1024}});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    EXPECT_EQ(a->best.bucketCapBytes, 1024);
    EXPECT_EQ(a->best.firstBucketCapBytes, 1024);
    EXPECT_NEAR(a->predictedBestMs, 505 * kUsInMs, 1e-9);
    EXPECT_NEAR(a->gainMs, 20 * kUsInMs, 1e-9);
    EXPECT_NEAR(a->gainPct, 20.0 / 525 * 100, 1e-9);
    // The replay of the recorded caps is exact here (error 0): the gain is beyond the model's error.
    EXPECT_NEAR(a->selfErrorPct, 0, 1e-9);
    EXPECT_FALSE(a->gainWithinError);
    // Two distinct layouts: the recorded one and the 3-bucket one.
    EXPECT_EQ(a->candidates.size(), 2u);
    // With only the recorded cap on offer the advice is to keep it, gain 0.
    a = advise(m, AdviseOptions{{25 * 1024}, {1024}});
    ASSERT_TRUE(a.has_value());
    EXPECT_TRUE(a->best == a->current);
    EXPECT_NEAR(a->gainMs, 0, 1e-12);
    EXPECT_TRUE(a->gainWithinError);
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
