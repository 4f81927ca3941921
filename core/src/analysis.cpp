// Analyses over a loaded Run, exactly as DESIGN.md ("Vocabulary and exact metric definitions")
// defines them: per-step overlap breakdown, per-bucket statistics, stragglers, the run summary
// and scaling efficiency. Pure functions: nothing here touches a file or throws.
#include "lockstep/core/analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <tuple>
#include <unordered_map>

namespace lockstep::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// DESIGN.md: a run straggler causes a mean wait of at least 5% of the step time. Below that the
// "straggler" is noise (every step has some rank that arrives last).
constexpr double kStragglerWaitFraction = 0.05;

// Appends [start, end) to a sorted-by-start stream of intervals, merging it into the last one
// when they touch or overlap. Empty or inverted intervals are dropped.
inline void appendMerged(std::vector<Interval>& out, TimeNs start, TimeNs end)
{
    if (end <= start)
        return;
    if (!out.empty() && start <= out.back().end) {
        out.back().end = std::max(out.back().end, end);
        return;
    }
    out.push_back({start, end});
}

// Sorts and merges in place (for lists assembled from several lanes).
void mergeInPlace(std::vector<Interval>& v)
{
    std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
    std::vector<Interval> out;
    out.reserve(v.size());
    for (const Interval& i : v)
        appendMerged(out, i.start, i.end);
    v = std::move(out);
}

// First interval of a sorted disjoint list that ends after t (their ends are sorted too).
inline size_t firstEndingAfter(std::span<const Interval> u, TimeNs t)
{
    return static_cast<size_t>(std::upper_bound(u.begin(), u.end(), t,
                                                [](TimeNs v, const Interval& i) { return v < i.end; })
                               - u.begin());
}

// |U ∩ [a, b)| for a sorted disjoint U.
TimeNs lengthWithin(std::span<const Interval> u, TimeNs a, TimeNs b)
{
    TimeNs total = 0;
    for (size_t i = firstEndingAfter(u, a); i < u.size() && u[i].start < b; ++i)
        total += std::min(u[i].end, b) - std::max(u[i].start, a);
    return total;
}

// |A ∩ B ∩ [a, b)| for sorted disjoint A and B: a two-pointer walk over the parts in the window.
TimeNs intersectionWithin(std::span<const Interval> x, std::span<const Interval> y, TimeNs a, TimeNs b)
{
    size_t i = firstEndingAfter(x, a);
    size_t j = firstEndingAfter(y, a);
    TimeNs total = 0;
    while (i < x.size() && j < y.size() && x[i].start < b && y[j].start < b) {
        const TimeNs lo = std::max({x[i].start, y[j].start, a});
        const TimeNs hi = std::min({x[i].end, y[j].end, b});
        if (hi > lo)
            total += hi - lo;
        if (x[i].end < y[j].end)
            ++i;
        else
            ++j;
    }
    return total;
}

// Dense index for each rank that owns a lane, plus the lane -> rank index map.
struct RankIndex {
    std::vector<int32_t> ranks;         // dense index -> rank number, sorted
    std::vector<int32_t> laneRank;      // lane index -> dense index
    int32_t find(int32_t rank) const
    {
        auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
        return it != ranks.end() && *it == rank ? static_cast<int32_t>(it - ranks.begin()) : -1;
    }
};

RankIndex indexRanks(const Run& run)
{
    RankIndex idx;
    for (const Lane& l : run.lanes)
        idx.ranks.push_back(l.rank);
    for (const Step& s : run.steps)
        idx.ranks.push_back(s.rank);
    std::sort(idx.ranks.begin(), idx.ranks.end());
    idx.ranks.erase(std::unique(idx.ranks.begin(), idx.ranks.end()), idx.ranks.end());
    idx.laneRank.resize(run.lanes.size());
    for (size_t i = 0; i < run.lanes.size(); ++i)
        idx.laneRank[i] = idx.find(run.lanes[i].rank);
    return idx;
}

int32_t worldSizeOf(const Run& run, const RankIndex& idx)
{
    return run.config.worldSize > 0 ? run.config.worldSize : static_cast<int32_t>(idx.ranks.size());
}

