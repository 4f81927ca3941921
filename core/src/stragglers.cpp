// Stragglers: arrival skew per bucket, the wait a late rank causes, step stragglers, and the run
// straggler named only when the evidence clears the run's own noise (docs/design.md).
//
// Per (step, bucket), over the ranks that launched it:
//   skew            = latest launch - earliest launch
//   late rank       = the rank that launched last (ties: the lower rank)
//   rank-time lost  = sum over the other ranks of (late launch - their launch): every other
//                     rank sits in the all-reduce that long, because a collective cannot finish
//                     before its last rank joins. A sum of N-1 ranks' time, so it grows with the
//                     world size and can exceed the step ("others waited 607 ms" in a 217 ms
//                     step of 16 ranks): labelled as rank-time, never as "the wait".
//   wait caused     = the MEAN over the other ranks of the same: a time on the scale of the
//                     step, never more than the skew.
// Per step, a rank's wait caused is the LARGEST of its buckets' waits, not their sum: the waits
// of one step overlap in time (a rank uniformly 5 ms behind delays every bucket by 5 ms, yet
// holds the others back by about 5 ms in that step), and where launches are serialized (kernels
// on one NCCL stream) only the first delayed bucket shows the skew. The step straggler is the
// rank that caused the most wait (ties: the lower rank; none when nobody caused any).
//
// The run straggler: is one rank systematically late, or is this the noise of a busy machine?
// Every step has some rank that arrives last, so "the rank that was last most often" alone names
// a straggler on every clean run. The test below asks for three things, each reported with its
// numbers so a reader can check the verdict:
//
//  1. Most steps, and not by chance. The candidate (the rank that was the step straggler most
//     often) was the step straggler in more than half of the steady steps with collectives. With
//     N ranks and nothing wrong each is last in about 1/N of the steps; the chance that noise
//     alone makes SOME rank last m or more times of n is at most N x P(Binomial(n, 1/N) >= m) (a
//     union bound over the N ranks). That chance must be at most 5%; it is reported, and 1 -
//     chance as the confidence. It measures consistency, not size; it also means a run needs a
//     few steady steps before anyone is named (two ranks: 6 steps all late; four ranks: 3).
//  2. Size. The wait it caused, averaged over all steady steps (0 in steps where it was not
//     late), is at least 5% of the mean steady step time, and so is its systematic delay: how
//     much later than the others it typically arrives, d = (its median lateness - the others'
//     median lateness) x (N-1)/N. (If it launches d after N-1 identical others, its lateness
//     against the mean of the others is +d and each other's is -d/(N-1), since their "others"
//     include it: the medians differ by d N/(N-1), and the factor gives back d.) Both,
//     because jitter alone makes every rank cause some wait now and then: a rank that is last in
//     most steps by a hair, and now and then by a long stall, has a mean wait of several percent
//     of the step but no systematic delay; a rank that is slow in itself has both. Below 5% it
//     does not matter even if it is real.
//  3. Clear of the noise, at both scales the ranks show among themselves.
//     Step to step: the rank's lateness in a step is how much later it launched than the
//     mean of the others, on the step's most skewed bucket (where the waiting happened; the
//     same bucket for every rank, so that over the ranks the latenesses of a step sum to zero
//     and none is favoured; for the late rank it is the wait it caused there). The healthy ranks'
//     lateness, pooled over the other ranks and the steady steps, shows how much arrival jitters
//     when nothing is injected: its robust spread sigma = 1.4826 x MAD (the standard deviation
//     for Gaussian noise, unmoved by the few huge stalls a busy machine produces). The evidence
//     is the candidate's TYPICAL lateness against the others' typical lateness: the difference
//     of their medians over the n steady steps. Noise alone moves a median over n steps by a
//     standard error of 1.2533 sigma / sqrt(n) (the median's efficiency for Gaussian noise). The
//     two medians are not independent: in every step the N ranks' latenesses sum to zero, so the
//     others' lateness is, on average, the candidate's mirrored and shared among N-1 ranks
//     (-L / (N-1)), and the difference of the medians moves by N/(N-1) times the candidate's
//     standard error: twice it with two ranks (one is exactly the mirror of the other), 4/3 with
//     four. (A simulation of Gaussian arrivals, bench/straggler/floor_simulation.py, 57 steps,
//     4,000 runs, gives 2.00, 1.40, 1.26 and 1.11 for N = 2, 3, 4, 8 against 2, 1.5, 1.33 and
//     1.14; the formula is slightly conservative.) The noise floor is kNoiseSigmas such standard errors of the difference:
//     noise alone gets there in about 2% of runs, and in far fewer together with criterion 1
//     (the rank late most often is also the rank whose median is highest, so the two tests are
//     not independent, but a noise-only run must pass both a 5% and a 2% test).
//     Rank to rank: healthy ranks are not identical either. A rank on a core the host shares
//     with another guest, or with more of the machine's background work, is a little late every
//     step for the whole run; that offset does not shrink with more steps, so the step-to-step
//     floor alone names such a rank on a long enough run. With k >= 2 other ranks their median
//     latenesses show how far healthy ranks sit apart: their standard deviation s, and a healthy
//     rank's median falls within 2 s sqrt(1 + 1/k) of theirs (a prediction interval; the factor
//     counts the uncertainty of their mean). The candidate must clear that rank floor too. With
//     two ranks there is no second healthy rank to compare with: a persistent difference of
//     speed between the two IS indistinguishable from a straggler, and the size criterion
//     (a systematic delay of at least 5% of the step) is then the whole guard.
//     A rank whose typical lateness stands clear of both is late by more than the run's jitter
//     and the ranks' spread can explain; a straggler hidden by heavy jitter needs more steps to
//     be named, which is the honest answer. Medians, not means, so that a handful of scheduler
//     stalls neither makes nor hides a straggler. (20%-trimmed means, whose standard error is
//     about 18% smaller for Gaussian noise, were tried offline on the 352 kept runs of eight
//     bench/straggler passes: the same 178 of 192 injected stragglers named and the same 20 of
//     160 clean runs, machine-made ones included; the simpler median stays.)
//     And clear of the clocks: the lead is a difference of times taken on two ranks' clocks,
//     which agree only within the stored uncertainty of their offsets (clock_sync.h: 0 on one
//     host, half the best exchange's round trip across hosts). That uncertainty is added to each
//     floor, scaled like the floors by N/(N-1) (the lead is a difference of medians of
//     latenesses; a clock error e moves it by e N/(N-1)): jitter and a constant offset error are
//     independent causes, and a lead the clocks alone can produce names nobody ("none (clock
//     +-5.140 ms)"). Two ranks on one host share a clock: 0, and nothing changes.
//
// What it assumes: the healthy ranks' jitter is like the candidate's would be without its
// delay (the ranks run the same program on similar machines), and lateness is comparable
// across steps (the step time does not change by orders of magnitude within the steady steps).
// With two ranks "the others among themselves" is one rank; its lateness is the mirror image of
// the candidate's, so sigma is then the step-to-step spread of the pair's arrival difference —
// the same noise seen from the other side. A rank that is slow because something else shares
// its core IS late every step; if it is consistently, measurably late it is named, which is
// what the person who has to act on it wants to know.
//
// The cause. The verdict says who is late; what to do about it depends on why. The recorders
// store, per step, the kernel's scheduler statistics of each rank's training thread: the time it
// ran on a CPU and the time it was runnable but waited for one (Step::cpuNs, runqNs). The ranks
// run the same program on the same amount of data, so the candidate's excess over the other
// ranks' mean, per steady step, is how much longer its training thread took to get the same work
// done. When that excess (extra run-queue wait + extra CPU time) is at least half of its
// systematic delay, the delay is on its training thread's CPU, and the larger part names it:
//   - "cpu-wait": the machine ran it later (other processes or more threads than cores on its
//     host; pin it, give it a core);
//   - "cpu-time": it did more work, or the same work on a slower core (an uneven partition, a
//     throttled or shared core);
// otherwise "elsewhere" — its delay is not its training thread's CPU (I/O, its data loader's
// workers, a slower link, a GPU) — or cores that the ranks share: on this 2-vCPU machine a rank
// given 15 ms of extra CPU work per step showed 14.3 ms more CPU time with 25 MiB buckets but
// only 3.9 ms more with 1 MiB buckets, where its peer idled beside it more often and the shared
// core ran its work faster (vCPUs that are hyperthreads of one core); "unknown" when some rank
// was not measured (imported traces, files before schema 3). Half, because both counters are noisy per step and the delay is a
// median: the thread must carry most of it; bench/straggler's outside witness (every thread of
// each rank, sampled from outside the process) judges false positives with the same rule. The
// cause explains; it never decides whether a rank is named.
#include "lockstep/core/analysis.h"
#include "lockstep/core/clock_sync.h"
#include "lockstep/core/diagnostics.h"

