// What if: the model of a DDP step built from one recorded run, and its replay under another
// configuration (whatif.h). This file holds the essay (what the model is and why), the recording
// indexed (WhatIfModel::build) and the config_extra formats; the fit is in whatif_fit.cpp, the
// replay in whatif_replay.cpp, the pieces they share in whatif_internal.h, the interval in
// whatif_interval.cpp, advise in whatif_advise.cpp and the text/JSON in whatif_report.cpp.
//
// ---------------------------------------------------------------------------------------------
// The model
//
// A recorded step of rank r is, on its training thread: data and forward, then backward with a
// gradient-ready instant per parameter, then the wait at the end of backward (DDP waits for every
// bucket's all-reduce), then the optimizer. On the side, each bucket's all-reduce runs from its
// launch to its completion. What a configuration (bucket caps, world size, link, compression)
// changes is only the communication and, through it, the wait: the training thread never waits
// for communication before the end of backward, so everything it does up to that point is the
// same computation whatever the buckets are. The model therefore keeps the recorded compute
// timeline as it is and recomputes the rest, step by step, with the runtime's own rules
// (instrumentation/src/reducer_torch.cpp):
//
//  1. Compute timeline. Per (rank, step): the spans and instants before the end of backward (the
//     start of the wait span), each parameter's gradient-ready instant (the latest in the step:
//     with gradient accumulation only the last micro-batch's backward synchronizes), the time
//     from the end of the wait to the end of the step (optimizer), and `post`, the part of the
//     wait that is not waiting for the link (writing the averaged gradients back). All of it is
//     replayed unchanged, shifted in time.
//
//  2. Buckets. Parameters are assigned in the bucket table's packing order (reverse
//     registration: backward produces the last layer's gradients first); a bucket closes as soon
//     as its float32 size reaches the cap, the first bucket with the first-bucket cap. A bucket is
//     ready when its last parameter is; it launches when it is ready and every earlier bucket has
//     launched (buckets launch in order), plus the launch's own cost on the training thread
//     (dividing the bucket by the world size), fitted from the recorded ready -> launch delays
//     as a + bytes * c. Sizes come from config_extra[param_numel] (whatif.h); without them the
//     units the caps group are the recorded buckets themselves (the recorded layout is then
//     reproduced exactly, other caps only approximately: the model says so).
//
//  3. Communication. One link: bucket b's all-reduce starts when every rank has launched it
//     (a collective cannot finish before its last participant joins) and the previous bucket's
//     has completed. It takes  latency * rounds  and then moves the bytes each rank sends. Per
//     algorithm, with N ranks and B bytes per bucket:
//        pairwise exchange (the runtime on 2 ranks, uncompressed): 1 round, each rank sends B
//        ring all-reduce (gloo; fp16 payloads):  2(N-1) rounds, each rank sends 2(N-1)/N * B
//        all-gather + local sum (bf16, gloo cannot sum it): N-1 rounds, each rank sends (N-1)*B
//        one rank: nothing to send
//     The bytes move at two rates: a busy rate while some rank is still in backward (until the
//     last gradient of the last rank is ready), an idle rate after. Communication shares the machine with backward (gloo's
//     threads, the exchange's sums and the kernel's socket copies take CPU from the training
//     threads; on a GPU, NCCL's kernels share the SMs with backward's): in bench/whatif's 2-rank
//     recordings on this 2-core machine (other jobs running beside them) buckets moved at
//     0.12-0.14 GB/s during backward and at 0.3-0.6 GB/s after it. A single rate would read that
//     slowdown as a latency per bucket (26 ms per round for the mlp) and condemn small buckets;
//     two rates put it where it happens.
//     Fit, from the run's own all-reduces: every (steady step, rank, bucket) gives a sample, the
//     time from its start (max(last launch over ranks, previous completion)) to its completion,
//     split at the last gradient-ready instant of any rank into a busy and an idle part. The transfers that
//     ran entirely after backward give the latency and the idle rate: a least-squares line
//     through their per-bucket medians against bytes sent (medians, because this machine's noise
//     comes in bursts that a mean would spread over every prediction; with one bucket size only,
//     latency and bandwidth cannot be told apart and the latency is 0). The busy rate is the
//     median over the other transfers of their busy time (less the latency) per byte left once
//     their idle part is accounted for at the idle rate; never faster than idle. Each step then
//     keeps its own link speed (its recorded transfer time over the fit's), as it keeps its own
//     compute (fitLink says why).
//
//  4. Emulated link. `lockstep run --link-gbps X` holds each bucket's completion until a serial
//     pipe of X Gbit/s per rank would have carried it: emulated end = max(own launch, previous
//     emulated end) + wire bytes * 8 / X, completion = max(real, emulated). The model does
//     exactly that. Recorded runs with an emulated link: a completion equal to its emulated end
//     hides the real link's time, so those samples are left out of the fit (censored).
//
//  5. Contention. The same computation is not done at the same speed: while a transfer runs during
//     backward, the communication takes CPU (on a GPU, SMs and memory bandwidth) from the training
//     thread. On this 2-core machine a 2-rank mlp at 1 MiB caps overlaps ~45 ms of transfers with
//     backward instead of ~12 ms at 25 MiB, and its backward grows by 6-30 ms (bench/whatif's
//     runs): without this, the model keeps backward as recorded, credits small buckets with all
//     the overlap and advises them, while the real runs are slower. The fit sees the other side
//     of the same sharing: the link moves bytes at the busy rate while backward runs, at the idle
//     rate when it has the machine to itself. Beside backward the link does idle-rate work in
//     busy-rate time: it holds a CPU for w = nsPerByteIdle / nsPerByteBusy of the time, and that
//     is all it can take from the training thread; and the training thread loses no more than the
//     link loses beside it (1 - w: a link that backward does not slow has a CPU of its own):
//        computeSlowdown = min(w, 1 - w)
//     (0 when the link is not slowed by backward, e.g. a GPU whose collectives do not compete; at
//     most 1/2, two threads sharing one core fairly). So a byte moved beside backward never costs
//     backward more than the link's time for it after backward: overlap pays when busy < 2 idle
//     and is a wash beyond. Until issue 29 the rule was 1 - w alone (the training thread keeping
//     the link's share of speed): a link starved of CPU by a loaded machine (busy 6-8 times idle
//     in 25 MiB recordings whose only transfer beside backward was the small first bucket) charged
//     backward 83-87 % of its speed beside every transfer, and 1 MiB caps came out 49-167 % slower
//     than measured, slower than 25 MiB where they ran faster (whatif_fit.cpp, contentionOf, has
//     the numbers). Per (rank, step), the recorded compute
//     timeline up to the end of backward is first turned into compute time: a stretch of wall
//     time with a transfer in flight holds (1 - slowdown) of compute, the rest holds all of it.
//     The transfers are the model's own for the recorded configuration (not the recorded
//     completions): its compute then replays exactly as recorded, and a prediction changes
//     compute only by what its configuration changes, not by the fit's error. The replay turns
//     compute time back into wall time with the predicted transfers. Transfers depend on the
//     ready instants and the ready instants on the transfers, but only on earlier ones: a bucket
//     is ready before its own transfer and every later one starts, so one sweep over the buckets
//     in order settles it (sweepLink, whatif_replay.cpp, says how the switch from the busy to the
//     idle rate, which depends on the transfer itself, is found). In bench/whatif's runs the
//     slowdown read off the backward growth is 0.2-0.85 for the mlp (both rules fit 0.4-0.5) and
//     0-0.7 for the transformer: a first-order account of a noisy effect, not a scheduler model.
//
//  6. The wait. Backward ends at the recorded instant (shifted); the wait ends at
//     max(end of backward, last completion) + post; the optimizer follows; the next step starts
//     after the recorded gap. Ranks couple only through the collectives' starts, which is how a
//     slow rank makes every other rank wait.
//
//  7. Compute scale. "What if compute were twice as fast (a faster device, a smaller model)?" The
//     configuration's computeScale k multiplies every duration of the training thread's own work:
//     compute time (5) up to the end of backward, so forward, backward and every gradient-ready
//     instant arrive k times as late from the step's start; the launch cost; the write-back after
//     the wait (`post`); the optimizer and whatever follows the wait; the gap to the next step.
//     The link keeps its fitted cost and the contention its share (phi): faster compute leaves
//     less backward to hide the same all-reduces behind, which is the question. k = 1 replays
//     exactly as without it. bench/whatif also uses it as a control: a target run's forward
//     (which no bucket, link or world-size choice changes) measured against its base run's says
//     how much faster or slower the shared machine ran the second time, and the prediction at that
//     k separates the model's error from the machine's drift.
//
// World sizes: ranks beyond the recorded ones replay recorded rank (r mod N)'s compute: per-rank
// work is unchanged (weak scaling, one device per rank), the collectives grow by the algorithm's
// factors. A 1-rank recording has no all-reduce to fit: only an emulated link costs anything.
// Ranks that share one host do not keep their speed, though: they share its cores, caches and
// memory bandwidth, and each computes slower beside the others (bench/whatif's 2-rank recordings on
// this 2-core host predicted at 1 rank came out 15-47% too slow; in one pair one rank alone ran
// the mlp's backward 1.36 and the transformer's 1.83 times faster than beside another, with the
// training thread's CPU time itself growing, not its waits for a core). The runtime's startup compute probe
// (whatif.h, kComputeProbeKey) times one forward + backward alone and with K processes of the host
// at once: the N recorded ranks (K = N), or in a 1-rank recording the rank and a partner process
// started for the probe only (K = 2; instrumentation/src/trainer_torch.cpp). With n processes on
// the host each computes s(n) = 1 + (together / alone - 1) * (n - 1) / (K - 1) times slower than
// alone (linear in between is an assumption: the probe measures only 1 and K). When a prediction
// asks for N' <= K ranks and every recorded rank ran on one host, each rank's compute is scaled by
//     factor(N') = s(N') / s(N)      (N = K, N' = 1: alone / together; N = 1, N' = 2: together / alone)
// applied as a compute scale (7) on top of the configuration's own (so the optimizer, data and gap
// scale alike, as measured: the optimizer slowed 1.3-1.5 times beside another rank). Bounds:
// together no faster than alone (a ratio together/alone in [0.9, 1) is noise: factor 1; below 0.9
// the probe was disturbed and is not used) and no slower than K processes taking turns on the
// cores (K times alone). On bench/whatif's 2 -> 1 rank pairs, predicted with and without the probe,
// it helped more often than it hurt (README, "Where the model stops being right": median |error|
// 12.7% -> 6.7% on one set of nine, 6.0% -> 4.7% on another) and missed a slowdown as often as
// not: its factor is noisy (0.69-1.0). A 1-rank recording predicted at 2 ranks on its host assumes
// they run there (as `lockstep run --nproc 2` does). More ranks than the probe ran together
// (N' > K) and recordings without the probe keep per-rank compute as recorded, and the notes say
// so; so does a run with --threads 0, whose ranks' thread count follows the ranks on the host (the
// partner is not started for it). Ranks on different hosts do not share
// compute: the probe is ignored (GPU runs, one device per rank, record none).
//
// Where the model stops being right: compute that speeds up or slows down with the configuration
// (communication threads competing with backward for CPU cores, which this 2-core machine shows;
// more ranks sharing a host than were recorded, and fewer where no compute probe was recorded;
// the probe's forward + backward standing for the whole step's sharing), compression's conversion
// cost, a network whose per-byte cost changes with message size (protocol switches), and skew
// between ranks growing with N. The replay of the recorded configuration measured against the
// recording (advise's self-check) shows how far the communication fit is from the truth on this run.
// ---------------------------------------------------------------------------------------------
#include "whatif_internal.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace lockstep::core {

