// The run summary, per-rank summaries and analyze(): every analysis computed once and the means
// over steady steps taken from them (docs/design.md; analysis.h for the rules).
#include "lockstep/core/analysis.h"

#include "analysis_internal.h"

#include "lockstep/core/run_db.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace lockstep::core {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kToMs = 1e-6;

// Sums of the breakdown over some (rank, step) rows, turned into means.
struct PartSums {
    double wall = 0, compute = 0, comm = 0, memory = 0;
    double computeOnly = 0, overlapped = 0, exposed = 0, memoryOnly = 0, idle = 0;
    double cpu = 0, runq = 0; // over the rows with scheduler statistics
    int n = 0, nSched = 0;
    void add(const StepBreakdown& b)
    {
        if (b.cpuNs >= 0 && b.runqNs >= 0) {
            cpu += static_cast<double>(b.cpuNs);
            runq += static_cast<double>(b.runqNs);
            ++nSched;
        }
        wall += static_cast<double>(b.wall);
        compute += static_cast<double>(b.compute);
        comm += static_cast<double>(b.communication);
        memory += static_cast<double>(b.memory);
        computeOnly += static_cast<double>(b.computeOnly);
        overlapped += static_cast<double>(b.overlapped);
        exposed += static_cast<double>(b.exposed);
        memoryOnly += static_cast<double>(b.memoryOnly);
        idle += static_cast<double>(b.idle);
        ++n;
    }
    double mean(double v) const { return n > 0 ? v / n * kToMs : 0.0; }
    double schedMean(double v) const { return nSched > 0 ? v / nSched * kToMs : kNaN; }
    double overlapRatio(bool multiRank) const { return multiRank && comm > 0 ? overlapped / comm : kNaN; }
};

// A (rank, step) row counts for the means when it is steady and has a window (a device-rule
// rank that launched nothing in a step has none: it says nothing about that step's time).
bool counts(const StepBreakdown& b) { return b.steady && b.window != StepWindow::NoDeviceWork; }

// The run's configuration, and its sizes counted.
void summarizeConfig(RunSummary& s, const Run& run, const RunAnalysis& a)
{
    const RunConfig& c = run.config;
    s.config = c;
    s.signature = configSignature(c);
    s.spans = static_cast<int64_t>(run.spans.size());
    for (const Diagnostic& d : run.diagnostics)
        s.diagnostics += d.count;
    s.worldSize = detail::worldSizeOf(run);
    s.multiRank = s.worldSize > 1;
    s.steady = a.steady;
    s.steadySteps = static_cast<int32_t>(a.steady.steps.size());
}

// Steps recorded per rank, and samples per steady step over all ranks.
struct StepCounts {
    std::map<int32_t, int32_t> perRank;
    std::map<int32_t, int64_t> samplesPerStep; // steady step -> samples over all ranks
};

StepCounts countSteps(const Run& run, const SteadySteps& steady)
{
    StepCounts n;
    for (const Step& st : run.steps) {
        n.perRank[st.rank]++;
        if (steady.contains(st.step))
            n.samplesPerStep[st.step] += st.samples > 0 ? st.samples : run.config.batchPerRank;
    }
    return n;
}

// The means over the counted (rank, step) rows, over all ranks and per rank, and the step window.
void summarizeBreakdown(RunSummary& s, const RunAnalysis& a, std::map<int32_t, PartSums>& perRank)
{
    PartSums all;
    bool host = false, device = false;
    for (const StepBreakdown& b : a.steps) {
        host |= b.window == StepWindow::Host;
        device |= b.window == StepWindow::Device;
        if (!counts(b))
            continue;
        all.add(b);
        perRank[b.rank].add(b);
    }
    s.window = host && device ? "host+device" : device ? "device" : "host";
    s.stepTimeMs = all.mean(all.wall);
    s.computeMs = all.mean(all.compute);
    s.commMs = all.mean(all.comm);
    s.memoryMs = all.mean(all.memory);
    s.computeOnlyMs = all.mean(all.computeOnly);
    s.overlappedMs = s.multiRank ? all.mean(all.overlapped) : kNaN;
    s.exposedCommMs = s.multiRank ? all.mean(all.exposed) : kNaN;
    s.memoryOnlyMs = all.mean(all.memoryOnly);
    s.idleMs = all.mean(all.idle);
    s.overlapRatio = all.overlapRatio(s.multiRank);
}

