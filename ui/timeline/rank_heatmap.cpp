// The rank × step heatmap (see rank_heatmap.h).
#include "rank_heatmap.h"

#include "format.h"
#include "timeline_palette.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

namespace lockstep::ui {

namespace {
constexpr int kLeft = 64;   // rank labels
constexpr int kBottom = 26; // step labels
constexpr int kTop = 30;    // title and colour scale
constexpr int kRight = 10;
constexpr int kHostBand = 96; // host labels, left of the rank labels (several hosts only)
// Colour levels of the ramp: more than the eye tells apart on one hue.
constexpr int kLevels = 256;

float maxOf(float a, float b)
{
    return std::isnan(a) ? b : std::isnan(b) ? a : std::max(a, b);
}
} // namespace

RankHeatmap::RankHeatmap(QWidget* parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setMinimumSize(300, 160);
}

void RankHeatmap::setModel(std::shared_ptr<const TimelineRunModel> model)
{
    m_model = std::move(model);
    m_rows.clear();
    m_hosts.clear();
    m_hostFirstRow.clear();
    if (m_model) {
        const RankStepMatrix& mx = m_model->rankStepMatrix();
        std::vector<HostGroup> hosts = hostGroups(m_model->run(), mx.ranks);
        if (hosts.size() > 1) {
            for (const HostGroup& h : hosts) {
                m_hostFirstRow.push_back(m_rows.size());
                for (int32_t rank : h.ranks)
                    m_rows.push_back(size_t(std::lower_bound(mx.ranks.begin(), mx.ranks.end(), rank) - mx.ranks.begin()));
            }
            m_hosts = std::move(hosts);
        } else {
            for (size_t i = 0; i < mx.ranks.size(); ++i)
                m_rows.push_back(i);
        }
    }
    rescale();
    m_imageStale = true;
    update();
}

void RankHeatmap::setMetric(RankStepMatrix::Metric metric)
{
    if (metric == m_metric)
        return;
    m_metric = metric;
    rescale();
    m_imageStale = true;
    update();
}

QRect RankHeatmap::plotRect() const
{
    const int left = kLeft + (m_hosts.empty() ? 0 : kHostBand);
    return QRect(left, kTop, std::max(1, width() - left - kRight), std::max(1, height() - kTop - kBottom));
}

void RankHeatmap::rescale()
{
    m_lo = 0;
    m_hi = 1;
    if (!m_model)
        return;
    const RankStepMatrix& mx = m_model->rankStepMatrix();
    // The scale spans steady steps: a slow first step would otherwise wash out the rest. Warm-up
    // cells above it show at the dark end.
    const int32_t warmup = m_model->run().config.warmupSteps;
    for (int pass = 0; pass < 2; ++pass) {
        float lo = std::numeric_limits<float>::infinity(), hi = -lo;
        for (size_t si = 0; si < mx.steps.size(); ++si) {
            if (pass == 0 && mx.steps[si] < warmup)
                continue;
            for (size_t ri = 0; ri < mx.ranks.size(); ++ri) {
                const float v = mx.value(m_metric, ri, si);
                if (std::isfinite(v)) {
                    lo = std::min(lo, v);
                    hi = std::max(hi, v);
                }
            }
        }
        if (hi >= lo) {
            // A wait or an exposed time of zero is the good end of the scale, whatever the minimum.
            m_lo = m_metric == RankStepMatrix::StepTime ? lo : 0.0f;
            m_hi = std::max(hi, m_lo + 1e-3f);
            return;
        }
    }
}

QColor RankHeatmap::colorFor(float value) const
{
    if (!std::isfinite(value))
        return palette::heatMissing();
    // The same 256 levels the picture is drawn with (rebuildImage's lookup table).
    const int level = std::clamp(int((value - m_lo) * (float(kLevels - 1) / (m_hi - m_lo)) + 0.5f), 0, kLevels - 1);
    return palette::heatRamp(double(level) / (kLevels - 1));
}

std::pair<size_t, size_t> RankHeatmap::ranksOfPixel(int y) const
{
    const size_t n = m_model ? m_model->rankStepMatrix().ranks.size() : 0;
    const int h = plotRect().height();
    const size_t a = size_t(double(y) * double(n) / h);
    const size_t b = std::max(a + 1, size_t(double(y + 1) * double(n) / h));
    return {std::min(a, n), std::min(b, n)};
}

namespace {
// Warm-up cells in grey, lighter for less.
QRgb muted(QRgb c)
{
    const int g = 0xf0 - (0xf0 - qGray(c)) / 2;
    return qRgb(g, g, g);
}
} // namespace

bool RankHeatmap::warmupOnly(size_t s0, size_t s1) const
{
    if (!m_model || s0 >= s1)
        return false;
    const auto& steps = m_model->rankStepMatrix().steps;
    const int32_t warmup = m_model->run().config.warmupSteps;
    return !steps.empty() && steps.back() >= warmup && s1 <= steps.size() && steps[s1 - 1] < warmup;
}

QColor RankHeatmap::colorAt(QPoint p) const
{
    const Cell c = cellAt(p);
    const QColor colour = colorFor(c.value);
    const auto [s0, s1] = stepsOfPixel(p.x() - plotRect().left());
    return std::isfinite(c.value) && warmupOnly(s0, s1) ? QColor(muted(colour.rgb())) : colour;
}

std::pair<size_t, size_t> RankHeatmap::stepsOfPixel(int x) const
{
    const size_t n = m_model ? m_model->rankStepMatrix().steps.size() : 0;
    const int w = plotRect().width();
    const size_t a = size_t(double(x) * double(n) / w);
    const size_t b = std::max(a + 1, size_t(double(x + 1) * double(n) / w));
    return {std::min(a, n), std::min(b, n)};
}

// The picture is kept one column per strip: a run of neighbouring pixel columns that cover the
// same steps, so their pixels have the same colour in every row. With fewer steps than pixels
// (the usual case: 20 steps across 1300 pixels) that is a 20 × height image instead of a
// width × height one, and the paint stretches each column over its strip — exact, since a
// one-pixel-wide source has one colour to give. The small image is the point: building a fresh
// full-size picture touched 4 MB of new memory, and on the 2-core VM those first-use page faults
// alone were about 11 ms of a 14 ms first frame; the compact one is 64 KB. With at least as many
// steps as pixels every strip is one column wide and the image is the picture, drawn in one blit.
//
// A pixel is the largest of the cells it covers: the max over its ranks and its steps, taken in
// that order. For each pixel row the ranks it covers are folded into one row of per-step maxima,
// reading the matrix in its storage order (a rank's steps are contiguous); then each strip takes
// the max of its steps from that row and is coloured. The work is the cells once plus, per pixel
// row, one pass over the steps and one over the strips: no ranks × pixels term, no buffer larger
// than a row. A row that covers the same rank as the row above (fewer ranks than pixel rows) is
// a copy of it.
void RankHeatmap::rebuildImage()
{
    const QRect plot = plotRect();
    const int w = plot.width(), h = plot.height();
    m_stripStarts.clear();
    std::vector<std::pair<size_t, size_t>> stripSteps;
    for (int x = 0; x < w; ++x) {
        const auto steps = stepsOfPixel(x);
        if (stripSteps.empty() || steps != stripSteps.back()) {
            m_stripStarts.push_back(x);
            stripSteps.push_back(steps);
        }
    }
    m_stripStarts.push_back(w);
    const int nStrips = int(stripSteps.size());
    if (m_image.size() != QSize(nStrips, h))
        m_image = QImage(nStrips, h, QImage::Format_RGB32); // a metric switch writes over the same pixels
    m_imageFor = plot.size();
    m_imageStale = false;

    // Colours through a lookup table (a QColor per pixel would dominate the frame).
    QRgb lut[kLevels];
    for (int i = 0; i < kLevels; ++i)
        lut[i] = palette::heatRamp(double(i) / (kLevels - 1)).rgb();
    const QRgb missing = palette::heatMissing().rgb();
    const float scale = float(kLevels - 1) / (m_hi - m_lo);
    auto rgbOf = [&](float v) {
        if (!std::isfinite(v))
            return missing;
        return lut[std::clamp(int((v - m_lo) * scale + 0.5f), 0, kLevels - 1)];
    };
    const RankStepMatrix& mx = m_model->rankStepMatrix();
    const size_t nSteps = mx.steps.size();
    const std::vector<float>& values = mx.values[m_metric];
    // Warm-up steps are off the colour scale (rescale): drawn in grey, lighter for less, so they
    // never read as values on the blue ramp (strips of warm-up steps only; a run with no steady
    // step keeps its colours).
    std::vector<char> warmStrip(size_t(nStrips), 0);
    for (int j = 0; j < nStrips; ++j)
        warmStrip[size_t(j)] = warmupOnly(stripSteps[size_t(j)].first, stripSteps[size_t(j)].second);
    std::vector<float> rowMax(nSteps);
    std::pair<size_t, size_t> ranksAbove;
    for (int y = 0; y < h; ++y) {
        const auto ranks = ranksOfPixel(y);
        auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(y));
        if (y > 0 && ranks == ranksAbove) {
            std::copy_n(reinterpret_cast<const QRgb*>(m_image.constScanLine(y - 1)), nStrips, line);
            continue;
        }
        ranksAbove = ranks;
        std::fill(rowMax.begin(), rowMax.end(), std::numeric_limits<float>::quiet_NaN());
        for (size_t ri = ranks.first; ri < ranks.second; ++ri) {
            const float* cells = values.data() + m_rows[ri] * nSteps;
            for (size_t si = 0; si < nSteps; ++si)
                rowMax[si] = maxOf(rowMax[si], cells[si]);
        }
        for (int j = 0; j < nStrips; ++j) {
            float v = std::numeric_limits<float>::quiet_NaN();
            for (size_t si = stripSteps[size_t(j)].first; si < stripSteps[size_t(j)].second; ++si)
                v = maxOf(v, rowMax[si]);
            line[j] = warmStrip[size_t(j)] && std::isfinite(v) ? muted(rgbOf(v)) : rgbOf(v);
        }
    }
}

