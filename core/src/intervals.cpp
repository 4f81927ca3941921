// The interval algebra (see intervals.h). Every function walks sorted sets with pointers; none
// sorts except unionClipped/mergeInPlace, whose input may be in any order.
#include "lockstep/core/intervals.h"

#include <algorithm>
#include <array>
#include <limits>

namespace lockstep::core {

namespace {
// First interval of a set that ends after t (ends of a set are sorted too).
size_t firstEndingAfter(std::span<const Interval> set, TimeNs t)
{
    return static_cast<size_t>(
        std::upper_bound(set.begin(), set.end(), t, [](TimeNs v, const Interval& i) { return v < i.end; })
        - set.begin());
}
} // namespace

void appendMerged(std::vector<Interval>& set, TimeNs start, TimeNs end)
{
    if (end <= start)
        return;
    if (!set.empty() && start <= set.back().end) {
        set.back().end = std::max(set.back().end, end);
        return;
    }
    set.push_back({start, end});
}

void mergeInPlace(std::vector<Interval>& v)
{
    std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
    size_t out = 0;
    for (const Interval& i : v) {
        if (i.end <= i.start)
            continue;
        if (out > 0 && i.start <= v[out - 1].end)
            v[out - 1].end = std::max(v[out - 1].end, i.end);
        else
            v[out++] = i;
    }
    v.resize(out);
}

std::vector<Interval> unionClipped(std::vector<Interval> intervals, TimeNs lo, TimeNs hi)
{
    for (Interval& i : intervals) {
        i.start = std::max(i.start, lo);
        i.end = std::min(i.end, hi);
    }
    mergeInPlace(intervals);
    return intervals;
}

TimeNs totalLength(std::span<const Interval> set)
{
    TimeNs total = 0;
    for (const Interval& i : set)
        total += i.end - i.start;
    return total;
}

TimeNs lengthWithin(std::span<const Interval> set, TimeNs lo, TimeNs hi)
{
    TimeNs total = 0;
    for (size_t i = firstEndingAfter(set, lo); i < set.size() && set[i].start < hi; ++i)
        total += std::min(set[i].end, hi) - std::max(set[i].start, lo);
    return total;
}

TimeNs intersectionLength(std::span<const Interval> a, std::span<const Interval> b)
{
    TimeNs total = 0;
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const TimeNs lo = std::max(a[i].start, b[j].start);
        const TimeNs hi = std::min(a[i].end, b[j].end);
        if (hi > lo)
            total += hi - lo;
        if (a[i].end < b[j].end)
            ++i;
        else
            ++j;
    }
    return total;
}

std::vector<Interval> intersectIntervals(std::span<const Interval> a, std::span<const Interval> b)
{
    std::vector<Interval> out;
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const TimeNs lo = std::max(a[i].start, b[j].start);
        const TimeNs hi = std::min(a[i].end, b[j].end);
        if (lo < hi)
            out.push_back({lo, hi});
        if (a[i].end < b[j].end)
            ++i;
        else
            ++j;
    }
    return out;
}

std::vector<Interval> subtractIntervals(std::span<const Interval> a, std::span<const Interval> b)
{
    std::vector<Interval> out;
    size_t j = 0;
    for (const Interval& x : a) {
        TimeNs cur = x.start;
        while (j < b.size() && b[j].end <= cur)
            ++j;
        for (size_t k = j; k < b.size() && b[k].start < x.end; ++k) {
            if (b[k].start > cur)
                out.push_back({cur, b[k].start});
            cur = std::max(cur, b[k].end);
            if (cur >= x.end)
                break;
        }
        if (cur < x.end)
            out.push_back({cur, x.end});
    }
    return out;
}

std::vector<Interval> clipTo(std::span<const Interval> set, TimeNs lo, TimeNs hi)
{
    std::vector<Interval> out;
    for (size_t i = firstEndingAfter(set, lo); i < set.size() && set[i].start < hi; ++i)
        out.push_back({std::max(set[i].start, lo), std::min(set[i].end, hi)});
    return out;
}

// One sweep over the boundaries of the three sets inside [lo, hi): between two consecutive
// boundaries membership in C, M and Mem is constant, so each elementary piece adds its length
// to one of eight bins (a 3-bit mask). The parts are sums of bins, which is why they add up to
// |W| by construction. Cost: the number of intervals inside the window, after one binary
// search per set.
WindowParts windowParts(std::span<const Interval> compute, std::span<const Interval> comm,
                        std::span<const Interval> memory, TimeNs lo, TimeNs hi)
{
    WindowParts p;
    if (hi <= lo)
        return p;
    p.wall = hi - lo;
    const std::array<std::span<const Interval>, 3> sets{compute, comm, memory};
    std::array<size_t, 3> at{};
    for (size_t k = 0; k < 3; ++k)
        at[k] = firstEndingAfter(sets[k], lo);
    std::array<TimeNs, 8> bins{};
    TimeNs t = lo;
    while (t < hi) {
        unsigned mask = 0;
        TimeNs next = hi;
        for (size_t k = 0; k < 3; ++k) {
            const std::span<const Interval> s = sets[k];
            while (at[k] < s.size() && s[at[k]].end <= t)
                ++at[k];
            if (at[k] == s.size())
                continue;
            if (s[at[k]].start <= t) {
                mask |= 1u << k;
                next = std::min(next, s[at[k]].end);
            } else {
                next = std::min(next, s[at[k]].start);
            }
        }
        bins[mask] += next - t;
        t = next;
    }
    constexpr unsigned kC = 1, kM = 2, kMem = 4;
    for (unsigned mask = 0; mask < 8; ++mask) {
        const TimeNs v = bins[mask];
        if (mask & kC)
            p.compute += v;
        if (mask & kM)
            p.communication += v;
        if (mask & kMem)
            p.memory += v;
        if ((mask & kC) && (mask & kM))
            p.overlapped += v;
        else if (mask & kC)
            p.computeOnly += v;
        else if (mask & kM)
            p.exposed += v;
        else if (mask & kMem)
            p.memoryOnly += v;
        else
            p.idle += v;
    }
    return p;
}

} // namespace lockstep::core