using namespace whatif_detail;

namespace {

std::string normalizedCompress(const std::string& c) { return c.empty() ? std::string("none") : c; }

std::string mib(int64_t bytes)
{
    char buf[32];
    const double v = static_cast<double>(bytes) / (1 << 20);
    std::snprintf(buf, sizeof buf, "%g MiB", std::round(v * 1000) / 1000);
    return buf;
}

} // namespace

// ---- config_extra[param_numel] --------------------------------------------------------------

std::string formatParamNumel(const std::vector<std::vector<int64_t>>& numelPerBucket)
{
    std::string out;
    for (const auto& bucket : numelPerBucket)
        for (int64_t n : bucket) {
            if (!out.empty())
                out += ',';
            out += std::to_string(n);
        }
    return out;
}

Result<std::vector<std::vector<int64_t>>> parseParamNumel(std::string_view text, const std::vector<Bucket>& buckets)
{
    std::vector<int64_t> all;
    size_t pos = 0;
    while (pos <= text.size() && !text.empty()) {
        const size_t comma = std::min(text.find(',', pos), text.size());
        int64_t v = 0;
        const auto* first = text.data() + pos;
        const auto* last = text.data() + comma;
        const auto [ptr, ec] = std::from_chars(first, last, v);
        if (ec != std::errc() || ptr != last || v <= 0)
            return fail(std::string(kParamNumelKey) + ": '" + std::string(first, last)
                        + "' is not a positive element count");
        all.push_back(v);
        pos = comma + 1;
    }
    size_t params = 0;
    for (const Bucket& b : buckets)
        params += b.params.size();
    if (all.size() != params)
        return fail(std::string(kParamNumelKey) + " lists " + std::to_string(all.size())
                    + " parameter sizes but the bucket table has " + std::to_string(params) + " parameters");
    std::vector<std::vector<int64_t>> out;
    size_t i = 0;
    for (const Bucket& b : buckets) {
        out.emplace_back(all.begin() + static_cast<ptrdiff_t>(i),
                         all.begin() + static_cast<ptrdiff_t>(i + b.params.size()));
        i += b.params.size();
    }
    return out;
}