std::vector<RankHeatmap::HostBand> RankHeatmap::hostBands() const
{
    std::vector<HostBand> out;
    if (m_hosts.empty() || m_rows.empty())
        return out;
    const QRect plot = plotRect();
    const double rowPx = double(plot.height()) / double(m_rows.size());
    for (size_t h = 0; h < m_hosts.size(); ++h) {
        const size_t first = m_hostFirstRow[h], last = first + m_hosts[h].ranks.size();
        const int top = plot.top() + int(std::lround(double(first) * rowPx));
        const int bottom = plot.top() + int(std::lround(double(last) * rowPx));
        out.push_back({hostTitle(m_hosts[h]), QRect(0, top, kHostBand, std::max(1, bottom - top))});
    }
    return out;
}

RankHeatmap::Cell RankHeatmap::cellAt(QPoint p) const
{
    Cell c;
    const QRect plot = plotRect();
    if (!m_model || !plot.contains(p))
        return c;
    const RankStepMatrix& mx = m_model->rankStepMatrix();
    if (mx.ranks.empty() || mx.steps.empty())
        return c;
    const auto [r0, r1] = ranksOfPixel(p.y() - plot.top());
    const auto [s0, s1] = stepsOfPixel(p.x() - plot.left());
    if (r0 >= r1 || s0 >= s1)
        return c;
    // The pixel's largest value and where it is (what the colour shows).
    size_t bestR = r0, bestS = s0;
    float best = std::numeric_limits<float>::quiet_NaN();
    for (size_t ri = r0; ri < r1; ++ri)
        for (size_t si = s0; si < s1; ++si) {
            const float v = mx.value(m_metric, m_rows[ri], si);
            if (std::isfinite(v) && (std::isnan(best) || v > best)) {
                best = v;
                bestR = ri;
                bestS = si;
            }
        }
    c.rank = mx.ranks[m_rows[bestR]];
    c.step = mx.steps[bestS];
    c.value = best;
    c.ranksCovered = int(r1 - r0);
    return c;
}

