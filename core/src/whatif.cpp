// What if: the model of a DDP step built from one recorded run, and its replay under another
// configuration (whatif.h). Report formatting lives in whatif_report.cpp.
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
//     rate when it has the machine to itself. The model assumes the sharing is symmetric: the
//     training thread keeps the same fraction of its speed as the link keeps of its own,
//        computeSlowdown = 1 - nsPerByteIdle / nsPerByteBusy
//     (0 when the link is not slowed by backward, e.g. a GPU whose collectives do not compete;
//     capped at 0.9 so that compute always progresses). Per (rank, step), the recorded compute
//     timeline up to the end of backward is first turned into compute time: a stretch of wall
//     time with a transfer in flight holds (1 - slowdown) of compute, the rest holds all of it.
//     The transfers are the model's own for the recorded configuration (not the recorded
//     completions): its compute then replays exactly as recorded, and a prediction changes
//     compute only by what its configuration changes, not by the fit's error. The replay turns
//     compute time back into wall time with the predicted transfers. Transfers depend on the
//     ready instants and the ready instants on the transfers, but only on earlier ones: a bucket
//     is ready before its own transfer and every later one starts, so one sweep over the buckets
//     in order settles it (predict() says how the switch from the busy to the idle rate, which
//     depends on the transfer itself, is found). In bench/whatif's runs the slowdown read off
//     the backward growth is 0.2-0.85 for the mlp (this rule fits 0.4-0.55) and 0-0.7 for the transformer: a
//     first-order account of a noisy effect, not a scheduler model.
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
#include "lockstep/core/whatif.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace lockstep::core {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr TimeNs kNever = std::numeric_limits<TimeNs>::min();
// Gradients are float32 (the runtime's parameters; DDP buckets of float32 models): the caps
// compare float32 sizes whatever travels on the wire.
constexpr int64_t kGradElemBytes = 4;
// A recorded completion within this of its emulated end was held by the emulated link, not by
// the real one: the runtime stores the emulated end itself, so only clock-correction rounding
// (nanoseconds) separates them; 10 µs leaves margin and is far below any real transfer.
constexpr TimeNs kCensorToleranceNs = 10'000;
// A compute probe whose ranks ran faster together than alone by more than this (together / alone
// below it) was disturbed (load beside the alone turns): not used. Between it and 1: noise, the
// same speed.
constexpr double kComputeProbeMinRatio = 0.9;

int64_t wireElemBytes(std::string_view compress)
{
    return compress == "fp16" || compress == "bf16" ? 2 : kGradElemBytes;
}

std::string normalizedCompress(const std::string& c) { return c.empty() ? std::string("none") : c; }

enum class Algorithm { Local, Pairwise, Ring, AllGather };

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

// Rounds of latency and bytes each rank sends per bucket byte (header essay, "Communication").
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

// How long a transfer of `bytes` takes when the last gradient of its step is ready `busyFor` ns
// after it starts: the latency, then the bytes at the busy rate while backward lasts and at the
// idle rate after; `stretch` scales all of it (the step's own link speed, see fitLink).
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

// The transfers of a step in wall time (one link: in order, none overlapping the next) and the two
// maps they imply between a rank's wall time and its compute time (header essay, 5): while a
// transfer runs, compute advances at (1 - phi) per ns of wall time, otherwise at 1. Compute time
// is counted from the rank's step start (`origin`); every transfer starts after it (a collective
// starts after every rank launched it).
class Contention {
public:
    void clear()
    {
        m_a.clear();
        m_b.clear();
        m_before.clear();
    }
    // A transfer [a, e), no earlier than the last one's end; an empty one is not kept (false).
    bool append(TimeNs a, TimeNs e)
    {
        if (e <= a)
            return false;
        m_before.push_back(m_b.empty() ? 0 : m_before.back() + (m_b.back() - m_a.back()));
        m_a.push_back(a);
        m_b.push_back(e);
        return true;
    }
    void popBack()
    {
        m_a.pop_back();
        m_b.pop_back();
        m_before.pop_back();
    }
    // Compute time done by wall time t.
    double toCompute(TimeNs t, TimeNs origin, double phi) const
    {
        const auto i = static_cast<size_t>(std::upper_bound(m_a.begin(), m_a.end(), t) - m_a.begin());
        const TimeNs busy = i == 0 ? 0 : m_before[i - 1] + std::min(t, m_b[i - 1]) - m_a[i - 1];
        return static_cast<double>(t - origin) - phi * static_cast<double>(busy);
    }
    // The wall time by which compute time q is done (the inverse of toCompute).
    TimeNs toWall(double q, TimeNs origin, double phi) const
    {
        // Compute time at the start of transfer i: (a_i - origin) - phi * before_i, ascending in i.
        const auto atStart = [&](size_t i) {
            return static_cast<double>(m_a[i] - origin) - phi * static_cast<double>(m_before[i]);
        };
        size_t lo = 0, hi = m_a.size();
        while (lo < hi) {
            const size_t mid = (lo + hi) / 2;
            if (atStart(mid) <= q)
                lo = mid + 1;
            else
                hi = mid;
        }
        double offset = q;
        if (lo > 0) {
            const size_t i = lo - 1;
            const double len = static_cast<double>(m_b[i] - m_a[i]);
            offset = q <= atStart(i) + (1 - phi) * len
                ? static_cast<double>(m_a[i] - origin) + (q - atStart(i)) / (1 - phi)
                : q + phi * (static_cast<double>(m_before[i]) + len);
        }
        return origin + static_cast<TimeNs>(std::llround(offset));
    }

private:
    std::vector<TimeNs> m_a, m_b, m_before; // transfer i is [a_i, b_i); before_i: time in transfers before it
};

