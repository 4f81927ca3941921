// What if: the replay. The recorded steps under another configuration (WhatIfModel::predict): the
// runtime's bucket assignment, launches, one link, the emulated link, contention, the wait (the
// essay above whatif.cpp, 1 to 7, says what and why). predict runs the steps in order, each a
// function of its own: the configuration's notes and host factor, the layout, the predicted run's
// shell, the replay of each step (Replay), the bound on contention and the interval.
#include "whatif_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace lockstep::core {

namespace whatif_detail {

const char* algorithmText(Algorithm a)
{
    switch (a) {
    case Algorithm::Local:
        return "none (world of one)";
    case Algorithm::Pairwise:
        return "pairwise send/recv exchange (world of 2)";
    case Algorithm::Ring:
        return "process group allreduce";
    case Algorithm::AllGather:
        return "process group allgather + local sum (bf16)";
    }
    return "";
}

Algorithm algorithmFor(int32_t world, std::string_view compress, bool pairwiseAllowed)
{
    if (world <= 1)
        return Algorithm::Local;
    if (compress == "bf16")
        return Algorithm::AllGather;
    if (compress == "none" && world == 2 && pairwiseAllowed)
        return Algorithm::Pairwise;
    return Algorithm::Ring;
}

double roundsOf(Algorithm a, int32_t n)
{
    switch (a) {
    case Algorithm::Local:
        return 0;
    case Algorithm::Pairwise:
        return 1;
    case Algorithm::Ring:
        return 2.0 * (n - 1);
    case Algorithm::AllGather:
        return n - 1;
    }
    return 0;
}

double bytesFactorOf(Algorithm a, int32_t n)
{
    switch (a) {
    case Algorithm::Local:
        return 0;
    case Algorithm::Pairwise:
        return 1;
    case Algorithm::Ring:
        return 2.0 * (n - 1) / n;
    case Algorithm::AllGather:
        return n - 1;
    }
    return 0;
}

double transferNs(const LinkFit& l, double latency, double bytes, double busyFor, double stretch)
{
    if (bytes <= 0)
        return 0;
    const double busyRate = l.nsPerByteBusy * stretch, idleRate = l.nsPerByteIdle * stretch;
    double t = latency * stretch;
    if (t < busyFor) {
        const double busyBytes = busyRate > 0 ? (busyFor - t) / busyRate : bytes;
        if (bytes <= busyBytes)
            return t + bytes * busyRate;
        bytes -= busyBytes;
        t = busyFor;
    }
    return t + bytes * idleRate;
}

std::vector<std::vector<int32_t>> assignUnits(const std::vector<Unit>& units, const WhatIfConfig& cfg)
{
    std::vector<std::vector<int32_t>> buckets;
    std::vector<int32_t> open;
    int64_t size = 0;
    int64_t cap = cfg.firstBucketCapBytes;
    for (size_t u = 0; u < units.size(); ++u) {
        open.push_back(static_cast<int32_t>(u));
        size += units[u].numel * kGradElemBytes;
        if (size >= cap) {
            buckets.push_back(std::move(open));
            open.clear();
            size = 0;
            cap = cfg.bucketCapBytes;
        }
    }
    if (!open.empty())
        buckets.push_back(std::move(open));
    return buckets;
}

BucketCosts bucketCosts(const LinkFit& link, Algorithm alg, int32_t n, const std::vector<int64_t>& bucketWire,
                        double computeScale)
{
    BucketCosts c;
    c.latency = link.fitted ? link.latencyNs * roundsOf(alg, n) : 0;
    for (int64_t wire : bucketWire) {
        const auto bytes = static_cast<double>(wire);
        c.work.push_back(link.fitted ? bytes * bytesFactorOf(alg, n) : 0);
        c.launchCost.push_back(
            static_cast<TimeNs>(std::llround((link.launchNs + bytes * link.launchNsPerByte) * computeScale)));
    }
    return c;
}

// Rank r (replaying recorded rank r mod world, from stepStart[r]) launches bucket b once its units
// are ready and its earlier buckets have launched, plus the launch cost; one link runs the
// collectives in order, each from its last launch and the previous one's completion. Bucket b is
// ready on every rank before its own transfer and every later one starts, so its ready instants
// (compute time turned into wall time) depend only on the transfers before it: one sweep settles
// contention, no iteration. A transfer moves at the busy rate until the last gradient of any rank;
// that instant depends on the transfer itself (it slows backward while it runs) but not on later
// ones (they start after it ends): it is read off with the transfer taken as busy throughout,
// which is exact up to that instant. Compute time is the recording's times `scale` (the
// configuration's compute scale).
void sweepLink(const LinkFit& link, double phi, double scale, double stretch, const RankStep* rec, int32_t world,
               const std::vector<TimeNs>& stepStart, const std::vector<std::vector<int32_t>>& bucketUnits,
               const BucketCosts& costs, std::vector<TimeNs>& launch, std::vector<TimeNs>& done, Contention& transfers)
{
    constexpr double kAllBusy = std::numeric_limits<double>::infinity();
    const auto n = static_cast<int32_t>(stepStart.size());
    const size_t nb = bucketUnits.size();
    transfers.clear();
    TimeNs linkDone = kNever;
    for (size_t b = 0; b < nb; ++b) {
        TimeNs start = linkDone;
        for (int32_t r = 0; r < n; ++r) {
            const RankStep& x = rec[r % world];
            TimeNs ready = kNever;
            for (int32_t u : bucketUnits[b])
                ready = std::max(ready, transfers.toWall(scale * x.unitReadyCompute[u], stepStart[r], phi));
            const TimeNs l = std::max(ready, b > 0 ? launch[r * nb + b - 1] : kNever) + costs.launchCost[b];
            launch[r * nb + b] = l;
            start = std::max(start, l);
        }
        const auto xfer = [&](double busyFor) {
            return static_cast<TimeNs>(std::llround(transferNs(link, costs.latency, costs.work[b], busyFor, stretch)));
        };
        const bool tentative = transfers.append(start, start + xfer(kAllBusy));
        TimeNs lastGradient = kNever;
        for (int32_t r = 0; r < n; ++r)
            lastGradient =
                std::max(lastGradient, transfers.toWall(scale * rec[r % world].lastReadyCompute, stepStart[r], phi));
        if (tentative)
            transfers.popBack();
        linkDone = start + xfer(static_cast<double>(std::max<TimeNs>(0, lastGradient - start)));
        transfers.append(start, linkDone);
        for (int32_t r = 0; r < n; ++r)
            done[r * nb + b] = linkDone;
    }
}

namespace {

using Data = WhatIfModel::Data;

// A compute probe whose ranks ran faster together than alone by more than this (together / alone
// below it) was disturbed (load beside the alone turns): not used. Between it and 1: noise, the
// same speed.
constexpr double kComputeProbeMinRatio = 0.9;

Status checkConfig(const WhatIfConfig& cfg)
{
    if (cfg.bucketCapBytes <= 0 || cfg.firstBucketCapBytes <= 0)
        return fail("bucket caps must be positive");
    if (cfg.worldSize < 1)
        return fail("the world size must be at least 1");
    if (cfg.linkGbps < 0 || !std::isfinite(cfg.linkGbps))
        return fail("the link speed must be a positive number of Gbit/s (0 = not emulated)");
    if (cfg.compress != "none" && cfg.compress != "fp16" && cfg.compress != "bf16")
        return fail("unknown compression '" + cfg.compress + "' (none | fp16 | bf16)");
    if (!(cfg.computeScale > 0) || !std::isfinite(cfg.computeScale))
        return fail("the compute scale must be a positive number (1 = as recorded, 0.5 = compute twice as fast)");
    return {};
}

// Another number of ranks on the recorded ranks' one host: the startup compute probe's factor
// (essay, "World sizes") into p.hostComputeFactor, and the note that says what was done and why.
void applyHostComputeProbe(const Data& d, const WhatIfConfig& cfg, Prediction& p)
{
    bool oneHost = !d.rankInfo.empty() && !d.rankInfo.front().host.empty();
    for (const RankInfo& ri : d.rankInfo)
        oneHost = oneHost && ri.host == d.rankInfo.front().host;
    if (!oneHost)
        return;
    const std::string ranks = std::to_string(cfg.worldSize) + (cfg.worldSize == 1 ? " rank" : " ranks");
    // A 1-rank recording cannot say where more ranks would run: the prediction is for them on its
    // host, as `lockstep run --nproc N` runs them.
    const std::string shared = (d.world == 1 ? "the recorded rank's host (" : "the recorded ranks share one host (")
        + d.rankInfo.front().host + ")";
    const std::string unpredicted = shared + ": with " + ranks + " on it each rank's compute speed changes "
                                             "(cores, memory bandwidth), which the model does not predict";
    const auto threads = d.config.extra.find("threads_requested");
    const std::string threadsNote = threads != d.config.extra.end() && threads->second == "0"
        ? "; each rank's thread count changes as well (--threads 0: cores / ranks on the host), which the "
          "model does not predict"
        : "";
    const auto it = d.config.extra.find(kComputeProbeKey);
    if (it == d.config.extra.end()) {
        p.notes.push_back(unpredicted + threadsNote);
        return;
    }
    auto probe = parseComputeProbe(it->second);
    if (!probe) {
        p.notes.push_back(unpredicted + "; the startup compute probe is unreadable (" + probe.error().message
                          + ") and was not used" + threadsNote);
        return;
    }
    // K processes ran together: the recorded ranks of the host, or a 1-rank run's rank and its
    // partner (trainer_torch.cpp, probeComputeWithPartner).
    const int k = probe->ranksOnHost;
    const std::string who = d.world == 1 ? " processes" : " ranks";
    const std::string together = std::to_string(k) + who + " at once";
    const std::string timed = "the startup probe's forward+backward took " + milliseconds(probe->aloneNs)
        + " alone and " + milliseconds(probe->togetherNs) + " with " + together;
    const double ratio = static_cast<double>(probe->togetherNs) / static_cast<double>(probe->aloneNs);
    if (d.world > 1 && k != d.world) {
        p.notes.push_back(unpredicted + "; the startup compute probe ran " + together + " where "
                          + std::to_string(d.world) + " ranks were recorded on the host, and was not used" + threadsNote);
        return;
    }
    if (cfg.worldSize > k) {
        p.notes.push_back(unpredicted + "; the startup compute probe measured " + together + ", not "
                          + std::to_string(cfg.worldSize) + threadsNote);
        return;
    }
    if (ratio < kComputeProbeMinRatio) {
        p.notes.push_back(unpredicted + "; " + timed + ": faster together than alone, a disturbed probe, not used"
                          + threadsNote);
        return;
    }
    // Sane bounds: together no faster than alone (within noise: the same speed) and no slower than
    // the K processes taking turns on the host's cores would be.
    const double used = std::clamp(ratio, 1.0, static_cast<double>(k));
    const auto slowdown = [&](int n) { return 1.0 + (used - 1.0) * (n - 1) / (k - 1.0); };
    p.hostComputeFactor = slowdown(cfg.worldSize) / slowdown(d.world);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.2f", p.hostComputeFactor);
    std::string note = shared + ": each rank's compute x" + buf + " with " + ranks + " on it: " + timed;
    if ((cfg.worldSize != 1 && cfg.worldSize != k) || (d.world != 1 && d.world != k))
        note += " (linear between 1 and " + std::to_string(k) + who + ")";
    if (used != ratio) {
        std::snprintf(buf, sizeof buf, "%.2f", ratio);
        note += used == 1.0 ? std::string("; together within noise of alone (x") + buf + "): taken as the same speed"
                            : std::string("; together took x") + buf + " the time alone, more than " + std::to_string(k)
                + who + " taking turns on the cores would (a disturbed probe?): taken as x" + std::to_string(k);
    }
    p.notes.push_back(note + threadsNote);
}

// Where this prediction extrapolates beyond the recording, in the order the notes are read; the
// host's compute factor among them.
void configurationNotes(const Data& d, const WhatIfConfig& cfg, Prediction& p)
{
    if (!d.perParameter && (cfg.bucketCapBytes != d.recorded.bucketCapBytes
                            || cfg.firstBucketCapBytes != d.recorded.firstBucketCapBytes))
        p.notes.push_back("parameter sizes are not recorded: buckets regroup whole recorded buckets (approximate)");
    if (cfg.worldSize > d.world)
        p.notes.push_back((cfg.worldSize - 1 == d.world ? "rank " + std::to_string(d.world) + " replays "
                                                         : "ranks " + std::to_string(d.world) + ".."
                               + std::to_string(cfg.worldSize - 1) + " replay ")
                          + (d.world == 1 ? std::string("rank 0's compute")
                                          : "recorded ranks' compute (rank r as rank r mod " + std::to_string(d.world) + ")")
                          + ": one device per rank, per-rank work unchanged");
    if (cfg.worldSize != d.world)
        applyHostComputeProbe(d, cfg, p);
    if (cfg.compress != d.recorded.compress)
        p.notes.push_back("the compute cost of converting gradients to and from " + cfg.compress
                          + " is not modelled");
    if (cfg.computeScale != 1.0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "compute x%g: the training thread's work takes %g times its recorded time; ",
                      cfg.computeScale, cfg.computeScale);
        p.notes.push_back(std::string(buf) + "communication keeps its fitted cost and the same share of compute's "
                                             "speed while both run");
    }
    if (cfg.worldSize > 1 && !d.link.fitted)
        p.notes.push_back(cfg.linkGbps > 0
                              ? "the real link's time is unknown (see the model's notes): communication costs only the "
                                "emulated link"
                              : "the real link's time is unknown (see the model's notes): communication costs nothing "
                                "(give a link speed to cost it)");
}

// The runtime's bucket assignment under a configuration (essay, 2).
struct Layout {
    std::vector<std::vector<int32_t>> bucketUnits;
    std::vector<int64_t> bucketWire;   // bytes on the wire per bucket
    std::vector<int32_t> bucketOfUnit; // unit -> bucket
    size_t size() const { return bucketUnits.size(); }
};

Layout layoutFor(const Data& d, const WhatIfConfig& cfg)
{
    Layout l;
    const int64_t wire = wireElemBytes(cfg.compress);
    l.bucketUnits = assignUnits(d.units, cfg);
    for (const auto& units : l.bucketUnits) {
        int64_t numel = 0;
        for (int32_t u : units)
            numel += d.units[u].numel;
        l.bucketWire.push_back(numel * wire);
    }
    l.bucketOfUnit.resize(d.units.size());
    for (size_t b = 0; b < l.size(); ++b)
        for (int32_t u : l.bucketUnits[b])
            l.bucketOfUnit[u] = static_cast<int32_t>(b);
    return l;
}

// The predicted run before its timeline: the recording's identity, the new configuration, marked
// predicted; its buckets, ranks and lanes (compute lane 2r, communication lane 2r + 1). Returns
// each bucket's interned communication span name.
std::vector<StringId> writeRunShell(const Data& d, const WhatIfConfig& cfg, Algorithm alg, const Layout& layout,
                                    Run& out)
{
    const size_t nb = layout.size();
    out.config = d.config;
    out.config.source = kPredictedSource;
    out.config.name = d.config.name + " (predicted: " + describe(cfg) + ")";
    out.config.worldSize = cfg.worldSize;
    out.config.bucketCapBytes = cfg.bucketCapBytes;
    out.config.firstBucketCapBytes = cfg.firstBucketCapBytes;
    out.config.linkGbps = cfg.linkGbps;
    out.config.compress = cfg.compress;
    out.config.status = RunStatus::Completed;
    out.config.failureCause.clear();
    out.config.stepsPlanned = static_cast<int32_t>(d.stepIds.size());
    out.config.extra["predicted_from"] = d.config.name;
    out.config.extra["predicted_config"] = describe(cfg);
    out.config.extra["allreduce"] = algorithmText(alg);
    out.strings = d.strings;
    out.clocksCorrected = true;
    std::vector<std::vector<int64_t>> numelPerBucket(nb);
    for (size_t b = 0; b < nb; ++b) {
        Bucket bk;
        bk.index = static_cast<int32_t>(b);
        bk.bytes = layout.bucketWire[b];
        for (int32_t u : layout.bucketUnits[b]) {
            for (StringId name : d.units[u].names)
                bk.params.push_back(d.strings.text(name));
            numelPerBucket[b].push_back(d.units[u].numel);
        }
        out.buckets.push_back(std::move(bk));
    }
    if (d.perParameter)
        out.config.extra[kParamNumelKey] = formatParamNumel(numelPerBucket);
    else
        out.config.extra.erase(kParamNumelKey);
    std::vector<StringId> commName(nb);
    for (size_t b = 0; b < nb; ++b)
        commName[b] = out.strings.intern("allreduce bucket " + std::to_string(b));
    for (int32_t r = 0; r < cfg.worldSize; ++r) {
        const int32_t base = r % d.world;
        RankInfo ri;
        ri.rank = r;
        ri.host = d.rankInfo[base].host;
        ri.device = d.rankInfo[base].device;
        out.ranks.push_back(ri);
        out.lanes.push_back(Lane{LaneId{static_cast<uint32_t>(2 * r)}, r, LaneKind::Compute, -1, -1,
                                 d.computeLaneName[base]});
        out.lanes.push_back(Lane{LaneId{static_cast<uint32_t>(2 * r + 1)}, r, LaneKind::Comm, -1, -1,
                                 d.commLaneName[base]});
    }
    return commName;
}

// The steps replayed: all, or up to the options' number of steady steps.
size_t stepsToReplay(const Data& d, const PredictOptions& options)
{
    if (options.maxSteadySteps > 0) {
        int32_t steady = 0;
        for (size_t si = 0; si < d.stepIds.size(); ++si)
            if (d.stepIds[si] >= d.config.warmupSteps && ++steady == options.maxSteadySteps)
                return si + 1;
    }
    return d.stepIds.size();
}

// The replay of the recorded steps in order (essay, 1-6), written straight into the predicted run.
class Replay {
public:
    Replay(const Data& d, const WhatIfConfig& cfg, const Layout& layout, Algorithm alg, double k, Run& out,
           std::vector<StringId> commName)
        : m_d(d), m_layout(layout), m_costs(bucketCosts(d.link, alg, cfg.worldSize, layout.bucketWire, k)),
          m_k(k), m_phi(d.link.computeSlowdown), m_n(cfg.worldSize), m_nb(layout.size()), m_out(out),
          m_commName(std::move(commName)), m_emulatedXfer(m_nb, 0), m_prevEnd(m_n, kNever),
          m_launch(static_cast<size_t>(m_n) * m_nb), m_done(m_launch.size()), m_stepStart(m_n), m_backwardEnd(m_n)
    {
        m_emulated = cfg.linkGbps > 0;
        if (m_emulated)
            for (size_t b = 0; b < m_nb; ++b)
                m_emulatedXfer[b] = static_cast<TimeNs>(static_cast<double>(layout.bucketWire[b]) * 8.0 / cfg.linkGbps);
    }