void RankHeatmap::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette::background());
    const QRect plot = plotRect();
    QFont small = font();
    small.setPointSizeF(std::max(6.5, font().pointSizeF() * 0.85));
    p.setFont(small);
    const QFontMetrics fm(small);
    if (!m_model || m_model->rankStepMatrix().steps.empty() || m_model->rankStepMatrix().ranks.empty()) {
        p.setPen(palette::laneText());
        p.drawText(rect(), Qt::AlignCenter, tr("no steps recorded"));
        return;
    }
    const RankStepMatrix& mx = m_model->rankStepMatrix();
    if (m_imageStale || m_imageFor != plot.size())
        rebuildImage();
    if (m_image.width() == plot.width()) {
        p.drawImage(plot.topLeft(), m_image);
    } else {
        for (int j = 0; j < m_image.width(); ++j) {
            const int x0 = m_stripStarts[size_t(j)], x1 = m_stripStarts[size_t(j) + 1];
            p.drawImage(QRect(plot.left() + x0, plot.top(), x1 - x0, plot.height()), m_image, QRect(j, 0, 1, plot.height()));
        }
    }
    p.setPen(palette::separatorLine());
    p.drawRect(plot.adjusted(0, 0, -1, -1));

    // Rank labels: every k-th rank so labels do not overlap (k from 1, 2, 5, 10, …).
    const double rowPx = double(plot.height()) / double(mx.ranks.size());
    int stride = 1;
    for (int m : {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000})
        if (m * rowPx >= fm.height() + 2) {
            stride = m;
            break;
        }
    p.setPen(palette::laneText());
    for (size_t ri = 0; ri < mx.ranks.size(); ri += size_t(stride)) {
        const double y = plot.top() + (double(ri) + 0.5) * rowPx;
        p.drawText(QRectF(plot.left() - kLeft, y - fm.height() / 2.0, kLeft - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
                   tr("rank %1").arg(mx.ranks[m_rows[ri]]));
    }
    // Host bands: each host's name beside its ranks, a line between hosts across the plot.
    for (const HostBand& band : hostBands()) {
        p.setPen(palette::separatorLine());
        if (band.rect.top() > plot.top())
            p.drawLine(QPoint(0, band.rect.top()), QPoint(plot.right(), band.rect.top()));
        p.setPen(palette::headerText());
        // The host's name on one line, its ranks on the next ("node-a · ranks 0, 2").
        QString text = band.title;
        text.replace(text.lastIndexOf(QStringLiteral(" · ")), 3, QLatin1Char('\n'));
        p.drawText(band.rect.adjusted(4, 0, -4, 0), Qt::AlignVCenter | Qt::AlignLeft | Qt::TextWordWrap, text);
    }
    // Step labels, the same way. Warm-up steps read "(n)", as on the Charts page: drawn, but left
    // out of the colour scale and of every run-level number (unless no step is past the warm-up).
    const int32_t warmup = m_model->run().config.warmupSteps;
    const bool markWarmup = warmup > 0 && mx.steps.back() >= warmup && mx.steps.front() < warmup;
    const auto stepLabel = [&](int32_t step) { return formatStepLabel(step, markWarmup && step < warmup); };
    const double colPx = double(plot.width()) / double(mx.steps.size());
    const int labelW = fm.horizontalAdvance(formatStepLabel(mx.steps.back(), markWarmup)) + 8;
    stride = 1;
    for (int m : {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000})
        if (m * colPx >= labelW) {
            stride = m;
            break;
        }
    for (size_t si = 0; si < mx.steps.size(); ++si) {
        if (mx.steps[si] % stride != 0)
            continue;
        const double x = plot.left() + (double(si) + 0.5) * colPx;
        p.drawText(QRectF(x - labelW / 2.0, plot.bottom() + 3, labelW, fm.height()), Qt::AlignCenter, stepLabel(mx.steps[si]));
    }
    p.drawText(QRectF(plot.left(), plot.bottom() + 3 + fm.height(), plot.width(), fm.height()), Qt::AlignCenter,
               markWarmup ? tr("step   ((n): warm-up, in grey: left out of the colour scale and the run's numbers)") : tr("step"));

    // Title and colour scale.
    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    p.setPen(palette::headerText());
    // The scale's ends carry their own units (formatMs: "830 µs", "17.4 s").
    const QString title = tr("%1 per rank and step").arg(QString::fromUtf8(RankStepMatrix::metricName(m_metric)));
    p.drawText(QRect(plot.left(), 0, plot.width() / 2, kTop - 6), Qt::AlignVCenter | Qt::AlignLeft, title);
    p.setFont(small);
    const int rampW = std::min(220, plot.width() / 3);
    const QRect ramp(plot.right() - rampW - fm.horizontalAdvance(formatMs(m_hi)) - 8, 8, rampW, 10);
    for (int x = 0; x < ramp.width(); ++x)
        p.fillRect(QRect(ramp.left() + x, ramp.top(), 1, ramp.height()), palette::heatRamp(double(x) / std::max(1, ramp.width() - 1)));
    p.setPen(palette::laneText());
    p.drawText(QRect(ramp.left() - 80, 0, 76, kTop - 8), Qt::AlignVCenter | Qt::AlignRight, formatMs(m_lo));
    p.drawText(QRect(ramp.right() + 4, 0, 80, kTop - 8), Qt::AlignVCenter | Qt::AlignLeft, formatMs(m_hi));
}