#include "analysis_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace lockstep::core::detail {

namespace {

// docs/design.md: a run straggler causes a mean wait of at least 5% of the step time; below that the
// delay does not matter whatever its cause.
constexpr double kStragglerWaitFraction = 0.05;
// The most a pattern of late steps may owe to chance (criterion 1): the usual 5% level.
constexpr double kChanceLevel = 0.05;
// The noise floor in standard errors of the difference of median latenesses (see above): two
// is a one-sided 2.3% chance for Gaussian noise, the same order as criterion 1's 5%; a third
// (0.13%) on top of the binomial test missed real 10% stragglers on this busy 2-core machine
// (bench/straggler) while no clean run came near two.
constexpr double kNoiseSigmas = 2.0;
// 1.4826 x MAD is the standard deviation of a normal distribution.
constexpr double kMadToSigma = 1.4826;
// The standard error of a median of n Gaussian samples is sqrt(pi / 2) sigma / sqrt(n).
constexpr double kMedianStandardError = 1.2533;

double median(std::vector<double> v)
{
    if (v.empty())
        return 0.0;
    const size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid), v.end());
    const double upper = v[mid];
    if (v.size() % 2 == 1)
        return upper;
    const double lower = *std::max_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid));
    return (lower + upper) / 2.0;
}

