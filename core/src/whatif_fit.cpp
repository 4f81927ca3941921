// What if: the fit. The link's cost (latency, the busy and idle rates, each step's own speed), the
// launch cost, and the contention between transfers and backward, all read off the recording's own
// all-reduces (the essay above whatif.cpp, 3 to 5, says what and why). fitLink runs the stages in
// order, each a function of its own over the samples (LinkSamples) and the idle line (IdleLine).
#include "whatif_internal.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace lockstep::core::whatif_detail {

namespace {

// A recorded completion within this of its emulated end was held by the emulated link, not by
// the real one: the runtime stores the emulated end itself, so only clock-correction rounding
// (nanoseconds) separates them; 10 µs leaves margin and is far below any real transfer.
constexpr TimeNs kCensorToleranceNs = 10'000;

double median(std::vector<double> v)
{
    if (v.empty())
        return kNaN;
    const size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid), v.end());
    const double hi = v[mid];
    if (v.size() % 2 == 1)
        return hi;
    return (hi + *std::max_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid))) / 2;
}

// y = intercept + slope * x over (x, y) points, both non-negative: a cost cannot be negative and
// cannot fall as a bucket grows, so a noisy fit that says otherwise is clamped to the nearest
// admissible line (through the origin, or flat).
struct Line {
    double intercept = 0;
    double slope = 0;
    bool separable = false; // two or more distinct x: intercept and slope both determined
};
Line fitLine(const std::vector<std::pair<double, double>>& points)
{
    Line line;
    if (points.empty())
        return line;
    std::set<double> xs;
    double sx = 0, sy = 0;
    for (const auto& [x, y] : points) {
        xs.insert(x);
        sx += x;
        sy += y;
    }
    const double n = static_cast<double>(points.size());
    const double mx = sx / n, my = sy / n;
    if (xs.size() < 2) {
        line.slope = mx > 0 ? std::max(0.0, my) / mx : 0;
        return line;
    }
    line.separable = true;
    double sxx = 0, sxy = 0, sxx0 = 0, sxy0 = 0;
    for (const auto& [x, y] : points) {
        sxx += (x - mx) * (x - mx);
        sxy += (x - mx) * (y - my);
        sxx0 += x * x;
        sxy0 += x * y;
    }
    line.slope = sxy / sxx;
    line.intercept = my - line.slope * mx;
    if (line.slope < 0) {
        line.slope = 0;
        line.intercept = std::max(0.0, my);
    } else if (line.intercept < 0) {
        line.intercept = 0;
        line.slope = sxx0 > 0 ? std::max(0.0, sxy0 / sxx0) : 0;
    }
    return line;
}

// One all-reduce of one (step, rank) as the fit sees it.
struct Sample {
    size_t step = 0;    // index into d.stepIds
    double total = 0;   // completion - start
    double busy = 0;    // of which before the last gradient of the step
    double busyFor = 0; // from the start to the last gradient of the step (0 if after)
};

// Everything the stages read off the recording's steps.
struct LinkSamples {
    Algorithm alg = Algorithm::Local; // the recorded configuration's
    double rounds = 0;                // its rounds of latency per bucket
    double factor = 0;                // its bytes sent per bucket byte
    std::vector<double> work;         // per recorded bucket, the bytes each rank sends
    std::vector<std::vector<Sample>> perBucket;
    std::vector<std::vector<double>> launchCost; // per recorded bucket, ready -> launch beyond the previous launch
    std::vector<char> fitted;         // per step: its samples fit the rates (steady, or no step is)
    int censored = 0;                 // all-reduces held by the recorded emulated link
};

// The idle rate and the latency (essay, 3): a line through the per-bucket medians of the transfers
// that moved after every rank's backward, or through all of them when none did.
struct IdleLine {
    Line line;
    bool haveIdle = false;
    std::vector<std::pair<double, double>> idlePoints, allPoints;
    const std::vector<std::pair<double, double>>& points() const { return haveIdle ? idlePoints : allPoints; }
};