std::string microseconds(double ns)
{
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
    return buf;
}

std::string milliseconds(int64_t ns)
{
    char buf[32];
    const double v = static_cast<double>(ns) / 1e6;
    std::snprintf(buf, sizeof buf, v < 10 ? "%.2f ms" : v < 100 ? "%.1f ms" : "%.0f ms", v);
    return buf;
}

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

// ---- The indexed recording ------------------------------------------------------------------

namespace {

// An indivisible piece of the gradient that the caps group: one parameter, or one recorded
// bucket when parameter sizes were not recorded.
struct Unit {
    std::vector<StringId> names; // parameter names (the model's string table)
    int64_t numel = 0;
};

// The runtime's bucket assignment (header essay, 2): units in packing order, a bucket closes as
// soon as its float32 size reaches the cap (the first bucket's cap for bucket 0).
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

struct RankStep {
    int32_t rank = 0;
    int32_t step = 0;
    TimeNs start = 0;
    TimeNs end = 0;
    TimeNs backwardEnd = 0; // start of the wait for buckets
    TimeNs waitEnd = 0;
    TimeNs post = 0;        // waitEnd - max(backwardEnd, last completion): write-back, not link
    double loss = kNaN;
    int64_t samples = 0;
    std::vector<TimeNs> unitReady;              // per unit, the latest ready instant
    std::vector<TimeNs> launch, completion;     // per recorded bucket; kNever if not recorded
    std::vector<Span> before, after;            // training-thread spans around the wait
    std::vector<Instant> instants;              // training-thread instants
    Contention contention;                      // the recorded configuration's transfers (essay, 5)
    std::vector<double> unitReadyCompute;       // per unit, its ready instant in compute time
    double lastReadyCompute = 0;                // the last of them
    double backwardEndCompute = 0;              // the end of backward in compute time
};

// What each bucket of a layout costs on the link (header essay, 2 and 3): the bytes each rank
// sends (0 when the link is not fitted), the launch cost on the training thread (its own work:
// times the compute scale), and the latency.
struct BucketCosts {
    std::vector<double> work;
    std::vector<TimeNs> launchCost;
    double latency = 0;
};
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

// The link over one step (header essay, 2, 3 and 5), bucket after bucket. Rank r (replaying
// recorded rank r mod world, from stepStart[r]) launches bucket b once its units are ready and its
// earlier buckets have launched, plus the launch cost; one link runs the collectives in order,
// each from its last launch and the previous one's completion. Bucket b is ready on every rank
// before its own transfer and every later one starts, so its ready instants (compute time turned
// into wall time) depend only on the transfers before it: one sweep settles contention, no
// iteration. A transfer moves at the busy rate until the last gradient of any rank; that instant
// depends on the transfer itself (it slows backward while it runs) but not on later ones (they
// start after it ends): it is read off with the transfer taken as busy throughout, which is exact
// up to that instant. Compute time is the recording's times `scale` (the configuration's compute
// scale). Writes the launches, the completions (the same on every rank) and the transfers.
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

} // namespace

struct WhatIfModel::Data {
    RunConfig config;
    std::vector<RankInfo> rankInfo;     // per recorded rank index
    std::vector<std::string> computeLaneName, commLaneName;
    StringTable strings;
    int32_t world = 0;                  // recorded ranks
    std::vector<int32_t> stepIds;       // replayed steps, ascending
    std::vector<RankStep> rankSteps;    // [stepIndex * world + rankIndex]
    std::vector<Unit> units;            // packing order
    std::vector<int32_t> unitOfName;    // StringId.v -> unit, -1 for other strings
    std::vector<std::vector<int32_t>> recordedBucketUnits;
    bool perParameter = false;
    bool pairwiseAllowed = true;
    LinkFit link;
    WhatIfConfig recorded;
    WhatIfNumbers measured;
    std::vector<std::string> notes;
    std::vector<double> linkStretch;    // per replayed step: its link time / the fit's (fitLink)
    WhatIfNumbers replayed;             // the recorded configuration, predicted
    StringId waitName;                  // interned name of the wait span the replay emits
    double noisePct = 0;                // the recording's step-to-step noise (stepNoisePct)
    // The same recording modelled with no contention (phi = 0): the other end of the bound on
    // contention (header essay, 5); null when the fit found none.
    std::shared_ptr<const Data> noContention;
};