// Steady steps: DESIGN.md excludes the first warmupSteps steps from run-level numbers. A run
// that has only warm-up steps (a short smoke run) would otherwise have no numbers at all, so it
// falls back to all steps; summarize() and stragglers() use this same rule.
bool hasSteadyStep(const Run& run)
{
    for (const Step& s : run.steps)
        if (s.step >= run.config.warmupSteps)
            return true;
    return false;
}

struct SteadyRule {
    int32_t firstSteady = 0;
    bool isSteady(int32_t step) const { return step >= firstSteady; }
};
SteadyRule steadyRule(const Run& run)
{
    return SteadyRule{hasSteadyStep(run) ? run.config.warmupSteps : std::numeric_limits<int32_t>::min()};
}

StragglerReport stragglersFrom(const Run& run, const std::vector<BucketStat>& stats);

} // namespace

// ---------------------------------------------------------------------------------------------
// Interval helpers

std::vector<Interval> unionClipped(std::vector<Interval> intervals, TimeNs lo, TimeNs hi)
{
    for (Interval& i : intervals) {
        i.start = std::max(i.start, lo);
        i.end = std::min(i.end, hi);
    }
    std::erase_if(intervals, [](const Interval& i) { return i.end <= i.start; });
    mergeInPlace(intervals);
    return intervals;
}

TimeNs totalLength(const std::vector<Interval>& sortedDisjoint)
{
    TimeNs total = 0;
    for (const Interval& i : sortedDisjoint)
        total += i.end - i.start;
    return total;
}

TimeNs intersectionLength(const std::vector<Interval>& a, const std::vector<Interval>& b)
{
    return intersectionWithin(a, b, std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max());
}