// The samples of one step (index si): per rank and bucket, the launch cost and, unless the
// recorded emulated link held its completion, the transfer from its start (its last launch over
// ranks and the previous completion) to its completion, split at the step's last gradient.
void sampleStep(const WhatIfModel::Data& d, const Run& run, size_t si, LinkSamples& s)
{
    const int32_t n = d.world;
    const size_t nb = d.recordedBucketUnits.size();
    const RankStep* rs = &d.rankSteps[si * static_cast<size_t>(n)];
    // Backward is busy until the last gradient of the last rank is ready.
    TimeNs busyUntil = kNever;
    for (int32_t r = 0; r < n; ++r)
        for (TimeNs ready : rs[r].unitReady)
            busyUntil = std::max(busyUntil, ready);
    std::vector<TimeNs> maxLaunch(nb, kNever);
    for (size_t b = 0; b < nb; ++b)
        for (int32_t r = 0; r < n; ++r) {
            if (rs[r].launch[b] == kNever) {
                maxLaunch[b] = kNever;
                break;
            }
            maxLaunch[b] = std::max(maxLaunch[b], rs[r].launch[b]);
        }
    for (int32_t r = 0; r < n; ++r) {
        const RankStep& x = rs[r];
        TimeNs emulated = 0;   // the runtime's emulated pipe on this rank (recorded link)
        bool prevKnown = true; // the previous bucket's real completion is known
        for (size_t b = 0; b < nb; ++b) {
            if (x.launch[b] == kNever || x.completion[b] == kNever) {
                prevKnown = false;
                continue;
            }
            bool held = false;
            if (d.recorded.linkGbps > 0) {
                const auto xfer = static_cast<TimeNs>(static_cast<double>(run.buckets[b].bytes) * 8.0
                                                      / d.recorded.linkGbps);
                emulated = std::max(x.launch[b], emulated) + xfer;
                held = x.completion[b] <= emulated + kCensorToleranceNs;
            }
            // Launch cost: ready -> launch beyond waiting for the previous bucket's launch.
            TimeNs ready = kNever;
            bool allReady = true;
            for (int32_t u : d.recordedBucketUnits[b]) {
                allReady = allReady && x.unitReady[u] != kNever;
                ready = std::max(ready, x.unitReady[u]);
            }
            if (allReady && s.fitted[si]) {
                const TimeNs after = b > 0 && x.launch[b - 1] != kNever ? std::max(ready, x.launch[b - 1]) : ready;
                s.launchCost[b].push_back(static_cast<double>(std::max<TimeNs>(0, x.launch[b] - after)));
            }
            if (held) {
                ++s.censored;
            } else if (prevKnown && maxLaunch[b] != kNever) {
                const TimeNs start = b > 0 ? std::max(maxLaunch[b], x.completion[b - 1]) : maxLaunch[b];
                const TimeNs done = std::max(start, x.completion[b]);
                s.perBucket[b].push_back(Sample{si, static_cast<double>(done - start),
                                                static_cast<double>(std::clamp(busyUntil, start, done) - start),
                                                static_cast<double>(std::max<TimeNs>(0, busyUntil - start))});
            }
            prevKnown = !held;
        }
    }
}

// Every step gives samples (its own link speed, fitStepStretch); the rates are fitted on steady ones.
LinkSamples collectSamples(WhatIfModel::Data& d, const Run& run)
{
    const int32_t n = d.world;
    const size_t nb = d.recordedBucketUnits.size();
    LinkSamples s;
    s.alg = algorithmFor(n, d.recorded.compress, d.pairwiseAllowed);
    s.rounds = roundsOf(s.alg, n);
    s.factor = bytesFactorOf(s.alg, n);
    s.work.resize(nb);
    for (size_t b = 0; b < nb; ++b)
        s.work[b] = static_cast<double>(run.buckets[b].bytes) * s.factor;
    bool anySteady = false;
    for (int32_t id : d.stepIds)
        anySteady = anySteady || id >= d.config.warmupSteps;
    if (!anySteady && !d.stepIds.empty())
        d.notes.push_back("no steady step (all within the first " + std::to_string(d.config.warmupSteps)
                          + "): the link is fitted on warm-up steps");
    s.fitted.resize(d.stepIds.size());
    for (size_t si = 0; si < d.stepIds.size(); ++si)
        s.fitted[si] = !anySteady || d.stepIds[si] >= d.config.warmupSteps;
    s.perBucket.resize(nb);
    s.launchCost.resize(nb);
    for (size_t si = 0; si < d.stepIds.size(); ++si)
        sampleStep(d, run, si, s);
    return s;
}

