// Stored summaries (summary_store.h): what report and the app read instead of every span must be
// exactly what the full in-memory path computes (issue 31 item 4), and a summary that no longer
// describes its file must never be used.
#include "lockstep/core/report.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/summary_store.h"
#include "lockstep/core/synthetic.h"
#include "lockstep/import/import.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <string>

namespace lockstep::core {
namespace {

const std::string kData = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/data/";

// The full in-memory path: every span loaded, core::analyze.
struct Full {
    Run run;
    RunAnalysis analysis;
};
Full fullPath(const std::string& path)
{
    auto run = loadRun(path);
    EXPECT_TRUE(run) << run.error().message;
    Full f{std::move(*run), {}};
    f.analysis = analyze(f.run);
    return f;
}

// The overview draws exactly what the spans draw wherever it claims to (run_overview.h): for every
// lane, at every threshold at least the lane's fold gap and over the whole run and windows of it,
// LaneLod queries on the overview's items return the items that queries on the spans return (what
// of each lies in the window, and its sub-row; inside the window also its start, end, span count
// and longest span); an item that stands for one span carries that span.
// Returns how many lanes were folded (gap > 0), so callers know the folding was exercised.
size_t expectOverviewExact(const Run& full, const RunOverview& overview)
{
    Run header = full;
    header.spans.clear();
    std::vector<DrawItem> folded;
    EXPECT_TRUE(overviewRun(overview, header, folded));
    const RunLod fromOverview(header, folded);
    const RunLod fromSpans(full);
    size_t foldedLanes = 0, compared = 0;
    for (size_t i = 0; i < full.lanes.size(); ++i) {
        const LaneId id{static_cast<uint32_t>(i)};
        const LaneOverview& lane = overview.lanes[i];
        const auto [first, last] = full.laneSpanRange(id);
        EXPECT_EQ(lane.work.spans, int64_t(last - first));
        EXPECT_EQ(lane.rows, fromSpans.lane(id).rowCount());
        EXPECT_EQ(fromOverview.lane(id).rowCount(), fromSpans.lane(id).rowCount());
        if (first == last)
            continue;
        foldedLanes += lane.gap > 0;
        TimeNs t0 = full.spans[first].start, t1 = t0;
        for (size_t k = first; k < last; ++k)
            t1 = std::max(t1, full.spans[k].end);
        const TimeNs extent = std::max<TimeNs>(1, t1 - t0);
        for (TimeNs threshold : {lane.gap, lane.gap * 3, extent / 2000, extent / 300, extent / 40}) {
            if (threshold < lane.gap || threshold <= 0)
                continue;
            for (auto [a, b] : {std::pair{t0, t1 + 1}, std::pair{t0 + extent / 3, t0 + extent / 2},
                                std::pair{t0 + extent / 7, t0 + extent / 7 + extent / 50}}) {
                std::vector<DrawItem> want, got;
                fromSpans.lane(id).query(a, b, double(threshold), 1.0, want);
                fromOverview.lane(id).query(a, b, double(threshold), 1.0, got);
                EXPECT_EQ(got.size(), want.size()) << "lane " << i << " threshold " << threshold;
                if (got.size() != want.size())
                    return foldedLanes;
                for (size_t k = 0; k < want.size(); ++k) {
                    // What is drawn: the item within the window, in its sub-row. At the window's
                    // right edge an item may stand for spans beyond it (the LOD's own levels do the
                    // same): there the two ends differ by less than the threshold, a pixel.
                    const TimeNs gotEnd = std::min(got[k].end, b), wantEnd = std::min(want[k].end, b);
                    const bool atEdge = std::max(got[k].end, want[k].end) > b - threshold;
                    EXPECT_EQ(std::tuple(std::max(got[k].start, a), got[k].row), std::tuple(std::max(want[k].start, a), want[k].row))
                        << "lane " << i << " item " << k << " threshold " << threshold << " gap " << lane.gap;
                    EXPECT_LE(std::abs(gotEnd - wantEnd), atEdge ? threshold : 0)
                        << "lane " << i << " item " << k << " threshold " << threshold << " gap " << lane.gap;
                    // One inside the window is the same item.
                    if (want[k].start < a || atEdge)
                        continue;
                    EXPECT_EQ(std::tuple(got[k].start, got[k].end, got[k].count, got[k].maxDuration),
                              std::tuple(want[k].start, want[k].end, want[k].count, want[k].maxDuration))
                        << "lane " << i << " item " << k << " threshold " << threshold << " gap " << lane.gap;
                    if (want[k].count == 1) {
                        const Span& s = full.spans[fromSpans.laneOffset(id) + want[k].span];
                        const Span& o = header.spans[fromOverview.laneOffset(id) + got[k].span];
                        EXPECT_EQ(std::tuple(o.kind, o.name.v, o.bucket, o.bytes, o.step),
                                  std::tuple(s.kind, s.name.v, s.bucket, s.bytes, s.step));
                    }
                }
                compared += want.size();
            }
        }
    }
    EXPECT_GT(compared, 0u);
    return foldedLanes;
}

// Each part of the stored analysis equals the full path's, byte for byte of their encodings
// (NaN equals NaN); the reports printed from both are the same text and JSON. The stored overview
// draws what the spans draw.
void expectSameAnalysis(const std::string& path)
{
    const Full full = fullPath(path);
    auto stored = loadAnalyzedRun(path);
    ASSERT_TRUE(stored) << stored.error().message;
    ASSERT_TRUE(stored->stored) << stored->whyComputed;
    EXPECT_TRUE(stored->run.spans.empty()) << "a reader of the stored summary loads no spans";
    for (SummaryPart part : {kSummaryRun, kSummarySteps, kSummaryBuckets})
        EXPECT_EQ(encodeSummaryPart(stored->run, stored->analysis, part), encodeSummaryPart(full.run, full.analysis, part))
            << "part " << summaryPartName(part);
    EXPECT_GT(full.analysis.steps.size(), 0u);
    EXPECT_EQ(stored->analysis.steps.size(), full.analysis.steps.size());
    EXPECT_EQ(stored->analysis.buckets.size(), full.analysis.buckets.size());
    EXPECT_EQ(reportText(stored->run, stored->analysis), reportText(full.run, full.analysis));
    EXPECT_EQ(reportJson(stored->run, stored->analysis), reportJson(full.run, full.analysis));
    EXPECT_TRUE(stored->overview.lanes.empty()) << "the overview is read only when asked for";
    auto withOverview = loadAnalyzedRun(path, AnalyzedRunOptions{.parts = kSummaryAll | kSummaryOverview});
    ASSERT_TRUE(withOverview && withOverview->stored) << (withOverview ? withOverview->whyComputed : withOverview.error().message);
    EXPECT_LE(withOverview->overview.items(), std::max<size_t>(kOverviewItemBudget, full.run.lanes.size() * kOverviewMinLaneItems));
    expectOverviewExact(full.run, withOverview->overview);
    // Stored and rebuilt overviews are the same bytes.
    EXPECT_EQ(encodeOverviewPart(withOverview->overview), encodeOverviewPart(buildRunOverview(full.run)));
}

SyntheticParams midSizeRun()
{
    // 64 ranks, 8 to a host (measured clock offsets beside shared ones), a straggler, noise and
    // hiccups: every analysis has something to say.
    SyntheticParams p = bigRunParams(400'000, 64);
    return p;
}

TEST(SummaryStore, AMidSizeGeneratedRunReadsTheSameAnalysisFromItsSummaries)
{
    test::TempDir dir;
    const std::string path = dir.file("big.db");
    auto counts = writeSyntheticRun(midSizeRun(), path);
    ASSERT_TRUE(counts) << counts.error().message;
    auto before = loadAnalyzedRun(path, AnalyzedRunOptions{.parts = kSummaryRun});
    ASSERT_TRUE(before);
    EXPECT_FALSE(before->stored);
    EXPECT_EQ(before->whyComputed, "no stored summary");
    ASSERT_TRUE(storeSummaries(path));
    expectSameAnalysis(path);
    // The run part alone (what `lockstep report` reads) leaves the per-step parts empty.
    auto runOnly = loadAnalyzedRun(path, AnalyzedRunOptions{.parts = kSummaryRun});
    ASSERT_TRUE(runOnly);
    EXPECT_TRUE(runOnly->stored);
    EXPECT_TRUE(runOnly->analysis.steps.empty());
    EXPECT_FALSE(runOnly->analysis.ranks.empty());
    EXPECT_EQ(runOnly->analysis.summary.stragglers, fullPath(path).analysis.summary.stragglers);
}

// A budget far below the spans folds every busy lane: the overview still draws exactly what the
// spans draw at and above each lane's gap, on a generated run and on real profiler traces (lanes
// with nested operators: several sub-rows).
TEST(SummaryStore, AFoldedOverviewDrawsWhatTheSpansDraw)
{
    SyntheticParams p = bigRunParams(200'000, 16);
    test::TempDir dir;
    const std::string path = dir.file("folded.db");
    ASSERT_TRUE(writeSyntheticRun(p, path));
    const core::Run generated = *loadRun(path);
    EXPECT_GT(expectOverviewExact(generated, buildRunOverview(generated, {}, 1000)), generated.lanes.size() / 2);
    const std::string imported = dir.file("imported.db");
    ASSERT_TRUE(importTraces({kData + "gpu/kineto-gloo2-rank-0.json.gz", kData + "gpu/kineto-gloo2-rank-1.json.gz"}, imported));
    const core::Run traces = *loadRun(imported);
    const RunOverview overview = buildRunOverview(traces, {}, 1000);
    EXPECT_GT(expectOverviewExact(traces, overview), 0u);
    size_t multiRow = 0;
    for (const LaneOverview& l : overview.lanes)
        multiRow += l.rows > 1;
    EXPECT_GT(multiRow, 0u) << "the traces have nested operators";
    // An overview that does not fit the run is refused, the run left as it was.
    core::Run header = traces;
    header.spans.clear();
    std::vector<DrawItem> folded;
    RunOverview wrong = overview;
    wrong.lanes.pop_back();
    EXPECT_FALSE(overviewRun(wrong, header, folded));
    wrong = overview;
    for (LaneOverview& l : wrong.lanes)
        if (!l.items.empty()) {
            l.items.front().name.v = uint32_t(traces.strings.size());
            break;
        }
    EXPECT_FALSE(overviewRun(wrong, header, folded));
    EXPECT_TRUE(header.spans.empty());
}

// Spans streamed in for a window (RunReader::laneSpans) are exactly the spans load() gives there,
// and the overview with them in place draws, inside the window and at any zoom, what the spans
// draw: on a generated run with clock offsets between hosts, and on real traces (several sub-rows).
void expectDetailExact(const std::string& path, size_t budget)
{
    const core::Run full = *loadRun(path);
    const core::Run header = *loadRun(path, LoadOptions{.spans = false});
    ASSERT_TRUE(header.spans.empty());
    const RunOverview overview = buildRunOverview(full, {}, budget);
    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader);
    TimeNs first = std::numeric_limits<TimeNs>::max(), last = std::numeric_limits<TimeNs>::min();
    for (const Span& s : full.spans)
        first = std::min(first, s.start), last = std::max(last, s.end);
    const RunLod fromSpans(full);
    size_t compared = 0, streamed = 0, foldedLanes = 0;
    for (auto [fa, fb] : {std::pair{0.40, 0.43}, std::pair{0.0, 0.02}, std::pair{0.97, 1.0}}) {
        const TimeNs a = first + TimeNs(double(last - first) * fa), b = first + TimeNs(double(last - first) * fb);
        OverviewDetail detail;
        for (size_t i = 0; i < full.lanes.size(); ++i)
            if (const auto w = detailRange(overview.lanes[i], LaneId{uint32_t(i)}, a, b); w.end > w.start)
                detail.windows.push_back(w);
        auto spans = (*reader)->laneSpans(header, detail.windows);
        ASSERT_TRUE(spans) << spans.error().message;
        detail.spans = std::move(*spans);
        // The streamed spans are load()'s, field for field and in its order.
        for (size_t w = 0; w < detail.windows.size(); ++w) {
            const auto [lf, ll] = full.laneSpanRange(detail.windows[w].lane);
            std::vector<Span> want;
            for (size_t k = lf; k < ll; ++k)
                if (full.spans[k].start >= detail.windows[w].start && full.spans[k].start < detail.windows[w].end)
                    want.push_back(full.spans[k]);
            ASSERT_EQ(detail.spans[w].size(), want.size()) << "lane " << detail.windows[w].lane.v;
            for (size_t k = 0; k < want.size(); ++k) {
                const Span &x = detail.spans[w][k], &y = want[k];
                ASSERT_EQ(std::tuple(x.start, x.end, x.bytes, x.lane.v, x.name.v, x.step, x.bucket, x.kind),
                          std::tuple(y.start, y.end, y.bytes, y.lane.v, y.name.v, y.step, y.bucket, y.kind));
            }
            streamed += want.size();
        }
        core::Run hybrid = header;
        std::vector<DrawItem> folded;
        ASSERT_TRUE(overviewRun(overview, hybrid, folded, &detail));
        const RunLod fromHybrid(hybrid, folded);
        for (size_t i = 0; i < full.lanes.size(); ++i) {
            const LaneId id{uint32_t(i)};
            foldedLanes += overview.lanes[i].gap > 0;
            EXPECT_EQ(fromHybrid.lane(id).rowCount(), fromSpans.lane(id).rowCount());
            for (TimeNs threshold : {TimeNs(1), TimeNs(700), (b - a) / 3000, (b - a) / 200, overview.lanes[i].gap}) {
                if (threshold <= 0)
                    continue;
                std::vector<DrawItem> want, got;
                fromSpans.lane(id).query(a, b, double(threshold), 1.0, want);
                fromHybrid.lane(id).query(a, b, double(threshold), 1.0, got);
                ASSERT_EQ(got.size(), want.size()) << "lane " << i << " threshold " << threshold;
                for (size_t k = 0; k < want.size(); ++k) {
                    // At the window's edges an item may stand for spans beyond them, and which
                    // spans fold together there follows the LOD's levels: the drawn part (clipped
                    // to the window) differs by less than the threshold, a pixel.
                    const TimeNs gotEnd = std::min(got[k].end, b), wantEnd = std::min(want[k].end, b);
                    const TimeNs gotStart = std::max(got[k].start, a), wantStart = std::max(want[k].start, a);
                    const bool atEdge = std::max(got[k].end, want[k].end) > b - threshold
                        || std::min(got[k].start, want[k].start) < a + threshold;
                    EXPECT_EQ(got[k].row, want[k].row) << "lane " << i << " item " << k << " threshold " << threshold;
                    EXPECT_LE(std::abs(gotStart - wantStart), atEdge ? threshold : 0) << "lane " << i << " item " << k;
                    EXPECT_LE(std::abs(gotEnd - wantEnd), atEdge ? threshold : 0) << "lane " << i << " item " << k;
                    if (!atEdge) {
                        EXPECT_EQ(std::tuple(got[k].start, got[k].end, got[k].count, got[k].maxDuration),
                                  std::tuple(want[k].start, want[k].end, want[k].count, want[k].maxDuration))
                            << "lane " << i << " item " << k << " threshold " << threshold;
                    }
                    if (want[k].count == 1 && !atEdge) {
                        const Span& s = full.spans[fromSpans.laneOffset(id) + want[k].span];
                        const Span& o = hybrid.spans[fromHybrid.laneOffset(id) + got[k].span];
                        EXPECT_EQ(std::tuple(o.start, o.end, o.kind, o.name.v, o.bucket, o.bytes, o.step),
                                  std::tuple(s.start, s.end, s.kind, s.name.v, s.bucket, s.bytes, s.step));
                    }
                }
                compared += want.size();
            }
        }
    }
    EXPECT_GT(compared, 1000u);
    EXPECT_GT(streamed, 100u);
    EXPECT_GT(foldedLanes, 0u);
    // A window that cuts an item is refused.
    OverviewDetail cut;
    for (size_t i = 0; i < overview.lanes.size(); ++i)
        for (const OverviewItem& it : overview.lanes[i].items)
            if (it.count > 1 && cut.windows.empty())
                cut.windows.push_back({LaneId{uint32_t(i)}, it.start + 1, it.end + 1});
    ASSERT_FALSE(cut.windows.empty());
    cut.spans.resize(1);
    core::Run refused = header;
    std::vector<DrawItem> folded;
    EXPECT_FALSE(overviewRun(overview, refused, folded, &cut));
}

void execSql(const std::string& path, const char* sql);

TEST(SummaryStore, SpansStreamedForAWindowDrawWhatTheSpansDraw)
{
    test::TempDir dir;
    const std::string generated = dir.file("window.db");
    ASSERT_TRUE(writeSyntheticRun(bigRunParams(200'000, 16), generated));
    // The second host's clock runs 3 ms behind and drifts 50 µs over the run: the streamed spans
    // must be put on rank 0's clock as load() puts them.
    execSql(generated, "UPDATE ranks SET clock_offset_ns = 3000000 + rank * 1000, clock_offset_end_ns = 3050000 + rank * 1000, "
                       "clock_sync_start_ns = 1700000000500000000, clock_sync_end_ns = 1700000001500000000 WHERE rank >= 8");
    {
        const core::Run header = *loadRun(generated, LoadOptions{.spans = false});
        ASSERT_EQ(header.ranks.back().clockOffsetNs, 3015000);
        ASSERT_NE(header.ranks.back().correct(1700000001000000000), 1700000001000000000);
    }
    expectDetailExact(generated, 1000);
    const std::string imported = dir.file("imported.db");
    ASSERT_TRUE(importTraces({kData + "gpu/kineto-gloo2-rank-0.json.gz", kData + "gpu/kineto-gloo2-rank-1.json.gz"}, imported));
    expectDetailExact(imported, 1000);
}

TEST(SummaryStore, ImportStoresTheSummariesOfRealProfilerTraces)
{
    test::TempDir dir;
    for (const auto& files : {std::vector<std::string>{kData + "cpu/kineto-cpu-rank0.json.gz", kData + "cpu/kineto-cpu-rank1.json.gz"},
                              std::vector<std::string>{kData + "gpu/kineto-gloo2-rank-0.json.gz",
                                                       kData + "gpu/kineto-gloo2-rank-1.json.gz"}}) {
        const std::string path = dir.file("imported-" + std::to_string(files.size()) + files.front().substr(files.front().size() - 12));
        auto stats = importTraces(files, path);
        ASSERT_TRUE(stats) << stats.error().message;
        expectSameAnalysis(path);
    }
}

TEST(SummaryStore, MergeStoresTheSummariesOfTheMergedRun)
{
    test::TempDir dir;
    core::Run run = makeSyntheticRun(SyntheticParams{.worldSize = 4, .steps = 6, .stragglerRank = 2,
                                               .stragglerDelayNs = 1'000'000, .ranksPerHost = 2});
    // A shard holding every rank (what a one-process job leaves), merged into the run file.
    std::vector<std::string> shards{dir.file("shard.db")};
    ASSERT_TRUE(saveRun(run, shards.front()));
    const std::string merged = dir.file("merged.db");
    auto stats = mergeRunFiles(shards, merged);
    ASSERT_TRUE(stats) << stats.error().message;
    expectSameAnalysis(merged);
}

// Runs a statement on a file as another program (the sqlite3 shell) would: no Lockstep writer.
void execSql(const std::string& path, const char* sql)
{
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
}

class StaleSummary : public ::testing::Test {
protected:
    void SetUp() override
    {
        core::Run run = makeSyntheticRun(SyntheticParams{.worldSize = 3, .steps = 5, .ranksPerHost = 1});
        ASSERT_TRUE(saveRun(run, path));
        auto fresh = loadAnalyzedRun(path);
        ASSERT_TRUE(fresh);
        ASSERT_TRUE(fresh->stored) << fresh->whyComputed;
    }
    // The file's analysis is computed from its spans (not read), and equals the full path's.
    void expectComputed(const std::string& why)
    {
        auto got = loadAnalyzedRun(path);
        ASSERT_TRUE(got) << got.error().message;
        EXPECT_FALSE(got->stored);
        EXPECT_EQ(got->whyComputed, why);
        const Full full = fullPath(path);
        for (SummaryPart part : {kSummaryRun, kSummarySteps, kSummaryBuckets})
            EXPECT_EQ(encodeSummaryPart(got->run, got->analysis, part), encodeSummaryPart(full.run, full.analysis, part));
    }
    test::TempDir dir;
    std::string path = dir.file("run.db");
};

TEST_F(StaleSummary, AWriterThatOpensTheRunDropsItsSummaries)
{
    auto w = RunWriter::openExisting(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->setStatus(RunStatus::Failed, "changed after the summary"));
    ASSERT_TRUE((*w)->close());
    expectComputed("no stored summary");
    auto got = loadAnalyzedRun(path);
    EXPECT_EQ(got->analysis.summary.config.status, RunStatus::Failed);
}

TEST_F(StaleSummary, AStepChangedBehindLockstepsBackMakesItStale)
{
    execSql(path, "UPDATE steps SET end_ns = end_ns + 5000000 WHERE rank = 1 AND step = 3");
    expectComputed("stale stored summary (the run changed after it was computed)");
}

TEST_F(StaleSummary, AClockOffsetChangedBehindLockstepsBackMakesItStale)
{
    execSql(path, "UPDATE ranks SET clock_offset_ns = clock_offset_ns + 250000 WHERE rank = 2");
    expectComputed("stale stored summary (the run changed after it was computed)");
}

TEST_F(StaleSummary, ASummaryOfAnotherBuildsAnalysisCodeIsNotRead)
{
    // What a file indexed by an older Lockstep holds: the same run, another code fingerprint.
    execSql(path, "UPDATE summaries SET stamp = replace(stamp, ' code=', ' code=0')");
    expectComputed("stored summary written by another build of Lockstep (its analysis code differs)");
}

TEST_F(StaleSummary, AnotherCodecVersionIsNotRead)
{
    execSql(path, "UPDATE summaries SET version = version + 1");
    expectComputed("stored summary of another version (" + std::to_string(kSummaryVersion + 1) + ")");
}

TEST_F(StaleSummary, ADamagedSummaryIsComputedInstead)
{
    // Cut short; then bytes that decompress but do not decode.
    execSql(path, "UPDATE summaries SET data = substr(data, 1, length(data) - 3) WHERE part = 'steps'");
    expectComputed("damaged stored summary");
    ASSERT_TRUE(storeSummaries(path));
    execSql(path, "UPDATE summaries SET data = zeroblob(40) WHERE part = 'run'");
    expectComputed("damaged stored summary");
    // A size no part of this run can have (here 64 GiB; the compressed bytes could not hold it
    // either): refused, nothing allocated for it (allocating it would end the reader with
    // std::bad_alloc).
    ASSERT_TRUE(storeSummaries(path));
    execSql(path, "UPDATE summaries SET data = X'0000000010000000' || substr(data, 9) WHERE part = 'buckets'");
    expectComputed("damaged stored summary");    // A bomb: bytes that do inflate to the size they declare, 100 MB of zeros from ~100 KB, far
    // beyond what a run of 3 ranks and 5 steps can hold.
    ASSERT_TRUE(storeSummaries(path));
    {
        const std::string zeros(100u << 20, '\0');
        uLongf size = compressBound(static_cast<uLong>(zeros.size()));
        std::string bomb(size + 8, '\0');
        const uint64_t n = zeros.size();
        std::memcpy(bomb.data(), &n, 8);
        ASSERT_EQ(compress2(reinterpret_cast<Bytef*>(bomb.data() + 8), &size, reinterpret_cast<const Bytef*>(zeros.data()),
                            static_cast<uLong>(zeros.size()), 9),
                  Z_OK);
        bomb.resize(size + 8);
        ASSERT_LT(bomb.size(), 1u << 20);
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        sqlite3_stmt* st = nullptr;
        ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE summaries SET data = ? WHERE part = 'steps'", -1, &st, nullptr), SQLITE_OK);
        sqlite3_bind_blob(st, 1, bomb.data(), static_cast<int>(bomb.size()), SQLITE_STATIC);
        EXPECT_EQ(sqlite3_step(st), SQLITE_DONE);
        sqlite3_finalize(st);
        sqlite3_close(db);
    }
    expectComputed("damaged stored summary");
}

TEST(SummaryStore, ARunStillBeingWrittenIsAnalysedOnReadNotStored)
{
    test::TempDir dir;
    const std::string path = dir.file("live.db");
    const core::Run run = makeSyntheticRun(SyntheticParams{.worldSize = 2, .steps = 3});
    auto w = RunWriter::create(path, run.config);
    ASSERT_TRUE(w);
    for (const Lane& l : run.lanes)
        ASSERT_TRUE((*w)->addLane(l));
    for (const RankInfo& r : run.ranks)
        ASSERT_TRUE((*w)->addRank(r));
    ASSERT_TRUE((*w)->commit());
    auto s = storeSummaries(path);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message.find("is being written"), std::string::npos) << s.error().message;
    auto got = loadAnalyzedRun(path);
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_FALSE(got->stored);
    ASSERT_TRUE((*w)->close());
    EXPECT_TRUE(storeSummaries(path)) << "once closed, it can be stored";
}

TEST(SummaryStore, FilesOlderThanBootIdsAreAnalysedOnReadNotMigrated)
{
    test::TempDir dir;
    const std::string path = dir.file("old.db");
    std::filesystem::copy_file(kData + "cpu/run-cpu-2.db", path);
    auto s = storeSummaries(path);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message.find("written before schema version 4"), std::string::npos) << s.error().message;
    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader);
    EXPECT_LT((*reader)->schemaVersion(), 4) << "the file was left as it was";
    auto got = loadAnalyzedRun(path);
    ASSERT_TRUE(got);
    EXPECT_FALSE(got->stored);
}

} // namespace
} // namespace lockstep::core
