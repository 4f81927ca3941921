// Step breakdown, the per-rank index, steady steps, alignment, bucket statistics and bucket
// states, exactly as docs/design.md ("Vocabulary and exact metric definitions") defines them (see
// analysis.h for the rules). Stragglers are in stragglers.cpp, the summary in summary.cpp.
// Pure functions: nothing here touches a file or throws.
#include "lockstep/core/analysis.h"

#include "analysis_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace lockstep::core {

namespace detail {

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

int32_t worldSizeOf(const Run& run)
{
    if (run.config.worldSize > 0)
        return run.config.worldSize;
    return static_cast<int32_t>(indexRanks(run).ranks.size());
}

} // namespace detail

using detail::indexRanks;
using detail::RankIndex;
using detail::worldSizeOf;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double ratio(TimeNs overlapped, TimeNs communication, bool applicable)
{
    return applicable && communication > 0 ? static_cast<double>(overlapped) / static_cast<double>(communication)
                                           : kNaN;
}

void setParts(StepBreakdown& b, const WindowParts& p, bool multiRank)
{
    static_cast<WindowParts&>(b) = p;
    b.overlapRatio = ratio(p.overlapped, p.communication, multiRank);
}

// C, M, Mem being built for one group (a rank's host lanes, or one (rank, step) of device
// work). Spans of one lane arrive sorted by start and are merged as they come; when a second
// lane contributes, the lists are only appended to and merged once at the end.
struct UnionBuilder {
    std::vector<Interval> sets[3]; // by SpanCategory: compute, communication, memory
    uint32_t lastLane = UINT32_MAX;
    bool multi = false;
    TimeNs first = std::numeric_limits<TimeNs>::max();
    TimeNs last = std::numeric_limits<TimeNs>::min();

    void add(uint32_t lane, SpanCategory cat, TimeNs start, TimeNs end)
    {
        if (cat == SpanCategory::Other || end < start)
            return;
        first = std::min(first, start);
        last = std::max(last, end);
        if (lane != lastLane) {
            multi = multi || lastLane != UINT32_MAX;
            lastLane = lane;
        }
        std::vector<Interval>& v = sets[static_cast<size_t>(cat)];
        if (multi)
            v.push_back({start, end});
        else
            appendMerged(v, start, end);
    }
    void finish()
    {
        if (multi)
            for (auto& v : sets)
                mergeInPlace(v);
        multi = false;
    }
};

} // namespace

const char* stepWindowName(StepWindow window)
{
    switch (window) {
    case StepWindow::Host: return "host";
    case StepWindow::Device: return "device";
    case StepWindow::NoDeviceWork: return "no device work";
    }
    return "?";
}

// ---------------------------------------------------------------------------------------------
// Steady steps

bool SteadySteps::contains(int32_t step) const { return std::binary_search(steps.begin(), steps.end(), step); }

std::string SteadySteps::describe() const
{
    auto range = [](const std::vector<int32_t>& v) {
        if (v.empty())
            return std::string("none");
        bool contiguous = v.back() - v.front() + 1 == static_cast<int32_t>(v.size());
        std::string s = v.size() == 1 ? "step " + std::to_string(v.front())
                                      : "steps " + std::to_string(v.front()) + (contiguous ? "-" : "..")
                                            + std::to_string(v.back());
        return s;
    };
    if (allSteps == 0)
        return "no steps";
    if (fallback)
        return "no step past the warm-up (steps numbered below " + std::to_string(warmupSteps) + "): all "
            + std::to_string(steps.size()) + " step(s) are used (" + range(steps) + "), warm-up included";
    const auto count = [](size_t n, const char* what) {
        return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
    };
    const int32_t excluded = allSteps - static_cast<int32_t>(steps.size());
    if (excluded == 0)
        return range(steps) + " (all " + count(steps.size(), "step") + "; none is warm-up)";
    return range(steps) + " (" + count(steps.size(), "steady step") + "; " + count(size_t(excluded), "warm-up step")
        + ", numbered below " + std::to_string(warmupSteps) + ", left out)";
}

SteadySteps steadySteps(const Run& run)
{
    SteadySteps s;
    s.warmupSteps = run.config.warmupSteps;
    std::vector<int32_t> all;
    all.reserve(run.steps.size());
    for (const Step& st : run.steps)
        all.push_back(st.step);
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    s.allSteps = static_cast<int32_t>(all.size());
    for (int32_t step : all)
        if (step >= s.warmupSteps)
            s.steps.push_back(step);
    if (s.steps.empty() && !all.empty()) {
        s.fallback = true;
        s.steps = std::move(all);
    }
    return s;
}

// ---------------------------------------------------------------------------------------------
// Alignment

int32_t alignStep(const Run& run)
{
    const SteadySteps steady = steadySteps(run);
    return steady.steps.empty() ? 0 : steady.steps.front();
}