// The launch cost on the training thread: a + bytes * c through the per-bucket medians.
void fitLaunchCost(LinkFit& link, const Run& run, const LinkSamples& s)
{
    std::vector<std::pair<double, double>> launchPoints;
    for (size_t b = 0; b < s.launchCost.size(); ++b)
        if (!s.launchCost[b].empty())
            launchPoints.emplace_back(static_cast<double>(run.buckets[b].bytes), median(s.launchCost[b]));
    const Line launch = fitLine(launchPoints);
    link.launchNs = launch.intercept;
    link.launchNsPerByte = launch.slope;
}

// Idle rate and latency: a line through the per-bucket medians of the transfers that moved after
// every rank's backward (nothing else competes with them). Counts the samples into the link.
IdleLine fitIdleLine(LinkFit& link, const LinkSamples& s)
{
    IdleLine idle;
    for (size_t b = 0; b < s.perBucket.size(); ++b) {
        std::vector<double> after, all;
        for (const Sample& x : s.perBucket[b]) {
            if (!s.fitted[x.step])
                continue;
            all.push_back(x.total);
            if (x.busy == 0)
                after.push_back(x.total);
            else
                ++link.busySamples;
        }
        link.samples += static_cast<int>(all.size());
        if (!after.empty())
            idle.idlePoints.emplace_back(s.work[b], median(after));
        if (!all.empty())
            idle.allPoints.emplace_back(s.work[b], median(all));
    }
    idle.haveIdle = !idle.idlePoints.empty();
    idle.line = fitLine(idle.points());
    return idle;
}

// The startup probe (whatif.h, kLinkProbeKey): the same path timed at a few sizes with nothing
// else running. Its intercept stands in for the latency when the run's own transfers cannot give
// one (one bucket size); the run's rate is then what its transfers took beyond that latency. A
// probe whose latency exceeds the run's own transfer times describes another link (or a slower
// moment) and is not used. Returns the note that says which (empty: no probe, or nothing to say).
std::string applyLinkProbe(const WhatIfModel::Data& d, LinkFit& link, const LinkSamples& s, IdleLine& idle)
{
    const auto it = d.config.extra.find(kLinkProbeKey);
    if (it == d.config.extra.end())
        return {};
    auto probe = parseLinkProbe(it->second);
    std::vector<std::pair<double, double>> probePoints;
    if (probe)
        for (const LinkProbePoint& p : *probe)
            probePoints.emplace_back(static_cast<double>(p.bytes) * s.factor, static_cast<double>(p.ns));
    const Line fromProbe = fitLine(probePoints);
    // A larger message that took less time says the probe was disturbed (a rank descheduled for
    // longer than the transfer): its line would be noise.
    std::sort(probePoints.begin(), probePoints.end());
    bool monotone = true;
    for (size_t i = 1; i < probePoints.size(); ++i)
        monotone = monotone && probePoints[i].second >= probePoints[i - 1].second;
    if (!probe)
        return "the startup probe is unreadable (" + probe.error().message + ") and was not used";
    if (!monotone)
        return "the startup probe was disturbed (a larger message took less time) and was not used";
    if (!fromProbe.separable)
        return {};
    link.probeLatencyNs = fromProbe.intercept / s.rounds;
    if (idle.line.separable)
        return {};
    const auto& pts = idle.points();
    double sx = 0, sy = 0;
    for (const auto& [x, y] : pts)
        sx += x, sy += y;
    if (!(fromProbe.intercept < sy / static_cast<double>(pts.size())))
        return "the startup probe's latency (" + microseconds(link.probeLatencyNs)
            + " per round) exceeds this run's own transfer times and was not used";
    idle.line.intercept = fromProbe.intercept;
    idle.line.slope = sx > 0 ? (sy - fromProbe.intercept * static_cast<double>(pts.size())) / sx : 0;
    idle.line.separable = true;
    link.latencyFromProbe = true;
    return "the link's latency (" + microseconds(link.probeLatencyNs) + " per round) is the startup probe's ("
        + std::to_string(probe->size()) + " sizes): this run's transfers after backward had one size";
}

