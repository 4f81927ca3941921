// Clock alignment of ranks: clock_sync.h has the rule and its reasons.
#include "lockstep/core/clock_sync.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace lockstep::core {

TimeNs halfRoundTrip(TimeNs rttNs) { return rttNs <= 0 ? 0 : (rttNs + 1) / 2; }

std::optional<ClockEstimate> bestClockExchange(std::span<const ClockExchange> exchanges)
{
    std::optional<ClockEstimate> best;
    for (const ClockExchange& e : exchanges) {
        const TimeNs rtt = e.receivedNs - e.sentNs;
        if (rtt < 0)
            continue;
        if (best && rtt >= best->rttNs) // strict: ties keep the earliest
            continue;
        // sent + rtt / 2 without overflow: the midpoint of the exchange in our clock.
        const TimeNs mid = e.sentNs + rtt / 2;
        best = ClockEstimate{e.remoteNs - mid, rtt, halfRoundTrip(rtt), e.sentNs};
    }
    return best;
}

std::string readBootId()
{
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (!in || !std::getline(in, id))
        return {};
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ' || id.back() == '\r'))
        id.pop_back();
    return id;
}

namespace {
bool measured(const RankInfo& r) { return r.clockSyncStartNs != 0 || r.clockRttNs != 0 || r.clockOffsetNs != 0; }

void shareRankZerosClock(RankInfo& r, ClockBasis basis)
{
    r.clockBasis = basis;
    r.clockOffsetNs = r.clockOffsetEndNs = 0;
    r.clockSyncStartNs = r.clockSyncEndNs = 0;
    r.clockUncertaintyNs = 0;
}

std::string formatMs(TimeNs ns)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) * 1e-6);
    return buf;
}
} // namespace

ClockAlignment alignClocks(std::vector<RankInfo>& ranks, bool bootIdsRecorded)
{
    ClockAlignment out;
    const auto zero = std::find_if(ranks.begin(), ranks.end(), [](const RankInfo& r) { return r.rank == 0; });
    const std::string zeroBoot = zero == ranks.end() ? std::string() : zero->bootId;
    // Old files: every rank names one (non-empty) host.
    bool oneHostName = !bootIdsRecorded && ranks.size() > 1 && !ranks.front().host.empty();
    for (const RankInfo& r : ranks)
        oneHostName = oneHostName && r.host == ranks.front().host;
    TimeNs lo = 0, hi = 0, rtt = 0;
    bool anyIgnored = false;
    for (RankInfo& r : ranks) {
        if (r.rank == 0) {
            shareRankZerosClock(r, ClockBasis::Reference);
            continue;
        }
        if (!zeroBoot.empty() && r.bootId == zeroBoot) {
            shareRankZerosClock(r, ClockBasis::SameBoot);
            continue;
        }
        if (oneHostName) {
            if (measured(r)) {
                const TimeNs a = std::min(r.clockOffsetNs, r.clockOffsetEndNs), b = std::max(r.clockOffsetNs, r.clockOffsetEndNs);
                lo = anyIgnored ? std::min(lo, a) : a;
                hi = anyIgnored ? std::max(hi, b) : b;
                rtt = std::max(rtt, r.clockRttNs);
                anyIgnored = true;
            }
            shareRankZerosClock(r, ClockBasis::SameHostName);
            continue;
        }
        if (!measured(r)) {
            r.clockBasis = ClockBasis::NotMeasured;
            continue;
        }
        r.clockBasis = ClockBasis::Measured;
        r.clockUncertaintyNs = std::max(r.clockUncertaintyNs, halfRoundTrip(r.clockRttNs));
        out.anyMeasured = true;
    }
    if (oneHostName) {
        out.assumedFromHostNames = true;
        out.note = "the file records no boot ids (written before schema 4) and every rank names host '"
            + ranks.front().host + "': taken as one host sharing one clock, offset 0";
        if (anyIgnored)
            out.note += "; the stored offsets (" + formatMs(lo) + " to " + formatMs(hi) + ", round trip up to "
                + formatMs(rtt) + ") were not applied";
    }
    return out;
}

TimeNs pairClockUncertainty(const RankInfo& a, const RankInfo& b)
{
    return a.clockUncertaintyNs + b.clockUncertaintyNs;
}

const char* clockBasisName(ClockBasis basis)
{
    switch (basis) {
    case ClockBasis::Measured:
        return "measured";
    case ClockBasis::Reference:
        return "rank 0";
    case ClockBasis::SameBoot:
        return "same boot";
    case ClockBasis::SameHostName:
        return "same host name";
    case ClockBasis::NotMeasured:
        break;
    }
    return "not measured";
}

} // namespace lockstep::core