double robustSpread(const std::vector<double>& v)
{
    if (v.size() < 2)
        return 0.0;
    const double m = median(v);
    std::vector<double> dev;
    dev.reserve(v.size());
    for (double x : v)
        dev.push_back(std::fabs(x - m));
    return kMadToSigma * median(std::move(dev));
}

// P(Binomial(n, p) >= m), summed in log space (n can be tens of thousands of steps).
double binomialTail(int n, int m, double p)
{
    if (m <= 0)
        return 1.0;
    if (m > n)
        return 0.0;
    if (p >= 1.0)
        return 1.0;
    const double lp = std::log(p), lq = std::log1p(-p);
    const double lgn = std::lgamma(n + 1.0);
    double total = 0.0;
    for (int i = m; i <= n; ++i)
        total += std::exp(lgn - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) + i * lp + (n - i) * lq);
    return std::min(1.0, total);
}

// One rank's launch of one bucket in one step.
struct Launch {
    int32_t step, bucket, rank;
    TimeNs launch;
};

// Per (step, rank): the largest wait caused on one bucket (with its rank-time lost) and the
// lateness on the step's most skewed bucket.
struct PerRank {
    int32_t step, rank;
    TimeNs wait, lost;
    double lateness;
};

// (step, bucket) groups: stats are sorted by (rank, step, bucket); regroup by (step, bucket)
// through a compact copy. The stats come one sorted run per rank: a stable merge sort keeps
// ranks ascending within a group and is fast on such runs.
std::vector<Launch> launchesByStepBucket(const std::vector<BucketStat>& stats)
{
    std::vector<Launch> order;
    order.reserve(stats.size());
    for (const BucketStat& s : stats)
        order.push_back({s.step, s.bucket, s.rank, s.launch});
    std::stable_sort(order.begin(), order.end(), [](const Launch& a, const Launch& b) {
        return std::tie(a.step, a.bucket) < std::tie(b.step, b.bucket);
    });
    return order;
}