    // Spans and instants are written straight into their final place, lane after lane, in time
    // order, so the run needs no sort (a replayed step keeps its recorded order and follows the
    // previous one): a cursor per lane, starting where the lanes before it end.
    void placeCursors(size_t stepCount)
    {
        const int32_t world = m_d.world;
        m_spanCursor.assign(2 * static_cast<size_t>(m_n), 0);
        m_instantCursor.assign(m_n, 0);
        std::vector<size_t> computeSpans(world, 0), instants(world, 0);
        for (size_t si = 0; si < stepCount; ++si)
            for (int32_t b = 0; b < world; ++b) {
                const RankStep& x = m_d.rankSteps[si * static_cast<size_t>(world) + b];
                computeSpans[b] += x.before.size() + x.after.size() + 1;
                instants[b] += x.instants.size();
            }
        size_t spans = 0, ins = 0;
        for (int32_t r = 0; r < m_n; ++r) {
            m_spanCursor[2 * r] = spans;
            spans += computeSpans[r % world];
            m_spanCursor[2 * r + 1] = spans;
            spans += m_nb * stepCount;
            m_instantCursor[r] = ins;
            ins += instants[r % world];
        }
        m_out.spans.resize(spans);
        m_out.instants.resize(ins);
        m_out.steps.reserve(static_cast<size_t>(m_n) * stepCount);
    }