namespace {

WhatIfNumbers numbersOf(const RunSummary& s, int32_t buckets)
{
    // The one place the model reads the analysis' summary: keep the dependence narrow.
    WhatIfNumbers n;
    n.stepTimeMs = s.stepTimeMs;
    n.overlapRatio = s.overlapRatio;
    n.exposedCommMs = s.exposedCommMs;
    n.commMs = s.commMs;
    n.throughput = s.throughput;
    n.buckets = buckets;
    return n;
}

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

// Fits the link and the launch cost from the recorded steps (header essay, 3 and 4).
// Long (~230 lines) on purpose, for now: the samples, the idle line, the startup probe, the busy
// rate and each step's stretch are one fit in stages that each read the previous stage's locals
// (the samples, the line); split, each stage would take and return half a dozen of them. To split
// next (issue 27): samples / idle line + probe / busy rate / stretch, with a struct between them.
void fitLink(WhatIfModel::Data& d, const Run& run)
{
    const int32_t n = d.world;
    const size_t nb = d.recordedBucketUnits.size();
    const Algorithm recordedAlg = algorithmFor(n, d.recorded.compress, d.pairwiseAllowed);
    const double rounds = roundsOf(recordedAlg, n);
    const double factor = bytesFactorOf(recordedAlg, n);
    std::vector<double> work(nb); // bytes each rank sends for the bucket
    for (size_t b = 0; b < nb; ++b)
        work[b] = static_cast<double>(run.buckets[b].bytes) * factor;

    bool anySteady = false;
    for (int32_t s : d.stepIds)
        anySteady = anySteady || s >= d.config.warmupSteps;
    if (!anySteady && !d.stepIds.empty())
        d.notes.push_back("no steady step (all within the first " + std::to_string(d.config.warmupSteps)
                          + "): the link is fitted on warm-up steps");

    struct Sample {
        size_t step = 0;    // index into d.stepIds
        double total = 0;   // completion - start
        double busy = 0;    // of which before the last gradient of the step
        double busyFor = 0; // from the start to the last gradient of the step (0 if after)
    };
    std::vector<std::vector<Sample>> samples(nb);
    std::vector<std::vector<double>> launchCost(nb);
    int censored = 0;
    // Every step gives samples (its own link speed below); the rates are fitted on steady ones.
    const auto fitted = [&](size_t si) { return !anySteady || d.stepIds[si] >= d.config.warmupSteps; };
    for (size_t si = 0; si < d.stepIds.size(); ++si) {
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
                if (allReady && fitted(si)) {
                    const TimeNs after = b > 0 && x.launch[b - 1] != kNever ? std::max(ready, x.launch[b - 1]) : ready;
                    launchCost[b].push_back(static_cast<double>(std::max<TimeNs>(0, x.launch[b] - after)));
                }
                if (held) {
                    ++censored;
                } else if (prevKnown && maxLaunch[b] != kNever) {
                    const TimeNs start = b > 0 ? std::max(maxLaunch[b], x.completion[b - 1]) : maxLaunch[b];
                    const TimeNs done = std::max(start, x.completion[b]);
                    samples[b].push_back(Sample{si, static_cast<double>(done - start),
                                                static_cast<double>(std::clamp(busyUntil, start, done) - start),
                                                static_cast<double>(std::max<TimeNs>(0, busyUntil - start))});
                }
                prevKnown = !held;
            }
        }
    }

    std::vector<std::pair<double, double>> launchPoints;
    for (size_t b = 0; b < nb; ++b)
        if (!launchCost[b].empty())
            launchPoints.emplace_back(static_cast<double>(run.buckets[b].bytes), median(launchCost[b]));
    const Line launch = fitLine(launchPoints);
    d.link.launchNs = launch.intercept;
    d.link.launchNsPerByte = launch.slope;

    if (recordedAlg == Algorithm::Local) {
        d.notes.push_back("a 1-rank recording has no all-reduce to fit the link from: predicted communication "
                          "costs only an emulated link (--link-gbps), the real link's own time is unknown");
        return;
    }
    // Idle rate and latency: a line through the per-bucket medians of the transfers that moved
    // after every rank's backward (nothing else competes with them).
    std::vector<std::pair<double, double>> idlePoints, allPoints;
    for (size_t b = 0; b < nb; ++b) {
        std::vector<double> idle, all;
        for (const Sample& x : samples[b]) {
            if (!fitted(x.step))
                continue;
            all.push_back(x.total);
            if (x.busy == 0)
                idle.push_back(x.total);
            else
                ++d.link.busySamples;
        }
        d.link.samples += static_cast<int>(all.size());
        if (!idle.empty())
            idlePoints.emplace_back(work[b], median(idle));
        if (!all.empty())
            allPoints.emplace_back(work[b], median(all));
    }
    if (allPoints.empty()) {
        d.notes.push_back(censored > 0
                              ? "every all-reduce of the recording was held by its emulated link: the real link's "
                                "time is unknown, predicted communication costs only an emulated link"
                              : "no all-reduce with a complete record: predicted communication costs only an emulated link");
        return;
    }
    d.link.fitted = true;
    const bool haveIdle = !idlePoints.empty();
    Line line = fitLine(haveIdle ? idlePoints : allPoints);
    // The startup probe (whatif.h, kLinkProbeKey): the same path timed at a few sizes
    // with nothing else running. Its intercept stands in for the latency when the run's own
    // transfers cannot give one (one bucket size); the run's rate is then what its transfers
    // took beyond that latency. A probe whose latency exceeds the run's own transfer times
    // describes another link (or a slower moment) and is not used.
    std::string probeNote;
    if (auto it = d.config.extra.find(kLinkProbeKey); it != d.config.extra.end()) {
        auto probe = parseLinkProbe(it->second);
        std::vector<std::pair<double, double>> probePoints;
        if (probe)
            for (const LinkProbePoint& p : *probe)
                probePoints.emplace_back(static_cast<double>(p.bytes) * factor, static_cast<double>(p.ns));
        const Line fromProbe = fitLine(probePoints);
        // A larger message that took less time says the probe was disturbed (a rank descheduled
        // for longer than the transfer): its line would be noise.
        std::sort(probePoints.begin(), probePoints.end());
        bool monotone = true;
        for (size_t i = 1; i < probePoints.size(); ++i)
            monotone = monotone && probePoints[i].second >= probePoints[i - 1].second;
        if (!probe) {
            probeNote = "the startup probe is unreadable (" + probe.error().message + ") and was not used";
        } else if (!monotone) {
            probeNote = "the startup probe was disturbed (a larger message took less time) and was not used";
        } else if (fromProbe.separable) {
            d.link.probeLatencyNs = fromProbe.intercept / rounds;
            if (!line.separable) {
                const auto& pts = haveIdle ? idlePoints : allPoints;
                double sx = 0, sy = 0;
                for (const auto& [x, y] : pts)
                    sx += x, sy += y;
                if (fromProbe.intercept < sy / static_cast<double>(pts.size())) {
                    line.intercept = fromProbe.intercept;
                    line.slope = sx > 0 ? (sy - fromProbe.intercept * static_cast<double>(pts.size())) / sx : 0;
                    line.separable = true;
                    d.link.latencyFromProbe = true;
                    probeNote = "the link's latency (" + microseconds(d.link.probeLatencyNs)
                        + " per round) is the startup probe's (" + std::to_string(probe->size())
                        + " sizes): this run's transfers after backward had one size";
                } else {
                    probeNote = "the startup probe's latency (" + microseconds(d.link.probeLatencyNs)
                        + " per round) exceeds this run's own transfer times and was not used";
                }
            }
        }
    }
    d.link.latencySeparable = line.separable;
    d.link.latencyNs = line.intercept / rounds;
    d.link.nsPerByteIdle = line.slope;
    d.link.nsPerByteBusy = line.slope;
    if (!haveIdle) {
        d.notes.push_back("every all-reduce of the recording moved while backward computed: the link's rate after "
                          "backward is assumed to be the same");
    } else {
        // Busy rate: what is left of each transfer once its idle part is accounted for at the idle
        // rate was moved during its busy part (after the latency). Transfers with less than a
        // tenth of their bytes left for the busy part say little about its rate (a division by
        // almost nothing) and are skipped.
        std::vector<double> busyRates;
        for (size_t b = 0; b < nb; ++b)
            for (const Sample& x : samples[b]) {
                if (!fitted(x.step))
                    continue;
                const double busy = x.busy - line.intercept;
                const double left = work[b] - (x.total - x.busy) / std::max(line.slope, 1e-12);
                if (x.busy > 0 && busy > 0 && left >= 0.1 * work[b])
                    busyRates.push_back(busy / left);
            }
        if (!busyRates.empty())
            d.link.nsPerByteBusy = std::max(line.slope, median(busyRates));
    }
    if (d.link.nsPerByteBusy > 0)
        d.link.computeSlowdown = std::clamp(1.0 - d.link.nsPerByteIdle / d.link.nsPerByteBusy, 0.0, kMaxComputeSlowdown);
    // Each step's own link speed: the fit describes a typical step, but on a shared machine whole
    // steps run slow or fast (another job takes the CPU for a while), and the replay keeps each
    // step's recorded compute with its slowness. Communication gets the same: per step, its
    // recorded transfer time over the fit's for the same transfers, applied to every transfer of
    // that step in a prediction. The mean over steps is then not biased low by fitting medians.
    {
        std::vector<double> recorded(d.stepIds.size(), 0), modelled(d.stepIds.size(), 0);
        for (size_t b = 0; b < nb; ++b)
            for (const Sample& x : samples[b]) {
                recorded[x.step] += x.total;
                modelled[x.step] += transferNs(d.link, line.intercept, work[b], x.busyFor, 1.0);
            }
        std::vector<double> steady;
        for (size_t si = 0; si < d.stepIds.size(); ++si) {
            if (modelled[si] > 0 && recorded[si] > 0)
                d.linkStretch[si] = recorded[si] / modelled[si];
            if (fitted(si))
                steady.push_back(d.linkStretch[si]);
        }
        std::sort(steady.begin(), steady.end());
        if (!steady.empty()) {
            d.link.stretchLow = steady[steady.size() / 10];
            d.link.stretchHigh = steady[steady.size() - 1 - steady.size() / 10];
        }
    }
    if (!probeNote.empty())
        d.notes.push_back(probeNote);
    if (!line.separable)
        d.notes.push_back("fewer than two bucket sizes moved after backward: the link's latency cannot be told "
                          "apart from its bandwidth and is taken as 0 (predictions at smaller caps may be optimistic)");
    if (censored > 0)
        d.notes.push_back(std::to_string(censored) + " all-reduces held by the recorded emulated link were left "
                          "out of the link fit");
}