// Busy rate: what is left of each transfer once its idle part is accounted for at the idle rate
// was moved during its busy part (after the latency). Transfers with less than a tenth of their
// bytes left for the busy part say little about its rate (a division by almost nothing) and are
// skipped. Never faster than idle.
void fitBusyRate(LinkFit& link, const LinkSamples& s, const Line& line)
{
    std::vector<double> busyRates;
    for (size_t b = 0; b < s.perBucket.size(); ++b)
        for (const Sample& x : s.perBucket[b]) {
            if (!s.fitted[x.step])
                continue;
            const double busy = x.busy - line.intercept;
            const double left = s.work[b] - (x.total - x.busy) / std::max(line.slope, 1e-12);
            if (x.busy > 0 && busy > 0 && left >= 0.1 * s.work[b])
                busyRates.push_back(busy / left);
        }
    if (!busyRates.empty())
        link.nsPerByteBusy = std::max(line.slope, median(busyRates));
}

// Each step's own link speed: the fit describes a typical step, but on a shared machine whole
// steps run slow or fast (another job takes the CPU for a while), and the replay keeps each step's
// recorded compute with its slowness. Communication gets the same: per step, its recorded transfer
// time over the fit's for the same transfers, applied to every transfer of that step in a
// prediction. The mean over steps is then not biased low by fitting medians.
void fitStepStretch(WhatIfModel::Data& d, const LinkSamples& s, const Line& line)
{
    std::vector<double> recorded(d.stepIds.size(), 0), modelled(d.stepIds.size(), 0);
    for (size_t b = 0; b < s.perBucket.size(); ++b)
        for (const Sample& x : s.perBucket[b]) {
            recorded[x.step] += x.total;
            modelled[x.step] += transferNs(d.link, line.intercept, s.work[b], x.busyFor, 1.0);
        }
    std::vector<double> steady;
    for (size_t si = 0; si < d.stepIds.size(); ++si) {
        if (modelled[si] > 0 && recorded[si] > 0)
            d.linkStretch[si] = recorded[si] / modelled[si];
        if (s.fitted[si])
            steady.push_back(d.linkStretch[si]);
    }
    std::sort(steady.begin(), steady.end());
    if (!steady.empty()) {
        d.link.stretchLow = steady[steady.size() / 10];
        d.link.stretchHigh = steady[steady.size() - 1 - steady.size() / 10];
    }
}

// The share of its speed the training thread loses while a transfer runs beside its backward
// (essay, 5). A transfer during backward does the work of nsPerByteIdle per byte (its time with the
// machine to itself) in nsPerByteBusy of wall time: the link holds a CPU for idle / busy of that
// time, and that is all it can take from the training thread; the rest of the time it waits for a
// CPU, which the training thread or any other process holds. And the training thread loses no more
// than the link loses beside it (1 - idle / busy): a link that is not slowed by backward (busy =
// idle) has a CPU of its own and takes none. The two agree at busy = 2 idle (two threads sharing
// one core fairly: each at half speed) and bound each other elsewhere. Issue 29: a 25 MiB recording
// on the loaded 2-core machine moved its one small first bucket during backward 6-8 times slower
// than after it (a link starved of CPU by both ranks' training threads and the machine's other
// jobs), and 1 - idle / busy charged backward 83-87 % of its speed for every nanosecond a transfer
// ran beside it: at 1 MiB caps the predicted backward came out 108-273 ms where it measured 75-86.
double contentionOf(const LinkFit& link)
{
    if (!(link.nsPerByteBusy > 0))
        return 0;
    const double working = link.nsPerByteIdle / link.nsPerByteBusy;
    return std::clamp(std::min(working, 1.0 - working), 0.0, kMaxComputeSlowdown);
}

} // namespace

