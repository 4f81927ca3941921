// Colour choices for the timeline (see timeline_palette.h for the reasons).
#include "timeline_palette.h"

#include <algorithm>
#include <cmath>

namespace lockstep::ui::palette {

QColor spanKindColor(core::SpanKind kind)
{
    using K = core::SpanKind;
    switch (kind) {
    case K::DataLoad: return QColor(0xa7, 0xae, 0xb6);   // grey: not training work
    case K::Forward: return QColor(0x7f, 0xa7, 0xd1);    // soft blue
    case K::Backward: return QColor(0x9a, 0x8c, 0xc8);   // soft violet
    case K::Optimizer: return QColor(0xd8, 0xb0, 0x6a);  // amber
    case K::Comm: return QColor(0xe0, 0x8a, 0x3c);       // orange (buckets override)
    case K::Wait: return QColor(0xe9, 0xc6, 0xc2);       // pale rose: time spent blocked
    case K::Kernel: return QColor(0x7c, 0xb5, 0xac);     // teal
    case K::CommKernel: return QColor(0xe0, 0x8a, 0x3c);
    case K::Memcpy: return QColor(0xc6, 0xa9, 0xd6);
    case K::Memset: return QColor(0xb8, 0xc9, 0x9e);
    case K::CpuOp: return QColor(0x9d, 0xbc, 0xd9);
    case K::Other: break;
    }
    return QColor(0xb4, 0xb4, 0xb4);
}

QColor bucketColor(int bucket)
{
    // Ordered so that neighbours alternate dark and light, blue and yellow.
    static const QRgb kColors[kBucketColorCount] = {0x2040df, 0xdfdf20, 0x854775, 0xe2ec79, 0x8fafef, 0xdcd7a3};
    if (bucket < 0)
        return spanKindColor(core::SpanKind::Comm);
    return QColor(kColors[bucket % kBucketColorCount]);
}

Qt::BrushStyle bucketPattern(int bucket)
{
    if (bucket < 0)
        return Qt::NoBrush;
    static const Qt::BrushStyle kPatterns[] = {Qt::NoBrush, Qt::BDiagPattern, Qt::Dense6Pattern, Qt::HorPattern};
    return kPatterns[(bucket / kBucketColorCount) % 4];
}

const char* bucketPatternName(int bucket)
{
    static const char* kNames[] = {"", "diagonal lines", "dots", "horizontal lines"};
    return bucket < 0 ? "" : kNames[(bucket / kBucketColorCount) % 4];
}

QColor patternInk(QColor fill)
{
    QColor ink = textOn(fill);
    ink.setAlpha(150);
    return ink;
}

QColor spanColor(const core::Span& span)
{
    if (core::isCommunication(span.kind) && span.bucket >= 0)
        return bucketColor(span.bucket);
    return spanKindColor(span.kind);
}

QColor overlappedColor() { return QColor(0x00, 0x9e, 0x73); }
QColor exposedColor() { return QColor(0xd5, 0x5e, 0x00); }
QColor stragglerColor() { return QColor(0x6a, 0x3d, 0x9a); }
// Opaque (not alpha) so neighbouring marks at one pixel per step do not stack into stripes.
QColor stragglerFill() { return QColor(0xdc, 0xd0, 0xea); }
QColor stragglerText() { return QColor(0x4a, 0x2a, 0x6c); }
QColor foldedColor() { return QColor(0xb0, 0xb4, 0xba); }
QColor quietStreamsColor() { return QColor(0x8c, 0x96, 0xa8); }

QColor textOn(QColor fill)
{
    const double luma = 0.299 * fill.redF() + 0.587 * fill.greenF() + 0.114 * fill.blueF();
    return luma > 0.6 ? QColor(0x20, 0x20, 0x20) : QColor(0xff, 0xff, 0xff);
}

QColor exposedShare(double f)
{
    f = std::clamp(std::isfinite(f) ? f : 0.0, 0.0, 1.0);
    const QColor g = overlappedColor(), r = exposedColor();
    return QColor::fromRgbF(float(g.redF() + (r.redF() - g.redF()) * f), float(g.greenF() + (r.greenF() - g.greenF()) * f),
                            float(g.blueF() + (r.blueF() - g.blueF()) * f));
}

QColor background() { return QColor(0xfb, 0xfb, 0xfa); }
QColor gutterBackground() { return QColor(0xf0, 0xf1, 0xf3); }
QColor rankHeaderBackground() { return QColor(0xe6, 0xe8, 0xec); }
QColor runHeaderBackground() { return QColor(0xd5, 0xda, 0xe2); }
QColor hostHeaderBackground() { return QColor(0xdc, 0xe3, 0xee); }
QColor headerText() { return QColor(0x20, 0x24, 0x2a); }
QColor laneText() { return QColor(0x50, 0x56, 0x60); }
QColor gridLine() { return QColor(0xe4, 0xe4, 0xe4); }
QColor separatorLine() { return QColor(0xc8, 0xcc, 0xd2); }
QColor stepLine() { return QColor(0x70, 0x78, 0x84); }
QColor stripBackground() { return QColor(0xee, 0xef, 0xf1); }
QColor gradReadyTick() { return QColor(0x2a, 0x2e, 0x36); }
QColor rulerBackground() { return QColor(0xf4, 0xf5, 0xf7); }
QColor rulerTick() { return QColor(0x90, 0x96, 0xa0); }
QColor rulerText() { return QColor(0x30, 0x34, 0x3a); }
QColor stepLabelText() { return QColor(0x28, 0x50, 0x80); }
QColor selectionOutline() { return QColor(0x10, 0x10, 0x10); }
QColor linkedOutline() { return QColor(0x10, 0x10, 0x10); }
QColor flowArrow() { return QColor(0x22, 0x22, 0x22); }
QColor searchMatch() { return QColor(0xff, 0x00, 0xa0); }
QColor measureFill() { return QColor(0x1f, 0x6f, 0xd0, 40); }
QColor measureEdge() { return QColor(0x1f, 0x6f, 0xd0); }
QColor replayCursor() { return QColor(0xd0, 0x20, 0x60); }
QColor replayDim() { return QColor(0xfb, 0xfb, 0xfa, 170); }

QColor bucketStatePending() { return QColor(0xe9, 0xeb, 0xef); }
QColor bucketStateWaiting() { return QColor(0xf6, 0xd3, 0x86); }
QColor bucketStateInFlight() { return QColor(0x9c, 0xc3, 0xec); }
QColor bucketStateDone() { return QColor(0xaf, 0xd8, 0xa8); }

QColor computeOnlyColor() { return QColor(0x7f, 0xa7, 0xd1); }
QColor memoryOnlyColor() { return QColor(0xc6, 0xa9, 0xd6); }
QColor idleColor() { return QColor(0xd1, 0xd5, 0xdb); }

QColor heatRamp(double t)
{
    // PuBu (ColorBrewer): one hue family whose lightness falls steadily, so the order of values
    // reads in grey too and for every colour vision.
    static const QColor kStops[] = {QColor(0xf1, 0xee, 0xf6), QColor(0xa6, 0xbd, 0xdb), QColor(0x36, 0x90, 0xc0),
                                    QColor(0x03, 0x4e, 0x7b)};
    constexpr int n = int(std::size(kStops)) - 1;
    t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * n;
    const int i = std::min(n - 1, int(t));
    const double f = t - i;
    const QColor a = kStops[i], b = kStops[i + 1];
    return QColor::fromRgbF(float(a.redF() + (b.redF() - a.redF()) * f), float(a.greenF() + (b.greenF() - a.greenF()) * f),
                            float(a.blueF() + (b.blueF() - a.blueF()) * f));
}

QColor heatMissing() { return QColor(0xfb, 0xfb, 0xfa); }

} // namespace lockstep::ui::palette