// ---- config_extra[link_probe] --------------------------------------------------------------

std::string formatLinkProbe(const std::vector<LinkProbePoint>& points)
{
    std::string out;
    for (const LinkProbePoint& p : points)
        out += (out.empty() ? "" : ",") + std::to_string(p.bytes) + ":" + std::to_string(p.ns);
    return out;
}

Result<std::vector<LinkProbePoint>> parseLinkProbe(std::string_view text)
{
    std::vector<LinkProbePoint> out;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t comma = std::min(text.find(',', pos), text.size());
        const std::string_view item = text.substr(pos, comma - pos);
        const size_t colon = item.find(':');
        LinkProbePoint p;
        const auto number = [](std::string_view t, int64_t& v) {
            const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
            return ec == std::errc() && ptr == t.data() + t.size() && v > 0;
        };
        if (colon == std::string_view::npos || !number(item.substr(0, colon), p.bytes)
            || !number(item.substr(colon + 1), p.ns))
            return fail(std::string(kLinkProbeKey) + ": '" + std::string(item)
                        + "' is not a positive bytes:nanoseconds pair");
        out.push_back(p);
        pos = comma + 1;
    }
    return out;
}

// ---- config_extra[compute_probe] -----------------------------------------------------------

std::string formatComputeProbe(const ComputeProbe& probe)
{
    return std::to_string(probe.aloneNs) + ":" + std::to_string(probe.togetherNs) + ":"
        + std::to_string(probe.ranksOnHost);
}

