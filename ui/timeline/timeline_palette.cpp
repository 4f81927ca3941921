// Colour choices for the timeline (see timeline_palette.h for the reasons).
#include "timeline_palette.h"

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
    // Tableau 10: designed so that any two entries are told apart, also in print.
    static const QRgb kColors[kBucketColorCount] = {
        0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
        0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac,
    };
    if (bucket < 0)
        return spanKindColor(core::SpanKind::Comm);
    return QColor(kColors[bucket % kBucketColorCount]);
}

QColor spanColor(const core::Span& span)
{
    if (core::isCommunication(span.kind) && span.bucket >= 0)
        return bucketColor(span.bucket);
    return spanKindColor(span.kind);
}

QColor overlappedColor() { return QColor(0x4c, 0xa8, 0x5a); }
QColor exposedColor() { return QColor(0xd6, 0x45, 0x3d); }
QColor stragglerColor() { return QColor(0xc0, 0x39, 0x2b); }
// Opaque (not alpha) so neighbouring marks at one pixel per step do not stack into stripes.
QColor stragglerFill() { return QColor(0xe8, 0xb9, 0xb6); }
QColor foldedCommColor() { return QColor(0x8c, 0x9c, 0xb4); }

QColor foldedColor(QColor base)
{
    // Keep the hue so a folded backward still reads as backward, but make it quieter than a
    // real span: the user should see "there is more here, zoom in".
    QColor c = base.toHsv();
    c.setHsv(c.hue(), c.saturation() * 55 / 100, std::min(255, c.value() * 92 / 100 + 10));
    return c.toRgb();
}

QColor textOn(QColor fill)
{
    const double luma = 0.299 * fill.redF() + 0.587 * fill.greenF() + 0.114 * fill.blueF();
    return luma > 0.6 ? QColor(0x20, 0x20, 0x20) : QColor(0xff, 0xff, 0xff);
}

QColor background() { return QColor(0xfb, 0xfb, 0xfa); }
QColor gutterBackground() { return QColor(0xf0, 0xf1, 0xf3); }
QColor rankHeaderBackground() { return QColor(0xe6, 0xe8, 0xec); }
QColor runHeaderBackground() { return QColor(0xd5, 0xda, 0xe2); }
QColor gridLine() { return QColor(0xe4, 0xe4, 0xe4); }
QColor stepLine() { return QColor(0x70, 0x78, 0x84); }
QColor selectionOutline() { return QColor(0x10, 0x10, 0x10); }
QColor replayCursor() { return QColor(0xd0, 0x20, 0x60); }

} // namespace lockstep::ui::palette
