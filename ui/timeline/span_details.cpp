// The selected span's details (see span_details.h).
#include "span_details.h"

#include "time_axis.h"
#include "timeline_model.h"
#include "timeline_palette.h"

#include <QLabel>
#include <QListWidget>
#include <QPainter>
#include <QVBoxLayout>

#include <cmath>

namespace lockstep::ui {

namespace {

// A one-line stacked bar of a step: compute only | overlapped | exposed | idle.
class BreakdownBar : public QWidget {
public:
    explicit BreakdownBar(QWidget* parent) : QWidget(parent) { setFixedHeight(14); }
    void setBreakdown(std::optional<core::StepBreakdown> b)
    {
        m_b = b;
        update();
    }

protected:
    void paintEvent(QPaintEvent*) override
    {
        QPainter p(this);
        p.fillRect(rect(), QColor(0xee, 0xef, 0xf1));
        if (!m_b || m_b->wall <= 0)
            return;
        const double w = width();
        double x = 0;
        const std::pair<core::TimeNs, QColor> parts[] = {
            {m_b->computeOnly, palette::spanKindColor(core::SpanKind::Backward)},
            {m_b->overlapped, palette::overlappedColor()},
            {m_b->exposed, palette::exposedColor()},
        };
        for (const auto& [len, color] : parts) {
            const double pw = w * double(len) / double(m_b->wall);
            p.fillRect(QRectF(x, 0, pw, height()), color);
            x += pw;
        }
    }

private:
    std::optional<core::StepBreakdown> m_b;
};

} // namespace

struct SpanDetailsPanel::Impl {
    QLabel* title = nullptr;
    QLabel* table = nullptr;
    QLabel* paramsTitle = nullptr;
    QListWidget* params = nullptr;
    QLabel* stepTitle = nullptr;
    BreakdownBar* bar = nullptr;
    QLabel* stepTable = nullptr;
    QString summary;
    QStringList paramNames;
    std::optional<core::StepBreakdown> breakdown;