TimeNs alignmentOrigin(const Run& run)
{
    if (!run.steps.empty()) {
        const int32_t s = alignStep(run);
        TimeNs origin = std::numeric_limits<TimeNs>::max();
        for (const Step& st : run.steps)
            if (st.step == s)
                origin = std::min(origin, st.start);
        if (origin != std::numeric_limits<TimeNs>::max())
            return origin;
    }
    TimeNs first = std::numeric_limits<TimeNs>::max();
    for (const Lane& lane : run.lanes) {
        const auto [a, b] = run.laneSpanRange(lane.id);
        if (a < b)
            first = std::min(first, run.spans[a].start);
    }
    return first == std::numeric_limits<TimeNs>::max() ? 0 : first;
}

// ---------------------------------------------------------------------------------------------
// Step breakdown
//
// The naive way (for each step, scan the spans) is O(steps × spans): hours on 10 M spans. Here
// the spans are walked once, lane by lane (each lane is sorted by start), and every span the
// rank's rule counts (countedCategory) feeds one union of C, one of M and one of Mem per rank,
// built by a linear merge (touching segments collapse into one interval, so the unions are far
// smaller than the lanes); a rank's lanes are then merged together once. Parts are by time: a
// window's parts are its rank's unions inside it, whatever step launched the work (so step
// s+1's kernels hide step s's collective, as Holistic Trace Analysis counts it). Under the
// device rule the walk also keeps each (rank, launching step)'s device extent, from which the
// tiling windows are cut (tilingWindows). Each step then binary-searches its rank's unions and
// sweeps the intervals inside W (windowParts). Total O(spans + U log U + steps log U), U the
// size of the unions.
namespace detail {

std::vector<Interval> tilingWindows(const std::vector<DeviceExtent>& extents)
{
    // Step s runs from the first device work it launched to the first device work step s+1
    // launched: consecutive windows share their edge, so they neither overlap nor leave a gap.
    // Starts are kept monotone (a step whose first work ran before its predecessor's has an
    // empty window rather than one that overlaps). The last window ends at the later of its
    // last device work and its host step's end: the GPU waiting for the host is in the step.
    std::vector<Interval> out(extents.size());
    for (size_t i = 0; i < extents.size(); ++i)
        out[i].start = i == 0 ? extents[i].first : std::max(extents[i].first, out[i - 1].start);
    for (size_t i = 0; i < extents.size(); ++i)
        out[i].end = i + 1 < extents.size() ? out[i + 1].start
                                            : std::max({out[i].start, extents[i].last, extents[i].hostEnd});
    return out;
}

RankRules rankRules(const Run& run, const RankIndex& idx)
{
    const size_t n = idx.ranks.size();
    RankRules rules;
    rules.device.assign(n, 0);
    rules.hostCollectives.assign(n, 0);
    std::vector<char> commKernel(n, 0), hostComm(n, 0);
    for (const Span& s : run.spans) {
        if (s.lane.v >= run.lanes.size())
            continue;
        const int32_t r = idx.laneRank[s.lane.v];
        if (r < 0)
            continue;
        if (run.lanes[s.lane.v].kind == LaneKind::GpuStream) {
            rules.device[r] |= isDeviceKind(s.kind);
            commKernel[r] |= s.kind == SpanKind::CommKernel;
        } else {
            hostComm[r] |= s.kind == SpanKind::Comm && s.bucket >= 0;
        }
    }
    for (size_t r = 0; r < n; ++r)
        rules.hostCollectives[r] = rules.device[r] && !commKernel[r] && hostComm[r];
    return rules;
}

namespace {

uint64_t rankStepKey(int32_t rank, int32_t step)
{
    return (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) | static_cast<uint32_t>(step);
}

// Per rank: the unions of what it counts, by time (host rule: its host lanes; device rule:
// its device work whatever step launched it, plus its host collectives and training
// threads' work where its collectives run on the host).
struct CountedWork {
    std::vector<UnionBuilder> unions;
    // Device rule: the extent of the device work each (rank, step) launched.
    std::unordered_map<uint64_t, Interval> extent;
};

// One pass over `spans` into `work`; false, leaving `work` partial, at a lane whose spans are
// not in start order. Lanes need not be contiguous: a lane met in several stretches is merged
// like several lanes.
bool walkLanes(std::span<const Span> spans, const Run& run, const RankIndex& idx, const RankRules& rules,
               CountedWork& work)
{
    uint64_t cachedKey = UINT64_MAX;
    Interval* cached = nullptr;
    size_t i = 0;
    while (i < spans.size()) {
        const uint32_t laneIndex = spans[i].lane.v;
        size_t j = i;
        while (j < spans.size() && spans[j].lane.v == laneIndex)
            ++j;
        if (laneIndex < run.lanes.size() && idx.laneRank[laneIndex] >= 0) {
            const int32_t r = idx.laneRank[laneIndex];
            const LaneKind laneKind = run.lanes[laneIndex].kind;
            const bool device = rules.device[r];
            const bool hostColl = rules.hostCollectives[r];
            // A stretch of a lane is its own contribution: a lane met again later merges
            // like another lane.
            const uint32_t stretch = static_cast<uint32_t>(i);
            TimeNs previous = std::numeric_limits<TimeNs>::min();
            for (size_t k = i; k < j; ++k) {
                const Span& s = spans[k];
                if (s.start < previous)
                    return false;
                previous = s.start;
                work.unions[r].add(stretch, countedCategory(device, hostColl, laneKind, s), s.start, s.end);
                if (!device || laneKind != LaneKind::GpuStream || !isDeviceKind(s.kind) || s.step == kNoStep
                    || s.end < s.start)
                    continue;
                const uint64_t k2 = rankStepKey(r, s.step);
                if (k2 != cachedKey) {
                    auto [it, fresh] = work.extent.try_emplace(k2, Interval{s.start, s.end});
                    cachedKey = k2;
                    cached = &it->second;
                    if (fresh)
                        continue;
                }
                cached->start = std::min(cached->start, s.start);
                cached->end = std::max(cached->end, s.end);
            }
        }
        i = j;
    }
    return true;
}

CountedWork countedWork(const Run& run, const RankIndex& idx, const RankRules& rules)
{
    CountedWork work;
    work.unions.resize(idx.ranks.size());
    // The walk needs each lane's spans in start order (the Run invariant). It checks that as it
    // goes (a separate is_sorted pass would read 10 M spans twice); a hand-made Run that breaks
    // it is sorted into a private copy and walked again rather than analysed wrongly.
    if (!walkLanes(run.spans, run, idx, rules, work)) {
        std::vector<Span> sorted = run.spans;
        std::stable_sort(sorted.begin(), sorted.end(), [](const Span& a, const Span& b) {
            return std::tie(a.lane.v, a.start) < std::tie(b.lane.v, b.start);
        });
        work.unions.assign(idx.ranks.size(), UnionBuilder{});
        work.extent.clear();
        walkLanes(sorted, run, idx, rules, work);
    }
    for (UnionBuilder& u : work.unions)
        u.finish();
    return work;
}

// Device rule: each rank's steps with device work, in step order, tile its time.
std::unordered_map<uint64_t, Interval> deviceWindows(const Run& run, const RankIndex& idx, const RankRules& rules,
                                                     const std::unordered_map<uint64_t, Interval>& extent)
{
    std::unordered_map<uint64_t, Interval> window;
    std::vector<const Step*> ordered;
    ordered.reserve(run.steps.size());
    for (const Step& st : run.steps)
        ordered.push_back(&st);
    std::sort(ordered.begin(), ordered.end(),
              [](const Step* a, const Step* b) { return std::tie(a->rank, a->step) < std::tie(b->rank, b->step); });
    for (size_t i = 0; i < ordered.size();) {
        size_t j = i;
        while (j < ordered.size() && ordered[j]->rank == ordered[i]->rank)
            ++j;
        const int32_t r = idx.find(ordered[i]->rank);
        if (r >= 0 && rules.device[r]) {
            std::vector<DeviceExtent> ex;
            for (size_t k = i; k < j; ++k)
                if (auto it = extent.find(rankStepKey(r, ordered[k]->step)); it != extent.end())
                    ex.push_back({ordered[k]->step, it->second.start, it->second.end, ordered[k]->end});
            const std::vector<Interval> w = tilingWindows(ex);
            for (size_t k = 0; k < ex.size(); ++k)
                window.emplace(rankStepKey(r, ex[k].step), w[k]);
        }
        i = j;
    }
    return window;
}

} // namespace

std::vector<StepBreakdown> stepBreakdownWith(const Run& run, const SteadySteps& steady)
{
    const RankIndex idx = indexRanks(run);
    const bool multiRank = worldSizeOf(run) > 1;
    const RankRules rules = rankRules(run, idx);
    const CountedWork work = countedWork(run, idx, rules);
    const std::vector<UnionBuilder>& unions = work.unions;
    const std::unordered_map<uint64_t, Interval> window = deviceWindows(run, idx, rules, work.extent);

    // One rank has nothing to communicate (docs/design.md: "no communication to hide"): its local
    // all-reduces are not communication. M is empty, so their time that no compute covers is
    // idle and the five parts still add up to W; overlap and exposed communication are not
    // applicable. RunIndex::collect applies the same rule to every other query.
    const auto commOf = [multiRank](const std::vector<Interval>& m) {
        return multiRank ? std::span<const Interval>(m) : std::span<const Interval>();
    };
    std::vector<StepBreakdown> out;
    out.reserve(run.steps.size());
    for (const Step& st : run.steps) {
        StepBreakdown b;
        b.rank = st.rank;
        b.step = st.step;
        b.warmup = st.step < run.config.warmupSteps;
        b.steady = steady.contains(st.step);
        b.cpuNs = st.cpuNs;
        b.runqNs = st.runqNs;
        const int32_t r = idx.find(st.rank);
        if (r >= 0 && rules.device[r]) {
            auto it = window.find(rankStepKey(r, st.step));
            if (it == window.end()) {
                b.window = StepWindow::NoDeviceWork;
                b.start = b.end = st.start;
                b.overlapRatio = kNaN;
            } else {
                const UnionBuilder& u = unions[r];
                b.window = StepWindow::Device;
                b.start = it->second.start;
                b.end = it->second.end;
                setParts(b, windowParts(u.sets[0], commOf(u.sets[1]), u.sets[2], b.start, b.end), multiRank);
            }
        } else {
            b.window = StepWindow::Host;
            b.start = st.start;
            b.end = st.end;
            if (r >= 0) {
                const UnionBuilder& u = unions[r];
                setParts(b, windowParts(u.sets[0], commOf(u.sets[1]), u.sets[2], st.start, st.end), multiRank);
            } else {
                setParts(b, windowParts({}, {}, {}, st.start, st.end), multiRank);
            }
        }
        out.push_back(b);
    }
    std::stable_sort(out.begin(), out.end(), [](const StepBreakdown& a, const StepBreakdown& b) {
        return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
    });
    return out;
}

} // namespace detail

