// Time ruler arithmetic: "nice" tick spacing (1-2-5 series) and where the ticks fall. Their
// labels are written by format.h's formatTickLabel.
#pragma once

#include "lockstep/core/types.h"

#include <vector>

namespace lockstep::ui {

// Smallest 1-2-5 multiple of a power of ten that is >= rawStep (ns). rawStep <= 0 gives 1.
core::TimeNs niceTickStep(double rawStep);

struct Tick {
    core::TimeNs t = 0;
    bool major = false;
};
// Ticks in [t0, t1] spaced so that neighbours are at least minPixels apart at nsPerPixel.
// Every fifth (or second, for a 2-step) tick is major and carries a label.
std::vector<Tick> rulerTicks(core::TimeNs t0, core::TimeNs t1, double nsPerPixel, double minPixels,
                             core::TimeNs* stepOut = nullptr);

} // namespace lockstep::ui
