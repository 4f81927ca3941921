// The synthetic run generator's two outputs (core/synthetic.h, issue 31): writeSyntheticRun
// streams into a real run file, rank after rank or step after step, what makeSyntheticRun builds
// in memory, a seed gives one run, the
// counts are what was asked, every collective is aligned across ranks, every step is complete, and
// `lockstep report` reads the file and names the generated straggler.
#include "db_test_util.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/synthetic.h"

#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include <map>
#include <set>
#include <tuple>

namespace {

using namespace dbtest;
using lockstep::test::TempDir;

// Small, but with every feature on: hosts, forward modules, a straggler, noise, hiccups.
SyntheticParams smallParams(uint64_t seed = 7)
{
    SyntheticParams p;
    p.worldSize = 12;
    p.ranksPerHost = 4;
    p.steps = 6;
    p.buckets = 3;
    p.backwardSegmentsPerBucket = 2;
    p.forwardSpans = 3;
    p.stragglerRank = 9;
    p.stragglerDelayNs = 2'000'000;
    p.arrivalNoiseNs = 100'000;
    p.hiccupChance = 0.1;
    p.hiccupNs = 1'000'000;
    p.seed = seed;
    return p;
}

Run load(const std::string& path)
{
    auto run = loadRun(path);
    EXPECT_TRUE(run.has_value()) << (run ? "" : run.error().message);
    return run ? std::move(*run) : Run{};
}

// A span as comparable text: lane by (rank, kind), name by its text.
using SpanKey = std::tuple<int32_t, int, TimeNs, TimeNs, int64_t, std::string, int32_t, int32_t, int>;
std::vector<SpanKey> spanKeys(const Run& run)
{
    std::vector<SpanKey> keys;
    for (const Span& s : run.spans) {
        const Lane& lane = run.lanes.at(s.lane.v);
        keys.emplace_back(lane.rank, static_cast<int>(lane.kind), s.start, s.end, s.bytes, run.strings.text(s.name), s.step,
                          s.bucket, static_cast<int>(s.kind));
    }
    return keys;
}

using InstantKey = std::tuple<int32_t, TimeNs, std::string, int32_t, int32_t>;
std::vector<InstantKey> instantKeys(const Run& run)
{
    std::vector<InstantKey> keys;
    for (const Instant& in : run.instants)
        keys.emplace_back(run.lanes.at(in.lane.v).rank, in.ts, run.strings.text(in.name), in.step, in.bucket);
    return keys;
}

using StepKey = std::tuple<int32_t, int32_t, TimeNs, TimeNs, int64_t, int64_t, int64_t>;
std::vector<StepKey> stepKeys(const Run& run)
{
    std::vector<StepKey> keys;
    for (const Step& s : run.steps)
        keys.emplace_back(s.rank, s.step, s.start, s.end, s.samples, s.cpuNs, s.runqNs);
    return keys;
}

void expectSameRun(const Run& a, const Run& b)
{
    EXPECT_EQ(a.config.worldSize, b.config.worldSize);
    EXPECT_EQ(a.config.status, b.config.status);
    EXPECT_EQ(a.config.endedNs, b.config.endedNs);
    ASSERT_EQ(a.ranks.size(), b.ranks.size());
    for (size_t i = 0; i < a.ranks.size(); ++i) {
        EXPECT_EQ(a.ranks[i].host, b.ranks[i].host);
        EXPECT_EQ(a.ranks[i].bootId, b.ranks[i].bootId);
        EXPECT_EQ(a.ranks[i].clockBasis, b.ranks[i].clockBasis);
        EXPECT_EQ(a.ranks[i].clockUncertaintyNs, b.ranks[i].clockUncertaintyNs);
    }
    ASSERT_EQ(a.buckets.size(), b.buckets.size());
    for (size_t i = 0; i < a.buckets.size(); ++i) {
        EXPECT_EQ(a.buckets[i].bytes, b.buckets[i].bytes);
        EXPECT_EQ(a.buckets[i].params, b.buckets[i].params);
    }
    EXPECT_EQ(stepKeys(a), stepKeys(b));
    EXPECT_TRUE(spanKeys(a) == spanKeys(b));
    EXPECT_TRUE(instantKeys(a) == instantKeys(b));
}

TEST(Synthetic, StreamedFileHoldsTheRunMadeInMemory)
{
    TempDir dir;
    const SyntheticParams p = smallParams();
    auto counts = writeSyntheticRun(p, dir.file("streamed.db"));
    ASSERT_TRUE(counts.has_value()) << counts.error().message;
    ASSERT_TRUE(writeSyntheticRun(p, dir.file("by_step.db"), RunWriter::Mode::CreateNew, SyntheticOrder::StepMajor));
    ASSERT_TRUE(saveRun(makeSyntheticRun(p), dir.file("saved.db")).has_value());
    EXPECT_FALSE(exists(dir.file("streamed.db-wal"))); // closed whole
    const lockstep::core::Run streamed = load(dir.file("streamed.db"));
    const lockstep::core::Run saved = load(dir.file("saved.db"));
    // Rank after rank (the default) and step after step write the same run.
    expectSameRun(streamed, saved);
    expectSameRun(load(dir.file("by_step.db")), saved);
    EXPECT_EQ(streamed.config.status, RunStatus::Completed);
    // The counts are the parameters' and the file's.
    const SyntheticCounts expected = syntheticCounts(p);
    EXPECT_EQ(counts->spans, expected.spans);
    EXPECT_EQ(static_cast<int64_t>(streamed.spans.size()), expected.spans);
    EXPECT_EQ(static_cast<int64_t>(streamed.instants.size()), expected.instants);
    EXPECT_EQ(static_cast<int64_t>(streamed.steps.size()), expected.steps);
    // Per rank-step: data, 3 forward, 6 segments, wait, optimizer; 3 all-reduces; 6 instants.
    EXPECT_EQ(expected.spans, int64_t{12} * 6 * (3 + 3 + 6 + 3));
    EXPECT_EQ(expected.instants, int64_t{12} * 6 * 6);
}

TEST(Synthetic, ASeedGivesOneRun)
{
    TempDir dir;
    ASSERT_TRUE(writeSyntheticRun(smallParams(7), dir.file("a.db")).has_value());
    ASSERT_TRUE(writeSyntheticRun(smallParams(7), dir.file("b.db")).has_value());
    ASSERT_TRUE(writeSyntheticRun(smallParams(8), dir.file("c.db")).has_value());
    const lockstep::core::Run a = load(dir.file("a.db"));
    expectSameRun(a, load(dir.file("b.db")));
    EXPECT_FALSE(spanKeys(a) == spanKeys(load(dir.file("c.db"))));
    // An existing file is refused unless overwriting was asked for.
    EXPECT_FALSE(writeSyntheticRun(smallParams(7), dir.file("a.db")).has_value());
    EXPECT_TRUE(writeSyntheticRun(smallParams(7), dir.file("a.db"), RunWriter::Mode::Overwrite).has_value());
}

TEST(Synthetic, CollectivesAlignAndStepsAreComplete)
{
    TempDir dir;
    const SyntheticParams p = smallParams();
    ASSERT_TRUE(writeSyntheticRun(p, dir.file("run.db")).has_value());
    const lockstep::core::Run run = load(dir.file("run.db"));
    // Every (rank, step) has its row and its spans.
    std::set<std::pair<int32_t, int32_t>> rows, withSpans;
    for (const Step& s : run.steps)
        rows.emplace(s.rank, s.step);
    for (const Span& s : run.spans)
        withSpans.emplace(run.lanes.at(s.lane.v).rank, s.step);
    EXPECT_EQ(rows.size(), static_cast<size_t>(p.worldSize * p.steps));
    EXPECT_EQ(rows, withSpans);
    // Each (step, bucket) is one all-reduce on every rank: one span per rank, all completing
    // together, with the bucket's bytes; the launch is never before the bucket was ready.
    std::map<std::pair<int32_t, int32_t>, std::vector<const Span*>> collectives;
    for (const Span& s : run.spans)
        if (s.kind == SpanKind::Comm)
            collectives[{s.step, s.bucket}].push_back(&s);
    EXPECT_EQ(collectives.size(), static_cast<size_t>(p.steps * p.buckets));
    for (const auto& [key, spans] : collectives) {
        ASSERT_EQ(spans.size(), static_cast<size_t>(p.worldSize));
        std::set<int32_t> ranks;
        for (const Span* s : spans) {
            ranks.insert(run.lanes.at(s->lane.v).rank);
            EXPECT_EQ(s->end, spans.front()->end) << "step " << key.first << " bucket " << key.second;
            EXPECT_EQ(s->bytes, run.buckets.at(key.second).bytes);
            EXPECT_LT(s->start, s->end);
        }
        EXPECT_EQ(ranks.size(), static_cast<size_t>(p.worldSize));
    }
    // Hosts of 4 ranks: ranks off rank 0's host carry a measured clock, the others share it.
    EXPECT_EQ(run.ranks.at(5).host, "node-001");
    EXPECT_EQ(run.ranks.at(3).clockBasis, ClockBasis::SameBoot);
    EXPECT_EQ(run.ranks.at(5).clockBasis, ClockBasis::Measured);
}

TEST(Synthetic, BigShapeLoadsAnalyzesAndReports)
{
    TempDir dir;
    // The benchmark's shape at 32 ranks: 200 spans per rank-step, about 12 steps.
    const SyntheticParams p = bigRunParams(int64_t{32} * 200 * 12, 32);
    EXPECT_EQ(p.steps, 12);
    const SyntheticCounts counts = syntheticCounts(p);
    EXPECT_EQ(counts.spans, int64_t{32} * 200 * 12);
    ASSERT_TRUE(writeSyntheticRun(p, dir.file("big.db")).has_value());
    const lockstep::core::Run run = load(dir.file("big.db"));
    EXPECT_EQ(static_cast<int64_t>(run.spans.size()), counts.spans);
    auto analysis = analyze(run, {});
    ASSERT_TRUE(analysis.has_value()) << analysis.error().message;
    // The CLI reads it: the text report and the JSON, which names the generated straggler.
    const auto text = lockstep::test::lockstep({"report", dir.file("big.db")});
    ASSERT_EQ(text.exitCode, 0) << text.describe();
    EXPECT_TRUE(contains(text.out, "straggler")) << text.out;
    const auto json = lockstep::test::lockstep({"report", "--json", dir.file("big.db")});
    ASSERT_EQ(json.exitCode, 0) << json.describe();
    rapidjson::Document doc;
    ASSERT_FALSE(doc.Parse(json.out.c_str()).HasParseError());
    ASSERT_TRUE(doc.HasMember("stragglers") && doc["stragglers"].IsArray());
    ASSERT_EQ(doc["stragglers"].Size(), 1u) << json.out.substr(0, 4000);
    EXPECT_EQ(doc["stragglers"][0].GetInt(), p.stragglerRank);
}

} // namespace