std::vector<StepBreakdown> stepBreakdown(const Run& run)
{
    return detail::stepBreakdownWith(run, steadySteps(run));
}

std::vector<TimeNs> laneMaxDurations(const Run& run)
{
    std::vector<TimeNs> out(run.lanes.size(), 0);
    for (const Span& s : run.spans)
        if (s.lane.v < out.size())
            out[s.lane.v] = std::max(out[s.lane.v], s.duration());
    return out;
}

// ---------------------------------------------------------------------------------------------
// RunIndex

RunIndex::RunIndex(const Run& run)
    : RunIndex(run, core::laneMaxDurations(run))
{
}

RunIndex::RunIndex(const Run& run, std::vector<TimeNs> laneMaxDuration)
    : m_run(&run)
    , m_laneMax(std::move(laneMaxDuration))
    , m_worldSize(worldSizeOf(run))
    , m_steady(steadySteps(run))
{
    m_laneMax.resize(run.lanes.size(), 0);
    const RankIndex idx = indexRanks(run);
    m_ranks = idx.ranks;
    m_entries.resize(m_ranks.size());
    // Which rule each rank follows (stepBreakdownWith's, the same function).
    const detail::RankRules rules = detail::rankRules(run, idx);
    for (size_t r = 0; r < m_ranks.size(); ++r) {
        m_entries[r].rank = m_ranks[r];
        m_entries[r].device = rules.device[r];
        m_entries[r].hostCollectives = rules.hostCollectives[r];
    }
    for (const Lane& lane : run.lanes) {
        const int32_t r = lane.id.v < idx.laneRank.size() ? idx.laneRank[lane.id.v] : -1;
        if (r < 0)
            continue;
        RankEntry& e = m_entries[r];
        const bool gpu = lane.kind == LaneKind::GpuStream;
        if (e.device ? gpu || e.hostCollectives : !gpu)
            e.counted.push_back(lane.id);
    }
    // Device extents per (rank, launching step), then the tiling windows (docs/design.md).
    std::map<std::pair<int32_t, int32_t>, Interval> extents;
    for (const RankEntry& e : m_entries) {
        if (!e.device)
            continue;
        for (LaneId lane : e.counted) {
            if (run.lanes[lane.v].kind != LaneKind::GpuStream)
                continue;
            const auto [a, b] = run.laneSpanRange(lane);
            for (size_t i = a; i < b; ++i) {
                const Span& s = run.spans[i];
                if (!isDeviceKind(s.kind) || s.step == kNoStep || s.end < s.start)
                    continue;
                auto [it, fresh] = extents.try_emplace({e.rank, s.step}, Interval{s.start, s.end});
                if (!fresh) {
                    it->second.start = std::min(it->second.start, s.start);
                    it->second.end = std::max(it->second.end, s.end);
                }
            }
        }
    }
    std::vector<detail::DeviceExtent> ex;
    for (auto it = extents.begin(); it != extents.end();) {
        const int32_t rank = it->first.first;
        ex.clear();
        for (; it != extents.end() && it->first.first == rank; ++it) {
            const Step* st = findStep(rank, it->first.second);
            if (st) // device work of a step the rank never recorded is in no window
                ex.push_back({it->first.second, it->second.start, it->second.end, st->end});
        }
        const std::vector<Interval> w = detail::tilingWindows(ex);
        for (size_t k = 0; k < ex.size(); ++k)
            m_deviceSteps.push_back(DeviceStep{rank, ex[k].step, w[k].start, w[k].end});
    }
}

