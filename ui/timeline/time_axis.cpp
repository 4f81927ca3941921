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

namespace {
struct Unit {
    double scale;
    const char* name;
};
Unit unitFor(double magnitudeNs)
{
    const double a = std::fabs(magnitudeNs);
    if (a >= 1e9)
        return {1e9, "s"};
    if (a >= 1e6)
        return {1e6, "ms"};
    if (a >= 1e3)
        return {1e3, "µs"};
    return {1, "ns"};
}
QString trimmed(double v, int precision)
{
    QString s = QString::number(v, 'f', precision);
    if (s.contains(QLatin1Char('.'))) {
        while (s.endsWith(QLatin1Char('0')))
            s.chop(1);
        if (s.endsWith(QLatin1Char('.')))
            s.chop(1);
    }
    if (s == QLatin1String("-0"))
        s = QStringLiteral("0");
    return s;
}
} // namespace

QString formatDuration(double ns, int precision)
{
    const Unit u = unitFor(ns);
    // Three significant digits read best: 12.5 ms, 830 ns, 1.25 s.
    const double v = ns / u.scale;
    const double a = std::fabs(v);
    const int decimals = a >= 100 ? std::max(0, precision - 3) : a >= 10 ? std::max(0, precision - 2)
                                                                          : std::max(0, precision - 1);
    return trimmed(v, decimals) + QLatin1Char(' ') + QString::fromUtf8(u.name);
}

QString formatTickLabel(core::TimeNs t, core::TimeNs tickStep)
{
    if (t == 0)
        return QStringLiteral("0");
    // The unit of twice the major spacing: 500 µs majors read as 0.5, 1, 1.5 ms. Far from the
    // origin a larger unit keeps labels short: 182.625 s, not 182625 ms.
    Unit u = unitFor(static_cast<double>(tickStep) * 10);
    if (std::fabs(static_cast<double>(t)) / u.scale >= 10000)
        u = unitFor(static_cast<double>(t));
    // Enough decimals to write the major spacing exactly (0.025 s needs 3), so neighbouring
    // labels never round to the same text.
    int decimals = 0;
    for (double v = static_cast<double>(tickStep) * 5 / u.scale; std::fabs(v - std::round(v)) > 1e-6 && decimals < 9; v *= 10)
        ++decimals;
    return trimmed(static_cast<double>(t) / u.scale, decimals) + QLatin1Char(' ') + QString::fromUtf8(u.name);
}

QString formatBytes(double bytes)
{
    const double a = std::fabs(bytes);
    // One decimal kept ("4.0 MB"): bucket sizes are compared by eye across labels.
    if (a >= 1024.0 * 1024 * 1024)
        return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 2) + QStringLiteral(" GB");
    if (a >= 1024.0 * 1024)
        return QString::number(bytes / (1024.0 * 1024), 'f', 1) + QStringLiteral(" MB");
    if (a >= 1024.0)
        return QString::number(bytes / 1024.0, 'f', 1) + QStringLiteral(" KB");
    return trimmed(bytes, 0) + QStringLiteral(" B");
}

QString formatBandwidth(double gbPerSecond)
{
    if (!std::isfinite(gbPerSecond))
        return QStringLiteral("–");
    return trimmed(gbPerSecond, gbPerSecond >= 100 ? 0 : gbPerSecond >= 10 ? 1 : 2) + QStringLiteral(" GB/s");
}

} // namespace lockstep::ui