// ---------------------------------------------------------------------------------------------
// Step breakdown
//
// The naive way (for each step, scan the spans) is O(steps × spans): hours on 10 M spans. Here
// each lane is walked once: its spans are sorted by start, so the union of its compute spans
// and the union of its communication spans come out of one linear merge (touching backward
// segments collapse into a single interval, so the unions are far smaller than the lanes).
// A rank's lanes are then combined (sort + merge of the small unions), and each step W only
// binary-searches into its rank's two unions and walks the intervals inside W, clipping the
// first and last one to W. A span that crosses a step boundary is thereby split between the
// steps by time, as DESIGN.md's clipping asks. Total: O(spans + U log U + steps log U).
//
// The GPU rule (DESIGN.md): on a rank that has GpuStream lanes with spans, C and M come from
// the device timeline only (every kernel that is not communication is compute, on any stream);
// host spans would count the same work twice, shifted by the launch latency.
std::vector<StepBreakdown> stepBreakdown(const Run& run)
{
    const RankIndex idx = indexRanks(run);
    const size_t nRanks = idx.ranks.size();
    struct RankUnions {
        std::vector<Interval> hostC, hostM, devC, devM;
        int hostLanes = 0, devLanes = 0; // lanes that contributed (> 1 needs a merge)
    };
    std::vector<RankUnions> unions(nRanks);

    // The walk needs each lane's spans in start order (the Run invariant). It checks that as it
    // goes (a separate is_sorted pass would read 10 M spans twice); a hand-made Run that breaks
    // it is sorted into a private copy and walked again rather than analysed wrongly. Lanes
    // need not be contiguous: a lane met in several stretches is merged like several lanes.
    auto walk = [&](std::span<const Span> spans) {
        size_t i = 0;
        while (i < spans.size()) {
            const uint32_t laneIndex = spans[i].lane.v;
            size_t j = i;
            while (j < spans.size() && spans[j].lane.v == laneIndex)
                ++j;
            if (laneIndex < run.lanes.size() && idx.laneRank[laneIndex] >= 0) {
                RankUnions& ru = unions[idx.laneRank[laneIndex]];
                const bool device = run.lanes[laneIndex].kind == LaneKind::GpuStream;
                // Each stretch's union is merged on its own, then appended; several stretches of
                // one rank are merged together afterwards.
                std::vector<Interval> laneC, laneM;
                TimeNs previous = std::numeric_limits<TimeNs>::min();
                for (size_t k = i; k < j; ++k) {
                    const Span& s = spans[k];
                    if (s.start < previous)
                        return false;
                    previous = s.start;
                    if (isCompute(s.kind))
                        appendMerged(laneC, s.start, s.end);
                    else if (isCommunication(s.kind))
                        appendMerged(laneM, s.start, s.end);
                }
                std::vector<Interval>& c = device ? ru.devC : ru.hostC;
                std::vector<Interval>& m = device ? ru.devM : ru.hostM;
                c.insert(c.end(), laneC.begin(), laneC.end());
                m.insert(m.end(), laneM.begin(), laneM.end());
                (device ? ru.devLanes : ru.hostLanes)++;
            }
            i = j;
        }
        return true;
    };
    if (!walk(run.spans)) {
        std::vector<Span> sorted = run.spans;
        std::sort(sorted.begin(), sorted.end(), [](const Span& a, const Span& b) {
            return std::tie(a.lane.v, a.start) < std::tie(b.lane.v, b.start);
        });
        unions.assign(nRanks, RankUnions{});
        walk(sorted);
    }
    for (RankUnions& ru : unions) {
        if (ru.hostLanes > 1) {
            mergeInPlace(ru.hostC);
            mergeInPlace(ru.hostM);
        }
        if (ru.devLanes > 1) {
            mergeInPlace(ru.devC);
            mergeInPlace(ru.devM);
        }
    }

    std::vector<StepBreakdown> out;
    out.reserve(run.steps.size());
    for (const Step& st : run.steps) {
        StepBreakdown b;
        b.rank = st.rank;
        b.step = st.step;
        b.start = st.start;
        b.end = st.end;
        b.wall = std::max<TimeNs>(0, st.end - st.start);
        b.warmup = st.step < run.config.warmupSteps;
        const int32_t r = idx.find(st.rank);
        if (r >= 0 && b.wall > 0) {
            const RankUnions& ru = unions[r];
            const bool gpu = ru.devLanes > 0;
            const std::vector<Interval>& c = gpu ? ru.devC : ru.hostC;
            const std::vector<Interval>& m = gpu ? ru.devM : ru.hostM;
            b.compute = lengthWithin(c, st.start, st.end);
            b.communication = lengthWithin(m, st.start, st.end);
            b.overlapped = intersectionWithin(c, m, st.start, st.end);
        }
        b.exposed = b.communication - b.overlapped;
        b.computeOnly = b.compute - b.overlapped;
        b.idle = b.wall - (b.compute + b.communication - b.overlapped);
        b.overlapRatio = b.communication > 0
            ? static_cast<double>(b.overlapped) / static_cast<double>(b.communication)
            : kNaN;
        out.push_back(b);
    }
    std::stable_sort(out.begin(), out.end(), [](const StepBreakdown& a, const StepBreakdown& b) {
        return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
    });
    return out;
}