const RunIndex::RankEntry* RunIndex::entry(int32_t rank) const
{
    auto it = std::lower_bound(m_ranks.begin(), m_ranks.end(), rank);
    return it != m_ranks.end() && *it == rank ? &m_entries[static_cast<size_t>(it - m_ranks.begin())] : nullptr;
}

bool RunIndex::deviceRule(int32_t rank) const
{
    const RankEntry* e = entry(rank);
    return e && e->device;
}

std::optional<size_t> RunIndex::largestCollective(int32_t rank, int32_t step) const
{
    const Step* st = findStep(rank, step);
    if (!st)
        return std::nullopt;
    const Run& run = *m_run;
    std::optional<size_t> best;
    for (const Lane& lane : run.lanes) {
        if (lane.rank != rank)
            continue;
        // A host thread's work of the step starts inside the host step; a GPU stream's may start
        // any time after its launch, but a stream runs its work in launch order.
        const TimeNs limit = lane.kind == LaneKind::GpuStream ? std::numeric_limits<TimeNs>::max() : st->end + 1;
        const auto [a, b] = run.laneSpanRange(lane.id);
        const auto end = run.spans.begin() + static_cast<ptrdiff_t>(b);
        auto it = std::lower_bound(run.spans.begin() + static_cast<ptrdiff_t>(a), end, st->start,
                                   [](const Span& s, TimeNs v) { return s.start < v; });
        for (; it != end && it->start < limit; ++it) {
            if (it->start >= st->end && it->step != kNoStep && it->step > step)
                break;
            if (it->step != step || !isCommunication(it->kind))
                continue;
            const size_t i = static_cast<size_t>(it - run.spans.begin());
            if (!best || it->bytes > run.spans[*best].bytes)
                best = i;
        }
    }
    return best;
}

