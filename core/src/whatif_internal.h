// Pieces the what-if sources share (not installed): the indexed recording (WhatIfModel::Data), the
// link's mechanics both the fit and the replay use (the algorithms' factors, a transfer's time, the
// map between wall time and compute time, the sweep of one step's buckets), and the entry points
// of each file:
//   whatif.cpp         the essay (the model and why), the recording indexed (WhatIfModel::build),
//                      config_extra formats, accessors
//   whatif_fit.cpp     the link and the contention fitted from the recording (fitLink,
//                      recordContention)
//   whatif_replay.cpp  the replay under another configuration (WhatIfModel::predict) and the
//                      link sweep it shares with the fit (sweepLink)
//   whatif_interval.cpp, whatif_advise.cpp, whatif_report.cpp: the interval, advise, text/JSON
#pragma once

#include "lockstep/core/whatif.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::core::whatif_detail {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr TimeNs kNever = std::numeric_limits<TimeNs>::min();
// Gradients are float32 (the runtime's parameters; DDP buckets of float32 models): the caps
// compare float32 sizes whatever travels on the wire.
inline constexpr int64_t kGradElemBytes = 4;

inline int64_t wireElemBytes(std::string_view compress)
{
    return compress == "fp16" || compress == "bf16" ? 2 : kGradElemBytes;
}

enum class Algorithm { Local, Pairwise, Ring, AllGather };

const char* algorithmText(Algorithm a);
Algorithm algorithmFor(int32_t world, std::string_view compress, bool pairwiseAllowed);
// Rounds of latency and bytes each rank sends per bucket byte (whatif.cpp essay, "Communication").
double roundsOf(Algorithm a, int32_t n);
double bytesFactorOf(Algorithm a, int32_t n);

// How long a transfer of `bytes` takes when the last gradient of its step is ready `busyFor` ns
// after it starts: the latency, then the bytes at the busy rate while backward lasts and at the
// idle rate after; `stretch` scales all of it (the step's own link speed, see fitLink).
double transferNs(const LinkFit& l, double latency, double bytes, double busyFor, double stretch);

// The transfers of a step in wall time (one link: in order, none overlapping the next) and the two
// maps they imply between a rank's wall time and its compute time (essay, 5): while a transfer
// runs, compute advances at (1 - phi) per ns of wall time, otherwise at 1. Compute time is counted
// from the rank's step start (`origin`); every transfer starts after it (a collective starts after
// every rank launched it).
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

inline std::string microseconds(double ns)
{
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
    return buf;
}

inline std::string milliseconds(int64_t ns)
{
    char buf[32];
    const double v = static_cast<double>(ns) / 1e6;
    std::snprintf(buf, sizeof buf, v < 10 ? "%.2f ms" : v < 100 ? "%.1f ms" : "%.0f ms", v);
    return buf;
}

// An indivisible piece of the gradient that the caps group: one parameter, or one recorded
// bucket when parameter sizes were not recorded.
struct Unit {
    std::vector<StringId> names; // parameter names (the model's string table)
    int64_t numel = 0;
};

// The runtime's bucket assignment (essay, 2): units in packing order, a bucket closes as soon as
// its float32 size reaches the cap (the first bucket's cap for bucket 0).
std::vector<std::vector<int32_t>> assignUnits(const std::vector<Unit>& units, const WhatIfConfig& cfg);

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

// What each bucket of a layout costs on the link (essay, 2 and 3): the bytes each rank sends (0
// when the link is not fitted), the launch cost on the training thread (its own work: times the
// compute scale), and the latency.
struct BucketCosts {
    std::vector<double> work;
    std::vector<TimeNs> launchCost;
    double latency = 0;
};
BucketCosts bucketCosts(const LinkFit& link, Algorithm alg, int32_t n, const std::vector<int64_t>& bucketWire,
                        double computeScale);

// The link over one step (essay, 2, 3 and 5), bucket after bucket (whatif_replay.cpp says how).
// Writes the launches, the completions (the same on every rank) and the transfers.
void sweepLink(const LinkFit& link, double phi, double scale, double stretch, const RankStep* rec, int32_t world,
               const std::vector<TimeNs>& stepStart, const std::vector<std::vector<int32_t>>& bucketUnits,
               const BucketCosts& costs, std::vector<TimeNs>& launch, std::vector<TimeNs>& done, Contention& transfers);

// The one place the model reads the analysis' summary: keep the dependence narrow.
inline WhatIfNumbers numbersOf(const RunSummary& s, int32_t buckets)
{
    WhatIfNumbers n;
    n.stepTimeMs = s.stepTimeMs;
    n.overlapRatio = s.overlapRatio;
    n.exposedCommMs = s.exposedCommMs;
    n.commMs = s.commMs;
    n.throughput = s.throughput;
    n.buckets = buckets;
    return n;
}

} // namespace lockstep::core::whatif_detail

namespace lockstep::core {

struct WhatIfModel::Data {
    using RankStep = whatif_detail::RankStep;
    using Unit = whatif_detail::Unit;
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
    // contention (essay, 5); null when the fit found none.
    std::shared_ptr<const Data> noContention;
};

namespace whatif_detail {

// whatif_fit.cpp: the link and the launch cost from the recorded steps (essay, 3 and 4), then the
// recorded configuration's transfers and compute time per (rank, step) (essay, 5).
void fitLink(WhatIfModel::Data& d, const Run& run);
void recordContention(WhatIfModel::Data& d);

} // namespace whatif_detail

} // namespace lockstep::core