// ---------------------------------------------------------------------------------------------
// Bucket statistics
//
// A bucket's collective in a step is its communication span carrying that (step, bucket) on
// that rank. Host Comm spans (launch -> completion as the reducer saw it) are preferred; a rank
// that only has device communication kernels tagged with the bucket uses those. If a bucket's
// collective was recorded as several spans (a chunked all-reduce), they are one collective:
// earliest start, latest end, bytes summed. Spans without bytes take the bucket table's size.
// Ready is the latest GradReady instant carrying the same (rank, step, bucket).
std::vector<BucketStat> bucketStats(const Run& run)
{
    const RankIndex idx = indexRanks(run);
    struct Entry {
        int32_t rank, step, bucket;
        bool host;
        TimeNs start, end;
        int64_t bytes;
    };
    std::vector<Entry> entries;
    entries.reserve(1024);
    for (const Span& s : run.spans) {
        if (!isCommunication(s.kind) || s.bucket < 0 || s.step < 0 || s.lane.v >= run.lanes.size())
            continue;
        entries.push_back({run.lanes[s.lane.v].rank, s.step, s.bucket, s.kind == SpanKind::Comm,
                           s.start, s.end, s.bytes});
    }
    // Spans come in (lane, start) order, so on a normal run the entries already are in key
    // order (lanes by rank, collectives by time): checking is far cheaper than sorting 1 M.
    const auto entryLess = [](const Entry& a, const Entry& b) {
        return std::tie(a.rank, a.step, a.bucket, a.start) < std::tie(b.rank, b.step, b.bucket, b.start);
    };
    if (!std::is_sorted(entries.begin(), entries.end(), entryLess))
        std::sort(entries.begin(), entries.end(), entryLess);

    std::unordered_map<int32_t, int64_t> tableBytes;
    for (const Bucket& b : run.buckets)
        tableBytes[b.index] = b.bytes;
    const int32_t n = worldSizeOf(run, idx);
    const double busFactor = n > 1 ? 2.0 * (n - 1) / n : 0.0;

    std::vector<BucketStat> out;
    out.reserve(entries.size());
    for (size_t i = 0; i < entries.size();) {
        size_t j = i;
        bool anyHost = false;
        while (j < entries.size() && entries[j].rank == entries[i].rank && entries[j].step == entries[i].step
               && entries[j].bucket == entries[i].bucket) {
            anyHost |= entries[j].host;
            ++j;
        }
        BucketStat st;
        st.rank = entries[i].rank;
        st.step = entries[i].step;
        st.bucket = entries[i].bucket;
        st.launch = std::numeric_limits<TimeNs>::max();
        st.completion = std::numeric_limits<TimeNs>::min();
        for (size_t k = i; k < j; ++k) {
            if (entries[k].host != anyHost)
                continue;
            st.launch = std::min(st.launch, entries[k].start);
            st.completion = std::max(st.completion, entries[k].end);
            st.bytes += entries[k].bytes;
        }
        if (st.bytes == 0) {
            auto it = tableBytes.find(st.bucket);
            st.bytes = it != tableBytes.end() ? it->second : 0;
        }
        st.duration = std::max<TimeNs>(0, st.completion - st.launch);
        // bytes per ns is GB/s (1e9 bytes per second).
        st.algbwGBps = st.duration > 0 ? static_cast<double>(st.bytes) / static_cast<double>(st.duration) : 0.0;
        st.busbwGBps = st.algbwGBps * busFactor;
        out.push_back(st);
        i = j;
    }

    // Ready times. Instants come sorted by (lane, ts) and a bucket's gradient-ready instants are
    // consecutive, so the (rank, step, bucket) key changes rarely: one binary search per run of
    // equal keys instead of one per instant.
    const auto keyLess = [](const BucketStat& s, const std::tuple<int32_t, int32_t, int32_t>& k) {
        return std::tie(s.rank, s.step, s.bucket) < k;
    };
    // Instants and collectives both advance in time, so the next key is usually the entry right
    // after the previous one: try that before searching.
    size_t hint = 0;
    auto flush = [&](std::tuple<int32_t, int32_t, int32_t> key, TimeNs ts) {
        auto it = out.end();
        for (size_t h = hint; h < out.size() && h < hint + 2; ++h) {
            if (std::tie(out[h].rank, out[h].step, out[h].bucket) == key) {
                it = out.begin() + static_cast<ptrdiff_t>(h);
                break;
            }
        }
        if (it == out.end())
            it = std::lower_bound(out.begin(), out.end(), key, keyLess);
        hint = static_cast<size_t>(it - out.begin());
        if (it != out.end() && std::tie(it->rank, it->step, it->bucket) == key)
            it->ready = std::max(it->ready, ts);
    };
    bool have = false;
    std::tuple<int32_t, int32_t, int32_t> cur{};
    TimeNs curMax = 0;
    for (const Instant& in : run.instants) {
        if (in.kind != InstantKind::GradReady || in.bucket < 0 || in.step < 0 || in.lane.v >= run.lanes.size())
            continue;
        const std::tuple<int32_t, int32_t, int32_t> key{run.lanes[in.lane.v].rank, in.step, in.bucket};
        if (have && key == cur) {
            curMax = std::max(curMax, in.ts);
            continue;
        }
        if (have)
            flush(cur, curMax);
        cur = key;
        curMax = in.ts;
        have = true;
    }
    if (have)
        flush(cur, curMax);
    for (BucketStat& st : out)
        st.readyToLaunch = st.ready >= 0 ? st.launch - st.ready : -1;
    return out;
}