    // Replays step index si on every rank.
    void step(size_t si)
    {
        const int32_t world = m_d.world;
        const RankStep* rec = &m_d.rankSteps[si * static_cast<size_t>(world)];
        for (int32_t r = 0; r < m_n; ++r) {
            const RankStep& x = rec[r % world];
            TimeNs start = x.start;
            if (m_prevEnd[r] != kNever) {
                const RankStep& prev = m_d.rankSteps[(si - 1) * static_cast<size_t>(world) + r % world];
                start = m_prevEnd[r] + scaled(x.start - prev.end);
            }
            m_stepStart[r] = start;
        }
        sweepLink(m_d.link, m_phi, m_k, m_d.linkStretch[si], rec, world, m_stepStart, m_layout.bucketUnits, m_costs,
                  m_launch, m_done, m_transfers);
        for (int32_t r = 0; r < m_n; ++r)
            m_backwardEnd[r] = m_transfers.toWall(m_k * rec[r % world].backwardEndCompute, m_stepStart[r], m_phi);
        if (m_emulated)
            holdByEmulatedLink();
        for (int32_t r = 0; r < m_n; ++r)
            writeRank(rec[r % world], r);
    }

private:
    // The emulated link holds each rank's completion as the runtime does.
    void holdByEmulatedLink()
    {
        for (int32_t r = 0; r < m_n; ++r) {
            TimeNs pipe = kNever;
            for (size_t b = 0; b < m_nb; ++b) {
                pipe = std::max(m_launch[r * m_nb + b], pipe) + m_emulatedXfer[b];
                m_done[r * m_nb + b] = std::max(m_done[r * m_nb + b], pipe);
            }
        }
    }

