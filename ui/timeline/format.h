// How the app writes numbers and names, in one place so every page writes "12.3 ms", "4.0 MiB"
// and "42.0 %" the same way. Sizes are binary (KiB, MiB, GiB: bucket caps are powers of two);
// bandwidths are decimal GB/s (nccl-tests' convention, as core computes them).
//
// Names come from files (run names, lane names, event names of imported traces) and can be
// anything, up to megabytes: displayText() cuts them to a length a screen can show before Qt lays
// them out, so a 50 MB event name costs what a 200-character one does.
#pragma once

#include "lockstep/core/types.h"

#include <QString>

#include <string>
#include <string_view>

namespace lockstep::ui {

// At most this many characters of a name reach a label; beyond it a "…" says it was cut.
inline constexpr int kMaxDisplayChars = 200;
// `text` as UTF-8, cut at kMaxDisplayChars (or `maxChars`) characters with "…" appended.
QString displayText(std::string_view text, int maxChars = kMaxDisplayChars);
QString displayText(const QString& text, int maxChars = kMaxDisplayChars);
// Core's std::string into QString, whole (for paths and messages, not for names shown in labels).
inline QString qs(const std::string& s) { return QString::fromStdString(s); }

QString formatDuration(double ns, int precision = 3); // "12.5 ms", "830 ns", "-1.2 s"; "—" for NaN
QString formatMs(double ms);                          // formatDuration of ms (core's summaries are in ms)
QString formatBytes(double bytes);                    // "25.0 MiB", "512 B"
QString formatPercent(double ratio);                  // 0.42 -> "42.0 %", NaN -> "—"
QString formatBandwidth(double gbPerSecond);          // "12.3 GB/s", "—" for NaN
// A ruler label: the unit follows the tick step so labels of one ruler share a unit.
QString formatTickLabel(core::TimeNs t, core::TimeNs tickStep);
// A signed difference: "+1.20 ms", "−0.35 ms".
QString formatSignedMs(double ms);
// A step on a chart axis: "12", or "(2)" for a warm-up step (drawn, but left out of the run's
// numbers; the Charts page and the Ranks heatmap say so in their axis titles).
QString formatStepLabel(int32_t step, bool warmup);
// A tooltip that shows `text` as it is: Qt renders a tooltip that looks like markup as rich text
// (a run name or path with <img src=...> would load a local file), so user strings in tooltips
// go through this (escaped inside a rich-text container, line breaks kept).
QString plainToolTip(const QString& text);
// "1 rank", "4 ranks": every heading that counts ranks.
QString formatRanks(qint64 n);
// "10,035,200": counts of spans, steps and matches, digits grouped the same in every locale.
QString formatCount(qint64 n);

} // namespace lockstep::ui