Result<ComputeProbe> parseComputeProbe(std::string_view text)
{
    ComputeProbe p;
    int64_t fields[3] = {0, 0, 0};
    size_t pos = 0;
    for (int i = 0; i < 3; ++i) {
        const size_t colon = i < 2 ? text.find(':', pos) : text.size();
        if (colon == std::string_view::npos)
            break;
        const std::string_view t = text.substr(pos, colon - pos);
        const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), fields[i]);
        if (ec != std::errc() || ptr != t.data() + t.size())
            fields[i] = 0;
        pos = colon + 1;
    }
    if (fields[0] <= 0 || fields[1] <= 0 || fields[2] < 2 || fields[2] > std::numeric_limits<int32_t>::max())
        return fail(std::string(kComputeProbeKey) + ": '" + std::string(text)
                    + "' is not alone_ns:together_ns:ranks_on_host (positive times, at least 2 ranks)");
    p.aloneNs = fields[0];
    p.togetherNs = fields[1];
    p.ranksOnHost = static_cast<int32_t>(fields[2]);
    return p;
}

bool isPredicted(const RunConfig& config) { return config.source == kPredictedSource; }

std::string describe(const WhatIfConfig& c)
{
    std::string s = mib(c.bucketCapBytes) + " buckets (first " + mib(c.firstBucketCapBytes) + "), "
        + std::to_string(c.worldSize) + (c.worldSize == 1 ? " rank" : " ranks");
    if (c.linkGbps > 0) {
        char buf[48];
        std::snprintf(buf, sizeof buf, ", link %g Gbit/s", c.linkGbps);
        s += buf;
    }
    if (c.compress != "none")
        s += ", " + c.compress;
    if (c.computeScale != 1.0) {
        char buf[48];
        std::snprintf(buf, sizeof buf, ", compute x%g", c.computeScale);
        s += buf;
    }
    return s;
}


