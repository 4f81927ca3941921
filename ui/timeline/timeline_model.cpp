// The timeline's per-run model (see timeline_model.h).
#include "timeline_model.h"

#include <algorithm>
#include <unordered_map>
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

// Core's breakdown is sorted by (rank, step), its rank summaries by rank.
const core::StepBreakdown* breakdownOf(const core::RunAnalysis& a, int32_t rank, int32_t step)
{
    auto it = std::lower_bound(a.steps.begin(), a.steps.end(), std::pair{rank, step},
                               [](const core::StepBreakdown& b, std::pair<int32_t, int32_t> k) {
                                   return std::pair{b.rank, b.step} < k;
                               });
    return it != a.steps.end() && it->rank == rank && it->step == step ? &*it : nullptr;
}

const core::RankSummary* summaryOf(const core::RunAnalysis& a, int32_t rank)
{
    auto it = std::lower_bound(a.ranks.begin(), a.ranks.end(), rank,
                               [](const core::RankSummary& x, int32_t v) { return x.rank < v; });
    return it != a.ranks.end() && it->rank == rank ? &*it : nullptr;
}

using LaneWork = std::vector<core::LaneWork>; // by lane id

// What the eye needs first: the training thread, the communication, then the host threads that
// launch or run collectives (gloo's worker threads on an imported trace), the GPU streams
// busiest first (a trace's dozens of nearly idle streams sink to the bottom), then the other
// host threads.
void orderLanes(std::vector<const core::Lane*>& lanes, const LaneWork& work)
{
    const auto group = [&](const core::Lane& l) {
        switch (l.kind) {
        case LaneKind::Compute: return 0;
        case LaneKind::Comm: return 1;
        case LaneKind::HostThread: return work[l.id.v].communicates ? 2 : 4;
        case LaneKind::GpuStream: return 3;
        }
        return 5;
    };
    std::stable_sort(lanes.begin(), lanes.end(), [&](const core::Lane* x, const core::Lane* y) {
        const int gx = group(*x), gy = group(*y);
        if (gx != gy)
            return gx < gy;
        if (gx == 3 && work[x->id.v].busyNs != work[y->id.v].busyNs)
            return work[x->id.v].busyNs > work[y->id.v].busyNs;
        return std::tuple{laneOrder(*x), x->device, x->stream} < std::tuple{laneOrder(*y), y->device, y->stream};
    });
}

// The strip goes under the communication lane (or the first lane that communicates); a rank
// without one carries it on its last lane.
void placeStrip(TimelineRunModel::RankLanes& rl, const std::vector<const core::Lane*>& lanes, const LaneWork& work)
{
    auto comm = std::find_if(lanes.begin(), lanes.end(), [](const core::Lane* l) { return l->kind == LaneKind::Comm; });
    if (comm == lanes.end())
        comm = std::find_if(lanes.begin(), lanes.end(), [&](const core::Lane* l) { return work[l->id.v].communicates; });
    if (comm != lanes.end())
        rl.stripLane = (*comm)->id;
    else if (!lanes.empty())
        rl.stripLane = lanes.back()->id;
}

// Nearly idle GPU streams fold into one row (timeline_model.h): below kQuietStreamShare of the
// busiest stream's busy time, no communication, not the strip's lane.
// On an overview (`folded` not empty) the lanes' spans stand for folded items: their union is
// drawn, its length is not known.
void foldQuietStreams(const Run& r, TimelineRunModel::RankLanes& rl, const std::vector<const core::Lane*>& lanes,
                      const LaneWork& work, const std::vector<core::DrawItem>& folded)
{
    TimeNs busiest = 0;
    for (const core::Lane* l : lanes)
        if (l->kind == LaneKind::GpuStream)
            busiest = std::max(busiest, work[l->id.v].busyNs);
    std::vector<core::LaneId> quiet;
    for (const core::Lane* l : lanes)
        if (l->kind == LaneKind::GpuStream && !work[l->id.v].communicates && l->id != rl.stripLane
            && double(work[l->id.v].busyNs) < TimelineRunModel::kQuietStreamShare * double(busiest))
            quiet.push_back(l->id);
    if (quiet.size() < 2)
        return;
    std::vector<Interval> pieces;
    bool exact = true;
    for (core::LaneId id : quiet) {
        const auto [first, last] = r.laneSpanRange(id);
        for (size_t i = first; i < last; ++i) {
            pieces.push_back(Interval{r.spans[i].start, r.spans[i].end});
            exact = exact && (folded.empty() || folded[i].count == 1);
        }
    }
    core::mergeInPlace(pieces);
    for (const Interval& iv : pieces) {
        core::Span s;
        s.start = iv.start;
        s.end = iv.end;
        s.lane = quiet.front();
        s.kind = core::SpanKind::Other;
        rl.quietUnion.push_back(s);
    }
    rl.quietBusyNs = exact ? core::totalLength(pieces) : -1;
    rl.quietLod = core::LaneLod(std::span<const core::Span>(rl.quietUnion));
    rl.quietLanes = std::move(quiet);
}
} // namespace

