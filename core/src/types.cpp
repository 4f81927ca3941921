// Names of enums as stored in the database, string interning, clock correction, run ordering.
#include "lockstep/core/types.h"

#include <algorithm>
#include <array>
#include <tuple>

namespace lockstep::core {

StringTable::StringTable()
{
    intern("");
}

StringId StringTable::intern(std::string_view text)
{
    auto it = m_index.find(std::string(text));
    if (it != m_index.end())
        return StringId{it->second};
    const auto id = static_cast<uint32_t>(m_texts.size());
    m_texts.emplace_back(text);
    m_index.emplace(m_texts.back(), id);
    return StringId{id};
}

const std::string& StringTable::text(StringId id) const
{
    static const std::string kUnknown = "?";
    return id.v < m_texts.size() ? m_texts[id.v] : kUnknown;
}

namespace {
constexpr std::array<const char*, kSpanKindCount> kSpanKindNames = {
    "data", "forward", "backward", "optimizer", "comm", "wait",
    "kernel", "comm_kernel", "memcpy", "memset", "cpu_op", "other"};
constexpr std::array<const char*, 4> kLaneKindNames = {"compute", "comm", "gpu_stream", "host_thread"};
constexpr std::array<const char*, 3> kRunStatusNames = {"running", "completed", "failed"};
constexpr std::array<const char*, 3> kSeverityNames = {"info", "warning", "error"};

template <class Enum, size_t N>
bool fromName(const std::array<const char*, N>& names, std::string_view name, Enum* out)
{
    for (size_t i = 0; i < N; ++i) {
        if (name == names[i]) {
            *out = static_cast<Enum>(i);
            return true;
        }
    }
    return false;
}
template <size_t N>
const char* toName(const std::array<const char*, N>& names, size_t i)
{
    return i < N ? names[i] : "unknown";
}
} // namespace

const char* spanKindName(SpanKind k) { return toName(kSpanKindNames, static_cast<size_t>(k)); }
bool spanKindFromName(std::string_view n, SpanKind* out) { return fromName(kSpanKindNames, n, out); }
const char* laneKindName(LaneKind k) { return toName(kLaneKindNames, static_cast<size_t>(k)); }
bool laneKindFromName(std::string_view n, LaneKind* out) { return fromName(kLaneKindNames, n, out); }
const char* runStatusName(RunStatus s) { return toName(kRunStatusNames, static_cast<size_t>(s)); }
bool runStatusFromName(std::string_view n, RunStatus* out) { return fromName(kRunStatusNames, n, out); }
const char* severityName(Severity s) { return toName(kSeverityNames, static_cast<size_t>(s)); }
bool severityFromName(std::string_view n, Severity* out) { return fromName(kSeverityNames, n, out); }

// Linear interpolation of the offset between the start and end measurements models constant
// drift between the two clocks; before the first or after the last sample the nearer holds.
TimeNs RankInfo::correct(TimeNs local) const
{
    if (clockSyncEndNs <= clockSyncStartNs || clockSyncStartNs == 0)
        return local + clockOffsetNs;
    if (local <= clockSyncStartNs)
        return local + clockOffsetNs;
    if (local >= clockSyncEndNs)
        return local + clockOffsetEndNs;
    const long double f = static_cast<long double>(local - clockSyncStartNs)
        / static_cast<long double>(clockSyncEndNs - clockSyncStartNs);
    return local + clockOffsetNs
        + static_cast<TimeNs>(f * static_cast<long double>(clockOffsetEndNs - clockOffsetNs));
}

std::pair<size_t, size_t> Run::laneSpanRange(LaneId lane) const
{
    auto lo = std::lower_bound(spans.begin(), spans.end(), lane.v,
                               [](const Span& s, uint32_t l) { return s.lane.v < l; });
    auto hi = std::upper_bound(lo, spans.end(), lane.v,
                               [](uint32_t l, const Span& s) { return l < s.lane.v; });
    return {static_cast<size_t>(lo - spans.begin()), static_cast<size_t>(hi - spans.begin())};
}

void Run::normalize()
{
    std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
        return std::tie(a.lane.v, a.start, a.end) < std::tie(b.lane.v, b.start, b.end);
    });
    std::stable_sort(instants.begin(), instants.end(), [](const Instant& a, const Instant& b) {
        return std::tie(a.lane.v, a.ts) < std::tie(b.lane.v, b.ts);
    });
    std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
        return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
    });
    std::sort(buckets.begin(), buckets.end(),
              [](const Bucket& a, const Bucket& b) { return a.index < b.index; });
    std::sort(ranks.begin(), ranks.end(),
              [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
}

} // namespace lockstep::core