namespace {

// Units from the bucket table: one per parameter when sizes are recorded, else one per bucket.
Status buildUnits(const Run& run, WhatIfModel::Data& d)
{
    const int64_t wire = wireElemBytes(d.recorded.compress);
    std::vector<std::vector<int64_t>> numel;
    if (auto it = run.config.extra.find(kParamNumelKey); it != run.config.extra.end()) {
        auto parsed = parseParamNumel(it->second, run.buckets);
        if (!parsed)
            return fail("cannot model this run: " + parsed.error().message);
        numel = std::move(*parsed);
        d.perParameter = true;
    } else {
        d.notes.push_back("parameter sizes are not recorded (config key " + std::string(kParamNumelKey)
                          + "): other caps regroup whole recorded buckets, an approximation");
    }
    d.unitOfName.assign(d.strings.size(), -1);
    for (size_t b = 0; b < run.buckets.size(); ++b) {
        const Bucket& bk = run.buckets[b];
        if (bk.index != static_cast<int32_t>(b))
            return fail("cannot model this run: bucket indices are not 0.." + std::to_string(run.buckets.size() - 1));
        if (bk.params.empty())
            return fail("cannot model this run: bucket " + std::to_string(b) + " names no parameters");
        std::vector<int32_t> unitsOfBucket;
        int64_t sum = 0;
        for (size_t p = 0; p < bk.params.size(); ++p) {
            const StringId name = d.strings.intern(bk.params[p]);
            if (name.v >= d.unitOfName.size())
                d.unitOfName.resize(name.v + 1, -1);
            if (d.unitOfName[name.v] >= 0)
                return fail("cannot model this run: parameter '" + bk.params[p] + "' appears twice in the bucket table");
            if (d.perParameter || p == 0) {
                d.units.push_back(Unit{});
                unitsOfBucket.push_back(static_cast<int32_t>(d.units.size() - 1));
            }
            Unit& u = d.units.back();
            u.names.push_back(name);
            d.unitOfName[name.v] = static_cast<int32_t>(d.units.size() - 1);
            if (d.perParameter) {
                u.numel = numel[b][p];
                sum += u.numel * wire;
            }
        }
        if (d.perParameter && sum != bk.bytes)
            return fail("cannot model this run: " + std::string(kParamNumelKey) + " gives bucket " + std::to_string(b)
                        + " " + std::to_string(sum) + " bytes on the wire, the bucket table " + std::to_string(bk.bytes));
        if (!d.perParameter) {
            if (bk.bytes <= 0 || bk.bytes % wire != 0)
                return fail("cannot model this run: bucket " + std::to_string(b) + " has " + std::to_string(bk.bytes)
                            + " bytes, not a whole number of " + std::to_string(wire) + "-byte elements");
            d.units.back().numel = bk.bytes / wire;
        }
        d.recordedBucketUnits.push_back(std::move(unitsOfBucket));
    }
    return {};
}

} // namespace

// ---- The indexed recording ------------------------------------------------------------------