// Per (step, bucket) of `order`: its skew, late rank, rank-time lost and wait caused, appended
// to `skews`. Returns per (step, rank) the largest wait caused on one bucket (with its rank-time
// lost) and the lateness on the step's most skewed bucket, gathered per step in a small buffer
// and flushed in (step, rank) order.
std::vector<PerRank> skewsAndRankWaits(const std::vector<Launch>& order, std::vector<BucketSkew>& skews)
{
    std::vector<PerRank> perStepRank;
    std::vector<PerRank> acc;
    size_t skewedBegin = 0, skewedEnd = 0; // the step's most skewed (step, bucket) group in `order`
    TimeNs skewedSkew = -1;
    auto flushStep = [&]() {
        const size_t n = skewedEnd - skewedBegin;
        if (n > 1) {
            double sum = 0;
            for (size_t k = skewedBegin; k < skewedEnd; ++k)
                sum += static_cast<double>(order[k].launch);
            for (size_t k = skewedBegin; k < skewedEnd; ++k) {
                const double a = static_cast<double>(order[k].launch);
                for (PerRank& p : acc)
                    if (p.rank == order[k].rank)
                        p.lateness = a - (sum - a) / static_cast<double>(n - 1);
            }
        }
        skewedSkew = -1;
        std::sort(acc.begin(), acc.end(), [](const PerRank& a, const PerRank& b) { return a.rank < b.rank; });
        perStepRank.insert(perStepRank.end(), acc.begin(), acc.end());
        acc.clear();
    };
    auto slot = [&](int32_t step, int32_t rank) -> PerRank& {
        for (PerRank& p : acc)
            if (p.rank == rank)
                return p;
        // NaN until the step's most skewed bucket says (a rank absent from it has none).
        acc.push_back({step, rank, 0, 0, std::numeric_limits<double>::quiet_NaN()});
        return acc.back();
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
        const int32_t n = static_cast<int32_t>(j - i);
        BucketSkew sk;
        sk.step = order[i].step;
        sk.bucket = order[i].bucket;
        sk.ranks = n;
        sk.skew = hi - lo;
        sk.lateRank = late;
        for (size_t k = i; k < j; ++k)
            sk.rankTimeLost += hi - order[k].launch; // the late rank itself adds 0
        sk.waitCaused = n > 1 ? static_cast<TimeNs>(std::llround(static_cast<double>(sk.rankTimeLost) / (n - 1))) : 0;
        skews.push_back(sk);
        if (n > 1) {
            PerRank& p = slot(sk.step, late);
            if (sk.waitCaused > p.wait) {
                p.wait = sk.waitCaused;
                p.lost = sk.rankTimeLost;
            }
            for (size_t k = i; k < j; ++k)
                slot(sk.step, order[k].rank);
            if (sk.skew > skewedSkew) { // strict: ties keep the lower bucket
                skewedSkew = sk.skew;
                skewedBegin = i;
                skewedEnd = j;
            }
        }
        if (j == order.size() || order[j].step != sk.step)
            flushStep();
        i = j;
    }
    return perStepRank;
}