std::span<const LaneId> RunIndex::countedLanes(int32_t rank) const
{
    const RankEntry* e = entry(rank);
    return e ? std::span<const LaneId>(e->counted) : std::span<const LaneId>();
}

const Step* RunIndex::findStep(int32_t rank, int32_t step) const
{
    const auto& steps = m_run->steps;
    auto it = std::lower_bound(steps.begin(), steps.end(), std::pair{rank, step},
                               [](const Step& s, std::pair<int32_t, int32_t> k) { return std::pair{s.rank, s.step} < k; });
    if (it != steps.end() && it->rank == rank && it->step == step)
        return &*it;
    // A Run that was not normalized: a linear search rather than a wrong answer.
    for (const Step& s : steps)
        if (s.rank == rank && s.step == step)
            return &s;
    return nullptr;
}

const RunIndex::DeviceStep* RunIndex::findDeviceStep(int32_t rank, int32_t step) const
{
    auto it = std::lower_bound(m_deviceSteps.begin(), m_deviceSteps.end(), std::pair{rank, step},
                               [](const DeviceStep& d, std::pair<int32_t, int32_t> k) {
                                   return std::pair{d.rank, d.step} < k;
                               });
    return it != m_deviceSteps.end() && it->rank == rank && it->step == step ? &*it : nullptr;
}

RankUnions RunIndex::collect(const RankEntry& e, TimeNs lo, TimeNs hi) const
{
    std::vector<Interval> sets[3];
    const Run& run = *m_run;
    for (LaneId lane : e.counted) {
        const auto [a, b] = run.laneSpanRange(lane);
        const TimeNs maxDur = lane.v < m_laneMax.size() ? m_laneMax[lane.v] : 0;
        const LaneKind laneKind = run.lanes[lane.v].kind;
        // Spans overlapping [lo, hi): sorted by start, so the first candidate starts no earlier
        // than lo - (the lane's longest span).
        auto first = std::lower_bound(run.spans.begin() + static_cast<ptrdiff_t>(a),
                                      run.spans.begin() + static_cast<ptrdiff_t>(b), lo - maxDur,
                                      [](const Span& s, TimeNs t) { return s.start < t; });
        for (auto it = first; it != run.spans.begin() + static_cast<ptrdiff_t>(b) && it->start < hi; ++it) {
            if (it->end <= lo)
                continue;
            const SpanCategory cat = detail::countedCategory(e.device, e.hostCollectives, laneKind, *it);
            if (cat != SpanCategory::Other)
                sets[static_cast<size_t>(cat)].push_back({it->start, it->end});
        }
    }
    RankUnions u;
    u.compute = unionClipped(std::move(sets[0]), lo, hi);
    // One rank: its local all-reduces are not communication (stepBreakdownWith).
    if (m_worldSize > 1)
        u.comm = unionClipped(std::move(sets[1]), lo, hi);
    u.memory = unionClipped(std::move(sets[2]), lo, hi);
    return u;
}

StepBreakdown RunIndex::partsOf(const RankEntry& e, const RankUnions& u, TimeNs lo, TimeNs hi) const
{
    StepBreakdown b;
    b.rank = e.rank;
    b.step = kNoStep;
    b.start = lo;
    b.end = std::max(lo, hi);
    b.window = e.device ? StepWindow::Device : StepWindow::Host;
    setParts(b, windowParts(u.compute, u.comm, u.memory, lo, hi), m_worldSize > 1);
    return b;
}

