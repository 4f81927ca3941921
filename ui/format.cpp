// Formatting helpers (see format.h).
#include "format.h"

#include <cmath>

namespace lockstep::ui {

QString formatMs(double ms)
{
    if (!std::isfinite(ms))
        return QStringLiteral("—");
    if (std::abs(ms) >= 1000.0)
        return QStringLiteral("%1 s").arg(ms / 1000.0, 0, 'f', 2);
    if (std::abs(ms) >= 100.0)
        return QStringLiteral("%1 ms").arg(ms, 0, 'f', 0);
    return QStringLiteral("%1 ms").arg(ms, 0, 'f', std::abs(ms) >= 10.0 ? 1 : 2);
}

QString formatBytes(int64_t bytes)
{
    const double b = double(bytes);
    if (b >= 1024.0 * 1024.0 * 1024.0)
        return QStringLiteral("%1 GiB").arg(b / (1024.0 * 1024.0 * 1024.0), 0, 'f', 2);
    if (b >= 1024.0 * 1024.0)
        return QStringLiteral("%1 MiB").arg(b / (1024.0 * 1024.0), 0, 'f', 1);
    if (b >= 1024.0)
        return QStringLiteral("%1 KiB").arg(b / 1024.0, 0, 'f', 1);
    return QStringLiteral("%1 B").arg(bytes);
}

QString formatPercent(double ratio)
{
    if (!std::isfinite(ratio))
        return QStringLiteral("—");
    return QStringLiteral("%1 %").arg(ratio * 100.0, 0, 'f', 1);
}

QString formatNs(core::TimeNs ns)
{
    const double a = std::abs(double(ns));
    if (a >= 1e9)
        return QStringLiteral("%1 s").arg(double(ns) / 1e9, 0, 'f', 3);
    if (a >= 1e6)
        return QStringLiteral("%1 ms").arg(double(ns) / 1e6, 0, 'f', 3);
    if (a >= 1e3)
        return QStringLiteral("%1 µs").arg(double(ns) / 1e3, 0, 'f', 1);
    return QStringLiteral("%1 ns").arg(ns);
}

} // namespace lockstep::ui