// ---------------------------------------------------------------------------------------------
// Stragglers
//
// Per (step, bucket): skew = latest launch - earliest launch over ranks; the late rank is the
// one that launched last; the wait it caused is what every other rank spent waiting for it,
// sum of (late launch - their launch), since an all-reduce cannot finish before the last rank
// joins. Per step, each rank's caused wait is summed over buckets; the step straggler is the
// rank with the most.
//
// Tie-breaking (documented because results must be deterministic):
//  - two ranks launching a bucket at the same latest time: the lower rank number is the late rank;
//  - two ranks causing equal wait in a step: the lower rank number is the step straggler;
//  - a step in which no rank caused any wait has no straggler (rank -1);
//  - "straggler in most steady steps" means the plurality: every rank whose count of steady
//    steps as straggler equals the highest count (and is > 0) is a candidate; a candidate is a
//    run straggler only if its mean caused wait is ≥ 5% of the mean steady step time.
namespace {
StragglerReport stragglersFrom(const Run& run, const std::vector<BucketStat>& stats)
{
    StragglerReport rep;
    const SteadyRule steady = steadyRule(run);

    // (step, bucket) groups: stats are sorted by (rank, step, bucket); regroup by (step, bucket)
    // through a compact copy (sorting pointers into the stats would chase cache misses).
    struct Launch {
        int32_t step, bucket, rank;
        TimeNs launch;
    };
    std::vector<Launch> order;
    order.reserve(stats.size());
    for (const BucketStat& s : stats)
        order.push_back({s.step, s.bucket, s.rank, s.launch});
    // The stats come in rank order, one sorted run per rank: a stable merge sort on (step,
    // bucket) keeps ranks ascending within a group and is fast on such runs (introsort's pivots
    // degrade on this pattern).
    std::stable_sort(order.begin(), order.end(), [](const Launch& a, const Launch& b) {
        return std::tie(a.step, a.bucket) < std::tie(b.step, b.bucket);
    });
    // Wait caused per (step, rank). DESIGN.md defines the wait a late rank causes per bucket;
    // within a step we take the largest of its buckets' waits, not their sum. The waits of one
    // step overlap in time: a rank that is uniformly 5 ms behind delays every bucket by 5 ms, yet
    // holds the others back by about 5 ms in that step, not 5 ms times the number of buckets
    // (a sum named a "straggler" in nearly every many-bucket run). And where launches are
    // serialized (kernels on one NCCL stream) only the first delayed bucket shows the skew, so a
    // per-bucket mean would dilute a real straggler. The maximum is right in both cases.
    //
    // Flat and sorted by (step, rank). `order` is sorted by step,
    // so each step's few (rank, wait) pairs are gathered in a small buffer and flushed in order.
    struct Caused {
        int32_t step, rank;
        TimeNs wait;
    };
    std::vector<Caused> caused;
    std::vector<std::pair<int32_t, TimeNs>> stepAcc;
    auto flushStep = [&](int32_t step) {
        std::sort(stepAcc.begin(), stepAcc.end());
        for (const auto& [rank, wait] : stepAcc) {
            if (!caused.empty() && caused.back().step == step && caused.back().rank == rank)
                caused.back().wait = std::max(caused.back().wait, wait);
            else
                caused.push_back({step, rank, wait});
        }
        stepAcc.clear();
    };
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
        int32_t late = -1;
        while (j < order.size() && order[j].step == order[i].step && order[j].bucket == order[i].bucket) {
            lo = std::min(lo, order[j].launch);
            if (order[j].launch > hi) { // strict: ties keep the lower rank (sorted by rank)
                hi = order[j].launch;
                late = order[j].rank;
            }
            ++j;
        }
        BucketSkew sk;
        sk.step = order[i].step;
        sk.bucket = order[i].bucket;
        sk.skew = hi - lo;
        sk.lateRank = late;
        for (size_t k = i; k < j; ++k)
            sk.waitCaused += hi - order[k].launch; // the late rank itself adds 0
        rep.skews.push_back(sk);
        auto acc = std::find_if(stepAcc.begin(), stepAcc.end(), [late](const auto& p) { return p.first == late; });
        if (acc != stepAcc.end())
            acc->second = std::max(acc->second, sk.waitCaused);
        else
            stepAcc.push_back({late, sk.waitCaused});
        if (j == order.size() || order[j].step != sk.step)
            flushStep(sk.step);
        i = j;
    }