std::optional<StepBreakdown> RunIndex::stepBreakdown(int32_t rank, int32_t step) const
{
    const Step* st = findStep(rank, step);
    if (!st)
        return std::nullopt;
    const RankEntry* e = entry(rank);
    StepBreakdown b;
    if (!e) {
        RankEntry none;
        none.rank = rank;
        b = partsOf(none, {}, st->start, st->end);
    } else if (!e->device) {
        b = partsOf(*e, collect(*e, st->start, st->end), st->start, st->end);
    } else if (const DeviceStep* d = findDeviceStep(rank, step)) {
        b = partsOf(*e, collect(*e, d->first, d->last), d->first, d->last);
    } else {
        b.rank = rank;
        b.start = b.end = st->start;
        b.window = StepWindow::NoDeviceWork;
        b.overlapRatio = kNaN;
    }
    b.step = step;
    b.warmup = step < m_run->config.warmupSteps;
    b.steady = m_steady.contains(step);
    return b;
}

StepBreakdown RunIndex::rangeBreakdown(int32_t rank, TimeNs lo, TimeNs hi) const
{
    const RankEntry* e = entry(rank);
    if (!e) {
        RankEntry none;
        none.rank = rank;
        return partsOf(none, {}, lo, hi);
    }
    return partsOf(*e, hi > lo ? collect(*e, lo, hi) : RankUnions{}, lo, hi);
}

RankUnions RunIndex::unions(int32_t rank, TimeNs lo, TimeNs hi) const
{
    const RankEntry* e = entry(rank);
    return e && hi > lo ? collect(*e, lo, hi) : RankUnions{};
}

RankUnions RunIndex::stepUnions(int32_t rank, int32_t step) const
{
    const RankEntry* e = entry(rank);
    const Step* st = findStep(rank, step);
    if (!e || !st)
        return {};
    if (!e->device)
        return collect(*e, st->start, st->end);
    const DeviceStep* d = findDeviceStep(rank, step);
    return d && d->last > d->first ? collect(*e, d->first, d->last) : RankUnions{};
}

// ---------------------------------------------------------------------------------------------
// Bucket statistics
//
// A bucket's collective in a step is its communication span carrying that (step, bucket) on
// that rank. Host Comm spans (launch -> completion as the reducer saw it) are preferred; a rank
// that only has device communication kernels tagged with the bucket uses those. If a bucket's
// collective was recorded as several spans (a chunked all-reduce), they are one collective:
// earliest start, latest end, bytes summed. Spans without bytes take the bucket table's size.
// A bucket whose spans lie on more than one lane of the rank is a call and the op that runs it
// (an imported CPU trace: c10d::allreduce_ on the training thread, gloo:all_reduce on a worker
// thread): launch = the earliest span's start (the call), completion = the latest end of the
// spans on the other lanes (the run), even when the call returned later (its thread was
// descheduled, say): docs/design.md's "from launch to completion" of the collective.
// Ready is the latest GradReady instant carrying the same (rank, step, bucket).
std::vector<BucketStat> bucketStats(const Run& run)
{
    std::optional<RunIndex> index;
    if (detail::worldSizeOf(run) > 1)
        index.emplace(run);
    return detail::bucketStatsWith(run, index ? &*index : nullptr);
}

