// Colours of the timeline, in one place so the details panel, the replay views and the tests
// agree with what the widget paints. A calm palette for span kinds (the eye should go to
// communication, not to forward/backward), a qualitative palette for buckets (neighbouring
// bucket indices must not look alike), and two signal colours for overlapped (green) and
// exposed (red) communication.
#pragma once

#include "lockstep/core/types.h"

#include <QColor>

namespace lockstep::ui::palette {

QColor spanKindColor(core::SpanKind kind);
// Bucket b's colour (Tableau 10, cycled). Negative indices get the plain communication colour.
QColor bucketColor(int bucket);
inline constexpr int kBucketColorCount = 10;
// A span's fill: buckets by bucket index, everything else by kind.
QColor spanColor(const core::Span& span);

QColor overlappedColor();  // communication hidden behind compute
QColor exposedColor();     // communication nobody waited behind: the cost
QColor stragglerColor();
QColor stragglerFill();    // the straggler's step in its header row: a light, opaque red
QColor foldedCommColor();  // folded all-reduces of several buckets
QColor foldedColor(QColor base); // several spans drawn as one item: the base colour, greyed
QColor textOn(QColor fill);      // black or white, whichever reads better on `fill`

QColor background();
QColor gutterBackground();
QColor rankHeaderBackground();
QColor runHeaderBackground();
QColor gridLine();
QColor stepLine();
QColor selectionOutline();
QColor replayCursor();

} // namespace lockstep::ui::palette
