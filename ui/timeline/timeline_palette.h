// Colours of the timeline, in one place so the widget, the details panel, the replay views, the
// heatmap and the tests agree with what is painted. No other file of the timeline names a colour.
//
// A calm palette for span kinds (the eye should go to communication, not to forward/backward).
// Signal colours: overlapped communication (bluish green), exposed communication (vermillion),
// the straggler (purple) — Okabe and Ito's colour-blind-safe hues. Bucket colours: six hues
// chosen so that every pair of them, and each of them against the three signal colours, the
// folded grey and the background, differ by at least 25 CIELAB units for normal vision and as
// seen with protanopia and deuteranopia (Machado et al. 2009 simulation; the test recomputes it).
// Six, not ten: no larger set found keeps that distance, and neighbouring buckets are what must
// differ (labels name the bucket anyway). Past six, a pattern drawn over the colour tells the
// rounds apart (none, diagonal lines, dots, horizontal lines): 24 buckets, each its own colour and
// pattern, before anything repeats. Folded groups ("N spans too small to show") are one
// neutral grey: a fold of several buckets or kinds has no one colour to show.
#pragma once

#include "lockstep/core/types.h"

#include <QColor>

namespace lockstep::ui::palette {

QColor spanKindColor(core::SpanKind kind);
// Bucket b's colour (cycled). Negative indices get the plain communication colour.
QColor bucketColor(int bucket);
inline constexpr int kBucketColorCount = 6;
// Bucket b's pattern over its colour (Qt::NoBrush for the first six); with bucketColor, distinct
// for kBucketStyleCount buckets.
Qt::BrushStyle bucketPattern(int bucket);
inline constexpr int kBucketStyleCount = 24;
// What the pattern is called in legends ("", "diagonal lines", "dots", "horizontal lines").
const char* bucketPatternName(int bucket);
// The pattern's ink over a fill: the fill's text colour, half transparent.
QColor patternInk(QColor fill);
// A span's fill: buckets by bucket index, everything else by kind.
QColor spanColor(const core::Span& span);

QColor overlappedColor();  // communication hidden behind compute
QColor exposedColor();     // communication nobody hid: the cost
QColor stragglerColor();
QColor stragglerFill();    // the straggler's step in its header row: a light, opaque tint
QColor stragglerText();
QColor foldedColor();      // several spans drawn as one item
QColor quietStreamsColor(); // the folded row of nearly idle GPU streams: the union of their spans
QColor textOn(QColor fill); // black or white, whichever reads better on `fill`
// Between the overlapped and exposed colours by the exposed share f in [0, 1] (the zoomed-out
// strip colours a whole step by how much of its communication was exposed).
QColor exposedShare(double f);

QColor background();
QColor gutterBackground();
QColor rankHeaderBackground();
QColor runHeaderBackground();
QColor hostHeaderBackground(); // a host's header row (runs on several hosts)
QColor headerText();
QColor laneText();
QColor gridLine();
QColor separatorLine();
QColor stepLine();
QColor stripBackground();
QColor gradReadyTick();
QColor rulerBackground();
QColor rulerTick();
QColor rulerText();
QColor stepLabelText();
QColor selectionOutline();
QColor linkedOutline();    // the selected bucket's all-reduce on the other ranks
QColor flowArrow();        // late rank -> others, gradient ready -> launch
QColor searchMatch();      // outline of spans matching the search
QColor measureFill();      // the measured time range
QColor measureEdge();
QColor replayCursor();
QColor replayDim();        // over what has not happened yet at the replay cursor
// The bucket table's states in the replay (gradients pending, waiting, in flight, done).
QColor bucketStatePending();
QColor bucketStateWaiting();
QColor bucketStateInFlight();
QColor bucketStateDone();
// Breakdown parts shared by the details panel, the summary and the charts.
QColor computeOnlyColor();
QColor memoryOnlyColor();
QColor idleColor();
// The heatmap's colour ramp, t in [0, 1] (light to dark, one hue: readable without colour),
// and the colour of a cell with no value.
QColor heatRamp(double t);
QColor heatMissing();

} // namespace lockstep::ui::palette