const char* RankStepMatrix::metricName(Metric m)
{
    switch (m) {
    case StepTime: return "step time";
    case WaitCaused: return "wait caused";
    case ExposedComm: return "exposed communication";
    case CpuWait: return "CPU wait";
    case MetricCount: break;
    }
    return "";
}

TimelineRunModel::TimelineRunModel(std::shared_ptr<const Run> run, std::shared_ptr<const core::RunAnalysis> analysis)
    : m_run(std::move(run))
    , m_analysis(std::move(analysis))
{
}

std::shared_ptr<const TimelineRunModel> TimelineRunModel::build(std::shared_ptr<const Run> run,
                                                                std::shared_ptr<const core::RunAnalysis> analysis,
                                                                std::stop_token stop)
{
    if (!run)
        return nullptr;
    if (!analysis)
        analysis = std::make_shared<const core::RunAnalysis>(core::analyze(*run));
    std::shared_ptr<TimelineRunModel> model(new TimelineRunModel(std::move(run), std::move(analysis)));
    if (!model->construct(stop))
        return nullptr;
    return model;
}

std::shared_ptr<const TimelineRunModel> TimelineRunModel::build(std::shared_ptr<const Run> run)
{
    return build(std::move(run), nullptr);
}

std::shared_ptr<const TimelineRunModel> TimelineRunModel::buildOverview(const Run& header, const core::RunOverview& overview,
                                                                        std::shared_ptr<const core::RunAnalysis> analysis,
                                                                        std::stop_token stop, const core::OverviewDetail* detail)
{
    if (!analysis)
        return nullptr;
    auto run = std::make_shared<Run>(header);
    std::vector<core::DrawItem> folded;
    if (!core::overviewRun(overview, *run, folded, detail))
        return nullptr;
    std::shared_ptr<TimelineRunModel> model(new TimelineRunModel(std::move(run), std::move(analysis)));
    model->m_folded = std::move(folded);
    model->m_overview = true;
    for (const core::LaneOverview& l : overview.lanes)
        model->m_gaps.push_back(l.gap);
    if (detail) {
        model->m_detail.assign(header.lanes.size(), {0, 0});
        for (const core::RunReader::LaneWindow& w : detail->windows)
            if (w.lane.v < model->m_detail.size())
                model->m_detail[w.lane.v] = {w.start, w.end};
    }
    if (!model->construct(stop, &overview))
        return nullptr;
    return model;
}