// Per step: the mean W over ranks (windows that exist) and the straggler.
std::vector<StepStraggler> stepStragglers(const std::vector<StepBreakdown>& breakdown,
                                          const std::vector<BucketSkew>& skews,
                                          const std::vector<PerRank>& perStepRank)
{
    std::map<int32_t, std::pair<double, int>> walls;
    for (const StepBreakdown& b : breakdown) {
        auto& w = walls[b.step];
        if (b.window != StepWindow::NoDeviceWork) {
            w.first += static_cast<double>(b.wall);
            ++w.second;
        }
    }
    for (const BucketSkew& sk : skews)
        walls.try_emplace(sk.step, std::pair{0.0, 0});
    std::vector<StepStraggler> perStep;
    size_t c = 0;
    for (const auto& [step, w] : walls) {
        StepStraggler ss;
        ss.step = step;
        ss.stepTime = w.second > 0 ? static_cast<TimeNs>(std::llround(w.first / w.second)) : 0;
        while (c < perStepRank.size() && perStepRank[c].step < step)
            ++c;
        for (; c < perStepRank.size() && perStepRank[c].step == step; ++c) {
            // Sorted by rank, and only a strictly larger wait replaces: ties keep the lower rank.
            if (perStepRank[c].wait > ss.waitCaused) {
                ss.waitCaused = perStepRank[c].wait;
                ss.rankTimeLost = perStepRank[c].lost;
                ss.rank = perStepRank[c].rank;
            }
        }
        perStep.push_back(ss);
    }
    return perStep;
}

// The per (step, rank) waits and latenesses, sorted by (rank, step).
std::vector<RankStepWait> rankStepWaits(const std::vector<PerRank>& perStepRank)
{
    std::vector<RankStepWait> out;
    for (const PerRank& p : perStepRank)
        out.push_back({p.rank, p.step, p.wait, p.lateness});
    std::sort(out.begin(), out.end(), [](const RankStepWait& a, const RankStepWait& b) {
        return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
    });
    return out;
}

// The ranks the verdict compares (every rank with a breakdown or a bucket, ascending) and the
// steps it counts: the steady steps that have collectives.
struct VerdictScope {
    std::vector<int32_t> ranks;
    const SteadySteps& steady;
    std::map<int32_t, bool> hasCollective;

    VerdictScope(const std::vector<BucketStat>& stats, const std::vector<StepBreakdown>& breakdown,
                 const std::vector<BucketSkew>& skews, const SteadySteps& steadySteps)
        : steady(steadySteps)
    {
        for (const StepBreakdown& b : breakdown)
            ranks.push_back(b.rank);
        for (const BucketStat& st : stats)
            ranks.push_back(st.rank);
        std::sort(ranks.begin(), ranks.end());
        ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
        for (const BucketSkew& sk : skews)
            if (sk.ranks > 1)
                hasCollective[sk.step] = true;
    }
    size_t index(int32_t rank) const
    {
        return static_cast<size_t>(std::lower_bound(ranks.begin(), ranks.end(), rank) - ranks.begin());
    }
    bool counts(int32_t step) const { return steady.contains(step) && hasCollective.count(step) > 0; }
};

// Per rank over the counted steps, and the candidate: the rank that was the step straggler most
// often (best == 0: nobody ever was).
struct RankTally {
    int steadyCount = 0;
    double meanStep = 0.0;
    std::vector<std::vector<double>> lateness; // per rank index
    int best = 0;
    size_t bestIndex = 0;
};

RankTally tallyRanks(const VerdictScope& scope, StragglerReport& rep)
{
    RankTally t;
    const size_t nRanks = scope.ranks.size();
    double stepTimeSum = 0;
    std::vector<int> asStraggler(nRanks, 0);
    for (const StepStraggler& ss : rep.perStep) {
        if (!scope.counts(ss.step))
            continue;
        stepTimeSum += static_cast<double>(ss.stepTime);
        ++t.steadyCount;
        if (ss.rank >= 0)
            ++asStraggler[scope.index(ss.rank)];
    }
    std::vector<double> waitSum(nRanks, 0.0);
    t.lateness.resize(nRanks);
    for (const RankStepWait& w : rep.perRankStep) {
        if (!scope.counts(w.step))
            continue;
        waitSum[scope.index(w.rank)] += static_cast<double>(w.waitCaused);
        if (!std::isnan(w.latenessNs))
            t.lateness[scope.index(w.rank)].push_back(w.latenessNs);
    }
    t.meanStep = t.steadyCount > 0 ? stepTimeSum / t.steadyCount : 0.0;
    for (size_t k = 0; k < nRanks; ++k) {
        RankStraggle rs;
        rs.rank = scope.ranks[k];
        rs.stepsAsStraggler = asStraggler[k];
        rs.meanWaitNs = t.steadyCount > 0 ? waitSum[k] / t.steadyCount : 0.0;
        rs.meanWaitFraction = t.meanStep > 0 ? rs.meanWaitNs / t.meanStep : 0.0;
        rs.medianLatenessNs = median(t.lateness[k]);
        if (rs.stepsAsStraggler > t.best) { // strict: ties keep the lower rank
            t.best = rs.stepsAsStraggler;
            t.bestIndex = k;
        }
        rep.perRank.push_back(rs);
    }
    return t;
}