    // Per step: mean wall over ranks (every step of run.steps, plus steps only seen in
    // collectives), and the straggler.
    std::vector<std::pair<int32_t, TimeNs>> walls; // (step, wall) per (rank, step)
    walls.reserve(run.steps.size() + rep.skews.size());
    std::vector<int32_t> rankList;
    for (const Step& st : run.steps) {
        walls.push_back({st.step, std::max<TimeNs>(0, st.end - st.start)});
        rankList.push_back(st.rank);
    }
    for (const BucketStat& st : stats) {
        if (rankList.empty() || rankList.back() != st.rank) // stats are grouped by rank
            rankList.push_back(st.rank);
    }
    std::sort(rankList.begin(), rankList.end());
    rankList.erase(std::unique(rankList.begin(), rankList.end()), rankList.end());
    for (const BucketSkew& sk : rep.skews) {
        if (walls.empty() || walls.back().first != sk.step || walls.back().second != -1)
            walls.push_back({sk.step, -1}); // -1: present, but contributes no wall
    }
    std::stable_sort(walls.begin(), walls.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    size_t c = 0;
    for (size_t i = 0; i < walls.size();) {
        const int32_t step = walls[i].first;
        TimeNs sum = 0;
        int n = 0;
        for (; i < walls.size() && walls[i].first == step; ++i) {
            if (walls[i].second >= 0) {
                sum += walls[i].second;
                ++n;
            }
        }
        StepStraggler ss;
        ss.step = step;
        ss.stepTime = n > 0 ? sum / n : 0;
        while (c < caused.size() && caused[c].step < step)
            ++c;
        for (; c < caused.size() && caused[c].step == step; ++c) {
            // Sorted by rank, and only a strictly larger wait replaces: ties keep the lower rank.
            if (caused[c].wait > ss.waitCaused) {
                ss.waitCaused = caused[c].wait;
                ss.rank = caused[c].rank;
            }
        }
        rep.perStep.push_back(ss);
    }

    // Per rank over steady steps.
    double steadyTimeSum = 0;
    int steadyCount = 0;
    std::vector<int> asStraggler(rankList.size(), 0);
    std::vector<double> waitSum(rankList.size(), 0.0);
    auto rankIndex = [&rankList](int32_t rank) {
        return static_cast<size_t>(std::lower_bound(rankList.begin(), rankList.end(), rank) - rankList.begin());
    };
    for (const StepStraggler& ss : rep.perStep) {
        if (!steady.isSteady(ss.step))
            continue;
        steadyTimeSum += static_cast<double>(ss.stepTime);
        ++steadyCount;
        if (ss.rank >= 0)
            ++asStraggler[rankIndex(ss.rank)];
    }
    for (const Caused& cw : caused) {
        if (steady.isSteady(cw.step))
            waitSum[rankIndex(cw.rank)] += static_cast<double>(cw.wait);
    }

    const double meanStepTime = steadyCount > 0 ? steadyTimeSum / steadyCount : 0.0;
    int best = 0;
    for (size_t k = 0; k < rankList.size(); ++k) {
        RankStraggle rs;
        rs.rank = rankList[k];
        rs.stepsAsStraggler = asStraggler[k];
        rs.meanWaitNs = steadyCount > 0 ? waitSum[k] / steadyCount : 0.0;
        rs.meanWaitFraction = meanStepTime > 0 ? rs.meanWaitNs / meanStepTime : 0.0;
        best = std::max(best, rs.stepsAsStraggler);
        rep.perRank.push_back(rs);
    }
    for (const RankStraggle& rs : rep.perRank) {
        if (best > 0 && rs.stepsAsStraggler == best && rs.meanWaitFraction >= kStragglerWaitFraction)
            rep.stragglers.push_back(rs.rank);
    }
    return rep;
}
} // namespace

