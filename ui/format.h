// Small formatting helpers shared by the pages: durations, sizes, percentages, and core's
// std::string into QString. Kept in one place so every page writes "12.3 ms" the same way.
#pragma once

#include "lockstep/core/types.h"

#include <QString>

#include <string>

namespace lockstep::ui {

inline QString qs(const std::string& s) { return QString::fromStdString(s); }
QString formatMs(double ms);                 // "12.3 ms", "1.20 s", "—" for NaN
QString formatBytes(int64_t bytes);          // "25.0 MiB"
QString formatPercent(double ratio);         // ratio 0.42 -> "42.0 %", NaN -> "—"
QString formatNs(core::TimeNs ns);           // picks ns/µs/ms/s

} // namespace lockstep::ui