// Fits the link and the launch cost from the recorded steps (essay, 3 and 4), stage by stage.
void fitLink(WhatIfModel::Data& d, const Run& run)
{
    const LinkSamples s = collectSamples(d, run);
    fitLaunchCost(d.link, run, s);
    if (s.alg == Algorithm::Local) {
        d.notes.push_back("a 1-rank recording has no all-reduce to fit the link from: predicted communication "
                          "costs only an emulated link (--link-gbps), the real link's own time is unknown");
        return;
    }
    IdleLine idle = fitIdleLine(d.link, s);
    if (idle.allPoints.empty()) {
        d.notes.push_back(s.censored > 0
                              ? "every all-reduce of the recording was held by its emulated link: the real link's "
                                "time is unknown, predicted communication costs only an emulated link"
                              : "no all-reduce with a complete record: predicted communication costs only an emulated link");
        return;
    }
    d.link.fitted = true;
    const std::string probeNote = applyLinkProbe(d, d.link, s, idle);
    const Line& line = idle.line;
    d.link.latencySeparable = line.separable;
    d.link.latencyNs = line.intercept / s.rounds;
    d.link.nsPerByteIdle = line.slope;
    d.link.nsPerByteBusy = line.slope;
    if (!idle.haveIdle)
        d.notes.push_back("every all-reduce of the recording moved while backward computed: the link's rate after "
                          "backward is assumed to be the same");
    else
        fitBusyRate(d.link, s, line);
    d.link.computeSlowdown = contentionOf(d.link);
    fitStepStretch(d, s, line);
    if (!probeNote.empty())
        d.notes.push_back(probeNote);
    if (!line.separable)
        d.notes.push_back("fewer than two bucket sizes moved after backward: the link's latency cannot be told "
                          "apart from its bandwidth and is taken as 0 (predictions at smaller caps may be optimistic)");
    if (s.censored > 0)
        d.notes.push_back(std::to_string(s.censored) + " all-reduces held by the recorded emulated link were left "
                          "out of the link fit");
}

// Contention in the recording (essay, 5): per (rank, step), the model's own transfers for the
// recorded configuration (the link fit's, not the recorded completions, so that replaying the
// recorded configuration keeps its compute exactly and a prediction changes compute only by what
// the new configuration changes), and the ready instants and the end of backward in compute time.
// The transfers come from the replay's own sweep with the recorded ready instants as they are
// (compute time = wall time from the step's start, no slowdown).
void recordContention(WhatIfModel::Data& d)
{
    const int32_t n = d.world;
    const size_t nb = d.recordedBucketUnits.size();
    const double phi = d.link.computeSlowdown;
    std::vector<int64_t> bucketWire(nb, 0);
    for (size_t b = 0; b < nb; ++b)
        for (int32_t u : d.recordedBucketUnits[b])
            bucketWire[b] += d.units[u].numel * wireElemBytes(d.recorded.compress);
    const BucketCosts costs = bucketCosts(d.link, algorithmFor(n, d.recorded.compress, d.pairwiseAllowed), n, bucketWire, 1.0);
    std::vector<TimeNs> launch(static_cast<size_t>(n) * nb), done(launch.size()), stepStart(n);
    Contention transfers;
    for (size_t si = 0; si < d.stepIds.size(); ++si) {
        RankStep* rs = &d.rankSteps[si * static_cast<size_t>(n)];
        for (int32_t r = 0; r < n; ++r) {
            RankStep& x = rs[r];
            stepStart[r] = x.start;
            x.unitReadyCompute.resize(x.unitReady.size());
            x.lastReadyCompute = 0;
            for (size_t u = 0; u < x.unitReady.size(); ++u) {
                x.unitReadyCompute[u] = static_cast<double>(x.unitReady[u] - x.start);
                x.lastReadyCompute = std::max(x.lastReadyCompute, x.unitReadyCompute[u]);
            }
        }
        transfers.clear();
        if (phi > 0)
            sweepLink(d.link, 0.0, 1.0, d.linkStretch[si], rs, n, stepStart, d.recordedBucketUnits, costs, launch, done,
                      transfers);
        for (int32_t r = 0; r < n; ++r) {
            RankStep& x = rs[r];
            x.contention = transfers;
            x.lastReadyCompute = 0;
            for (size_t u = 0; u < x.unitReady.size(); ++u) {
                x.unitReadyCompute[u] = x.contention.toCompute(x.unitReady[u], x.start, phi);
                x.lastReadyCompute = std::max(x.lastReadyCompute, x.unitReadyCompute[u]);
            }
            x.backwardEndCompute = x.contention.toCompute(x.backwardEnd, x.start, phi);
        }
    }
}

} // namespace lockstep::core::whatif_detail
