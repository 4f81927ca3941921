// Names of enums as stored in the database, string interning, clock correction, run ordering.
#include "lockstep/core/types.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>
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

namespace {

// The stable sort of `v` by (lane, then `within`), done as a stable counting sort by lane and a
// stable sort of only the lanes that are not in order yet: the same order as one stable_sort by
// the whole key, in O(n) for what usually comes (a file's spans, lanes interleaved, each in
// order; a run already sorted costs one pass). Lane ids far above the element count (not a
// run's own numbering) take the plain stable_sort.
template <class T, class Within>
void stableSortByLane(std::vector<T>& v, Within within)
{
    const auto less = [&](const T& a, const T& b) {
        return a.lane.v != b.lane.v ? a.lane.v < b.lane.v : within(a, b);
    };
    if (std::is_sorted(v.begin(), v.end(), less))
        return;
    uint32_t maxLane = 0;
    for (const T& x : v)
        maxLane = std::max(maxLane, x.lane.v);
    if (maxLane > 4 * v.size() + 1024) {
        std::stable_sort(v.begin(), v.end(), less);
        return;
    }
    std::vector<size_t> first(size_t{maxLane} + 2, 0);
    for (const T& x : v)
        ++first[size_t{x.lane.v} + 1];
    for (size_t l = 1; l < first.size(); ++l)
        first[l] += first[l - 1];
    std::vector<T> sorted(v.size());
    std::vector<size_t> next(first.begin(), first.end() - 1);
    for (const T& x : v)
        sorted[next[x.lane.v]++] = x;
    for (size_t l = 0; l + 1 < first.size(); ++l) {
        const auto b = sorted.begin() + static_cast<std::ptrdiff_t>(first[l]);
        const auto e = sorted.begin() + static_cast<std::ptrdiff_t>(first[l + 1]);
        if (!std::is_sorted(b, e, within))
            std::stable_sort(b, e, within);
    }
    v.swap(sorted);
}

} // namespace

void Run::normalize()
{
    stableSortByLane(spans, [](const Span& a, const Span& b) { return std::tie(a.start, a.end) < std::tie(b.start, b.end); });
    stableSortByLane(instants, [](const Instant& a, const Instant& b) { return a.ts < b.ts; });
    std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
        return std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
    });
    std::sort(buckets.begin(), buckets.end(),
              [](const Bucket& a, const Bucket& b) { return a.index < b.index; });
    std::sort(ranks.begin(), ranks.end(),
              [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
}

} // namespace lockstep::core
