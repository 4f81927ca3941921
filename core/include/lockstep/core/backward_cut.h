// The rule that turns a backward pass into per-module Backward spans, declared once for every
// recorder that sees gradient-ready instants: the LibTorch runtime's (instrumentation/) and the
// PyTorch recorder's (python/). Pure function, no allocation beyond its result.
#pragma once

#include "lockstep/core/types.h"

#include <span>
#include <vector>

namespace lockstep::core {

// A segment of backward with no module to charge: a backward pass that readied no gradient.
inline constexpr int32_t kNoStage = -1;

// A gradient became ready at `ts`; its parameter belongs to module (stage) `stage`.
struct GradientReady {
    TimeNs ts = 0;
    int32_t stage = 0;
};

// [start, end) of backward charged to `stage` (kNoStage: to backward as a whole).
struct BackwardSegment {
    TimeNs start = 0;
    TimeNs end = 0;
    int32_t stage = kNoStage;
    friend bool operator==(const BackwardSegment&, const BackwardSegment&) = default;
};

// Backward is cut into per-module segments at gradient-ready instants. Autograd readies
// gradients roughly last layer first, and the time from the previous cut up to a module's
// gradient being ready is what computing that gradient cost, so it is charged to that module.
//  - Consecutive gradients of one module merge into one segment; a module whose gradients
//    arrive interleaved with another's gets several segments.
//  - The first segment starts at `start`, when backward was called: the loss's own backward is
//    charged to the module whose gradient comes first (the head).
//  - The last segment runs to max(last gradient, `end`): a recorder that knows when the engine
//    finished backward (the PyTorch recorder) passes that, so the tail after the last gradient
//    (the first layer's input gradients, the engine's own exit) is charged to the last module;
//    one that does not (the runtime) passes its last gradient's instant.
//  - Cuts never move back in time: a gradient stamped before the previous cut ends its segment
//    there (zero length), and every segment has end >= start.
//  - No gradient at all: one segment [start, max(start, end)) with stage kNoStage.
// `gradients` must be in time order (the caller sorts, if its stamps can arrive out of order).
std::vector<BackwardSegment> cutBackward(TimeNs start, std::span<const GradientReady> gradients, TimeNs end);

} // namespace lockstep::core
