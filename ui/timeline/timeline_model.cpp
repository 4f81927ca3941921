// The timeline's per-run model and the run helpers it shares (see timeline_model.h).
#include "timeline_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace lockstep::ui {

using core::Interval;
using core::LaneId;
using core::LaneKind;
using core::Run;
using core::TimeNs;

// ---------------------------------------------------------------------------------------------
// Alignment

int32_t alignStep(const Run& run)
{
    if (run.steps.empty())
        return 0;
    const int32_t wanted = std::max(0, run.config.warmupSteps);
    int32_t smallest = std::numeric_limits<int32_t>::max();
    for (const core::Step& s : run.steps) {
        if (s.step == wanted)
            return wanted;
        smallest = std::min(smallest, s.step);
    }
    // Fewer steps than the warm-up: align on the first step there is (step 0 normally).
    return smallest;
}

TimeNs alignmentOrigin(const Run& run)
{
    if (!run.steps.empty()) {
        const int32_t s = alignStep(run);
        TimeNs origin = std::numeric_limits<TimeNs>::max();
        for (const core::Step& st : run.steps)
            if (st.step == s)
                origin = std::min(origin, st.start);
        if (origin != std::numeric_limits<TimeNs>::max())
            return origin;
    }
    TimeNs first = std::numeric_limits<TimeNs>::max();
    for (const core::Lane& lane : run.lanes) {
        const auto [a, b] = run.laneSpanRange(lane.id);
        if (a < b)
            first = std::min(first, run.spans[a].start);
    }
    return first == std::numeric_limits<TimeNs>::max() ? 0 : first;
}

// ---------------------------------------------------------------------------------------------
// Interval algebra on sorted, disjoint lists (two-pointer sweeps).

std::vector<Interval> intersectIntervals(const std::vector<Interval>& a, const std::vector<Interval>& b)
{
    std::vector<Interval> out;
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const TimeNs lo = std::max(a[i].start, b[j].start);
        const TimeNs hi = std::min(a[i].end, b[j].end);
        if (lo < hi)
            out.push_back({lo, hi});
        if (a[i].end < b[j].end)
            ++i;
        else
            ++j;
    }
    return out;
}

std::vector<Interval> subtractIntervals(const std::vector<Interval>& a, const std::vector<Interval>& b)
{
    std::vector<Interval> out;
    size_t j = 0;
    for (const Interval& x : a) {
        TimeNs cur = x.start;
        while (j < b.size() && b[j].end <= cur)
            ++j;
        size_t k = j;
        while (k < b.size() && b[k].start < x.end) {
            if (b[k].start > cur)
                out.push_back({cur, b[k].start});
            cur = std::max(cur, b[k].end);
            if (cur >= x.end)
                break;
            ++k;
        }
        if (cur < x.end)
            out.push_back({cur, x.end});
    }
    return out;
}

std::vector<TimeNs> laneMaxDurations(const Run& run)
{
    std::vector<TimeNs> out(run.lanes.size(), 0);
    for (const core::Span& s : run.spans)
        if (s.lane.v < out.size())
            out[s.lane.v] = std::max(out[s.lane.v], s.duration());
    return out;
}

