// Level of detail (core/lod): sub-row packing of overlapping spans, visible range, folding of
// sub-pixel spans, and pre-folded levels that must give exactly what folding the raw spans gives.
#include "lockstep/core/lod.h"
#include "lockstep/core/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

using namespace lockstep::core;

namespace {
std::vector<Span> lane(std::initializer_list<std::pair<TimeNs, TimeNs>> intervals)
{
    std::vector<Span> v;
    for (auto [s, e] : intervals) {
        Span sp;
        sp.start = s;
        sp.end = e;
        sp.kind = SpanKind::Backward;
        v.push_back(sp);
    }
    return v;
}

// The folding rule written out independently of lod.cpp, over raw spans (one row's, in start
// order; `index` maps a position to the lane-relative span index): a span at least T long is
// its own item; a narrower one joins the pending fold if its start is less than T after the
// fold's end (the running maximum of ends), otherwise starts a new fold.
std::vector<DrawItem> referenceFold(const std::vector<Span>& spans, const std::vector<uint32_t>& index, TimeNs t)
{
    std::vector<DrawItem> out;
    bool pending = false;
    DrawItem cur;
    for (size_t k = 0; k < index.size(); ++k) {
        const Span& s = spans[index[k]];
        const TimeNs d = s.end - s.start;
        if (d >= t) {
            if (pending)
                out.push_back(cur);
            pending = false;
            out.push_back(DrawItem{s.start, s.end, index[k], 1, d});
            continue;
        }
        if (pending && s.start - cur.end < t) {
            cur.end = std::max(cur.end, s.end);
            cur.count++;
            cur.maxDuration = std::max(cur.maxDuration, d);
            continue;
        }
        if (pending)
            out.push_back(cur);
        cur = DrawItem{s.start, s.end, index[k], 1, d};
        pending = true;
    }
    if (pending)
        out.push_back(cur);
    return out;
}

std::vector<uint32_t> allOf(const std::vector<Span>& v)
{
    std::vector<uint32_t> idx(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        idx[i] = uint32_t(i);
    return idx;
}

// The most spans in flight at one instant (a sweep over +1 at start, -1 at end; an end sorts
// before a start at the same time because [a, b) and [b, c) do not overlap). Any packing needs
// at least this many rows.
uint32_t maxConcurrency(const std::vector<Span>& v)
{
    std::vector<std::pair<TimeNs, int>> events;
    for (const Span& s : v) {
        if (s.end <= s.start)
            continue; // an instant-long span overlaps nothing
        events.push_back({s.start, +1});
        events.push_back({s.end, -1});
    }
    std::sort(events.begin(), events.end());
    int cur = 0, best = 0;
    for (auto [t, d] : events) {
        cur += d;
        best = std::max(best, cur);
    }
    return uint32_t(std::max(best, 1));
}

// A lane with a mix of scales: bursts of short spans (ns to µs), some ms-long spans, gaps of
// every size, and nesting (a long span with short ones inside). Deterministic LCG.
std::vector<Span> mixedLane(size_t n)
{
    std::vector<Span> v;
    uint64_t x = 12345;
    auto next = [&x]() {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return x >> 33;
    };
    TimeNs t = 0;
    while (v.size() < n) {
        const uint64_t kind = next() % 100;
        TimeNs d;
        if (kind < 70)
            d = 10 + next() % 2000;                  // short
        else if (kind < 95)
            d = 5'000 + next() % 200'000;            // medium
        else
            d = 1'000'000 + next() % 5'000'000;      // long
        Span s;
        s.start = t;
        s.end = t + d;
        v.push_back(s);
        if (kind >= 95 && v.size() + 3 < n) {
            // Nested children inside the long span.
            for (int k = 0; k < 3; ++k) {
                Span c;
                c.start = t + 100 + k * 1000;
                c.end = c.start + 50 + next() % 500;
                v.push_back(c);
            }
        }
        const uint64_t g = next() % 100;
        const TimeNs gap = g < 60 ? 0 : g < 90 ? static_cast<TimeNs>(next() % 5000) : static_cast<TimeNs>(next() % 3'000'000);
        t += d + gap;
    }
    std::stable_sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    return v;
}

std::vector<std::vector<uint32_t>> rowsOf(const LaneLod& lod, size_t n)
{
    std::vector<std::vector<uint32_t>> rows(lod.rowCount());
    for (size_t i = 0; i < n; ++i)
        rows[lod.rowOf(i)].push_back(uint32_t(i));
    return rows;
}
} // namespace

TEST(Lod, ThreeConcurrentAllReducesGetThreeRows)
{
    // Three bucket all-reduces in flight at once (1 MiB buckets: the replay table shows this):
    // b0 [0, 22.8 ms), b1 [5, 25 ms), b2 [9, 30 ms), then b3 [31, 40 ms) after all have ended.
    // At t = 9 ms all three are busy -> 3 rows; b3 starts after b0 ended -> back on row 0.
    const auto v = lane({{0, 22'800'000}, {5'000'000, 25'000'000}, {9'000'000, 30'000'000}, {31'000'000, 40'000'000}});
    const LaneLod lod(v);
    EXPECT_EQ(lod.rowCount(), 3u);
    EXPECT_EQ(lod.rowOf(0), 0u);
    EXPECT_EQ(lod.rowOf(1), 1u);
    EXPECT_EQ(lod.rowOf(2), 2u);
    EXPECT_EQ(lod.rowOf(3), 0u);
    EXPECT_EQ(lod.overflowSpans(), 0u);
    // Zoomed so that nothing folds (1 µs per pixel): every all-reduce is its own item with its
    // full extent, on its own row. Bucket 0 keeps its 22.8 ms, not the 5 ms until b1 starts.
    std::vector<DrawItem> out;
    lod.query(0, 50'000'000, 1000.0, 3.0, out);
    ASSERT_EQ(out.size(), 4u);
    std::map<uint32_t, DrawItem> bySpan;
    for (const DrawItem& d : out)
        bySpan[d.span] = d;
    EXPECT_EQ(bySpan[0].row, 0u);
    EXPECT_EQ(bySpan[0].end - bySpan[0].start, 22'800'000);
    EXPECT_EQ(bySpan[1].row, 1u);
    EXPECT_EQ(bySpan[2].row, 2u);
    EXPECT_EQ(bySpan[3].row, 0u);
    // Items come row by row, each row in start order.
    for (size_t i = 1; i < out.size(); ++i)
        EXPECT_TRUE(out[i - 1].row < out[i].row || (out[i - 1].row == out[i].row && out[i - 1].start <= out[i].start));
}

TEST(Lod, LaneWithoutOverlapIsOneRowAndTouchingSpansShareIt)
{
    // [0,10) [10,20) [20,30): touching is not overlapping.
    const auto v = lane({{0, 10}, {10, 20}, {20, 30}});
    const LaneLod lod(v);
    EXPECT_EQ(lod.rowCount(), 1u);
    for (size_t i = 0; i < v.size(); ++i)
        EXPECT_EQ(lod.rowOf(i), 0u);
    const LaneLod empty;
    EXPECT_EQ(empty.rowCount(), 1u);
}

TEST(Lod, NestedSpansStackLikeACallStack)
{
    // parent [0,100), child [10,50), grandchild [20,30), second child [60,90).
    const auto v = lane({{0, 100}, {10, 50}, {20, 30}, {60, 90}});
    const LaneLod lod(v);
    EXPECT_EQ(lod.rowCount(), 3u);
    EXPECT_EQ(lod.rowOf(0), 0u);
    EXPECT_EQ(lod.rowOf(1), 1u);
    EXPECT_EQ(lod.rowOf(2), 2u);
    EXPECT_EQ(lod.rowOf(3), 1u); // the child row is free again after 50
}

TEST(Lod, PackingIsMinimalAndRowsNeverOverlap)
{
    const std::vector<Span> v = mixedLane(60'000);
    const LaneLod lod(v);
    EXPECT_EQ(lod.rowCount(), maxConcurrency(v));
    EXPECT_EQ(lod.overflowSpans(), 0u);
    for (const auto& row : rowsOf(lod, v.size())) {
        TimeNs end = std::numeric_limits<TimeNs>::min();
        for (uint32_t i : row) {
            ASSERT_GE(v[i].start, end) << "span " << i << " overlaps the one before it in its row";
            end = std::max(end, v[i].end);
        }
    }
}

TEST(Lod, TooManyConcurrentSpansOverflowIntoExistingRows)
{
    // 20 spans all covering [0, 1000): 16 rows, the 4 beyond them counted as overflow.
    std::vector<Span> v;
    for (int i = 0; i < 20; ++i)
        v.push_back(lane({{i, 1000 + i}}).front());
    const LaneLod lod(v);
    EXPECT_EQ(lod.rowCount(), LaneLod::kMaxRows);
    EXPECT_EQ(lod.overflowSpans(), 4u);
    std::vector<DrawItem> out;
    lod.query(0, 2000, 1.0, 1.0, out);
    EXPECT_EQ(out.size(), 20u); // overflowing spans are still drawn
}

TEST(Lod, VisibleRangeFindsLongSpanStartedBefore)
{
    // A [0,1000) is long; B [100,110), C [200,210), D [1500,1510).
    const auto v = lane({{0, 1000}, {100, 110}, {200, 210}, {1500, 1510}});
    const LaneLod lod(v);
    EXPECT_EQ(lod.maxDuration(), TimeNs(1000));
    // Window [500,600): only A overlaps; it started 500 before the window.
    auto [f, l] = lod.visibleRange(500, 600);
    EXPECT_EQ(f, size_t(0));
    EXPECT_EQ(l, size_t(3)); // D (start 1500) is out
    // Window [1200,1300): nothing overlaps (A ended at 1000, D starts at 1500).
    std::tie(f, l) = lod.visibleRange(1200, 1300);
    EXPECT_EQ(f, l);
    // Window [1505,2000): D overlaps.
    std::tie(f, l) = lod.visibleRange(1505, 2000);
    EXPECT_EQ(f, size_t(3));
    EXPECT_EQ(l, size_t(4));
    // Degenerate windows and an empty lane.
    std::tie(f, l) = lod.visibleRange(600, 500);
    EXPECT_EQ(f, l);
    const LaneLod empty;
    std::tie(f, l) = empty.visibleRange(0, 100);
    EXPECT_EQ(f, l);
    std::vector<DrawItem> out;
    empty.query(0, 100, 1.0, 3.0, out);
    EXPECT_TRUE(out.empty());
    // Per row: window [500,600) on B's and C's row (row 1) shows nothing, on A's row A.
    out.clear();
    lod.query(500, 600, 1.0, 1.0, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].span, 0u);
    EXPECT_EQ(out[0].row, 0u);
}

TEST(Lod, FoldingKeepsCountAndMaxDuration)
{
    // Threshold T = 5 ns/px × 2 px = 10.
    //  Row 0: [0,2) [3,6) [7,8): narrow (2, 3, 1), gaps 1 -> one item [0,8), count 3, max 3.
    //         [100,200): 100 >= 10 -> alone.
    //         [300,301) and [350,352): narrow but 49 apart -> two single items.
    //         [1000,1100) wide -> alone.
    //  Row 1: [1010,1012) [1013,1015), nested in [1000,1100): folded (gap 1): [1010,1015),
    //         count 2, max 2. Items come row by row, so it is the last one.
    const auto v = lane({{0, 2}, {3, 6}, {7, 8}, {100, 200}, {300, 301}, {350, 352},
                         {1000, 1100}, {1010, 1012}, {1013, 1015}});
    const LaneLod lod(v);
    EXPECT_EQ(lod.rowCount(), 2u);
    std::vector<DrawItem> out;
    lod.query(0, 2000, 5.0, 2.0, out);
    ASSERT_EQ(out.size(), size_t(6));
    EXPECT_EQ(out[0].start, TimeNs(0));
    EXPECT_EQ(out[0].end, TimeNs(8));
    EXPECT_EQ(out[0].count, 3u);
    EXPECT_EQ(out[0].maxDuration, TimeNs(3));
    EXPECT_EQ(out[1].count, 1u);
    EXPECT_EQ(out[1].span, 3u);
    EXPECT_EQ(out[2].span, 4u);
    EXPECT_EQ(out[2].count, 1u);
    EXPECT_EQ(out[3].span, 5u);
    EXPECT_EQ(out[4].span, 6u);
    EXPECT_EQ(out[4].row, 0u);
    EXPECT_EQ(out[5].start, TimeNs(1010));
    EXPECT_EQ(out[5].end, TimeNs(1015));
    EXPECT_EQ(out[5].count, 2u);
    EXPECT_EQ(out[5].maxDuration, TimeNs(2));
    EXPECT_EQ(out[5].row, 1u);
    // Zoomed in (T = 1): nothing folds, every span is its own item.
    out.clear();
    lod.query(0, 2000, 0.5, 2.0, out);
    EXPECT_EQ(out.size(), v.size());
    // Zoomed far out (T = 10000): one item per row: row 0 stands for 7 spans, row 1 for 2.
    out.clear();
    lod.query(0, 2000, 1000.0, 10.0, out);
    ASSERT_EQ(out.size(), size_t(2));
    EXPECT_EQ(out[0].count, 7u);
    EXPECT_EQ(out[0].maxDuration, TimeNs(100));
    EXPECT_EQ(out[1].count, 2u);
    // Only what is visible: window [250,400) shows the two spans at 300 and 350.
    out.clear();
    lod.query(250, 400, 5.0, 2.0, out);
    ASSERT_EQ(out.size(), size_t(2));
    EXPECT_EQ(out[0].span, 4u);
}

TEST(Lod, LevelsGiveTheSameItemsAsRawFoldingPerRow)
{
    const std::vector<Span> v = mixedLane(60'000);
    const LaneLod lod(v);
    ASSERT_GT(lod.rowCount(), 1u); // the nested children make a second row
    const auto rows = rowsOf(lod, v.size());
    const TimeNs t0 = v.front().start;
    TimeNs t1 = 0;
    for (const Span& s : v)
        t1 = std::max(t1, s.end);
    // Thresholds from below the finest level to far above the coarsest.
    for (TimeNs t : {TimeNs(5), TimeNs(1500), TimeNs(4096), TimeNs(20'000), TimeNs(300'000),
                     TimeNs(5'000'000), TimeNs(100'000'000), TimeNs(10'000'000'000)}) {
        std::vector<DrawItem> got;
        lod.query(t0, t1 + 1, static_cast<double>(t), 1.0, got);
        std::vector<DrawItem> want;
        for (uint32_t r = 0; r < rows.size(); ++r) {
            for (DrawItem d : referenceFold(v, rows[r], t)) {
                d.row = r;
                want.push_back(d);
            }
        }
        ASSERT_EQ(got.size(), want.size()) << "threshold " << t;
        uint64_t total = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i].row, want[i].row);
            EXPECT_EQ(got[i].start, want[i].start);
            EXPECT_EQ(got[i].end, want[i].end);
            EXPECT_EQ(got[i].count, want[i].count);
            EXPECT_EQ(got[i].maxDuration, want[i].maxDuration);
            total += got[i].count;
        }
        EXPECT_EQ(total, uint64_t(v.size())); // every span is drawn exactly once
    }
}

TEST(Lod, LevelsMatchRawFoldingOnASyntheticLane)
{
    // A synthetic compute lane: 35 µs backward segments fold from the 64 µs level on, whole
    // steps from the 1 ms level on, the whole lane at 4 ms (gaps between steps are 0.5 ms).
    const lockstep::core::Run run = makeSyntheticRunWithSpans(50'000, 1);
    const auto [a, b] = run.laneSpanRange(LaneId{0});
    const std::vector<Span> v(run.spans.begin() + static_cast<ptrdiff_t>(a), run.spans.begin() + static_cast<ptrdiff_t>(b));
    const LaneLod lod(v);
    EXPECT_EQ(lod.rowCount(), 1u);
    for (TimeNs t : {TimeNs(70'000), TimeNs(300'000), TimeNs(1'500'000), TimeNs(3'000'000), TimeNs(8'000'000)}) {
        std::vector<DrawItem> got;
        lod.query(v.front().start, v.back().end, static_cast<double>(t), 1.0, got);
        const std::vector<DrawItem> want = referenceFold(v, allOf(v), t);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i].start, want[i].start);
            EXPECT_EQ(got[i].count, want[i].count);
            EXPECT_EQ(got[i].maxDuration, want[i].maxDuration);
        }
    }
}