// Whether a verdict can be given at all, and why not.
void judgeApplicable(const Run& run, int32_t world, const RankTally& tally, StragglerEvidence& ev)
{
    // Lateness compares the ranks' clocks. A trace whose timestamps count from its own profiler's
    // start (kineto without baseTimeNanoseconds) lines the ranks up as if every profiler had
    // started at the same instant: differences between ranks are then the profilers' start
    // offsets as much as anything the ranks did, and no verdict can rest on them.
    const bool relativeClocks = std::any_of(run.diagnostics.begin(), run.diagnostics.end(), [](const Diagnostic& d) {
        return d.kind == diagnosticInfo(DiagnosticKind::RelativeTimestamps).name;
    });
    const int steadyCount = tally.steadyCount;
    ev.applicable = world > 1 && steadyCount > 0 && !relativeClocks;
    ev.notApplicable = world <= 1 ? "1 rank"
        : steadyCount == 0       ? "no bucket collectives in the steady steps"
        : relativeClocks         ? "the ranks' clocks are not comparable: the trace's timestamps are relative to each "
                                   "profiler's start, so lateness between ranks is unknown"
                                 : "";
    ev.steadySteps = steadyCount;
    ev.meanStepNs = tally.meanStep;
}

// The rank floor (criterion 3, rank to rank): how far the other ranks' median latenesses sit
// apart, with two or more of them; NaN spread otherwise.
void rankFloor(const VerdictScope& scope, const RankTally& tally, const StragglerReport& rep, StragglerEvidence& ev)
{
    std::vector<double> otherMedians;
    for (size_t k = 0; k < scope.ranks.size(); ++k)
        if (k != tally.bestIndex && !tally.lateness[k].empty())
            otherMedians.push_back(rep.perRank[k].medianLatenessNs);
    ev.rankSpreadNs = std::numeric_limits<double>::quiet_NaN();
    if (otherMedians.size() >= 2) {
        const double kOthers = static_cast<double>(otherMedians.size());
        double mean = 0;
        for (double m : otherMedians)
            mean += m / kOthers;
        double ss = 0;
        for (double m : otherMedians)
            ss += (m - mean) * (m - mean);
        ev.rankSpreadNs = std::sqrt(ss / (kOthers - 1));
        ev.rankFloorNs = kNoiseSigmas * ev.rankSpreadNs * std::sqrt(1.0 + 1.0 / kOthers);
    }
}

// The clocks (clock_sync.h): the lead is a difference of two ranks' corrected times, so an
// error of the candidate's offset or of another rank's moves it one for one. The floors
// measure the ranks' jitter, which a constant offset error does not show: the uncertainty is
// added to them, never folded into them.
double clockUncertainty(const Run& run, const VerdictScope& scope, size_t bestIndex, int32_t candidate)
{
    std::map<int32_t, TimeNs> uncertainty;
    for (const RankInfo& r : run.ranks)
        uncertainty[r.rank] = r.clockUncertaintyNs;
    TimeNs others = 0;
    for (size_t k = 0; k < scope.ranks.size(); ++k)
        if (k != bestIndex)
            others = std::max(others, uncertainty[scope.ranks[k]]);
    return static_cast<double>(uncertainty[candidate] + others);
}