// The buckets' share of the exposed communication, over the same (rank, step) rows: each bucket's
// own time clipped to the window (a bucket crossing a step's end counts in both steps, as the
// step's exposed communication does). A rank's own times are disjoint and in launch order, its
// windows in step order: one merge-like pass per rank.
double meanBucketExposedMs(const RunAnalysis& a, const RunIndex& index)
{
    std::map<int32_t, std::vector<const BucketStat*>> owned;
    for (const BucketStat& st : a.buckets)
        if (st.exposed > 0 && st.ownStart >= 0 && st.completion > st.ownStart)
            owned[st.rank].push_back(&st);
    for (auto& [rank, v] : owned)
        std::sort(v.begin(), v.end(), [](const BucketStat* x, const BucketStat* y) { return x->ownStart < y->ownStart; });
    double sum = 0;
    int rows = 0;
    for (const StepBreakdown& b : a.steps) {
        if (!counts(b))
            continue;
        ++rows;
        auto it = owned.find(b.rank);
        if (it == owned.end())
            continue;
        const std::vector<const BucketStat*>& v = it->second;
        // The first own time ending after the window starts.
        auto k = std::partition_point(v.begin(), v.end(), [&](const BucketStat* st) { return st->completion <= b.start; });
        for (; k != v.end() && (*k)->ownStart < b.end; ++k) {
            const TimeNs lo = std::max((*k)->ownStart, b.start), hi = std::min((*k)->completion, b.end);
            if (hi > lo) {
                const RankUnions u = index.unions(b.rank, lo, hi);
                sum += static_cast<double>(totalLength(subtractIntervals(u.comm, u.compute)));
            }
        }
    }
    return rows > 0 ? sum / rows * kToMs : 0.0;
}

// Unknown (NaN), never 0, when no step says how many samples it took (an imported trace).
double throughputOf(const std::map<int32_t, int64_t>& samplesPerStep, double stepTimeMs)
{
    if (samplesPerStep.empty() || !(stepTimeMs > 0))
        return kNaN;
    double samples = 0;
    for (const auto& [step, v] : samplesPerStep)
        samples += static_cast<double>(v);
    samples /= static_cast<double>(samplesPerStep.size());
    return samples > 0 ? samples / (stepTimeMs * 1e-3) : kNaN;
}

// Device work on a GPU stream that belongs to no step.
int64_t countDeviceSpansWithoutStep(const Run& run)
{
    int64_t n = 0;
    for (const Span& sp : run.spans)
        if (isDeviceKind(sp.kind) && sp.step == kNoStep && sp.lane.v < run.lanes.size()
            && run.lanes[sp.lane.v].kind == LaneKind::GpuStream)
            ++n;
    return n;
}

// Per rank: every rank with steps or with straggler statistics, in rank order.
std::vector<RankSummary> rankSummaries(const RunSummary& s, const StragglerReport& rep,
                                       std::map<int32_t, int32_t>& stepsPerRank, std::map<int32_t, PartSums>& perRank)
{
    std::vector<RankSummary> out;
    std::map<int32_t, const RankStraggle*> straggle;
    for (const RankStraggle& rs : rep.perRank)
        straggle[rs.rank] = &rs;
    std::map<int32_t, bool> ranks;
    for (const auto& [rank, n] : stepsPerRank)
        ranks[rank] = true;
    for (const auto& [rank, p] : straggle)
        ranks[rank] = true;
    for (const auto& [rank, unused] : ranks) {
        RankSummary r;
        r.rank = rank;
        r.steps = stepsPerRank.count(rank) ? stepsPerRank[rank] : 0;
        const PartSums& p = perRank[rank];
        r.stepTimeMs = p.mean(p.wall);
        r.computeMs = p.mean(p.compute);
        r.commMs = p.mean(p.comm);
        r.memoryMs = p.mean(p.memory);
        r.computeOnlyMs = p.mean(p.computeOnly);
        r.overlappedMs = s.multiRank ? p.mean(p.overlapped) : kNaN;
        r.exposedCommMs = s.multiRank ? p.mean(p.exposed) : kNaN;
        r.memoryOnlyMs = p.mean(p.memoryOnly);
        r.idleMs = p.mean(p.idle);
        r.overlapRatio = p.overlapRatio(s.multiRank);
        auto it = straggle.find(rank);
        r.stepsAsStraggler = it != straggle.end() ? it->second->stepsAsStraggler : 0;
        r.meanWaitCausedMs = !s.multiRank ? kNaN : it != straggle.end() ? it->second->meanWaitNs * kToMs : 0.0;
        r.cpuMs = p.schedMean(p.cpu);
        r.runqMs = p.schedMean(p.runq);
        out.push_back(r);
    }
    return out;
}

// One bucket's sums over the steady steps.
struct BucketAcc {
    int64_t bytes = 0;
    std::vector<std::string> params;
    double r2l = 0, dur = 0, skew = 0, wait = 0;
    int nR2l = 0, nStat = 0, nSkew = 0, nExposed = 0;
    double exposed = 0, hidden = 0;
    std::map<int32_t, int> late;
};

// The table's buckets in index order, plus any bucket only seen in spans.
std::map<int32_t, BucketAcc> accumulateBuckets(const Run& run, const RunAnalysis& a)
{
    std::map<int32_t, BucketAcc> acc;
    for (const Bucket& b : run.buckets) {
        BucketAcc& x = acc[b.index];
        x.bytes = b.bytes;
        x.params = b.params;
    }
    for (const BucketStat& st : a.buckets) {
        if (!a.steady.contains(st.step))
            continue;
        BucketAcc& x = acc[st.bucket];
        if (x.bytes == 0)
            x.bytes = st.bytes;
        if (st.readyToLaunch >= 0 && st.ready >= 0) {
            x.r2l += static_cast<double>(st.readyToLaunch);
            ++x.nR2l;
        }
        x.dur += static_cast<double>(st.duration);
        ++x.nStat;
        if (st.exposed >= 0) {
            x.exposed += static_cast<double>(st.exposed);
            x.hidden += static_cast<double>(std::max<TimeNs>(0, st.hidden));
            ++x.nExposed;
        }
    }
    for (const BucketSkew& sk : a.stragglers.skews) {
        if (!a.steady.contains(sk.step))
            continue;
        BucketAcc& x = acc[sk.bucket];
        x.skew += static_cast<double>(sk.skew);
        x.wait += static_cast<double>(sk.waitCaused);
        ++x.nSkew;
        if (sk.ranks > 1 && sk.skew > 0)
            ++x.late[sk.lateRank];
    }
    return acc;
}