StragglerReport stragglers(const Run& run)
{
    return stragglersFrom(run, bucketStats(run));
}

// ---------------------------------------------------------------------------------------------
// Summary

RunSummary summarize(const Run& run)
{
    RunSummary s;
    const RunConfig& c = run.config;
    s.name = c.name;
    s.model = c.model;
    s.source = c.source;
    s.backend = c.backend;
    s.device = c.device;
    s.status = c.status;
    s.failureCause = c.failureCause;
    s.bucketCapBytes = c.bucketCapBytes;
    s.batchPerRank = c.batchPerRank;
    s.spans = static_cast<int64_t>(run.spans.size());
    for (const Diagnostic& d : run.diagnostics)
        s.diagnostics += d.count;
    const RankIndex idx = indexRanks(run);
    s.worldSize = worldSizeOf(run, idx);

    // Means are over steady steps; if every step is a warm-up step (a run shorter than
    // warmupSteps), they fall back to all steps rather than report nothing.
    const SteadyRule steady = steadyRule(run);

    std::map<int32_t, int32_t> stepsPerRank;
    std::map<int32_t, int64_t> samplesPerStep; // step -> samples over all ranks
    std::vector<int32_t> steadyStepIds;
    for (const Step& st : run.steps) {
        stepsPerRank[st.rank]++;
        if (steady.isSteady(st.step)) {
            samplesPerStep[st.step] += st.samples > 0 ? st.samples : c.batchPerRank;
            steadyStepIds.push_back(st.step);
        }
    }
    for (const auto& [rank, n] : stepsPerRank)
        s.steps = std::max(s.steps, n);
    std::sort(steadyStepIds.begin(), steadyStepIds.end());
    steadyStepIds.erase(std::unique(steadyStepIds.begin(), steadyStepIds.end()), steadyStepIds.end());
    s.steadySteps = static_cast<int32_t>(steadyStepIds.size());

    const std::vector<StepBreakdown> breakdown = stepBreakdown(run);
    double wall = 0, compute = 0, comm = 0, overlapped = 0, exposed = 0, idle = 0;
    int n = 0;
    for (const StepBreakdown& b : breakdown) {
        if (!steady.isSteady(b.step))
            continue;
        wall += static_cast<double>(b.wall);
        compute += static_cast<double>(b.compute);
        comm += static_cast<double>(b.communication);
        overlapped += static_cast<double>(b.overlapped);
        exposed += static_cast<double>(b.exposed);
        idle += static_cast<double>(b.idle);
        ++n;
    }
    const double toMs = 1e-6;
    if (n > 0) {
        s.stepTimeMs = wall / n * toMs;
        s.computeMs = compute / n * toMs;
        s.commMs = comm / n * toMs;
        s.overlappedMs = overlapped / n * toMs;
        s.exposedCommMs = exposed / n * toMs;
        s.idleMs = idle / n * toMs;
    }
    s.overlapRatio = comm > 0 ? overlapped / comm : kNaN;
    if (!samplesPerStep.empty() && s.stepTimeMs > 0) {
        double samples = 0;
        for (const auto& [step, v] : samplesPerStep)
            samples += static_cast<double>(v);
        samples /= static_cast<double>(samplesPerStep.size());
        s.throughput = samples / (s.stepTimeMs * 1e-3);
    }

    const std::vector<BucketStat> stats = bucketStats(run);
    const StragglerReport rep = stragglersFrom(run, stats);
    s.stragglers = rep.stragglers;
    for (int32_t rank : rep.stragglers) {
        for (const RankStraggle& rs : rep.perRank)
            if (rs.rank == rank)
                s.stragglerWaitMs.push_back(rs.meanWaitNs * toMs);
    }

    // Per bucket: the table's buckets in index order, plus any bucket only seen in spans.
    struct Acc {
        int64_t bytes = 0;
        int32_t params = 0;
        double r2l = 0, dur = 0, alg = 0, bus = 0, skew = 0;
        int nR2l = 0, nStat = 0, nSkew = 0;
    };
    std::map<int32_t, Acc> acc;
    for (const Bucket& b : run.buckets) {
        Acc& a = acc[b.index];
        a.bytes = b.bytes;
        a.params = static_cast<int32_t>(b.params.size());
    }
    for (const BucketStat& st : stats) {
        if (!steady.isSteady(st.step))
            continue;
        Acc& a = acc[st.bucket];
        if (a.bytes == 0)
            a.bytes = st.bytes;
        if (st.readyToLaunch >= 0 && st.ready >= 0) {
            a.r2l += static_cast<double>(st.readyToLaunch);
            ++a.nR2l;
        }
        a.dur += static_cast<double>(st.duration);
        a.alg += st.algbwGBps;
        a.bus += st.busbwGBps;
        ++a.nStat;
    }
    for (const BucketSkew& sk : rep.skews) {
        if (!steady.isSteady(sk.step))
            continue;
        Acc& a = acc[sk.bucket];
        a.skew += static_cast<double>(sk.skew);
        ++a.nSkew;
    }
    for (const auto& [index, a] : acc) {
        BucketSummary b;
        b.bucket = index;
        b.bytes = a.bytes;
        b.params = a.params;
        b.meanReadyToLaunchMs = a.nR2l > 0 ? a.r2l / a.nR2l * toMs : kNaN;
        b.meanDurationMs = a.nStat > 0 ? a.dur / a.nStat * toMs : 0.0;
        b.meanAlgbwGBps = a.nStat > 0 ? a.alg / a.nStat : 0.0;
        b.meanBusbwGBps = a.nStat > 0 ? a.bus / a.nStat : 0.0;
        b.meanSkewMs = a.nSkew > 0 ? a.skew / a.nSkew * toMs : 0.0;
        s.buckets.push_back(b);
    }
    return s;
}

