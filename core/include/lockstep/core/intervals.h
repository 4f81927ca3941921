// The one interval algebra every metric is built on: unions, intersections and differences of
// time intervals, and the split of a window into docs/design.md's five parts. Half-open [start, end)
// intervals of TimeNs; a "set" is a vector of intervals sorted by start, disjoint and not
// touching (what unionClipped and appendMerged produce). Pure functions, no allocation beyond
// their results.
#pragma once

#include "lockstep/core/types.h"

#include <span>
#include <vector>

namespace lockstep::core {

struct Interval {
    TimeNs start = 0;
    TimeNs end = 0;
    friend bool operator==(const Interval&, const Interval&) = default;
};

// Appends [start, end) to a set being built from intervals that arrive sorted by start, merging
// it into the last interval when they touch or overlap. Empty or inverted intervals are dropped.
void appendMerged(std::vector<Interval>& set, TimeNs start, TimeNs end);
// The union of any intervals (any order, overlapping), each clipped to [lo, hi).
std::vector<Interval> unionClipped(std::vector<Interval> intervals, TimeNs lo, TimeNs hi);
// Sorts and merges in place: any list of intervals becomes a set.
void mergeInPlace(std::vector<Interval>& intervals);

TimeNs totalLength(std::span<const Interval> set);
// |set ∩ [lo, hi)|: binary search to the first interval ending after lo, then a walk.
TimeNs lengthWithin(std::span<const Interval> set, TimeNs lo, TimeNs hi);
// |a ∩ b| for two sets.
TimeNs intersectionLength(std::span<const Interval> a, std::span<const Interval> b);
// a ∩ b and a \ b as sets (two-pointer sweeps).
std::vector<Interval> intersectIntervals(std::span<const Interval> a, std::span<const Interval> b);
std::vector<Interval> subtractIntervals(std::span<const Interval> a, std::span<const Interval> b);
// The parts of `set` inside [lo, hi), clipped.
std::vector<Interval> clipTo(std::span<const Interval> set, TimeNs lo, TimeNs hi);

// docs/design.md's split of a window W = [lo, hi) given C (compute), M (communication) and Mem
// (memory operations), three sets: every instant of W is in exactly one of compute-only
// (C \ M), overlapped (C ∩ M), exposed (M \ C), memory-only (Mem \ (C ∪ M)) or idle, so the five
// parts add up to |W| exactly. The totals |C|, |M|, |Mem| (inside W) come with them.
struct WindowParts {
    TimeNs wall = 0;          // |W|
    TimeNs compute = 0;       // |C|
    TimeNs communication = 0; // |M|
    TimeNs memory = 0;        // |Mem|
    TimeNs computeOnly = 0;   // |C \ M|
    TimeNs overlapped = 0;    // |C ∩ M|
    TimeNs exposed = 0;       // |M \ C|
    TimeNs memoryOnly = 0;    // |Mem \ (C ∪ M)|
    TimeNs idle = 0;          // |W| - |C ∪ M ∪ Mem|
};
WindowParts windowParts(std::span<const Interval> compute, std::span<const Interval> comm,
                        std::span<const Interval> memory, TimeNs lo, TimeNs hi);

} // namespace lockstep::core