    // Wall time of a recorded training-thread instant up to the end of backward, in this replay.
    TimeNs replayedTs(int32_t r, const RankStep& x, TimeNs ts) const
    {
        return m_transfers.toWall(m_k * x.contention.toCompute(ts, x.start, m_phi), m_stepStart[r], m_phi);
    }
    // A recorded duration of the training thread's own work, in this replay (exact when k = 1).
    TimeNs scaled(TimeNs dt) const
    {
        return m_k == 1.0 ? dt : static_cast<TimeNs>(std::llround(m_k * static_cast<double>(dt)));
    }

    // The wait, the optimizer, and the timeline of rank r (replaying x) for this step.
    void writeRank(const RankStep& x, int32_t r)
    {
        TimeNs lastDone = kNever;
        for (size_t b = 0; b < m_nb; ++b)
            lastDone = std::max(lastDone, m_done[r * m_nb + b]);
        const TimeNs waitEnd = std::max(m_backwardEnd[r], lastDone) + scaled(x.post);
        // After the wait: the recorded times from the recorded wait's end, scaled.
        const auto afterWait = [&](TimeNs ts) { return waitEnd + scaled(ts - x.waitEnd); };
        const LaneId computeLane{static_cast<uint32_t>(2 * r)}, commLane{static_cast<uint32_t>(2 * r + 1)};
        Span* compute = &m_out.spans[m_spanCursor[2 * r]];
        for (const Span& s : x.before) {
            *compute = s;
            compute->start = replayedTs(r, x, s.start);
            compute->end = std::max(compute->start, replayedTs(r, x, s.end));
            compute->lane = computeLane;
            ++compute;
        }
        *compute++ = Span{m_backwardEnd[r], waitEnd, 0, computeLane, m_d.waitName, x.step, kNoBucket, SpanKind::Wait};
        for (const Span& s : x.after) {
            *compute = s;
            compute->start = afterWait(s.start);
            compute->end = afterWait(s.end);
            compute->lane = computeLane;
            ++compute;
        }
        m_spanCursor[2 * r] = static_cast<size_t>(compute - m_out.spans.data());
        for (size_t b = 0; b < m_nb; ++b) {
            const TimeNs l = m_launch[r * m_nb + b];
            m_out.spans[m_spanCursor[2 * r + 1]++] = Span{l, std::max(l, m_done[r * m_nb + b]), m_layout.bucketWire[b],
                                                          commLane, m_commName[b], x.step, static_cast<int32_t>(b),
                                                          SpanKind::Comm};
        }
        for (Instant in : x.instants) {
            // An instant at the end of backward (its last gradient) belongs to backward.
            in.ts = in.ts <= x.backwardEnd ? replayedTs(r, x, in.ts) : afterWait(in.ts);
            in.lane = computeLane;
            if (in.kind == InstantKind::GradReady && in.name.v < m_d.unitOfName.size() && m_d.unitOfName[in.name.v] >= 0)
                in.bucket = m_layout.bucketOfUnit[m_d.unitOfName[in.name.v]];
            m_out.instants[m_instantCursor[r]++] = in;
        }
        Step st;
        st.rank = r;
        st.step = x.step;
        st.start = m_stepStart[r];
        st.end = afterWait(x.end);
        st.loss = x.loss;
        st.samples = x.samples;
        m_out.steps.push_back(st);
        m_prevEnd[r] = st.end;
    }

