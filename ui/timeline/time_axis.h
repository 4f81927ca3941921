// Time ruler arithmetic: "nice" tick spacing (1-2-5 series) and human units (ns, µs, ms, s).
// Plain functions so the ruler, the tooltips and the details panel print times alike.
#pragma once

#include "lockstep/core/types.h"

#include <QString>

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

// "12.5 ms", "830 ns", "-1.2 s". `precision` = significant decimals kept (trailing zeros cut).
QString formatDuration(double ns, int precision = 3);
// A ruler label: the unit follows the tick step so labels of one ruler share a unit.
QString formatTickLabel(core::TimeNs t, core::TimeNs tickStep);
QString formatBytes(double bytes);
QString formatBandwidth(double gbPerSecond);

} // namespace lockstep::ui