// The run verdict on the candidate: the three criteria of the essay above, each with its numbers.
void judgeCandidate(const Run& run, int32_t world, const VerdictScope& scope, const RankTally& tally,
                    StragglerReport& rep)
{
    StragglerEvidence& ev = rep.evidence;
    const RankStraggle& cand = rep.perRank[tally.bestIndex];
    ev.candidate = cand.rank;
    ev.stepsLate = cand.stepsAsStraggler;
    ev.meanWaitNs = cand.meanWaitNs;
    ev.waitFraction = cand.meanWaitFraction;
    std::vector<double> others;
    for (size_t k = 0; k < scope.ranks.size(); ++k)
        if (k != tally.bestIndex)
            others.insert(others.end(), tally.lateness[k].begin(), tally.lateness[k].end());
    ev.noiseSpreadNs = robustSpread(others);
    const double n = static_cast<double>(std::max<size_t>(1, tally.lateness[tally.bestIndex].size()));
    const int32_t participants = std::max<int32_t>(2, std::min<int32_t>(world, static_cast<int32_t>(scope.ranks.size())));
    ev.noiseFloorNs = kNoiseSigmas * kMedianStandardError * ev.noiseSpreadNs * participants / (participants - 1.0) /
                      std::sqrt(n);
    ev.latenessAboveOthersNs = cand.medianLatenessNs - median(others);
    ev.systematicDelayNs = ev.latenessAboveOthersNs * (participants - 1) / participants;
    ev.delayFraction = tally.meanStep > 0 ? ev.systematicDelayNs / tally.meanStep : 0.0;
    rankFloor(scope, tally, rep, ev);
    ev.chance = std::min(1.0, participants * binomialTail(tally.steadyCount, ev.stepsLate, 1.0 / participants));
    ev.mostSteps = 2 * ev.stepsLate > tally.steadyCount && ev.chance <= kChanceLevel;
    ev.waitAboveThreshold =
        ev.waitFraction >= kStragglerWaitFraction && ev.delayFraction >= kStragglerWaitFraction;
    ev.clockUncertaintyNs = clockUncertainty(run, scope, tally.bestIndex, cand.rank);
    // In the lead's units: an error e of the candidate's clock moves its lateness by e and each
    // other's by -e/(N-1), the difference of the medians by e N/(N-1) (the floors' factor).
    const double floors = std::max(ev.noiseFloorNs, std::isnan(ev.rankFloorNs) ? 0.0 : ev.rankFloorNs);
    const bool clearsFloors = ev.latenessAboveOthersNs > 0 && ev.latenessAboveOthersNs >= floors;
    ev.clockFloorNs = ev.clockUncertaintyNs * participants / (participants - 1.0);
    ev.clearsNoise = clearsFloors && ev.latenessAboveOthersNs >= floors + ev.clockFloorNs;
    ev.withinClock = clearsFloors && !ev.clearsNoise;
    ev.straggler = ev.mostSteps && ev.waitAboveThreshold && ev.clearsNoise;
    if (ev.straggler)
        rep.stragglers.push_back(ev.candidate);
}