// Contention in the recording (header essay, 5): per (rank, step), the model's own transfers for
// the recorded configuration (the link fit's, not the recorded completions, so that replaying the
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

} // namespace

// Indexes the recording (lanes, steps, spans, instants) and fits it. Long (~220 lines): the
// indexing passes share the rank and step maps they build; to split next (issue 27): lanes,
// steps, spans and instants as four functions over a small index struct.
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

    // Ranks and their lanes.
    std::map<int32_t, int32_t> rankIndex;
    for (const Lane& l : run.lanes) {
        if (l.kind == LaneKind::GpuStream) {
            const auto [lo, hi] = run.laneSpanRange(l.id);
            if (lo != hi)
                return fail("cannot model this run: it has GPU stream lanes; the what-if model replays host "
                            "timelines (CPU runs) only");
        }
        if (l.kind == LaneKind::Compute)
            rankIndex.emplace(l.rank, 0);
    }
    if (rankIndex.empty())
        return fail("cannot model this run: it has no compute lane");
    d->world = static_cast<int32_t>(rankIndex.size());
    d->recorded.worldSize = d->world;
    d->rankInfo.resize(d->world);
    d->computeLaneName.assign(d->world, "compute");
    d->commLaneName.assign(d->world, "comm");
    {
        int32_t i = 0;
        for (auto& [rank, idx] : rankIndex) {
            idx = i;
            d->rankInfo[i].rank = rank;
            ++i;
        }
    }
    for (const RankInfo& ri : run.ranks)
        if (auto it = rankIndex.find(ri.rank); it != rankIndex.end())
            d->rankInfo[it->second] = ri;
    // lane -> (rank index, kind) for the spans below; -1: a lane the model does not replay.
    std::vector<int32_t> laneRank(run.lanes.size(), -1);
    int droppedLanes = 0;
    for (const Lane& l : run.lanes) {
        const auto it = rankIndex.find(l.rank);
        if (it == rankIndex.end() || l.id.v >= laneRank.size())
            continue;
        if (l.kind == LaneKind::Compute || l.kind == LaneKind::Comm) {
            laneRank[l.id.v] = it->second;
            (l.kind == LaneKind::Compute ? d->computeLaneName : d->commLaneName)[it->second] = l.name;
        } else {
            ++droppedLanes;
        }
    }
    if (droppedLanes > 0)
        d->notes.push_back(std::to_string(droppedLanes) + " lanes other than compute and communication are not replayed");

    // Pairwise exchange: the runtime's choice on 2 uncompressed ranks, unless the recording shows it
    // was switched off (LOCKSTEP_PAIRWISE=0). Recordings of torch's own DDP (no "allreduce" key)
    // always use the process group's all-reduce.
    {
        const auto it = run.config.extra.find("allreduce");
        if (it == run.config.extra.end())
            d->pairwiseAllowed = false;
        else if (d->world == 2 && d->recorded.compress == "none")
            d->pairwiseAllowed = it->second.rfind("pairwise", 0) == 0;
    }

    if (auto s = buildUnits(run, *d); !s)
        return std::unexpected(s.error());

    // Steps present on every rank are replayed (a failed run's last, partial step is not).
    std::map<int32_t, std::vector<const Step*>> stepsById;
    for (const Step& st : run.steps)
        if (rankIndex.count(st.rank))
            stepsById[st.step].push_back(&st);
    int partialSteps = 0;
    std::map<int32_t, size_t> stepIndex;
    for (const auto& [id, steps] : stepsById) {
        if (static_cast<int32_t>(steps.size()) != d->world) {
            ++partialSteps;
            continue;
        }
        stepIndex[id] = d->stepIds.size();
        d->stepIds.push_back(id);
    }
    if (d->stepIds.empty())
        return fail("cannot model this run: no step was completed by every rank");
    if (partialSteps > 0)
        d->notes.push_back(std::to_string(partialSteps) + " steps not completed by every rank are not replayed");

    const size_t nb = run.buckets.size();
    const size_t nu = d->units.size();
    d->rankSteps.resize(d->stepIds.size() * static_cast<size_t>(d->world));
    for (const auto& [id, steps] : stepsById) {
        const auto it = stepIndex.find(id);
        if (it == stepIndex.end())
            continue;
        for (const Step* st : steps) {
            RankStep& x = d->rankSteps[it->second * static_cast<size_t>(d->world) + rankIndex[st->rank]];
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
    const auto rankStepOf = [&](LaneId lane, int32_t step) -> RankStep* {
        if (lane.v >= laneRank.size() || laneRank[lane.v] < 0)
            return nullptr;
        const auto it = stepIndex.find(step);
        if (it == stepIndex.end())
            return nullptr;
        return &d->rankSteps[it->second * static_cast<size_t>(d->world) + laneRank[lane.v]];
    };

    // Spans: the wait marks the end of backward; communication spans give launches and
    // completions; the rest of the training thread is kept for the replay.
    std::vector<std::vector<Span>> compute(d->rankSteps.size());
    int unplacedComm = 0;
    for (const Span& s : run.spans) {
        RankStep* x = rankStepOf(s.lane, s.step);
        if (!x)
            continue;
        const auto k = static_cast<size_t>(x - d->rankSteps.data());
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
        d->notes.push_back(std::to_string(unplacedComm) + " communication spans that belong to no bucket are not replayed");
    int missingReady = 0;
    for (const Instant& in : run.instants) {
        RankStep* x = rankStepOf(in.lane, in.step);
        if (!x)
            continue;
        x->instants.push_back(in);
        if (in.kind == InstantKind::GradReady && in.name.v < d->unitOfName.size() && d->unitOfName[in.name.v] >= 0) {
            TimeNs& r = x->unitReady[d->unitOfName[in.name.v]];
            r = std::max(r, in.ts);
        }
    }
    bool anyReady = false;
    for (size_t k = 0; k < d->rankSteps.size(); ++k) {
        RankStep& x = d->rankSteps[k];
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
        d->notes.push_back(std::to_string(missingReady) + " (rank, step, parameter) gradient-ready instants are "
                           "missing: those parameters count as ready at the end of backward");

    d->linkStretch.assign(d->stepIds.size(), 1.0);
    fitLink(*d, run);
    // Missing readiness counts as the end of backward from here on (the fit skipped it).
    for (RankStep& x : d->rankSteps)
        for (TimeNs& r : x.unitReady)
            if (r == kNever)
                r = x.backwardEnd;
    recordContention(*d);

    d->measured = numbersOf(summarize(run), static_cast<int32_t>(nb));
    d->waitName = d->strings.intern("wait for buckets");
    d->noisePct = core::stepNoisePct(run);
    // The bound on contention (header essay, 5): the same recording with phi = 0. The recorded
    // compute is then the recorded wall time (no transfer takes a share of it).
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

// ---- The replay -----------------------------------------------------------------------------

// One replay (header essay, 1-7). Long (~360 lines) on purpose, for now: the predicted run is
// written straight into its final place (a cursor per lane, no sort), so the bucket layout, the
// lanes, the cursors and the step loop share state; the notes (the compute probe's factor) and the
// interval at the end are the parts to move out first (issue 27).
Result<Prediction> WhatIfModel::predict(const WhatIfConfig& cfg, const PredictOptions& options) const
{
    const Data& d = *m_data;
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

    Prediction p;
    p.config = cfg;
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
    // Another number of ranks on the recorded ranks' one host: the startup compute probe's factor
    // (header essay, "World sizes"), applied on top of the configuration's compute scale.
    if (cfg.worldSize != d.world) {
        bool oneHost = !d.rankInfo.empty() && !d.rankInfo.front().host.empty();
        for (const RankInfo& ri : d.rankInfo)
            oneHost = oneHost && ri.host == d.rankInfo.front().host;
        if (oneHost) {
            const std::string ranks = std::to_string(cfg.worldSize) + (cfg.worldSize == 1 ? " rank" : " ranks");
            // A 1-rank recording cannot say where more ranks would run: the prediction is for them
            // on its host, as `lockstep run --nproc N` runs them.
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
            } else if (auto probe = parseComputeProbe(it->second); !probe) {
                p.notes.push_back(unpredicted + "; the startup compute probe is unreadable (" + probe.error().message
                                  + ") and was not used" + threadsNote);
            } else {
                // K processes ran together: the recorded ranks of the host, or a 1-rank run's rank
                // and its partner (trainer_torch.cpp, probeComputeWithPartner).
                const int k = probe->ranksOnHost;
                const std::string who = d.world == 1 ? " processes" : " ranks";
                const std::string together = std::to_string(k) + who + " at once";
                const std::string timed = "the startup probe's forward+backward took " + milliseconds(probe->aloneNs)
                    + " alone and " + milliseconds(probe->togetherNs) + " with " + together;
                const double ratio = static_cast<double>(probe->togetherNs) / static_cast<double>(probe->aloneNs);
                if (d.world > 1 && k != d.world) {
                    p.notes.push_back(unpredicted + "; the startup compute probe ran " + together + " where "
                                      + std::to_string(d.world) + " ranks were recorded on the host, and was not used"
                                      + threadsNote);
                } else if (cfg.worldSize > k) {
                    p.notes.push_back(unpredicted + "; the startup compute probe measured " + together + ", not "
                                      + std::to_string(cfg.worldSize) + threadsNote);
                } else if (ratio < kComputeProbeMinRatio) {
                    p.notes.push_back(unpredicted + "; " + timed
                                      + ": faster together than alone, a disturbed probe, not used" + threadsNote);
                } else {
                    // Sane bounds: together no faster than alone (within noise: the same speed) and
                    // no slower than the K processes taking turns on the host's cores would be.
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
                        note += used == 1.0
                            ? std::string("; together within noise of alone (x") + buf + "): taken as the same speed"
                            : std::string("; together took x") + buf + " the time alone, more than " + std::to_string(k)
                                + who + " taking turns on the cores would (a disturbed probe?): taken as x"
                                + std::to_string(k);
                    }
                    p.notes.push_back(note + threadsNote);
                }
            }
        }
    }
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

    // Buckets: the runtime's assignment (header essay, 2).
    const int64_t wire = wireElemBytes(cfg.compress);
    const std::vector<std::vector<int32_t>> bucketUnits = assignUnits(d.units, cfg);
    std::vector<int64_t> bucketWire;
    for (const auto& units : bucketUnits) {
        int64_t numel = 0;
        for (int32_t u : units)
            numel += d.units[u].numel;
        bucketWire.push_back(numel * wire);
    }
    const size_t nb = bucketUnits.size();
    std::vector<int32_t> bucketOfUnit(d.units.size());
    for (size_t b = 0; b < nb; ++b)
        for (int32_t u : bucketUnits[b])
            bucketOfUnit[u] = static_cast<int32_t>(b);

    const Algorithm alg = algorithmFor(cfg.worldSize, cfg.compress, d.pairwiseAllowed);
    const double k = cfg.computeScale * p.hostComputeFactor;
    const BucketCosts costs = bucketCosts(d.link, alg, cfg.worldSize, bucketWire, k);
    std::vector<TimeNs> emulatedXfer(nb, 0);
    if (cfg.linkGbps > 0)
        for (size_t b = 0; b < nb; ++b)
            emulatedXfer[b] = static_cast<TimeNs>(static_cast<double>(bucketWire[b]) * 8.0 / cfg.linkGbps);
    // The predicted run: the recording's identity, the new configuration, marked predicted.
    Run& out = p.run;
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
        bk.bytes = bucketWire[b];
        for (int32_t u : bucketUnits[b]) {
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
    const int32_t n = cfg.worldSize;
    for (int32_t r = 0; r < n; ++r) {
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
    // The steps replayed: all, or up to the options' number of steady steps.
    size_t stepCount = d.stepIds.size();
    if (options.maxSteadySteps > 0) {
        int32_t steady = 0;
        for (size_t si = 0; si < d.stepIds.size(); ++si)
            if (d.stepIds[si] >= d.config.warmupSteps && ++steady == options.maxSteadySteps) {
                stepCount = si + 1;
                break;
            }
    }
    // Spans and instants are written straight into their final place, lane after lane, in time
    // order, so the run needs no sort (a replayed step keeps its recorded order and follows the
    // previous one): a cursor per lane, starting where the lanes before it end.
    std::vector<size_t> spanCursor(2 * static_cast<size_t>(n)), instantCursor(n);
    {
        std::vector<size_t> computeSpans(d.world, 0), instants(d.world, 0);
        for (size_t si = 0; si < stepCount; ++si)
            for (int32_t b = 0; b < d.world; ++b) {
                const RankStep& x = d.rankSteps[si * static_cast<size_t>(d.world) + b];
                computeSpans[b] += x.before.size() + x.after.size() + 1;
                instants[b] += x.instants.size();
            }
        size_t spans = 0, ins = 0;
        for (int32_t r = 0; r < n; ++r) {
            spanCursor[2 * r] = spans;
            spans += computeSpans[r % d.world];
            spanCursor[2 * r + 1] = spans;
            spans += nb * stepCount;
            instantCursor[r] = ins;
            ins += instants[r % d.world];
        }
        out.spans.resize(spans);
        out.instants.resize(ins);
        out.steps.reserve(static_cast<size_t>(n) * stepCount);
    }

    // Replay, step by step (header essay, 1-6).
    std::vector<TimeNs> prevEnd(n, kNever);      // predicted end of each rank's previous step
    std::vector<TimeNs> launch(static_cast<size_t>(n) * nb), done(launch.size());
    std::vector<TimeNs> stepStart(n), backwardEnd(n);
    const double phi = d.link.computeSlowdown;
    Contention transfers; // the step's predicted transfers, as compute shares the machine with them
    // Wall time of a recorded training-thread instant up to the end of backward, in this replay.
    const auto replayedTs = [&](int32_t r, const RankStep& x, TimeNs ts) {
        return transfers.toWall(k * x.contention.toCompute(ts, x.start, phi), stepStart[r], phi);
    };
    // A recorded duration of the training thread's own work, in this replay (exact when k = 1).
    const auto scaled = [k](TimeNs dt) {
        return k == 1.0 ? dt : static_cast<TimeNs>(std::llround(k * static_cast<double>(dt)));
    };
    for (size_t si = 0; si < stepCount; ++si) {
        const RankStep* rec = &d.rankSteps[si * static_cast<size_t>(d.world)];
        for (int32_t r = 0; r < n; ++r) {
            const RankStep& x = rec[r % d.world];
            TimeNs start = x.start;
            if (prevEnd[r] != kNever) {
                const RankStep& prev = d.rankSteps[(si - 1) * static_cast<size_t>(d.world) + r % d.world];
                start = prevEnd[r] + scaled(x.start - prev.end);
            }
            stepStart[r] = start;
        }
        sweepLink(d.link, phi, k, d.linkStretch[si], rec, d.world, stepStart, bucketUnits, costs, launch, done,
                  transfers);
        for (int32_t r = 0; r < n; ++r)
            backwardEnd[r] = transfers.toWall(k * rec[r % d.world].backwardEndCompute, stepStart[r], phi);
        // The emulated link holds each rank's completion as the runtime does.
        if (cfg.linkGbps > 0)
            for (int32_t r = 0; r < n; ++r) {
                TimeNs pipe = kNever;
                for (size_t b = 0; b < nb; ++b) {
                    pipe = std::max(launch[r * nb + b], pipe) + emulatedXfer[b];
                    done[r * nb + b] = std::max(done[r * nb + b], pipe);
                }
            }
        // The wait, the optimizer, and the timeline of each rank.
        for (int32_t r = 0; r < n; ++r) {
            const RankStep& x = rec[r % d.world];
            TimeNs lastDone = kNever;
            for (size_t b = 0; b < nb; ++b)
                lastDone = std::max(lastDone, done[r * nb + b]);
            const TimeNs waitEnd = std::max(backwardEnd[r], lastDone) + scaled(x.post);
            // After the wait: the recorded times from the recorded wait's end, scaled.
            const auto afterWait = [&](TimeNs ts) { return waitEnd + scaled(ts - x.waitEnd); };
            const LaneId computeLane{static_cast<uint32_t>(2 * r)}, commLane{static_cast<uint32_t>(2 * r + 1)};
            Span* compute = &out.spans[spanCursor[2 * r]];
            for (const Span& s : x.before) {
                *compute = s;
                compute->start = replayedTs(r, x, s.start);
                compute->end = std::max(compute->start, replayedTs(r, x, s.end));
                compute->lane = computeLane;
                ++compute;
            }
            *compute++ = Span{backwardEnd[r], waitEnd, 0, computeLane, d.waitName, x.step, kNoBucket, SpanKind::Wait};
            for (const Span& s : x.after) {
                *compute = s;
                compute->start = afterWait(s.start);
                compute->end = afterWait(s.end);
                compute->lane = computeLane;
                ++compute;
            }
            spanCursor[2 * r] = static_cast<size_t>(compute - out.spans.data());
            for (size_t b = 0; b < nb; ++b) {
                const TimeNs l = launch[r * nb + b];
                out.spans[spanCursor[2 * r + 1]++] = Span{l, std::max(l, done[r * nb + b]), bucketWire[b], commLane,
                                                          commName[b], x.step, static_cast<int32_t>(b), SpanKind::Comm};
            }
            for (Instant in : x.instants) {
                // An instant at the end of backward (its last gradient) belongs to backward.
                in.ts = in.ts <= x.backwardEnd ? replayedTs(r, x, in.ts) : afterWait(in.ts);
                in.lane = computeLane;
                if (in.kind == InstantKind::GradReady && in.name.v < d.unitOfName.size() && d.unitOfName[in.name.v] >= 0)
                    in.bucket = bucketOfUnit[d.unitOfName[in.name.v]];
                out.instants[instantCursor[r]++] = in;
            }
            Step st;
            st.rank = r;
            st.step = x.step;
            st.start = stepStart[r];
            st.end = afterWait(x.end);
            st.loss = x.loss;
            st.samples = x.samples;
            out.steps.push_back(st);
            prevEnd[r] = st.end;
        }
    }
    // Steps were produced step-major; the invariant is rank-major. Spans and instants are in order
    // unless a recording put one inside its own wait (none of ours does): then sort them.
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
    p.numbers = numbersOf(summarize(out), static_cast<int32_t>(nb));
    p.interval = intervalFor(changeKinds(d.recorded, cfg), p.numbers.stepTimeMs, d.noisePct);
    // A change the contention acts on (another layout or world size, a faster or slower compute)
    // is bounded by its prediction without contention too (header essay, 5).
    if (options.boundContention && d.noContention && !(cfg == d.recorded)) {
        WhatIfModel twin;
        twin.m_data = d.noContention;
        auto free = twin.predict(cfg, PredictOptions{.keepTimeline = false, .maxSteadySteps = options.maxSteadySteps});
        if (free) {
            p.noContentionStepMs = free->numbers.stepTimeMs;
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