namespace {

// A communication span carrying a (step, bucket): one piece of a bucket's collective.
struct CommEntry {
    int32_t rank, step, bucket;
    bool host;
    TimeNs start, end;
    int64_t bytes;
    uint32_t lane;
};

// The run's collective pieces in (rank, step, bucket, start) order.
std::vector<CommEntry> commEntries(const Run& run)
{
    std::vector<CommEntry> entries;
    entries.reserve(1024);
    for (const Span& s : run.spans) {
        if (!isCommunication(s.kind) || s.bucket < 0 || s.step < 0 || s.lane.v >= run.lanes.size())
            continue;
        entries.push_back({run.lanes[s.lane.v].rank, s.step, s.bucket, s.kind == SpanKind::Comm, s.start, s.end,
                           s.bytes, s.lane.v});
    }
    // Spans come in (lane, start) order, so on a normal run the entries already are in key
    // order (lanes by rank, collectives by time): checking is far cheaper than sorting 1 M.
    const auto entryLess = [](const CommEntry& a, const CommEntry& b) {
        return std::tie(a.rank, a.step, a.bucket, a.start) < std::tie(b.rank, b.step, b.bucket, b.start);
    };
    if (!std::is_sorted(entries.begin(), entries.end(), entryLess))
        std::sort(entries.begin(), entries.end(), entryLess);
    return entries;
}

// One (rank, step, bucket)'s collective from its pieces: launch, completion and
// bytes of the chosen family (host spans when there are any); no ready or exposed time yet.
BucketStat collectiveOf(std::span<const CommEntry> pieces, bool anyHost)
{
    const size_t j = pieces.size();
    BucketStat st;
    st.rank = pieces[0].rank;
    st.step = pieces[0].step;
    st.bucket = pieces[0].bucket;
    st.completion = std::numeric_limits<TimeNs>::min();
    size_t first = j; // the earliest span of the chosen family: the launch
    for (size_t k = 0; k < j; ++k) {
        if (pieces[k].host != anyHost)
            continue;
        if (first == j || std::tie(pieces[k].start, pieces[k].lane) < std::tie(pieces[first].start, pieces[first].lane))
            first = k; // a tie goes to the lower lane (a trace's training thread comes first)
        st.bytes += pieces[k].bytes;
    }
    bool otherLane = false;
    for (size_t k = 0; k < j; ++k)
        otherLane |= anyHost && pieces[k].host && pieces[k].lane != pieces[first].lane;
    st.launch = pieces[first].start;
    for (size_t k = 0; k < j; ++k)
        if (pieces[k].host == anyHost && (!otherLane || pieces[k].lane != pieces[first].lane))
            st.completion = std::max(st.completion, pieces[k].end);
    return st;
}

// Each (rank, step, bucket)'s collective, in key order, with bytes and bandwidths.
std::vector<BucketStat> bucketCollectives(const Run& run, const std::vector<CommEntry>& entries)
{
    std::unordered_map<int32_t, int64_t> tableBytes;
    for (const Bucket& b : run.buckets)
        tableBytes[b.index] = b.bytes;
    const int32_t n = worldSizeOf(run);
    const double busFactor = detail::busBandwidthFactor(n);

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
        BucketStat st = collectiveOf(std::span<const CommEntry>(entries.data() + i, j - i), anyHost);
        if (st.bytes == 0) {
            auto it = tableBytes.find(st.bucket);
            st.bytes = it != tableBytes.end() ? it->second : 0;
        }
        st.duration = std::max<TimeNs>(0, st.completion - st.launch);
        // bytes per ns is GB/s (1e9 bytes per second). Not defined where nothing crosses a link
        // (one rank) or the bytes are unknown (an imported trace without them).
        st.algbwGBps = n > 1 && st.duration > 0 && st.bytes > 0
            ? static_cast<double>(st.bytes) / static_cast<double>(st.duration)
            : kNaN;
        st.busbwGBps = st.algbwGBps * busFactor;
        out.push_back(st);
        i = j;
    }
    return out;
}

// Ready times. Instants come sorted by (lane, ts) and a bucket's gradient-ready instants are
// consecutive, so the (rank, step, bucket) key changes rarely: one search per run of equal
// keys instead of one per instant; the next key is usually the entry right after the
// previous one (instants and collectives both advance in time), so that is tried first.
void setReadyTimes(const Run& run, std::vector<BucketStat>& out)
{
    const auto keyLess = [](const BucketStat& s, const std::tuple<int32_t, int32_t, int32_t>& k) {
        return std::tie(s.rank, s.step, s.bucket) < k;
    };
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
}

// Exposed and hidden time: each bucket's own time (BucketStat) against all of the rank's
// compute by time (docs/design.md), so a bucket hidden behind the next step's kernels is
// hidden, and the buckets' exposed times add up to the rank's exposed bucket communication.
void setExposedTimes(const RunIndex& index, std::vector<BucketStat>& out)
{
    std::vector<size_t> order(out.size());
    for (size_t k = 0; k < order.size(); ++k)
        order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::tie(out[a].rank, out[a].launch, out[a].completion, out[a].step, out[a].bucket)
            < std::tie(out[b].rank, out[b].launch, out[b].completion, out[b].step, out[b].bucket);
    });
    int32_t rank = -1;
    TimeNs ownedUpTo = 0; // the latest completion of this rank's buckets launched so far
    for (size_t k : order) {
        BucketStat& st = out[k];
        if (st.rank != rank) {
            rank = st.rank;
            ownedUpTo = st.launch;
        }
        const TimeNs from = std::max(st.launch, ownedUpTo);
        st.ownStart = from;
        if (st.completion <= from) {
            st.exposed = st.hidden = 0;
            continue;
        }
        const RankUnions u = index.unions(st.rank, from, st.completion);
        // Only where communication is in flight: an imported bucket pairs the call that launched
        // it with the op that ran it, and between the two nothing may be.
        st.hidden = intersectionLength(u.comm, u.compute);
        st.exposed = totalLength(subtractIntervals(u.comm, u.compute));
        ownedUpTo = st.completion;
    }
}

} // namespace

std::vector<BucketStat> detail::bucketStatsWith(const Run& run, const RunIndex* index)
{
    std::vector<BucketStat> out = bucketCollectives(run, commEntries(run));
    setReadyTimes(run, out);
    // Exposed and hidden time are not applicable on one rank.
    if (worldSizeOf(run) > 1 && index && !out.empty())
        setExposedTimes(*index, out);
    return out;
}