namespace {

// The maps the indexing passes share: recorded rank -> rank index, lane -> rank index (-1: a lane
// the model does not replay), the steps every rank completed -> step index, and each step's rows.
struct RecordingIndex {
    std::map<int32_t, int32_t> rankIndex;
    std::vector<int32_t> laneRank;
    std::map<int32_t, std::vector<const Step*>> stepsById;
    std::map<int32_t, size_t> stepIndex;
};

// Ranks (those with a compute lane) and their lanes; refuses GPU timelines.
Status indexRanksAndLanes(const Run& run, WhatIfModel::Data& d, RecordingIndex& ix)
{
    for (const Lane& l : run.lanes) {
        if (l.kind == LaneKind::GpuStream) {
            const auto [lo, hi] = run.laneSpanRange(l.id);
            if (lo != hi)
                return fail("cannot model this run: it has GPU stream lanes; the what-if model replays host "
                            "timelines (CPU runs) only");
        }
        if (l.kind == LaneKind::Compute)
            ix.rankIndex.emplace(l.rank, 0);
    }
    if (ix.rankIndex.empty())
        return fail("cannot model this run: it has no compute lane");
    d.world = static_cast<int32_t>(ix.rankIndex.size());
    d.recorded.worldSize = d.world;
    d.rankInfo.resize(d.world);
    d.computeLaneName.assign(d.world, "compute");
    d.commLaneName.assign(d.world, "comm");
    {
        int32_t i = 0;
        for (auto& [rank, idx] : ix.rankIndex) {
            idx = i;
            d.rankInfo[i].rank = rank;
            ++i;
        }
    }
    for (const RankInfo& ri : run.ranks)
        if (auto it = ix.rankIndex.find(ri.rank); it != ix.rankIndex.end())
            d.rankInfo[it->second] = ri;
    ix.laneRank.assign(run.lanes.size(), -1);
    int droppedLanes = 0;
    for (const Lane& l : run.lanes) {
        const auto it = ix.rankIndex.find(l.rank);
        if (it == ix.rankIndex.end() || l.id.v >= ix.laneRank.size())
            continue;
        if (l.kind == LaneKind::Compute || l.kind == LaneKind::Comm) {
            ix.laneRank[l.id.v] = it->second;
            (l.kind == LaneKind::Compute ? d.computeLaneName : d.commLaneName)[it->second] = l.name;
        } else {
            ++droppedLanes;
        }
    }
    if (droppedLanes > 0)
        d.notes.push_back(std::to_string(droppedLanes) + " lanes other than compute and communication are not replayed");
    return {};
}

// Pairwise exchange: the runtime's choice on 2 uncompressed ranks, unless the recording shows it
// was switched off (LOCKSTEP_PAIRWISE=0). Recordings of torch's own DDP (no "allreduce" key)
// always use the process group's all-reduce.
bool pairwiseAllowedIn(const Run& run, const WhatIfModel::Data& d)
{
    const auto it = run.config.extra.find("allreduce");
    if (it == run.config.extra.end())
        return false;
    if (d.world == 2 && d.recorded.compress == "none")
        return it->second.rfind("pairwise", 0) == 0;
    return true;
}

// Steps present on every rank are replayed (a failed run's last, partial step is not): one
// RankStep each, empty but for the step's own row.
Status indexSteps(const Run& run, WhatIfModel::Data& d, RecordingIndex& ix)
{
    for (const Step& st : run.steps)
        if (ix.rankIndex.count(st.rank))
            ix.stepsById[st.step].push_back(&st);
    int partialSteps = 0;
    for (const auto& [id, steps] : ix.stepsById) {
        if (static_cast<int32_t>(steps.size()) != d.world) {
            ++partialSteps;
            continue;
        }
        ix.stepIndex[id] = d.stepIds.size();
        d.stepIds.push_back(id);
    }
    if (d.stepIds.empty())
        return fail("cannot model this run: no step was completed by every rank");
    if (partialSteps > 0)
        d.notes.push_back(std::to_string(partialSteps) + " steps not completed by every rank are not replayed");
    const size_t nb = run.buckets.size();
    const size_t nu = d.units.size();
    d.rankSteps.resize(d.stepIds.size() * static_cast<size_t>(d.world));
    for (const auto& [id, steps] : ix.stepsById) {
        const auto it = ix.stepIndex.find(id);
        if (it == ix.stepIndex.end())
            continue;
        for (const Step* st : steps) {
            RankStep& x = d.rankSteps[it->second * static_cast<size_t>(d.world) + ix.rankIndex[st->rank]];
            x.rank = st->rank;
            x.step = st->step;
            x.start = st->start;
            x.end = st->end;
            x.loss = st->loss;
            x.samples = st->samples > 0 ? st->samples : run.config.batchPerRank;
            x.backwardEnd = x.waitEnd = kNever;
            x.unitReady.assign(nu, kNever);
            x.launch.assign(nb, kNever);
            x.completion.assign(nb, kNever);
        }
    }
    return {};
}

// Spans and instants into their (rank, step): the wait marks the end of backward; communication
// spans give launches and completions; gradient-ready instants the units' ready instants; the
// rest of the training thread is kept for the replay (returned per rank step, in `compute`).
std::vector<std::vector<Span>> placeSpansAndInstants(const Run& run, WhatIfModel::Data& d, const RecordingIndex& ix)
{
    const size_t nb = run.buckets.size();
    const auto rankStepOf = [&](LaneId lane, int32_t step) -> RankStep* {
        if (lane.v >= ix.laneRank.size() || ix.laneRank[lane.v] < 0)
            return nullptr;
        const auto it = ix.stepIndex.find(step);
        if (it == ix.stepIndex.end())
            return nullptr;
        return &d.rankSteps[it->second * static_cast<size_t>(d.world) + ix.laneRank[lane.v]];
    };
    std::vector<std::vector<Span>> compute(d.rankSteps.size());
    int unplacedComm = 0;
    for (const Span& s : run.spans) {
        RankStep* x = rankStepOf(s.lane, s.step);
        if (!x)
            continue;
        const auto k = static_cast<size_t>(x - d.rankSteps.data());
        if (run.lanes[s.lane.v].kind == LaneKind::Comm || isCommunication(s.kind)) {
            if (s.bucket >= 0 && static_cast<size_t>(s.bucket) < nb) {
                x->launch[s.bucket] = s.start;
                x->completion[s.bucket] = s.end;
            } else {
                ++unplacedComm;
            }
        } else if (s.kind == SpanKind::Wait) {
            x->backwardEnd = s.start;
            x->waitEnd = s.end;
        } else {
            compute[k].push_back(s);
        }
    }
    if (unplacedComm > 0)
        d.notes.push_back(std::to_string(unplacedComm) + " communication spans that belong to no bucket are not replayed");
    for (const Instant& in : run.instants) {
        RankStep* x = rankStepOf(in.lane, in.step);
        if (!x)
            continue;
        x->instants.push_back(in);
        if (in.kind == InstantKind::GradReady && in.name.v < d.unitOfName.size() && d.unitOfName[in.name.v] >= 0) {
            TimeNs& r = x->unitReady[d.unitOfName[in.name.v]];
            r = std::max(r, in.ts);
        }
    }
    return compute;
}

// Per rank step: the end of backward where no wait span marks it, the write-back after the link
// (`post`), the training thread's spans before and after the wait; refuses a run without any
// gradient-ready instant named by parameter.
Status settleRankSteps(WhatIfModel::Data& d, std::vector<std::vector<Span>>& compute)
{
    int missingReady = 0;
    bool anyReady = false;
    for (size_t k = 0; k < d.rankSteps.size(); ++k) {
        RankStep& x = d.rankSteps[k];
        TimeNs lastDone = kNever;
        for (TimeNs c : x.completion)
            lastDone = std::max(lastDone, c);
        if (x.backwardEnd == kNever) {
            // No wait span (a recorder that does not mark the end of backward): backward ends with
            // its last span or ready instant, the wait with the last completion.
            TimeNs end = kNever;
            for (const Span& s : compute[k])
                if (s.kind == SpanKind::Backward)
                    end = std::max(end, s.end);
            for (TimeNs r : x.unitReady)
                end = std::max(end, r);
            x.backwardEnd = end == kNever ? x.start : end;
            x.waitEnd = std::max(x.backwardEnd, lastDone);
        }
        x.post = std::max<TimeNs>(0, x.waitEnd - std::max(x.backwardEnd, lastDone));
        for (Span& s : compute[k])
            (s.start < x.backwardEnd ? x.before : x.after).push_back(s);
        for (TimeNs& r : x.unitReady) {
            if (r == kNever)
                ++missingReady;
            else
                anyReady = true;
        }
    }
    if (!anyReady)
        return fail("cannot model this run: it has no gradient-ready instants named by parameter");
    if (missingReady > 0)
        d.notes.push_back(std::to_string(missingReady) + " (rank, step, parameter) gradient-ready instants are "
                          "missing: those parameters count as ready at the end of backward");
    return {};
}

} // namespace