// ---------------------------------------------------------------------------------------------
// Scaling efficiency (DESIGN.md). The baseline at N0 (the smallest world size present) is the
// mean over the runs at N0, so a repeated baseline run does not pick one arbitrarily. An
// efficiency that cannot be computed (zero baseline, zero throughput or step time) is NaN.
std::vector<ScalingPoint> scalingEfficiency(const std::vector<RunSummary>& runs, ScalingMode mode)
{
    std::vector<ScalingPoint> points;
    for (const RunSummary& r : runs) {
        if (r.worldSize <= 0)
            continue;
        ScalingPoint p;
        p.name = r.name;
        p.worldSize = r.worldSize;
        p.throughput = r.throughput;
        p.stepTimeMs = r.stepTimeMs;
        points.push_back(p);
    }
    std::stable_sort(points.begin(), points.end(),
                     [](const ScalingPoint& a, const ScalingPoint& b) { return a.worldSize < b.worldSize; });
    if (points.empty())
        return points;
    const int32_t n0 = points.front().worldSize;
    double thr0 = 0, t0 = 0;
    int k = 0;
    for (const ScalingPoint& p : points) {
        if (p.worldSize != n0)
            break;
        thr0 += p.throughput;
        t0 += p.stepTimeMs;
        ++k;
    }
    thr0 /= k;
    t0 /= k;
    for (ScalingPoint& p : points) {
        const double n = p.worldSize;
        if (mode == ScalingMode::Weak) {
            const double ideal = n * thr0 / n0;
            p.efficiency = ideal > 0 ? p.throughput / ideal : kNaN;
        } else {
            const double denom = p.stepTimeMs * n;
            p.efficiency = denom > 0 && t0 > 0 ? t0 * n0 / denom : kNaN;
        }
    }
    return points;
}

} // namespace lockstep::core
