// The timeline's per-run model and the run helpers it shares (see timeline_model.h).
#include "timeline_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <set>

namespace lockstep::ui {

using core::Interval;
using core::LaneId;
using core::LaneKind;
using core::Run;
using core::TimeNs;

// ---------------------------------------------------------------------------------------------
// Adapters over core (see the header)

RankUnions rankUnions(const Run& run, const std::vector<TimeNs>& laneMaxDuration, int32_t rank, TimeNs lo, TimeNs hi)
{
    return core::RunIndex(run, laneMaxDuration).unions(rank, lo, hi);
}

core::StepBreakdown rankStepBreakdown(const Run& run, const std::vector<TimeNs>& laneMaxDuration, int32_t rank,
                                      int32_t step, bool* found)
{
    const auto b = core::RunIndex(run, laneMaxDuration).stepBreakdown(rank, step);
    if (found)
        *found = b.has_value();
    if (b)
        return *b;
    core::StepBreakdown none;
    none.rank = rank;
    none.step = step;
    return none;
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

TimelineRunModel::TimelineRunModel(std::shared_ptr<const Run> run)
    : m_run(std::move(run))
{
    const Run& r = *m_run;
    m_lod = core::RunLod(r);
    std::vector<TimeNs> laneMax(r.lanes.size(), 0);
    for (size_t i = 0; i < r.lanes.size() && i < m_lod.laneCount(); ++i)
        laneMax[i] = m_lod.lane(LaneId{static_cast<uint32_t>(i)}).maxDuration();
    m_index = std::make_unique<core::RunIndex>(r, std::move(laneMax));
    const std::vector<TimeNs>& maxDuration = m_index->laneMaxDurations();
    m_alignStep = core::alignStep(r);
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
        for (size_t i = b; i > a && r.spans[i - 1].start >= lastStart - maxDuration[lane.id.v]; --i)
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

    // Ranks and their lanes in display order.
    std::set<int32_t> rankSet;
    for (const core::Lane& l : r.lanes)
        rankSet.insert(l.rank);
    for (const core::Step& s : r.steps)
        rankSet.insert(s.rank);
    std::map<int32_t, StepSpan> stepUnion;
    for (int32_t rank : rankSet) {
        auto rl = std::make_unique<RankLanes>();
        rl->rank = rank;
        std::vector<const core::Lane*> lanes;
        for (size_t i = 0; i < r.lanes.size(); ++i) {
            const core::Lane& l = r.lanes[i];
            // A lane whose id breaks the invariant (lanes[i].id.v == i) has no LOD to draw from:
            // leave it out rather than index past the end.
            if (l.rank == rank && l.id.v == i && i < m_lod.laneCount())
                lanes.push_back(&l);
        }
        std::stable_sort(lanes.begin(), lanes.end(), [](const core::Lane* a, const core::Lane* b) {
            return std::tuple{laneOrder(*a), a->device, a->stream} < std::tuple{laneOrder(*b), b->device, b->stream};
        });
        for (const core::Lane* l : lanes)
            rl->lanes.push_back(l->id);
        // The strip goes under the communication lane; a rank without one carries it on its
        // last lane.
        auto comm = std::find_if(lanes.begin(), lanes.end(), [](const core::Lane* l) { return l->kind == LaneKind::Comm; });
        if (comm != lanes.end())
            rl->stripLane = (*comm)->id;
        else if (!lanes.empty())
            rl->stripLane = lanes.back()->id;
        for (const core::Step& s : r.steps) {
            if (s.rank != rank)
                continue;
            rl->steps.push_back(StepSpan{s.step, s.start, s.end});
            auto [it, inserted] = stepUnion.try_emplace(s.step, StepSpan{s.step, s.start, s.end});
            if (!inserted) {
                it->second.start = std::min(it->second.start, s.start);
                it->second.end = std::max(it->second.end, s.end);
            }
        }
        // Overlap strips: per step, C ∩ M (overlapped) and M \ C (exposed) of what core counts
        // for that step (on GPU ranks the device work the step launched), as pieces.
        if (!lanes.empty()) {
            for (const StepSpan& st : rl->steps) {
                const RankUnions u = m_index->stepUnions(rank, st.step);
                const auto ov = intersectIntervals(u.compute, u.comm);
                const auto ex = subtractIntervals(u.comm, u.compute);
                rl->stepOverlap.emplace_back(core::totalLength(ov), core::totalLength(ex));
                appendPieces(rl->overlapped, ov, rl->stripLane, st.step);
                appendPieces(rl->exposed, ex, rl->stripLane, st.step);
            }
        }
        rl->stepOverlap.resize(rl->steps.size());
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

    if (!r.steps.empty() && rankSet.size() > 1) {
        core::StragglerReport report = core::stragglers(r);
        m_stragglers = std::move(report.perStep);
        m_runStragglers = std::move(report.stragglers);
    }
}

std::shared_ptr<const TimelineRunModel> TimelineRunModel::shared(std::shared_ptr<const Run> run)
{
    static std::mutex mutex;
    static std::map<const Run*, std::weak_ptr<const TimelineRunModel>> cache;
    const Run* key = run.get();
    {
        std::lock_guard lock(mutex);
        if (auto it = cache.find(key); it != cache.end()) {
            if (auto model = it->second.lock())
                return model;
            cache.erase(it);
        }
    }
    // Built outside the lock (seconds for a 10M-span run); two threads asking at once for one
    // new run both build it, and the second result wins the cache slot: correct, just wasted.
    auto model = std::make_shared<const TimelineRunModel>(std::move(run));
    std::lock_guard lock(mutex);
    for (auto it = cache.begin(); it != cache.end();) // drop expired entries as we go
        it = it->second.expired() ? cache.erase(it) : std::next(it);
    cache[key] = model;
    return model;
}

const TimelineRunModel::RankLanes* TimelineRunModel::rank(int32_t r) const
{
    for (const auto& rl : m_ranks)
        if (rl->rank == r)
            return rl.get();
    return nullptr;
}

const StepSpan* TimelineRunModel::step(int32_t s) const
{
    auto it = std::lower_bound(m_steps.begin(), m_steps.end(), s,
                               [](const StepSpan& a, int32_t v) { return a.step < v; });
    return it != m_steps.end() && it->step == s ? &*it : nullptr;
}

} // namespace lockstep::ui
