// Number and name formatting (see format.h).
#include "format.h"

#include <QLocale>

#include <cmath>

namespace lockstep::ui {

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
const QString kDash = QStringLiteral("—");
} // namespace

QString displayText(std::string_view text, int maxChars)
{
    // Cut the bytes first (a UTF-8 character is at most 4 bytes), then at a character boundary.
    const size_t maxBytes = size_t(std::max(1, maxChars)) * 4;
    const bool cutBytes = text.size() > maxBytes;
    QString s = QString::fromUtf8(text.data(), qsizetype(cutBytes ? maxBytes : text.size()));
    return displayText(cutBytes ? s + QChar(0x2026) : s, maxChars);
}

QString displayText(const QString& text, int maxChars)
{
    if (text.size() <= maxChars)
        return text;
    qsizetype cut = maxChars;
    if (cut > 0 && text.at(cut - 1).isHighSurrogate())
        --cut; // never split a surrogate pair
    return text.left(cut) + QChar(0x2026);
}

QString formatDuration(double ns, int precision)
{
    if (!std::isfinite(ns))
        return kDash;
    const Unit u = unitFor(ns);
    // Three significant digits read best: 12.5 ms, 830 ns, 1.25 s.
    const double v = ns / u.scale;
    const double a = std::fabs(v);
    const int decimals = a >= 100 ? std::max(0, precision - 3) : a >= 10 ? std::max(0, precision - 2)
                                                                          : std::max(0, precision - 1);
    return trimmed(v, decimals) + QLatin1Char(' ') + QString::fromUtf8(u.name);
}

QString formatMs(double ms)
{
    return formatDuration(ms * 1e6);
}

QString formatSignedMs(double ms)
{
    if (!std::isfinite(ms))
        return kDash;
    const QString body = formatDuration(std::fabs(ms) * 1e6);
    return (ms > 0 ? QStringLiteral("+") : ms < 0 ? QStringLiteral("−") : QString()) + body;
}

QString formatBytes(double bytes)
{
    if (!std::isfinite(bytes))
        return kDash;
    const double a = std::fabs(bytes);
    // One decimal kept ("4.0 MiB"): bucket sizes are compared by eye across labels.
    if (a >= 1024.0 * 1024 * 1024)
        return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 2) + QStringLiteral(" GiB");
    if (a >= 1024.0 * 1024)
        return QString::number(bytes / (1024.0 * 1024), 'f', 1) + QStringLiteral(" MiB");
    if (a >= 1024.0)
        return QString::number(bytes / 1024.0, 'f', 1) + QStringLiteral(" KiB");
    return trimmed(bytes, 0) + QStringLiteral(" B");
}

QString formatPercent(double ratio)
{
    if (!std::isfinite(ratio))
        return kDash;
    return QStringLiteral("%1 %").arg(ratio * 100.0, 0, 'f', 1);
}

QString formatBandwidth(double gbPerSecond)
{
    if (!std::isfinite(gbPerSecond))
        return kDash;
    return trimmed(gbPerSecond, gbPerSecond >= 100 ? 0 : gbPerSecond >= 10 ? 1 : 2) + QStringLiteral(" GB/s");
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

QString formatStepLabel(int32_t step, bool warmup)
{
    return warmup ? QStringLiteral("(%1)").arg(step) : QString::number(step);
}

QString formatRanks(qint64 n)
{
    return n == 1 ? QStringLiteral("1 rank") : QStringLiteral("%1 ranks").arg(n);
}

QString formatCount(qint64 n) { return QLocale(QLocale::English).toString(n); }

QString plainToolTip(const QString& text)
{
    if (text.isEmpty())
        return {};
    QString escaped = text.toHtmlEscaped();
    escaped.replace(QLatin1Char('\n'), QStringLiteral("<br>"));
    return QStringLiteral("<qt>%1</qt>").arg(escaped);
}

} // namespace lockstep::ui
