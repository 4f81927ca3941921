// A run's overview: each lane's spans folded to a few hundred items, stored in the run file with
// its analysis (summary_store.h, part "overview") so that the app draws a whole big run's timeline
// before, or instead of, loading its spans (issue 31).
//
// The items of a lane are one of its LaneLod's pre-folded levels (lod.h): the finest at which the
// whole run has at most kOverviewItemBudget items (and each lane at least kOverviewMinLaneItems,
// or all of its spans). Folding is idempotent (lod.cpp): a timeline query at a threshold at least
// the lane's `gap` gives, from the items, exactly what it gives from the spans. So the overview is
// not an approximation where the view is zoomed out that far (an item cut by the view's edge may
// count spans beyond it, as the LOD's own levels do); zoomed in further, its items are drawn as
// what they are (a folded item says how many spans it stands for) until, or unless, the spans are
// loaded.
#pragma once

#include "lockstep/core/lod.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/types.h"

#include <stop_token>
#include <vector>

namespace lockstep::core {

// What a lane holds: the timeline orders lanes by it and folds nearly idle GPU streams by it.
struct LaneWork {
    int64_t spans = 0;
    TimeNs busyNs = 0;         // the sum of its spans' durations
    bool communicates = false; // it carries a communication span
};
LaneWork laneWork(const Run& run, LaneId lane);

struct OverviewItem {
    TimeNs start = 0;
    TimeNs end = 0;
    TimeNs maxDuration = 0; // the longest span it stands for
    uint32_t count = 1;     // the spans it stands for
    uint32_t row = 0;       // the lane's sub-row
    // Its first span's (the whole item's when count is 1): what the timeline colours and names.
    int64_t bytes = 0;
    StringId name;
    int32_t step = kNoStep;
    int32_t bucket = kNoBucket;
    SpanKind kind = SpanKind::Other;
};

struct LaneOverview {
    LaneWork work;
    uint32_t rows = 1; // the lane's sub-rows (LaneLod::rowCount)
    TimeNs gap = 0;    // the items were folded at this gap (0: they are the spans)
    std::vector<OverviewItem> items; // sorted by start
};

struct RunOverview {
    std::vector<LaneOverview> lanes; // by lane id
    size_t items() const;
};

inline constexpr size_t kOverviewItemBudget = size_t{1} << 20;
inline constexpr size_t kOverviewMinLaneItems = 512;

// The overview of a loaded, normalized run (one lane's LOD at a time: memory follows the largest
// lane). Empty when `stop` is requested.
RunOverview buildRunOverview(const Run& run, std::stop_token stop = {}, size_t budget = kOverviewItemBudget);

// Spans streamed in for a window of some lanes (RunReader::laneSpans): where they are, the
// timeline draws them instead of the overview's items, exact at any zoom.
struct OverviewDetail {
    // Per lane, the range detailRange() gave; and its spans starting there, in load()'s order.
    std::vector<RunReader::LaneWindow> windows;
    std::vector<std::vector<Span>> spans; // parallel to windows
};

// The range of `lane` whose items a view of [t0, t1) replaces with spans: [t0, t1) and the items
// that reach into it, widened until no item of any sub-row straddles either edge. The spans
// starting in it are exactly those the items in it stand for.
RunReader::LaneWindow detailRange(const LaneOverview& lane, LaneId id, TimeNs t0, TimeNs t1);

// Gives `run` (its small tables loaded, no spans) one span per overview item, lane by lane, and
// `folded` (parallel to run.spans) what each stands for, for RunLod(run, folded). With `detail`,
// the items inside each of its windows are replaced by its spans (each standing for itself, in
// the sub-row the lane's packing gives it: lod.cpp's first fit, resumed from the rows' ends the
// items before the window leave). False, leaving both unchanged, when the overview or the detail
// does not fit the run (another lane count, a name the run's strings do not have, items out of
// order, a window that cuts an item): a damaged or foreign part is never drawn.
bool overviewRun(const RunOverview& overview, Run& run, std::vector<DrawItem>& folded,
                 const OverviewDetail* detail = nullptr);

} // namespace lockstep::core