void RankHeatmap::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton) {
        const Cell c = cellAt(event->position().toPoint());
        if (c.rank >= 0)
            emit cellClicked(c.rank, c.step);
    }
    QWidget::mouseReleaseEvent(event);
}

bool RankHeatmap::event(QEvent* event)
{
    if (event->type() != QEvent::ToolTip)
        return QWidget::event(event);
    auto* help = static_cast<QHelpEvent*>(event);
    const Cell c = cellAt(help->pos());
    if (c.rank < 0) {
        QToolTip::hideText();
        return true;
    }
    const QString metric = QString::fromUtf8(RankStepMatrix::metricName(m_metric));
    QString text = c.ranksCovered > 1 ? tr("rank %1 (largest of the %2 ranks under this pixel), step %3<br>%4: %5")
                                            .arg(c.rank)
                                            .arg(c.ranksCovered)
                                            .arg(c.step)
                                            .arg(metric, std::isfinite(c.value) ? formatMs(c.value) : tr("not applicable"))
                                      : tr("rank %1, step %2<br>%3: %4")
                                            .arg(c.rank)
                                            .arg(c.step)
                                            .arg(metric, std::isfinite(c.value) ? formatMs(c.value) : tr("not applicable"));
    text += tr("<br>click to show it in the timeline");
    QToolTip::showText(help->globalPos(), text, this);
    return true;
}

} // namespace lockstep::ui
