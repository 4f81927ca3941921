// Level of detail: visible range, folding of sub-pixel spans, and pre-folded levels that must
// give exactly what folding the raw spans gives.
#include "lockstep/core/lod.h"
#include "lockstep/core/synthetic.h"

#include <QtTest/QtTest>

#include <algorithm>

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

// The folding rule written out independently of lod.cpp, over raw spans: a span at least T long
// is its own item; a narrower one joins the pending fold if its start is less than T after the
// fold's end (the running maximum of ends), otherwise starts a new fold.
std::vector<DrawItem> referenceFold(const std::vector<Span>& spans, TimeNs t)
{
    std::vector<DrawItem> out;
    bool pending = false;
    DrawItem cur;
    for (size_t i = 0; i < spans.size(); ++i) {
        const Span& s = spans[i];
        const TimeNs d = s.end - s.start;
        if (d >= t) {
            if (pending)
                out.push_back(cur);
            pending = false;
            out.push_back(DrawItem{s.start, s.end, uint32_t(i), 1, d});
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
        cur = DrawItem{s.start, s.end, uint32_t(i), 1, d};
        pending = true;
    }
    if (pending)
        out.push_back(cur);
    return out;
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
} // namespace

class TestLod : public QObject {
    Q_OBJECT
private slots:
    void visibleRangeFindsLongSpanStartedBefore()
    {
        // A [0,1000) is long; B [100,110), C [200,210), D [1500,1510).
        const auto v = lane({{0, 1000}, {100, 110}, {200, 210}, {1500, 1510}});
        const LaneLod lod(v);
        QCOMPARE(lod.maxDuration(), TimeNs(1000));
        // Window [500,600): only A overlaps; it started 500 before the window.
        auto [f, l] = lod.visibleRange(500, 600);
        QCOMPARE(f, size_t(0));
        QCOMPARE(l, size_t(3)); // D (start 1500) is out
        // Window [1200,1300): nothing overlaps (A ended at 1000, D starts at 1500).
        std::tie(f, l) = lod.visibleRange(1200, 1300);
        QCOMPARE(f, l);
        // Window [1505,2000): D overlaps.
        std::tie(f, l) = lod.visibleRange(1505, 2000);
        QCOMPARE(f, size_t(3));
        QCOMPARE(l, size_t(4));
        // Degenerate windows and an empty lane.
        std::tie(f, l) = lod.visibleRange(600, 500);
        QCOMPARE(f, l);
        const LaneLod empty;
        std::tie(f, l) = empty.visibleRange(0, 100);
        QCOMPARE(f, l);
        std::vector<DrawItem> out;
        empty.query(0, 100, 1.0, 3.0, out);
        QVERIFY(out.empty());
    }

    void foldingKeepsCountAndMaxDuration()
    {
        // Threshold T = 5 ns/px × 2 px = 10.
        //  [0,2) [3,6) [7,8): narrow (2, 3, 1), gaps 1 -> one item [0,8), count 3, max 3.
        //  [100,200): 100 >= 10 -> alone.
        //  [300,301) and [350,352): narrow but 49 apart -> two single items.
        //  [1000,1100) wide with [1010,1012) [1013,1015) nested: the wide one alone, the two
        //  nested ones folded (gap 1): [1010,1015), count 2, max 2.
        const auto v = lane({{0, 2}, {3, 6}, {7, 8}, {100, 200}, {300, 301}, {350, 352},
                             {1000, 1100}, {1010, 1012}, {1013, 1015}});
        const LaneLod lod(v);
        std::vector<DrawItem> out;
        lod.query(0, 2000, 5.0, 2.0, out);
        QCOMPARE(out.size(), size_t(6));
        QCOMPARE(out[0].start, TimeNs(0));
        QCOMPARE(out[0].end, TimeNs(8));
        QCOMPARE(out[0].count, 3u);
        QCOMPARE(out[0].maxDuration, TimeNs(3));
        QCOMPARE(out[1].count, 1u);
        QCOMPARE(out[1].span, 3u);
        QCOMPARE(out[2].span, 4u);
        QCOMPARE(out[2].count, 1u);
        QCOMPARE(out[3].span, 5u);
        QCOMPARE(out[4].span, 6u);
        QCOMPARE(out[5].start, TimeNs(1010));
        QCOMPARE(out[5].end, TimeNs(1015));
        QCOMPARE(out[5].count, 2u);
        QCOMPARE(out[5].maxDuration, TimeNs(2));
        // Zoomed in (T = 1): nothing folds, every span is its own item.
        out.clear();
        lod.query(0, 2000, 0.5, 2.0, out);
        QCOMPARE(out.size(), v.size());
        // Zoomed far out (T = 10000): everything is one item standing for all 9 spans.
        out.clear();
        lod.query(0, 2000, 1000.0, 10.0, out);
        QCOMPARE(out.size(), size_t(1));
        QCOMPARE(out[0].count, 9u);
        QCOMPARE(out[0].maxDuration, TimeNs(100));
        // Only what is visible: window [250,400) shows the two spans at 300 and 350.
        out.clear();
        lod.query(250, 400, 5.0, 2.0, out);
        QCOMPARE(out.size(), size_t(2));
        QCOMPARE(out[0].span, 4u);
    }

    void levelsGiveTheSameItemsAsRawFolding()
    {
        const std::vector<Span> v = mixedLane(60'000);
        const LaneLod lod(v);
        const TimeNs t0 = v.front().start;
        TimeNs t1 = 0;
        for (const Span& s : v)
            t1 = std::max(t1, s.end);
        // Thresholds from below the finest level to far above the coarsest.
        for (TimeNs t : {TimeNs(5), TimeNs(1500), TimeNs(4096), TimeNs(20'000), TimeNs(300'000),
                         TimeNs(5'000'000), TimeNs(100'000'000), TimeNs(10'000'000'000)}) {
            std::vector<DrawItem> got;
            lod.query(t0, t1 + 1, static_cast<double>(t), 1.0, got);
            const std::vector<DrawItem> want = referenceFold(v, t);
            QCOMPARE(got.size(), want.size());
            uint64_t total = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                QCOMPARE(got[i].start, want[i].start);
                QCOMPARE(got[i].end, want[i].end);
                QCOMPARE(got[i].count, want[i].count);
                QCOMPARE(got[i].maxDuration, want[i].maxDuration);
                total += got[i].count;
            }
            QCOMPARE(total, uint64_t(v.size())); // every span is drawn exactly once
        }
    }

    void levelsMatchRawFoldingOnASyntheticLane()
    {
        // A synthetic compute lane: 35 µs backward segments fold from the 64 µs level on, whole
        // steps from the 1 ms level on, the whole lane at 4 ms (gaps between steps are 0.5 ms).
        const Run run = makeSyntheticRunWithSpans(50'000, 1);
        const auto [a, b] = run.laneSpanRange(LaneId{0});
        const std::vector<Span> v(run.spans.begin() + static_cast<ptrdiff_t>(a), run.spans.begin() + static_cast<ptrdiff_t>(b));
        const LaneLod lod(v);
        for (TimeNs t : {TimeNs(70'000), TimeNs(300'000), TimeNs(1'500'000), TimeNs(3'000'000), TimeNs(8'000'000)}) {
            std::vector<DrawItem> got;
            lod.query(v.front().start, v.back().end, static_cast<double>(t), 1.0, got);
            const std::vector<DrawItem> want = referenceFold(v, t);
            QCOMPARE(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) {
                QCOMPARE(got[i].start, want[i].start);
                QCOMPARE(got[i].count, want[i].count);
                QCOMPARE(got[i].maxDuration, want[i].maxDuration);
            }
        }
    }

    void zoomedOutQueryIsSmall()
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
        QVERIFY2(out.size() < 2000, qPrintable(QString::number(out.size())));
        uint64_t total = 0;
        for (const DrawItem& d : out)
            total += d.count;
        QCOMPARE(total, uint64_t(v.size()));
    }

    void runLodOffsets()
    {
        SyntheticParams p;
        p.worldSize = 2;
        p.steps = 3;
        const Run run = makeSyntheticRun(p);
        const RunLod lod(run);
        QCOMPARE(lod.laneCount(), run.lanes.size());
        for (size_t i = 0; i < run.lanes.size(); ++i) {
            const LaneId id{uint32_t(i)};
            const auto [first, last] = run.laneSpanRange(id);
            QCOMPARE(lod.laneOffset(id), first);
            QCOMPARE(lod.lane(id).size(), last - first);
        }
        // A window on lane 0 at 1 µs per pixel returns its spans with lane-relative indices.
        const LaneId l0{0};
        const auto [first, last] = run.laneSpanRange(l0);
        std::vector<DrawItem> out;
        lod.lane(l0).query(run.spans[first].start, run.spans[last - 1].end, 1.0, 1.0, out);
        QCOMPARE(out.size(), last - first); // spans are >= 1 µs wide: nothing folds at 1 ns
        QCOMPARE(run.spans[lod.laneOffset(l0) + out[2].span].start, out[2].start);
    }
};

QTEST_GUILESS_MAIN(TestLod)
#include "test_lod.moc"