    const Data& m_d;
    const Layout& m_layout;
    const BucketCosts m_costs;
    const double m_k;   // the configuration's compute scale times the host's factor
    const double m_phi; // the contention (essay, 5)
    const int32_t m_n;  // predicted ranks
    const size_t m_nb;  // predicted buckets
    Run& m_out;
    const std::vector<StringId> m_commName;
    bool m_emulated = false;
    std::vector<TimeNs> m_emulatedXfer;
    std::vector<size_t> m_spanCursor, m_instantCursor;
    std::vector<TimeNs> m_prevEnd; // predicted end of each rank's previous step
    std::vector<TimeNs> m_launch, m_done, m_stepStart, m_backwardEnd;
    Contention m_transfers; // the step's predicted transfers, as compute shares the machine with them
};

// Steps were produced step-major; the invariant is rank-major. Spans and instants are in order
// unless a recording put one inside its own wait (none of ours does): then sort them.
void putInOrder(Run& out)
{
    std::sort(out.steps.begin(), out.steps.end(),
              [](const Step& a, const Step& b) { return std::tie(a.rank, a.step) < std::tie(b.rank, b.step); });
    const auto spanOrder = [](const Span& a, const Span& b) {
        return std::tie(a.lane.v, a.start, a.end) < std::tie(b.lane.v, b.start, b.end);
    };
    const auto instantOrder = [](const Instant& a, const Instant& b) {
        return std::tie(a.lane.v, a.ts) < std::tie(b.lane.v, b.ts);
    };
    if (!std::is_sorted(out.spans.begin(), out.spans.end(), spanOrder)
        || !std::is_sorted(out.instants.begin(), out.instants.end(), instantOrder))
        out.normalize();
}

// The interval widened to hold the prediction without contention too (essay, 5), and the note.
void boundByNoContention(const Data& d, double noContentionStepMs, Prediction& p)
{
    p.noContentionStepMs = noContentionStepMs;
    const double e = p.interval.halfWidthPct / 100;
    p.interval.lowMs = std::min(p.interval.lowMs, p.noContentionStepMs / (1 + e));
    if (e < 1)
        p.interval.highMs = std::max(p.interval.highMs, p.noContentionStepMs / (1 - e));
    if (std::fabs(p.noContentionStepMs - p.numbers.stepTimeMs) > 0.01 * p.numbers.stepTimeMs) {
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "contention: %.4g ms with backward slowed by the transfers beside it (%.0f%%, read off "
                      "the link's rates, not off compute), %.4g ms with backward as recorded; the interval "
                      "holds both",
                      p.numbers.stepTimeMs, d.link.computeSlowdown * 100, p.noContentionStepMs);
        p.notes.push_back(buf);
    }
}

} // namespace

} // namespace whatif_detail