void TimelineRunModel::computeExtent()
{
    const Run& r = *m_run;
    const std::vector<TimeNs>& maxDuration = m_index->laneMaxDurations();
    m_begin = std::numeric_limits<TimeNs>::max();
    m_end = std::numeric_limits<TimeNs>::min();
    for (const core::Lane& lane : r.lanes) {
        const auto [first, last] = r.laneSpanRange(lane.id);
        if (first >= last)
            continue;
        m_begin = std::min(m_begin, r.spans[first].start);
        // Sorted by start: the last end lies within one longest span of the last start.
        const TimeNs lastStart = r.spans[last - 1].start;
        for (size_t i = last; i > first && r.spans[i - 1].start >= lastStart - maxDuration[lane.id.v]; --i)
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
}

// Instants per lane (sorted by lane, ts).
void TimelineRunModel::indexInstants()
{
    const Run& r = *m_run;
    m_laneInstants.assign(r.lanes.size(), {0, 0});
    for (size_t i = 0; i < r.lanes.size(); ++i) {
        const LaneId id{static_cast<uint32_t>(i)};
        auto lo = std::lower_bound(r.instants.begin(), r.instants.end(), id,
                                   [](const core::Instant& x, LaneId l) { return x.lane < l; });
        auto hi = std::upper_bound(lo, r.instants.end(), id,
                                   [](LaneId l, const core::Instant& x) { return l < x.lane; });
        m_laneInstants[i] = {static_cast<size_t>(lo - r.instants.begin()), static_cast<size_t>(hi - r.instants.begin())};
    }
}

// One rank's rows: its lanes in display order, the strip's lane, folded quiet streams, steps,
// overlap strips and the numbers ranks are ordered by.
std::unique_ptr<TimelineRunModel::RankLanes> TimelineRunModel::buildRank(int32_t rank, std::vector<const core::Lane*> lanes,
                                                                         const std::vector<const core::Step*>& steps)
{
    const Run& r = *m_run;
    auto rl = std::make_unique<RankLanes>();
    rl->rank = rank;
    orderLanes(lanes, m_work);
    for (const core::Lane* l : lanes)
        rl->lanes.push_back(l->id);
    placeStrip(*rl, lanes, m_work);
    foldQuietStreams(r, *rl, lanes, m_work, m_folded);
    if (!rl->quietLanes.empty() && m_quietLane.size() < r.lanes.size())
        m_quietLane.assign(r.lanes.size(), 0);
    for (core::LaneId id : rl->quietLanes)
        m_quietLane[id.v] = 1;
    for (const core::Step* s : steps)
        rl->steps.push_back(StepSpan{s->step, s->start, s->end});
    // Overlap strips: per step, C ∩ M (overlapped) and M \ C (exposed) of what core counts
    // for that step (on GPU ranks the device work the step launched), as pieces; the
    // zoomed-out strip takes core's per-step totals.
    for (const StepSpan& st : rl->steps) {
        const core::StepBreakdown* b = breakdownOf(*m_analysis, rank, st.step);
        rl->stepOverlap.emplace_back(b ? b->overlapped : 0, b ? b->exposed : 0);
        if (lanes.empty() || !detailed())
            continue; // an overview's strip is the per-step one
        const core::RankUnions u = m_index->stepUnions(rank, st.step);
        appendPieces(rl->overlapped, core::intersectIntervals(u.compute, u.comm), rl->stripLane, st.step);
        appendPieces(rl->exposed, core::subtractIntervals(u.comm, u.compute), rl->stripLane, st.step);
    }
    if (!rl->steps.empty()) {
        TimeNs sum = 0;
        for (const StepSpan& st : rl->steps)
            sum += st.end - st.start;
        rl->meanStepNs = sum / TimeNs(rl->steps.size());
    }
    const core::RankSummary* rs = summaryOf(*m_analysis, rank);
    rl->steadyStepNs = rs ? rs->stepTimeMs * 1e6 : std::numeric_limits<double>::quiet_NaN();
    rl->meanWaitCausedNs = rs ? rs->meanWaitCausedMs * 1e6 : std::numeric_limits<double>::quiet_NaN();
    auto byStart = [](const core::Span& x, const core::Span& y) { return x.start < y.start; };
    std::sort(rl->overlapped.begin(), rl->overlapped.end(), byStart);
    std::sort(rl->exposed.begin(), rl->exposed.end(), byStart);
    rl->overlappedLod = core::LaneLod(std::span<const core::Span>(rl->overlapped));
    rl->exposedLod = core::LaneLod(std::span<const core::Span>(rl->exposed));
    return rl;
}

// The heatmap's matrix over m_matrix.ranks: core's numbers, laid out rank by step.
void TimelineRunModel::buildMatrix()
{
    const core::RunAnalysis& a = *m_analysis;
    std::set<int32_t> stepSet;
    for (const core::StepBreakdown& b : a.steps)
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
    const bool multiRank = a.summary.multiRank;
    for (const core::StepBreakdown& b : a.steps) {
        if (auto c = cell(b.rank, b.step)) {
            m_matrix.values[RankStepMatrix::StepTime][*c] = float(double(b.wall) / 1e6);
            // Not applicable on one rank: no communication to hide.
            if (multiRank)
                m_matrix.values[RankStepMatrix::ExposedComm][*c] = float(double(b.exposed) / 1e6);
            // The training thread's wait for a CPU (empty where not recorded): the steps in which
            // the machine held a rank back.
            if (b.runqNs >= 0)
                m_matrix.values[RankStepMatrix::CpuWait][*c] = float(double(b.runqNs) / 1e6);
        }
    }
    for (const core::RankStepWait& w : a.stragglers.perRankStep)
        if (auto c = cell(w.rank, w.step))
            m_matrix.values[RankStepMatrix::WaitCaused][*c] = float(double(w.waitCaused) / 1e6);
}

bool TimelineRunModel::construct(std::stop_token stop, const core::RunOverview* overview)
{
    const Run& r = *m_run;
    m_lod = m_folded.empty() ? core::RunLod(r) : core::RunLod(r, m_folded);
    m_work.resize(r.lanes.size());
    for (size_t i = 0; i < r.lanes.size(); ++i)
        m_work[i] = overview ? overview->lanes[i].work : core::laneWork(r, LaneId{static_cast<uint32_t>(i)});
    if (stop.stop_requested())
        return false;
    std::vector<TimeNs> laneMax(r.lanes.size(), 0);
    for (size_t i = 0; i < r.lanes.size() && i < m_lod.laneCount(); ++i)
        laneMax[i] = m_lod.lane(LaneId{static_cast<uint32_t>(i)}).maxDuration();
    m_index = std::make_unique<core::RunIndex>(r, std::move(laneMax));
    m_alignStep = core::alignStep(r);
    m_origin = core::alignmentOrigin(r);
    computeExtent();
    indexInstants();

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

    std::map<int32_t, StepSpan> stepUnion;
    for (int32_t rank : rankSet) {
        if (stop.stop_requested())
            return false;
        std::unique_ptr<RankLanes> rl = buildRank(rank, lanesByRank[rank], stepsByRank[rank]);
        for (const StepSpan& s : rl->steps) {
            auto [it, inserted] = stepUnion.try_emplace(s.step, s);
            if (!inserted) {
                it->second.start = std::min(it->second.start, s.start);
                it->second.end = std::max(it->second.end, s.end);
            }
        }
        m_ranks.push_back(std::move(rl));
    }
    for (const auto& [step, span] : stepUnion)
        m_steps.push_back(span);

    m_matrix.ranks.assign(rankSet.begin(), rankSet.end());
    buildMatrix();
    return !stop.stop_requested();
}

const TimelineRunModel::RankLanes* TimelineRunModel::rank(int32_t r) const
{
    auto it = std::lower_bound(m_ranks.begin(), m_ranks.end(), r,
                               [](const std::unique_ptr<RankLanes>& x, int32_t v) { return x->rank < v; });
    return it != m_ranks.end() && (*it)->rank == r ? it->get() : nullptr;
}

const StepSpan* TimelineRunModel::RankLanes::step(int32_t s) const
{
    auto it = std::lower_bound(steps.begin(), steps.end(), s, [](const StepSpan& x, int32_t v) { return x.step < v; });
    return it != steps.end() && it->step == s ? &*it : nullptr;
}

const StepSpan* TimelineRunModel::step(int32_t s) const
{
    auto it = std::lower_bound(m_steps.begin(), m_steps.end(), s,
                               [](const StepSpan& x, int32_t v) { return x.step < v; });
    return it != m_steps.end() && it->step == s ? &*it : nullptr;
}

bool TimelineRunModel::hasSpans(LaneId lane, TimeNs t0, TimeNs t1) const
{
    if (detailed())
        return true;
    if (lane.v >= m_detail.size())
        return false;
    const auto [a, b] = m_detail[lane.v];
    return a < b && a <= t0 && t1 <= b;
}

const core::StepBreakdown* TimelineRunModel::stepBreakdown(int32_t rank, int32_t step) const
{
    return breakdownOf(*m_analysis, rank, step);
}

const core::BucketSkew* TimelineRunModel::bucketSkew(int32_t step, int32_t bucket) const
{
    const auto& skews = m_analysis->stragglers.skews;
    auto it = std::lower_bound(skews.begin(), skews.end(), std::pair{step, bucket},
                               [](const core::BucketSkew& k, std::pair<int32_t, int32_t> v) {
                                   return std::pair{k.step, k.bucket} < v;
                               });
    return it != skews.end() && it->step == step && it->bucket == bucket ? &*it : nullptr;
}

} // namespace lockstep::ui