// Indexes the recording (ranks and lanes, units, steps, spans and instants) and fits it.
Result<WhatIfModel> WhatIfModel::build(const Run& run)
{
    auto d = std::make_shared<Data>();
    d->config = run.config;
    d->strings = run.strings;
    d->recorded.bucketCapBytes = run.config.bucketCapBytes;
    d->recorded.firstBucketCapBytes = run.config.firstBucketCapBytes;
    d->recorded.linkGbps = run.config.linkGbps;
    d->recorded.compress = normalizedCompress(run.config.compress);
    if (d->recorded.compress != "none" && d->recorded.compress != "fp16" && d->recorded.compress != "bf16")
        return fail("cannot model this run: unknown compression '" + d->recorded.compress + "'");
    if (run.buckets.empty())
        return fail("cannot model this run: it has no bucket table (the what-if model needs a run recorded by "
                    "Lockstep's runtime or `lockstep record`, not an imported trace)");
    RecordingIndex ix;
    if (auto s = indexRanksAndLanes(run, *d, ix); !s)
        return std::unexpected(s.error());
    d->pairwiseAllowed = pairwiseAllowedIn(run, *d);
    if (auto s = buildUnits(run, *d); !s)
        return std::unexpected(s.error());
    if (auto s = indexSteps(run, *d, ix); !s)
        return std::unexpected(s.error());
    std::vector<std::vector<Span>> compute = placeSpansAndInstants(run, *d, ix);
    if (auto s = settleRankSteps(*d, compute); !s)
        return std::unexpected(s.error());

    d->linkStretch.assign(d->stepIds.size(), 1.0);
    fitLink(*d, run);
    // Missing readiness counts as the end of backward from here on (the fit skipped it).
    for (RankStep& x : d->rankSteps)
        for (TimeNs& r : x.unitReady)
            if (r == kNever)
                r = x.backwardEnd;
    recordContention(*d);

    d->measured = numbersOf(summarize(run), static_cast<int32_t>(run.buckets.size()));
    d->waitName = d->strings.intern("wait for buckets");
    d->noisePct = core::stepNoisePct(run);
    // The bound on contention (essay, 5): the same recording with phi = 0. The recorded compute is
    // then the recorded wall time (no transfer takes a share of it).
    if (d->link.computeSlowdown > 0) {
        auto twin = std::make_shared<Data>(*d);
        twin->link.computeSlowdown = 0;
        recordContention(*twin);
        d->noContention = std::move(twin);
    }
    WhatIfModel m;
    m.m_data = d;
    auto self = m.predict(d->recorded, PredictOptions{.keepTimeline = false});
    if (!self)
        return std::unexpected(self.error());
    d->replayed = self->numbers;
    return m;
}

