// The timeline's draw lists: what one frame paints, as flat lists of plain items (Tracy's habit).
// A frame is two phases: TimelineWidget builds these lists for the current view from the run
// models (the costly part: level-of-detail queries, label eliding, cached while the view does not
// change), then paints them with a handful of QPainter calls per item. Because the lists are
// plain data, tests check what would be drawn (where each all-reduce is, which labels fit)
// without painting, and hit testing reads the same spans the user sees.
//
// Every colour in a list comes from the palette (timeline_palette.h).
#pragma once

#include "lockstep/core/types.h"

#include <QColor>
#include <QLineF>
#include <QPointF>
#include <QRectF>
#include <QString>

#include <vector>

namespace lockstep::ui {

enum class DrawFont : uint8_t { Base, Small, Bold };

struct DrawFill {
    QRectF rect;
    QColor color;
};
struct DrawLine {
    QLineF line;
    QColor color;
    qreal width = 1;
    Qt::PenStyle style = Qt::SolidLine;
};
struct DrawOutline {
    QRectF rect;
    QColor color;
    qreal width = 2;
};
struct DrawText {
    QRectF rect;
    QString text; // already elided to fit `rect`
    QColor color;
    int flags = Qt::AlignVCenter | Qt::AlignLeft;
    DrawFont font = DrawFont::Small;
};
// An arrow from `from` to `to` with a head at `to` (flows between ranks, ready -> launch).
struct DrawArrow {
    QPointF from;
    QPointF to;
    QColor color;
};
// A span or folded group as drawn; also the hit-test list.
struct DrawSpan {
    QRectF rect;
    QColor color;
    Qt::BrushStyle pattern = Qt::NoBrush; // drawn over `color` (buckets past the sixth)
    int row = 0;          // index into the widget's rows
    int run = 0;
    uint32_t lane = 0;
    uint32_t subRow = 0;
    size_t span = 0;      // index into run.spans (the first span when folded)
    uint32_t count = 1;   // > 1: a folded group ("N spans too small to show")
    core::TimeNs start = 0, end = 0, maxDuration = 0; // absolute
};

// What changes only with the view (zoom, pan, scroll, size, rows): built once per view, cached.
struct TimelineDrawList {
    // Under everything, clipped below the ruler: header and lane backgrounds, grid lines.
    std::vector<DrawFill> rowFills;
    std::vector<DrawLine> rowLines;
    // The gutter: rank headers (with their collapse marks), lane names, run names.
    std::vector<DrawText> gutterLabels;
    // The time area (clipped right of the gutter, below the ruler), in paint order.
    std::vector<DrawLine> stepLines;
    std::vector<DrawSpan> spans;
    std::vector<DrawText> spanLabels;
    std::vector<DrawFill> ticks;  // gradient-ready instants
    std::vector<DrawFill> strips; // overlapped / exposed communication
    std::vector<DrawFill> marks;  // step stragglers in the rank headers
    std::vector<DrawText> markLabels;
    // The ruler band (clipped right of the gutter) and its corner over the gutter.
    std::vector<DrawFill> rulerFills;
    std::vector<DrawLine> rulerLines;
    std::vector<DrawText> rulerLabels;
    std::vector<DrawText> cornerLabels;
    size_t itemCount() const
    {
        return stepLines.size() + spans.size() + ticks.size() + strips.size() + marks.size() + rulerLines.size();
    }
};

// What changes without the view changing (selection, linked bucket, search matches, measured
// range, replay cursor): rebuilt for every paint from the cached list, cheap.
struct TimelineOverlay {
    std::vector<DrawFill> fills;       // search matches, measured range, replay dimming
    std::vector<DrawOutline> outlines; // the selection and the spans of its bucket on every rank
    std::vector<DrawLine> lines;       // replay cursor, range edges, wait brackets
    std::vector<DrawArrow> arrows;     // late rank -> the others; gradient ready -> launch
    std::vector<DrawText> labels;      // range length, arrival skew
};

} // namespace lockstep::ui
