// Clock alignment of ranks (docs/design.md "Time and clocks"): pure functions shared by the
// recorders (which exchange pings and keep the best) and the reader (which decides whose offset
// applies).
//
// The rule. Ranks whose kernels share a boot id read one CLOCK_REALTIME: their offset is 0 and
// its uncertainty 0, whatever an exchange measured (an exchange can only add error: a store-based
// ping-pong from Python measured 10 ms round trips and 0.4-4.7 ms "offsets" between processes of
// one host). Ranks on other hosts take the offset of the exchange with the smallest round trip
// out of many; the offset is right within half that round trip (the reply was read somewhere
// between the ping's send and the pong's receipt), and that half is stored as its uncertainty.
// Files written before boot ids were recorded (schema < 4) fall back to host names: when every
// rank names the same host they are taken as one host, and the run's diagnostics say so.
#pragma once

#include "lockstep/core/types.h"

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace lockstep::core {

// One ping-pong with the reference rank: this rank's clock when it sent the ping, the
// reference's clock when it answered, this rank's clock when the answer arrived.
struct ClockExchange {
    TimeNs sentNs = 0;
    TimeNs remoteNs = 0;
    TimeNs receivedNs = 0;
};

struct ClockEstimate {
    TimeNs offsetNs = 0;      // reference clock - this clock
    TimeNs rttNs = 0;         // round trip of the kept exchange
    TimeNs uncertaintyNs = 0; // |error of offsetNs| <= this: half the round trip, rounded up
    TimeNs atNs = 0;          // this clock when the kept exchange was sent
};

// The exchange with the smallest round trip (ties: the earliest), as an estimate. If both legs
// took equal time the reference read its clock at (sent + received) / 2 of ours; whatever the
// legs took, it read it inside [sent, received], so the error is at most half the round trip.
// Exchanges whose answer arrived before the ping left (a clock stepped backwards) are skipped;
// nullopt when none is left.
std::optional<ClockEstimate> bestClockExchange(std::span<const ClockExchange> exchanges);

// The half round trip bound, rounded up (a 1 ns round trip is uncertain by 1 ns, not 0).
TimeNs halfRoundTrip(TimeNs rttNs);

// This machine's kernel boot id (/proc/sys/kernel/random/boot_id, without the newline); "" when
// it cannot be read (not Linux, /proc not mounted).
std::string readBootId();

struct ClockAlignment {
    bool anyMeasured = false;       // some rank kept a measured offset (ranks on other hosts)
    bool assumedFromHostNames = false; // a file without boot ids: one host name taken as one clock
    std::string note;               // for the diagnostic when assumedFromHostNames
};

// Applies the rule to a run's ranks (in place): sets each rank's clockBasis; a rank that shares
// rank 0's clock gets zero offsets and zero uncertainty (so RankInfo::correct leaves its times
// alone); a measured rank keeps its offsets and gets an uncertainty of at least half its round
// trip. `bootIdsRecorded` is false for files older than boot ids (schema < 4): only then do host
// names stand in for them.
ClockAlignment alignClocks(std::vector<RankInfo>& ranks, bool bootIdsRecorded);

// How far two ranks' corrected times may disagree because of the clocks alone: the sum of their
// uncertainties against rank 0 (0 between ranks that share rank 0's clock).
TimeNs pairClockUncertainty(const RankInfo& a, const RankInfo& b);

} // namespace lockstep::core