WhatIfConfig WhatIfModel::recorded() const { return m_data->recorded; }
WhatIfNumbers WhatIfModel::measured() const { return m_data->measured; }
WhatIfNumbers WhatIfModel::replayed() const { return m_data->replayed; }
double WhatIfModel::stepNoisePct() const { return m_data->noisePct; }
double WhatIfModel::selfErrorPct() const
{
    const double measured = m_data->measured.stepTimeMs;
    return measured > 0 ? (m_data->replayed.stepTimeMs - measured) / measured * 100 : kNaN;
}
const LinkFit& WhatIfModel::link() const { return m_data->link; }
const std::vector<std::string>& WhatIfModel::notes() const { return m_data->notes; }

std::vector<size_t> WhatIfModel::bucketSizes(const WhatIfConfig& config) const
{
    std::vector<size_t> sizes;
    for (const auto& units : assignUnits(m_data->units, config)) {
        size_t params = 0;
        for (int32_t u : units)
            params += m_data->units[u].names.size();
        sizes.push_back(params);
    }
    return sizes;
}

int64_t WhatIfModel::gradientBytes() const
{
    int64_t sum = 0;
    for (const Unit& u : m_data->units)
        sum += u.numel * kGradElemBytes;
    return sum;
}

} // namespace lockstep::core