using namespace whatif_detail;

// One replay (essay, 1-7), step by step: the configuration checked and noted, the layout, the
// predicted run's shell, the steps replayed into it, then its numbers, interval and bound.
Result<Prediction> WhatIfModel::predict(const WhatIfConfig& cfg, const PredictOptions& options) const
{
    const Data& d = *m_data;
    if (auto ok = checkConfig(cfg); !ok)
        return std::unexpected(ok.error());
    Prediction p;
    p.config = cfg;
    configurationNotes(d, cfg, p);
    const Layout layout = layoutFor(d, cfg);
    const Algorithm alg = algorithmFor(cfg.worldSize, cfg.compress, d.pairwiseAllowed);
    const double k = cfg.computeScale * p.hostComputeFactor;
    std::vector<StringId> commName = writeRunShell(d, cfg, alg, layout, p.run);
    const size_t stepCount = stepsToReplay(d, options);
    {
        Replay replay(d, cfg, layout, alg, k, p.run, std::move(commName));
        replay.placeCursors(stepCount);
        for (size_t si = 0; si < stepCount; ++si)
            replay.step(si);
    }
    putInOrder(p.run);
    p.numbers = numbersOf(summarize(p.run), static_cast<int32_t>(layout.size()));
    p.interval = intervalFor(changeKinds(d.recorded, cfg), p.numbers.stepTimeMs, d.noisePct);
    // A change the contention acts on (another layout or world size, a faster or slower compute)
    // is bounded by its prediction without contention too (essay, 5).
    if (options.boundContention && d.noContention && !(cfg == d.recorded)) {
        WhatIfModel twin;
        twin.m_data = d.noContention;
        auto free = twin.predict(cfg, PredictOptions{.keepTimeline = false, .maxSteadySteps = options.maxSteadySteps});
        if (free)
            boundByNoContention(d, free->numbers.stepTimeMs, p);
    }
    if (options.keepTimeline) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3f:%.3f", p.interval.lowMs, p.interval.highMs);
        p.run.config.extra["predicted_interval_ms"] = buf;
        std::snprintf(buf, sizeof buf, "%.1f", p.interval.halfWidthPct);
        p.run.config.extra["predicted_interval_pct"] = buf;
        p.run.config.extra["predicted_interval_from"] = describeKinds(p.interval.kinds);
    }
    if (!options.keepTimeline)
        p.run = Run{};
    return p;
}

} // namespace lockstep::core
