// Ruler ticks and unit formatting (see time_axis.h).
#include "time_axis.h"

#include <cmath>

namespace lockstep::ui {

core::TimeNs niceTickStep(double rawStep)
{
    if (!(rawStep > 1.0))
        return 1;
    const double p = std::pow(10.0, std::floor(std::log10(rawStep)));
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        if (m * p >= rawStep * (1 - 1e-9))
            return static_cast<core::TimeNs>(std::llround(m * p));
    }
    return static_cast<core::TimeNs>(std::llround(10 * p));
}

std::vector<Tick> rulerTicks(core::TimeNs t0, core::TimeNs t1, double nsPerPixel, double minPixels,
                             core::TimeNs* stepOut)
{
    std::vector<Tick> ticks;
    if (t1 <= t0 || !(nsPerPixel > 0))
        return ticks;
    const core::TimeNs step = niceTickStep(nsPerPixel * minPixels);
    if (stepOut)
        *stepOut = step;
    // Major (labelled) ticks sit on multiples of 5 * step, so labels are at least
    // 5 * minPixels apart and never crowd, whatever the leading digit of the step.
    const core::TimeNs majorEvery = step * 5;
    core::TimeNs first = (t0 / step) * step;
    if (first < t0)
        first += step;
    // Guard against absurd counts (a ruler is at most a few thousand pixels wide).
    for (core::TimeNs t = first; t <= t1 && ticks.size() < 20000; t += step)
        ticks.push_back(Tick{t, t % majorEvery == 0});
    return ticks;
}

} // namespace lockstep::ui