namespace {

// Lanes of `rank` whose spans count for C and M (core::stepBreakdown's device rule).
std::vector<LaneId> countedLanes(const Run& run, int32_t rank)
{
    bool deviceSpans = false;
    for (const core::Lane& lane : run.lanes) {
        if (lane.rank == rank && lane.kind == LaneKind::GpuStream) {
            const auto [a, b] = run.laneSpanRange(lane.id);
            deviceSpans = deviceSpans || a < b;
        }
    }
    std::vector<LaneId> out;
    for (const core::Lane& lane : run.lanes)
        if (lane.rank == rank && (lane.kind == LaneKind::GpuStream) == deviceSpans)
            out.push_back(lane.id);
    return out;
}

// Spans of one lane overlapping [lo, hi): spans are sorted by start, so the first candidate
// starts no earlier than lo - (the lane's longest span).
template <class F>
void forEachSpanIn(const Run& run, LaneId lane, TimeNs maxDuration, TimeNs lo, TimeNs hi, F&& f)
{
    const auto [a, b] = run.laneSpanRange(lane);
    auto first = std::lower_bound(run.spans.begin() + a, run.spans.begin() + b, lo - maxDuration,
                                  [](const core::Span& s, TimeNs t) { return s.start < t; });
    for (auto it = first; it != run.spans.begin() + b && it->start < hi; ++it)
        if (it->end > lo)
            f(*it, static_cast<size_t>(it - run.spans.begin()));
}

} // namespace

RankUnions rankUnions(const Run& run, const std::vector<TimeNs>& laneMaxDuration, int32_t rank, TimeNs lo, TimeNs hi)
{
    std::vector<Interval> c, m;
    for (LaneId lane : countedLanes(run, rank)) {
        const TimeNs maxDur = lane.v < laneMaxDuration.size() ? laneMaxDuration[lane.v] : 0;
        forEachSpanIn(run, lane, maxDur, lo, hi, [&](const core::Span& s, size_t) {
            if (core::isCommunication(s.kind))
                m.push_back({s.start, s.end});
            else if (core::isCompute(s.kind))
                c.push_back({s.start, s.end});
        });
    }
    RankUnions out;
    out.compute = core::unionClipped(std::move(c), lo, hi);
    out.comm = core::unionClipped(std::move(m), lo, hi);
    return out;
}

core::StepBreakdown rankStepBreakdown(const Run& run, const std::vector<TimeNs>& laneMaxDuration, int32_t rank,
                                      int32_t step, bool* found)
{
    core::StepBreakdown out;
    out.rank = rank;
    out.step = step;
    auto it = std::lower_bound(run.steps.begin(), run.steps.end(), std::pair{rank, step},
                               [](const core::Step& s, std::pair<int32_t, int32_t> k) {
                                   return std::pair{s.rank, s.step} < k;
                               });
    const bool ok = it != run.steps.end() && it->rank == rank && it->step == step;
    if (found)
        *found = ok;
    if (!ok)
        return out;
    out.start = it->start;
    out.end = it->end;
    out.wall = it->end - it->start;
    const RankUnions u = rankUnions(run, laneMaxDuration, rank, it->start, it->end);
    out.compute = core::totalLength(u.compute);
    out.communication = core::totalLength(u.comm);
    out.overlapped = core::intersectionLength(u.compute, u.comm);
    out.exposed = out.communication - out.overlapped;
    out.computeOnly = out.compute - out.overlapped;
    out.idle = out.wall - (out.compute + out.communication - out.overlapped);
    out.overlapRatio = out.communication > 0 ? double(out.overlapped) / double(out.communication)
                                             : std::numeric_limits<double>::quiet_NaN();
    out.warmup = step < run.config.warmupSteps;
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
    int32_t found = core::kNoStep;
    for (const core::Step& s : run.steps) {
        if (s.rank != rank)
            continue;
        if (found == core::kNoStep || s.start <= t)
            found = s.step;
        if (s.start > t)
            break;
    }
    return found;
}