// The cause (essay above): the scheduler statistics over the same steps. Left Unknown when some
// rank was not measured or the candidate has no systematic delay.
void attributeCause(const std::vector<StepBreakdown>& breakdown, const VerdictScope& scope, size_t bestIndex,
                    StragglerEvidence& ev)
{
    const size_t nRanks = scope.ranks.size();
    std::vector<double> cpuSum(nRanks, 0.0), runqSum(nRanks, 0.0);
    std::vector<int> measured(nRanks, 0);
    for (const StepBreakdown& b : breakdown) {
        if (!scope.counts(b.step) || b.cpuNs < 0 || b.runqNs < 0)
            continue;
        const size_t k = scope.index(b.rank); // every breakdown rank is in scope.ranks
        cpuSum[k] += static_cast<double>(b.cpuNs);
        runqSum[k] += static_cast<double>(b.runqNs);
        ++measured[k];
    }
    bool allMeasured = true;
    double othersCpu = 0, othersRunq = 0;
    for (size_t k = 0; k < nRanks; ++k) {
        allMeasured = allMeasured && measured[k] > 0;
        if (k != bestIndex && measured[k] > 0) {
            othersCpu += cpuSum[k] / measured[k] / static_cast<double>(nRanks - 1);
            othersRunq += runqSum[k] / measured[k] / static_cast<double>(nRanks - 1);
        }
    }
    if (!allMeasured)
        return;
    constexpr double kToMs = 1e-6;
    const double cpu = cpuSum[bestIndex] / measured[bestIndex], runq = runqSum[bestIndex] / measured[bestIndex];
    ev.cpuMs = cpu * kToMs;
    ev.runqMs = runq * kToMs;
    ev.othersCpuMs = othersCpu * kToMs;
    ev.othersRunqMs = othersRunq * kToMs;
    if (ev.systematicDelayNs <= 0)
        return;
    const double extraWait = runq - othersRunq, extraCpu = cpu - othersCpu; // ns
    if (extraWait + extraCpu >= 0.5 * ev.systematicDelayNs)
        ev.cause = extraWait >= extraCpu ? StragglerCause::CpuWait : StragglerCause::CpuTime;
    else
        ev.cause = StragglerCause::Elsewhere;
}

} // namespace

StragglerReport stragglersWith(const Run& run, const std::vector<BucketStat>& stats,
                               const std::vector<StepBreakdown>& breakdown, const SteadySteps& steady)
{
    StragglerReport rep;
    const int32_t world = worldSizeOf(run);
    const std::vector<Launch> order = launchesByStepBucket(stats);
    const std::vector<PerRank> perStepRank = skewsAndRankWaits(order, rep.skews);
    rep.perStep = stepStragglers(breakdown, rep.skews, perStepRank);
    rep.perRankStep = rankStepWaits(perStepRank);

    const VerdictScope scope(stats, breakdown, rep.skews, steady);
    const RankTally tally = tallyRanks(scope, rep);
    judgeApplicable(run, world, tally, rep.evidence);
    if (!rep.evidence.applicable || tally.best == 0)
        return rep;
    judgeCandidate(run, world, scope, tally, rep);
    attributeCause(breakdown, scope, tally.bestIndex, rep.evidence);
    return rep;
}

} // namespace lockstep::core::detail

namespace lockstep::core {

const char* stragglerCauseName(StragglerCause cause)
{
    switch (cause) {
    case StragglerCause::CpuWait:
        return "cpu-wait";
    case StragglerCause::CpuTime:
        return "cpu-time";
    case StragglerCause::Elsewhere:
        return "elsewhere";
    case StragglerCause::Unknown:
        break;
    }
    return "unknown";
}

const char* stragglerCauseText(StragglerCause cause)
{
    switch (cause) {
    case StragglerCause::CpuWait:
        return "its training thread took that much longer on its CPU, mostly waiting for one: the machine ran it "
               "later (other processes, more threads than cores)";
    case StragglerCause::CpuTime:
        return "its training thread took that much longer on its CPU, mostly computing: more work, or the same "
               "work on a slower core";
    case StragglerCause::Elsewhere:
        return "its training thread's CPU time and wait for a CPU account for less than half of its delay: I/O, "
               "data loader or link, or cores shared with the other ranks (where CPU time is no measure of work)";
    case StragglerCause::Unknown:
        break;
    }
    return "";
}

StragglerReport stragglers(const Run& run)
{
    const SteadySteps steady = steadySteps(run);
    return detail::stragglersWith(run, bucketStats(run), detail::stepBreakdownWith(run, steady), steady);
}

} // namespace lockstep::core