// Per bucket: the means over the steady steps.
void summarizeBuckets(RunSummary& s, const Run& run, const RunAnalysis& a)
{
    const double busFactor = detail::busBandwidthFactor(s.worldSize);
    std::map<int32_t, BucketAcc> acc = accumulateBuckets(run, a);
    for (auto& [index, x] : acc) {
        BucketSummary b;
        b.bucket = index;
        b.bytes = x.bytes;
        b.params = static_cast<int32_t>(x.params.size());
        b.paramNames = std::move(x.params);
        b.meanReadyToLaunchMs = x.nR2l > 0 ? x.r2l / x.nR2l * kToMs : kNaN;
        b.meanDurationMs = x.nStat > 0 ? x.dur / x.nStat * kToMs : 0.0;
        b.meanExposedMs = x.nExposed > 0 ? x.exposed / x.nExposed * kToMs : kNaN;
        b.meanHiddenMs = x.nExposed > 0 ? x.hidden / x.nExposed * kToMs : kNaN;
        // The bandwidth of the mean duration shown beside it: bytes / mean duration (a mean of
        // per-step ratios would let one short collective dominate). Not defined on one rank or
        // without bytes (BucketStat).
        const double meanDurNs = x.nStat > 0 ? x.dur / x.nStat : 0.0;
        b.meanAlgbwGBps = s.multiRank && meanDurNs > 0 && x.bytes > 0 ? static_cast<double>(x.bytes) / meanDurNs : kNaN;
        b.meanBusbwGBps = b.meanAlgbwGBps * busFactor;
        b.meanSkewMs = !s.multiRank ? kNaN : x.nSkew > 0 ? x.skew / x.nSkew * kToMs : 0.0;
        b.meanWaitCausedMs = !s.multiRank ? kNaN : x.nSkew > 0 ? x.wait / x.nSkew * kToMs : 0.0;
        int most = 0;
        for (const auto& [rank, n] : x.late) {
            if (n > most) { // ties keep the lower rank
                most = n;
                b.lateRank = rank;
            }
        }
        s.buckets.push_back(std::move(b));
    }
}

} // namespace

Result<RunAnalysis> analyze(const Run& run, std::stop_token stop)
{
    // Checked between the analyses: each is a linear pass (a few hundred ms on 10 M spans), so a
    // superseded analysis ends within one of them.
    RunAnalysis a;
    a.steady = steadySteps(run);
    a.steps = detail::stepBreakdownWith(run, a.steady);
    if (stop.stop_requested())
        return fail(ErrorCode::Cancelled, kCancelled);
    // One index for the bucket statistics and the buckets' share of exposed communication below.
    std::optional<RunIndex> index;
    if (detail::worldSizeOf(run) > 1)
        index.emplace(run);
    a.buckets = detail::bucketStatsWith(run, index ? &*index : nullptr);
    if (stop.stop_requested())
        return fail(ErrorCode::Cancelled, kCancelled);
    a.stragglers = detail::stragglersWith(run, a.buckets, a.steps, a.steady);
    if (stop.stop_requested())
        return fail(ErrorCode::Cancelled, kCancelled);

    RunSummary& s = a.summary;
    summarizeConfig(s, run, a);
    StepCounts counted = countSteps(run, a.steady);
    for (const auto& [rank, n] : counted.perRank)
        s.steps = std::max(s.steps, n);
    std::map<int32_t, PartSums> perRank;
    summarizeBreakdown(s, a, perRank);
    s.bucketExposedMs = s.multiRank && index ? meanBucketExposedMs(a, *index) : kNaN;
    s.throughput = throughputOf(counted.samplesPerStep, s.stepTimeMs);
    s.deviceSpansWithoutStep = countDeviceSpansWithoutStep(run);

    const StragglerReport& rep = a.stragglers;
    s.straggler = rep.evidence;
    s.stragglers = rep.stragglers;
    for (int32_t rank : rep.stragglers)
        for (const RankStraggle& rs : rep.perRank)
            if (rs.rank == rank)
                s.stragglerWaitMs.push_back(rs.meanWaitNs * kToMs);

    a.ranks = rankSummaries(s, rep, counted.perRank, perRank);
    summarizeBuckets(s, run, a);
    return a;
}

RunAnalysis analyze(const Run& run) { return *analyze(run, std::stop_token{}); }

RunSummary summarize(const Run& run) { return analyze(run).summary; }

} // namespace lockstep::core