    // Longest span per lane of the last run seen: lets the breakdown of one (rank, step) be
    // computed with binary searches. Keyed by the span array's identity and size.
    const void* cacheKey = nullptr;
    size_t cacheSize = 0;
    std::vector<core::TimeNs> laneMax;
};

SpanDetailsPanel::SpanDetailsPanel(QWidget* parent)
    : QWidget(parent)
    , m_impl(std::make_unique<Impl>())
{
    auto& d = *m_impl;
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    d.title = new QLabel(this);
    QFont f = d.title->font();
    f.setBold(true);
    f.setPointSizeF(f.pointSizeF() * 1.1);
    d.title->setFont(f);
    d.title->setWordWrap(true);
    d.table = new QLabel(this);
    d.table->setTextFormat(Qt::RichText);
    d.table->setTextInteractionFlags(Qt::TextSelectableByMouse);
    d.table->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    d.stepTitle = new QLabel(tr("Step breakdown"), this);
    d.stepTitle->setFont(f);
    d.bar = new BreakdownBar(this);
    d.stepTable = new QLabel(this);
    d.stepTable->setTextFormat(Qt::RichText);
    d.paramsTitle = new QLabel(tr("Bucket parameters"), this);
    d.paramsTitle->setFont(f);
    d.params = new QListWidget(this);
    d.params->setSelectionMode(QAbstractItemView::NoSelection);
    layout->addWidget(d.title);
    layout->addWidget(d.table);
    layout->addWidget(d.stepTitle);
    layout->addWidget(d.bar);
    layout->addWidget(d.stepTable);
    layout->addWidget(d.paramsTitle);
    layout->addWidget(d.params, 1);
    layout->addStretch(0);
    clear();
}

SpanDetailsPanel::~SpanDetailsPanel() = default;

void SpanDetailsPanel::clear()
{
    auto& d = *m_impl;
    d.title->setText(tr("No span selected"));
    d.table->setText(tr("Click a span in the timeline to see its details."));
    d.summary.clear();
    d.paramNames.clear();
    d.params->clear();
    d.breakdown.reset();
    d.bar->setBreakdown(std::nullopt);
    d.stepTable->clear();
    d.stepTitle->hide();
    d.bar->hide();
    d.stepTable->hide();
    d.paramsTitle->hide();
    d.params->hide();
}

void SpanDetailsPanel::setSelection(const core::Run& run, qint64 spanIndex)
{
    auto& d = *m_impl;
    if (spanIndex < 0 || spanIndex >= qint64(run.spans.size())) {
        clear();
        return;
    }
    const core::Span& s = run.spans[size_t(spanIndex)];
    const core::Lane* lane = s.lane.v < run.lanes.size() ? &run.lanes[s.lane.v] : nullptr;
    const core::TimeNs origin = alignmentOrigin(run);

    QList<QPair<QString, QString>> rows;
    rows << qMakePair(tr("kind"), QString::fromUtf8(core::spanKindName(s.kind)));
    rows << qMakePair(tr("duration"), formatDuration(double(s.duration())));
    rows << qMakePair(tr("start"), formatDuration(double(s.start - origin)) + tr(" (from step %1)").arg(alignStep(run)));
    if (lane)
        rows << qMakePair(tr("rank / lane"), QStringLiteral("%1 / %2").arg(lane->rank).arg(QString::fromStdString(lane->name)));
    if (s.step != core::kNoStep)
        rows << qMakePair(tr("step"), QString::number(s.step));
    if (s.bucket != core::kNoBucket)
        rows << qMakePair(tr("bucket"), QString::number(s.bucket));
    if (s.bytes > 0)
        rows << qMakePair(tr("bytes"), formatBytes(double(s.bytes)) + QStringLiteral(" (%1)").arg(s.bytes));
    if (core::isCommunication(s.kind) && s.bytes > 0 && s.duration() > 0) {
        // DESIGN.md: algbw = bytes / duration; busbw = algbw × 2(N−1)/N (nccl-tests).
        const double algbw = double(s.bytes) / double(s.duration());
        int n = run.config.worldSize;
        if (n <= 0)
            n = std::max<int>(1, int(run.ranks.size()));
        const double busbw = algbw * 2.0 * (n - 1) / n;
        rows << qMakePair(tr("algbw"), formatBandwidth(algbw));
        rows << qMakePair(tr("busbw"), formatBandwidth(busbw) + tr(" (N = %1)").arg(n));
    }

    QString html = QStringLiteral("<table cellspacing='0' cellpadding='2'>");
    d.summary.clear();
    for (const auto& [k, v] : rows) {
        html += QStringLiteral("<tr><td style='color:#667'>%1</td><td>&nbsp;%2</td></tr>").arg(k.toHtmlEscaped(), v.toHtmlEscaped());
        d.summary += k + QStringLiteral(": ") + v + QLatin1Char('\n');
    }
    html += QStringLiteral("</table>");
    const QString name = QString::fromStdString(run.strings.text(s.name));
    d.title->setText(name.isEmpty() ? tr("(unnamed span)") : name);
    d.table->setText(html);

    // The bucket's parameters.
    d.paramNames.clear();
    d.params->clear();
    if (s.bucket != core::kNoBucket) {
        for (const core::Bucket& b : run.buckets) {
            if (b.index != s.bucket)
                continue;
            for (const std::string& p : b.params)
                d.paramNames << QString::fromStdString(p);
        }
    }
    d.params->addItems(d.paramNames);
    d.paramsTitle->setText(tr("Bucket %1 parameters (%2)").arg(s.bucket).arg(d.paramNames.size()));
    d.paramsTitle->setVisible(!d.paramNames.isEmpty());
    d.params->setVisible(!d.paramNames.isEmpty());

    // The step's breakdown on this rank.
    d.breakdown.reset();
    if (lane && s.step != core::kNoStep) {
        if (d.cacheKey != run.spans.data() || d.cacheSize != run.spans.size() || d.laneMax.size() != run.lanes.size()) {
            d.laneMax = laneMaxDurations(run);
            d.cacheKey = run.spans.data();
            d.cacheSize = run.spans.size();
        }
        bool found = false;
        core::StepBreakdown b = rankStepBreakdown(run, d.laneMax, lane->rank, s.step, &found);
        if (found)
            d.breakdown = b;
    }
    if (d.breakdown) {
        const core::StepBreakdown& b = *d.breakdown;
        auto pct = [&](core::TimeNs v) { return b.wall > 0 ? QStringLiteral("%1%").arg(100.0 * double(v) / double(b.wall), 0, 'f', 1) : QString(); };
        auto line = [&](const QString& k, core::TimeNs v, QColor c) {
            return QStringLiteral("<tr><td><span style='color:%4'>■</span> %1</td><td align='right'>&nbsp;%2</td><td align='right'>&nbsp;%3</td></tr>")
                .arg(k.toHtmlEscaped(), formatDuration(double(v)), pct(v), c.name());
        };
        QString t = QStringLiteral("<table cellspacing='0' cellpadding='1'>");
        t += line(tr("wall"), b.wall, QColor(0x80, 0x80, 0x80));
        t += line(tr("compute"), b.compute, palette::spanKindColor(core::SpanKind::Backward));
        t += line(tr("communication"), b.communication, palette::spanKindColor(core::SpanKind::Comm));
        t += line(tr("overlapped"), b.overlapped, palette::overlappedColor());
        t += line(tr("exposed"), b.exposed, palette::exposedColor());
        t += line(tr("idle"), b.idle, QColor(0xc8, 0xca, 0xcc));
        t += QStringLiteral("</table>");
        if (b.communication > 0)
            t += tr("overlap ratio %1%").arg(100.0 * b.overlapRatio, 0, 'f', 1);
        d.stepTitle->setText(tr("Step %1 on rank %2%3").arg(b.step).arg(b.rank).arg(b.warmup ? tr(" (warm-up)") : QString()));
        d.stepTable->setText(t);
        d.bar->setBreakdown(b);
        d.summary += QStringLiteral("step %1: compute %2, overlapped %3, exposed %4, idle %5\n")
                         .arg(b.step)
                         .arg(formatDuration(double(b.compute)), formatDuration(double(b.overlapped)),
                              formatDuration(double(b.exposed)), formatDuration(double(b.idle)));
    }
    d.stepTitle->setVisible(d.breakdown.has_value());
    d.bar->setVisible(d.breakdown.has_value());
    d.stepTable->setVisible(d.breakdown.has_value());
}

QString SpanDetailsPanel::summaryText() const
{
    return m_impl->summary;
}

QStringList SpanDetailsPanel::bucketParams() const
{
    return m_impl->paramNames;
}

std::optional<core::StepBreakdown> SpanDetailsPanel::stepBreakdown() const
{
    return m_impl->breakdown;
}

} // namespace lockstep::ui