// ---------------------------------------------------------------------------------------------
// Buckets at a time

const char* bucketStateName(BucketState state)
{
    switch (state) {
    case BucketState::Pending: return "gradients";
    case BucketState::Waiting: return "waiting";
    case BucketState::InFlight: return "in flight";
    case BucketState::Done: return "done";
    }
    return "?";
}

int32_t stepAt(const Run& run, int32_t rank, TimeNs t)
{
    int32_t found = kNoStep;
    for (const Step& s : run.steps) {
        if (s.rank != rank)
            continue;
        if (found == kNoStep || s.start <= t)
            found = s.step;
        if (s.start > t)
            break;
    }
    return found;
}

std::vector<BucketStatus> bucketStatesAt(const Run& run, int32_t rank, int32_t step, TimeNs t)
{
    std::map<int32_t, BucketStatus> byBucket;
    for (const Bucket& b : run.buckets) {
        BucketStatus st;
        st.bucket = b.index;
        st.bytes = b.bytes;
        byBucket[b.index] = st;
    }
    auto stepIt = std::find_if(run.steps.begin(), run.steps.end(),
                               [&](const Step& s) { return s.rank == rank && s.step == step; });
    if (stepIt == run.steps.end())
        return {};
    // A little slack around the step: a bucket's last all-reduce may be recorded as ending
    // just after the step's end stamp.
    const TimeNs lo = stepIt->start - (stepIt->end - stepIt->start) / 10;
    const TimeNs hi = stepIt->end + (stepIt->end - stepIt->start) / 10;

    std::map<int32_t, std::vector<TimeNs>> readyTimes;
    bool anyCommLane = false;
    for (const Lane& lane : run.lanes)
        anyCommLane = anyCommLane || (lane.rank == rank && lane.kind == LaneKind::Comm);
    for (const Lane& lane : run.lanes) {
        if (lane.rank != rank)
            continue;
        // Gradient-ready instants of this step, found by a binary search on (lane, ts).
        auto first = std::lower_bound(run.instants.begin(), run.instants.end(), std::pair{lane.id, lo},
                                      [](const Instant& i, std::pair<LaneId, TimeNs> k) {
                                          return std::pair{i.lane, i.ts} < k;
                                      });
        for (auto it = first; it != run.instants.end() && it->lane == lane.id && it->ts < hi; ++it)
            if (it->kind == InstantKind::GradReady && it->step == step && it->bucket >= 0)
                readyTimes[it->bucket].push_back(it->ts);
        // The bucket's all-reduce: host collectives if the rank records them, else comm kernels.
        const bool commLane = anyCommLane ? lane.kind == LaneKind::Comm : lane.kind == LaneKind::GpuStream;
        if (!commLane)
            continue;
        const auto [a, b] = run.laneSpanRange(lane.id);
        auto s0 = std::lower_bound(run.spans.begin() + static_cast<ptrdiff_t>(a),
                                   run.spans.begin() + static_cast<ptrdiff_t>(b), lo,
                                   [](const Span& s, TimeNs v) { return s.start < v; });
        for (auto it = s0; it != run.spans.begin() + static_cast<ptrdiff_t>(b) && it->start < hi; ++it) {
            if (!isCommunication(it->kind) || it->bucket < 0 || it->step != step)
                continue;
            BucketStatus& st = byBucket[it->bucket];
            st.bucket = it->bucket;
            if (st.bytes == 0)
                st.bytes = it->bytes;
            st.launch = st.launch < 0 ? it->start : std::min(st.launch, it->start);
            st.completion = std::max(st.completion, it->end);
        }
    }
    std::vector<BucketStatus> out;
    for (auto& [index, st] : byBucket) {
        const auto rt = readyTimes.find(index);
        if (rt != readyTimes.end()) {
            st.total = static_cast<int32_t>(rt->second.size());
            st.ready = static_cast<int32_t>(std::count_if(rt->second.begin(), rt->second.end(),
                                                          [&](TimeNs r) { return r <= t; }));
        } else {
            // No gradient-ready instants recorded: readiness is only known once it launched.
            auto bit = std::find_if(run.buckets.begin(), run.buckets.end(),
                                    [&](const Bucket& b) { return b.index == index; });
            st.total = bit != run.buckets.end() ? static_cast<int32_t>(bit->params.size()) : 0;
            st.ready = (st.launch >= 0 && t >= st.launch) ? st.total : 0;
        }
        if (st.launch >= 0 && t >= st.completion)
            st.state = BucketState::Done;
        else if (st.launch >= 0 && t >= st.launch)
            st.state = BucketState::InFlight;
        else if (st.total > 0 && st.ready >= st.total)
            st.state = BucketState::Waiting;
        else
            st.state = BucketState::Pending;
        out.push_back(st);
    }
    return out;
}

} // namespace lockstep::core