std::vector<BucketStatus> bucketStatesAt(const Run& run, int32_t rank, int32_t step, TimeNs t)
{
    std::map<int32_t, BucketStatus> byBucket;
    for (const core::Bucket& b : run.buckets) {
        BucketStatus st;
        st.bucket = b.index;
        st.bytes = b.bytes;
        byBucket[b.index] = st;
    }
    auto stepIt = std::find_if(run.steps.begin(), run.steps.end(),
                               [&](const core::Step& s) { return s.rank == rank && s.step == step; });
    if (stepIt == run.steps.end())
        return {};
    // A little slack around the step: a bucket's last all-reduce may be recorded as ending
    // just after the step's end stamp.
    const TimeNs lo = stepIt->start - (stepIt->end - stepIt->start) / 10;
    const TimeNs hi = stepIt->end + (stepIt->end - stepIt->start) / 10;

    std::map<int32_t, std::vector<TimeNs>> readyTimes;
    bool anyCommLane = false;
    for (const core::Lane& lane : run.lanes)
        anyCommLane = anyCommLane || (lane.rank == rank && lane.kind == LaneKind::Comm);
    for (const core::Lane& lane : run.lanes) {
        if (lane.rank != rank)
            continue;
        // Gradient-ready instants of this step, found by a binary search on (lane, ts).
        auto first = std::lower_bound(run.instants.begin(), run.instants.end(), std::pair{lane.id, lo},
                                      [](const core::Instant& i, std::pair<LaneId, TimeNs> k) {
                                          return std::pair{i.lane, i.ts} < k;
                                      });
        for (auto it = first; it != run.instants.end() && it->lane == lane.id && it->ts < hi; ++it)
            if (it->kind == core::InstantKind::GradReady && it->step == step && it->bucket >= 0)
                readyTimes[it->bucket].push_back(it->ts);
        // The bucket's all-reduce: host collectives if the rank records them, else comm kernels.
        const bool commLane = anyCommLane ? lane.kind == LaneKind::Comm : lane.kind == LaneKind::GpuStream;
        if (!commLane)
            continue;
        const auto [a, b] = run.laneSpanRange(lane.id);
        auto s0 = std::lower_bound(run.spans.begin() + a, run.spans.begin() + b, lo,
                                   [](const core::Span& s, TimeNs v) { return s.start < v; });
        for (auto it = s0; it != run.spans.begin() + b && it->start < hi; ++it) {
            if (!core::isCommunication(it->kind) || it->bucket < 0 || it->step != step)
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
                                    [&](const core::Bucket& b) { return b.index == index; });
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

// ---------------------------------------------------------------------------------------------
// TimelineRunModel

namespace {
int laneOrder(const core::Lane& l)
{
    switch (l.kind) {
    case LaneKind::Compute: return 0;
    case LaneKind::Comm: return 1;
    case LaneKind::GpuStream: return 2;
    case LaneKind::HostThread: return 3;
    }
    return 4;
}

void appendPieces(std::vector<core::Span>& out, const std::vector<Interval>& pieces, LaneId lane, int32_t step)
{
    for (const Interval& iv : pieces) {
        core::Span s;
        s.start = iv.start;
        s.end = iv.end;
        s.lane = lane;
        s.step = step;
        s.kind = core::SpanKind::Comm;
        out.push_back(s);
    }
}
} // namespace

const char* RankStepMatrix::metricName(Metric m)
{
    switch (m) {
    case StepTime: return "step time";
    case WaitCaused: return "wait caused";
    case ExposedComm: return "exposed communication";
    case MetricCount: break;
    }
    return "";
}

TimelineRunModel::TimelineRunModel(std::shared_ptr<const Run> run)
    : m_run(std::move(run))
{
}

std::shared_ptr<const TimelineRunModel> TimelineRunModel::build(std::shared_ptr<const Run> run,
                                                                const std::vector<core::StepBreakdown>& breakdown,
                                                                const core::StragglerReport& stragglers,
                                                                std::stop_token stop)
{
    if (!run)
        return nullptr;
    std::shared_ptr<TimelineRunModel> model(new TimelineRunModel(std::move(run)));
    if (!model->construct(breakdown, stragglers, stop))
        return nullptr;
    return model;
}

std::shared_ptr<const TimelineRunModel> TimelineRunModel::build(std::shared_ptr<const Run> run)
{
    if (!run)
        return nullptr;
    const auto breakdown = core::stepBreakdown(*run);
    const auto stragglers = core::stragglers(*run);
    return build(std::move(run), breakdown, stragglers);
}

bool TimelineRunModel::construct(const std::vector<core::StepBreakdown>& breakdown,
                                 const core::StragglerReport& stragglers, std::stop_token stop)
{
    const Run& r = *m_run;
    m_lod = core::RunLod(r);
    if (stop.stop_requested())
        return false;
    m_laneMaxDuration.assign(r.lanes.size(), 0);
    for (size_t i = 0; i < r.lanes.size() && i < m_lod.laneCount(); ++i)
        m_laneMaxDuration[i] = m_lod.lane(LaneId{static_cast<uint32_t>(i)}).maxDuration();
    m_alignStep = ui::alignStep(r);
    m_origin = alignmentOrigin(r);

    // Extent of the run.
    m_begin = std::numeric_limits<TimeNs>::max();
    m_end = std::numeric_limits<TimeNs>::min();
    for (const core::Lane& lane : r.lanes) {
        const auto [a, b] = r.laneSpanRange(lane.id);
        if (a >= b)
            continue;
        m_begin = std::min(m_begin, r.spans[a].start);
        // Sorted by start: the last end lies within one longest span of the last start.
        const TimeNs lastStart = r.spans[b - 1].start;
        for (size_t i = b; i > a && r.spans[i - 1].start >= lastStart - m_laneMaxDuration[lane.id.v]; --i)
            m_end = std::max(m_end, r.spans[i - 1].end);
    }
    for (const core::Step& s : r.steps) {
        m_begin = std::min(m_begin, s.start);
        m_end = std::max(m_end, s.end);
    }
    if (m_begin > m_end) {
        m_begin = m_origin;
        m_end = m_origin + 1;
    }

    // Instants per lane (sorted by lane, ts).
    m_laneInstants.assign(r.lanes.size(), {0, 0});
    for (size_t i = 0; i < r.lanes.size(); ++i) {
        const LaneId id{static_cast<uint32_t>(i)};
        auto lo = std::lower_bound(r.instants.begin(), r.instants.end(), id,
                                   [](const core::Instant& x, LaneId l) { return x.lane < l; });
        auto hi = std::upper_bound(lo, r.instants.end(), id,
                                   [](LaneId l, const core::Instant& x) { return l < x.lane; });
        m_laneInstants[i] = {static_cast<size_t>(lo - r.instants.begin()), static_cast<size_t>(hi - r.instants.begin())};
    }

    // Lanes and steps by rank, in one pass each (a 1024-rank run has 2048 lanes and 20 000
    // steps: a pass per rank would be quadratic).
    std::map<int32_t, std::vector<const core::Lane*>> lanesByRank;
    for (size_t i = 0; i < r.lanes.size(); ++i) {
        const core::Lane& l = r.lanes[i];
        // A lane whose id breaks the invariant (lanes[i].id.v == i) has no LOD to draw from:
        // leave it out rather than index past the end.
        if (l.id.v == i && i < m_lod.laneCount())
            lanesByRank[l.rank].push_back(&l);
    }
    std::map<int32_t, std::vector<const core::Step*>> stepsByRank;
    for (const core::Step& s : r.steps)
        stepsByRank[s.rank].push_back(&s);
    std::set<int32_t> rankSet;
    for (const auto& [rank, lanes] : lanesByRank)
        rankSet.insert(rank);
    for (const auto& [rank, steps] : stepsByRank)
        rankSet.insert(rank);
    // Core's breakdown is sorted by (rank, step).
    auto breakdownOf = [&](int32_t rank, int32_t step) -> const core::StepBreakdown* {
        auto it = std::lower_bound(breakdown.begin(), breakdown.end(), std::pair{rank, step},
                                   [](const core::StepBreakdown& b, std::pair<int32_t, int32_t> k) {
                                       return std::pair{b.rank, b.step} < k;
                                   });
        return it != breakdown.end() && it->rank == rank && it->step == step ? &*it : nullptr;
    };

    // A 1-rank run has no straggler (DESIGN.md: not applicable): no report is kept for it.
    if (rankSet.size() > 1)
        m_stragglers = stragglers;
    auto meanWaitOf = [&](int32_t rank) {
        const auto& per = m_stragglers.perRank; // sorted by rank
        auto it = std::lower_bound(per.begin(), per.end(), rank, [](const core::RankStraggle& x, int32_t v) { return x.rank < v; });
        return it != per.end() && it->rank == rank ? it->meanWaitNs : std::numeric_limits<double>::quiet_NaN();
    };

    std::map<int32_t, StepSpan> stepUnion;
    for (int32_t rank : rankSet) {
        if (stop.stop_requested())
            return false;
        auto rl = std::make_unique<RankLanes>();
        rl->rank = rank;
        std::vector<const core::Lane*> lanes = lanesByRank[rank];
        std::stable_sort(lanes.begin(), lanes.end(), [](const core::Lane* a, const core::Lane* b) {
            return std::tuple{laneOrder(*a), a->device, a->stream} < std::tuple{laneOrder(*b), b->device, b->stream};
        });
        for (const core::Lane* l : lanes)
            rl->lanes.push_back(l->id);
        // The strip goes under the communication lane; a rank without one carries it on its
        // last lane.
        auto comm = std::find_if(lanes.begin(), lanes.end(), [](const core::Lane* l) { return l->kind == LaneKind::Comm; });
        if (comm != lanes.end()) {
            rl->stripLane = rl->commLane = (*comm)->id;
            rl->hasCommLane = true;
        } else if (!lanes.empty()) {
            rl->stripLane = lanes.back()->id;
        }
        for (const core::Step* s : stepsByRank[rank]) {
            rl->steps.push_back(StepSpan{s->step, s->start, s->end});
            auto [it, inserted] = stepUnion.try_emplace(s->step, StepSpan{s->step, s->start, s->end});
            if (!inserted) {
                it->second.start = std::min(it->second.start, s->start);
                it->second.end = std::max(it->second.end, s->end);
            }
        }
        // Overlap strips: per step, C ∩ M (overlapped) and M \ C (exposed), as pieces; the
        // zoomed-out strip takes core's per-step totals.
        double steadySum = 0;
        int steadyCount = 0;
        for (const StepSpan& st : rl->steps) {
            const core::StepBreakdown* b = breakdownOf(rank, st.step);
            rl->stepOverlap.emplace_back(b ? b->overlapped : 0, b ? b->exposed : 0);
            if (b && !b->warmup) {
                steadySum += double(b->wall);
                ++steadyCount;
            }
            if (lanes.empty())
                continue;
            const RankUnions u = rankUnions(r, m_laneMaxDuration, rank, st.start, st.end);
            appendPieces(rl->overlapped, intersectIntervals(u.compute, u.comm), rl->stripLane, st.step);
            appendPieces(rl->exposed, subtractIntervals(u.comm, u.compute), rl->stripLane, st.step);
        }
        rl->steadyStepNs = steadyCount > 0 ? steadySum / steadyCount : std::numeric_limits<double>::quiet_NaN();
        rl->meanWaitCausedNs = meanWaitOf(rank);
        if (!rl->steps.empty()) {
            TimeNs sum = 0;
            for (const StepSpan& st : rl->steps)
                sum += st.end - st.start;
            rl->meanStepNs = sum / TimeNs(rl->steps.size());
        }
        auto byStart = [](const core::Span& a, const core::Span& b) { return a.start < b.start; };
        std::sort(rl->overlapped.begin(), rl->overlapped.end(), byStart);
        std::sort(rl->exposed.begin(), rl->exposed.end(), byStart);
        rl->overlappedLod = core::LaneLod(std::span<const core::Span>(rl->overlapped));
        rl->exposedLod = core::LaneLod(std::span<const core::Span>(rl->exposed));
        m_ranks.push_back(std::move(rl));
    }
    for (const auto& [step, span] : stepUnion)
        m_steps.push_back(span);

    // The heatmap's matrix: core's numbers, laid out rank by step.
    m_matrix.ranks.assign(rankSet.begin(), rankSet.end());
    std::set<int32_t> stepSet;
    for (const core::StepBreakdown& b : breakdown)
        stepSet.insert(b.step);
    m_matrix.steps.assign(stepSet.begin(), stepSet.end());
    const size_t cells = m_matrix.ranks.size() * m_matrix.steps.size();
    for (auto& v : m_matrix.values)
        v.assign(cells, std::numeric_limits<float>::quiet_NaN());
    auto cell = [&](int32_t rank, int32_t step) -> std::optional<size_t> {
        const auto ri = std::lower_bound(m_matrix.ranks.begin(), m_matrix.ranks.end(), rank);
        const auto si = std::lower_bound(m_matrix.steps.begin(), m_matrix.steps.end(), step);
        if (ri == m_matrix.ranks.end() || *ri != rank || si == m_matrix.steps.end() || *si != step)
            return std::nullopt;
        return size_t(ri - m_matrix.ranks.begin()) * m_matrix.steps.size() + size_t(si - m_matrix.steps.begin());
    };
    const bool multiRank = rankSet.size() > 1;
    for (const core::StepBreakdown& b : breakdown) {
        if (auto c = cell(b.rank, b.step)) {
            m_matrix.values[RankStepMatrix::StepTime][*c] = float(double(b.wall) / 1e6);
            // Not applicable on one rank: no wait to cause, no communication to expose.
            if (multiRank) {
                m_matrix.values[RankStepMatrix::ExposedComm][*c] = float(double(b.exposed) / 1e6);
                m_matrix.values[RankStepMatrix::WaitCaused][*c] = 0.0f;
            }
        }
    }
    for (const core::BucketSkew& k : m_stragglers.skews) {
        if (auto c = cell(k.lateRank, k.step)) {
            float& v = m_matrix.values[RankStepMatrix::WaitCaused][*c];
            v = std::max(std::isnan(v) ? 0.0f : v, float(double(k.waitCaused) / 1e6));
        }
    }
    return !stop.stop_requested();
}

const TimelineRunModel::RankLanes* TimelineRunModel::rank(int32_t r) const
{
    auto it = std::lower_bound(m_ranks.begin(), m_ranks.end(), r,
                               [](const std::unique_ptr<RankLanes>& a, int32_t v) { return a->rank < v; });
    return it != m_ranks.end() && (*it)->rank == r ? it->get() : nullptr;
}

const StepSpan* TimelineRunModel::RankLanes::step(int32_t s) const
{
    auto it = std::lower_bound(steps.begin(), steps.end(), s, [](const StepSpan& a, int32_t v) { return a.step < v; });
    return it != steps.end() && it->step == s ? &*it : nullptr;
}

const StepSpan* TimelineRunModel::step(int32_t s) const
{
    auto it = std::lower_bound(m_steps.begin(), m_steps.end(), s,
                               [](const StepSpan& a, int32_t v) { return a.step < v; });
    return it != m_steps.end() && it->step == s ? &*it : nullptr;
}

const core::BucketSkew* TimelineRunModel::bucketSkew(int32_t step, int32_t bucket) const
{
    const auto& skews = m_stragglers.skews;
    auto it = std::lower_bound(skews.begin(), skews.end(), std::pair{step, bucket},
                               [](const core::BucketSkew& k, std::pair<int32_t, int32_t> v) {
                                   return std::pair{k.step, k.bucket} < v;
                               });
    return it != skews.end() && it->step == step && it->bucket == bucket ? &*it : nullptr;
}

} // namespace lockstep::ui