// An item of the window [t0, t1): it starts before t1 and ends after t0, or is an instant at t0.
bool inWindow(TimeNs start, TimeNs end, TimeNs t0, TimeNs t1)
{
    return start < t1 && (end > t0 || (end == t0 && end == start));
}

TEST(Lod, AWindowQueryFoldsWhatReachesTheWindow)
{
    // Windows of many widths anywhere on a nested lane. Below the finest level the answer is the
    // fold of exactly the row's spans in the window. At a level, the fold of the whole row
    // restricted to the window: the same items, except that the first and last of a row may be
    // cut to what lies in the window (a fold there starts or ends with the window's spans).
    const std::vector<Span> v = mixedLane(60'000);
    const LaneLod lod(v);
    ASSERT_GT(lod.rowCount(), 1u);
    const auto rows = rowsOf(lod, v.size());
    TimeNs extent = 0;
    for (const Span& s : v)
        extent = std::max(extent, s.end);
    uint64_t x = 99;
    auto next = [&x]() {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return x >> 33;
    };
    size_t checkedItems = 0;
    for (int w = 0; w < 300; ++w) {
        const TimeNs width = TimeNs(1000) << (next() % 26); // 1 µs to 33 ms
        const TimeNs t0 = static_cast<TimeNs>(next() % static_cast<uint64_t>(extent));
        const TimeNs t1 = t0 + width;
        for (TimeNs t : {TimeNs(5), TimeNs(1500), TimeNs(20'000), TimeNs(300'000), TimeNs(5'000'000)}) {
            // A view is hundreds of thresholds wide (pixels × ns a pixel / pixels a span): a
            // narrower window could fall inside a fold's gap, where the fold is drawn in a wider
            // view and nothing in this one.
            if (t >= 1024 && width < 100 * t)
                continue;
            std::vector<DrawItem> got;
            lod.query(t0, t1, static_cast<double>(t), 1.0, got);
            size_t at = 0;
            for (uint32_t r = 0; r < rows.size(); ++r) {
                std::vector<DrawItem> want;
                if (t < 1024) {
                    std::vector<uint32_t> reaching;
                    for (uint32_t i : rows[r])
                        if (inWindow(v[i].start, v[i].end, t0, t1))
                            reaching.push_back(i);
                    want = referenceFold(v, reaching, t);
                } else {
                    for (const DrawItem& d : referenceFold(v, rows[r], t))
                        if (inWindow(d.start, d.end, t0, t1))
                            want.push_back(d);
                }
                for (size_t k = 0; k < want.size(); ++k, ++at) {
                    ASSERT_LT(at, got.size()) << "window " << w << " threshold " << t;
                    const DrawItem& g = got[at];
                    EXPECT_EQ(g.row, r);
                    const bool edge = t >= 1024 && (k == 0 || k + 1 == want.size());
                    if (edge) {
                        EXPECT_GE(g.start, want[k].start);
                        EXPECT_LE(g.end, want[k].end);
                        EXPECT_LE(g.count, want[k].count);
                    } else {
                        EXPECT_EQ(g.start, want[k].start) << "window " << w << " threshold " << t;
                        EXPECT_EQ(g.end, want[k].end);
                        EXPECT_EQ(g.count, want[k].count);
                        EXPECT_EQ(g.maxDuration, want[k].maxDuration);
                    }
                    ++checkedItems;
                }
            }
            EXPECT_EQ(at, got.size()) << "window " << w << " threshold " << t;
        }
    }
    EXPECT_GT(checkedItems, 10'000u);
}

TEST(Lod, ALongItemDoesNotWidenAQueryAfterIt)
{
    // A streamed window's lane (run_overview.h): one long folded overview item, then dense spans.
    // A window at the end gets the spans in it and not the long item; one over the item's tail
    // gets the item (with the spans it stands for) and the first spans.
    std::vector<Span> spans;
    std::vector<DrawItem> folded;
    spans.push_back(Span{});
    spans[0].start = 0;
    spans[0].end = 1'000'000'000;
    folded.push_back(DrawItem{.start = 0, .end = spans[0].end, .span = 0, .count = 500, .maxDuration = 1'000'000, .row = 0});
    for (int i = 0; i < 100'000; ++i) {
        Span s;
        s.start = spans[0].end + TimeNs(i) * 2000;
        s.end = s.start + 1000;
        spans.push_back(s);
        folded.push_back(DrawItem{.start = s.start, .end = s.end, .span = 0, .count = 1, .maxDuration = 1000, .row = 0});
    }
    const LaneLod lod(spans, folded);
    EXPECT_EQ(lod.maxDuration(), spans[0].end); // what callers stepping back by it must allow for
    const TimeNs end = spans.back().end;
    std::vector<DrawItem> out;
    lod.query(end - 20'000, end, 10.0, 1.0, out); // 10 spans
    ASSERT_EQ(out.size(), 10u);
    for (size_t k = 0; k < out.size(); ++k) {
        EXPECT_EQ(out[k].count, 1u);
        EXPECT_EQ(out[k].start, spans[spans.size() - 10 + k].start);
    }
    const auto [first, last] = lod.visibleRange(end - 20'000, end);
    EXPECT_GE(first, spans.size() - 10 - 64); // at most one block of spans before the window
    EXPECT_EQ(last, spans.size());
    out.clear();
    lod.query(spans[0].end - 1, spans[0].end + 4000, 10.0, 1.0, out);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].count, 500u);
    EXPECT_EQ(out[0].start, 0);
    EXPECT_EQ(out[1].start, spans[1].start);
    EXPECT_EQ(out[2].start, spans[2].start);
}

TEST(Lod, ZoomedOutQueryIsSmall)
{
    // 2000 pixels over the whole lane, 3-pixel threshold: far fewer items than spans, and
    // every span still accounted for.
    const std::vector<Span> v = mixedLane(60'000);
    const LaneLod lod(v);
    TimeNs t1 = 0;
    for (const Span& s : v)
        t1 = std::max(t1, s.end);
    std::vector<DrawItem> out;
    lod.query(0, t1, static_cast<double>(t1) / 2000.0, 3.0, out);
    EXPECT_LT(out.size(), 2000u * lod.rowCount());
    uint64_t total = 0;
    for (const DrawItem& d : out)
        total += d.count;
    EXPECT_EQ(total, uint64_t(v.size()));
}

TEST(Lod, RunLodOffsets)
{
    SyntheticParams p;
    p.worldSize = 2;
    p.steps = 3;
    const lockstep::core::Run run = makeSyntheticRun(p);
    const RunLod lod(run);
    ASSERT_EQ(lod.laneCount(), run.lanes.size());
    for (size_t i = 0; i < run.lanes.size(); ++i) {
        const LaneId id{uint32_t(i)};
        const auto [first, last] = run.laneSpanRange(id);
        EXPECT_EQ(lod.laneOffset(id), first);
        EXPECT_EQ(lod.lane(id).size(), last - first);
    }
    // A window on lane 0 at 1 µs per pixel returns its spans with lane-relative indices.
    const LaneId l0{0};
    const auto [first, last] = run.laneSpanRange(l0);
    std::vector<DrawItem> out;
    lod.lane(l0).query(run.spans[first].start, run.spans[last - 1].end, 1.0, 1.0, out);
    EXPECT_EQ(out.size(), last - first); // spans are >= 1 µs wide: nothing folds at 1 ns
    EXPECT_EQ(run.spans[lod.laneOffset(l0) + out[2].span].start, out[2].start);
}
