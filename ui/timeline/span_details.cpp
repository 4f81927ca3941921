// The selected span's details (see span_details.h).
#include "span_details.h"

#include "format.h"
#include "timeline_model.h"
#include "timeline_palette.h"

#include "lockstep/core/step_stats.h"

#include <QLabel>
#include <QListWidget>
#include <QPainter>
#include <QVBoxLayout>

#include <cmath>

namespace lockstep::ui {

namespace {

// A one-line stacked bar of a breakdown: compute only | overlapped | exposed | memory only | idle.
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
        p.fillRect(rect(), palette::idleColor());
        if (!m_b || m_b->wall <= 0)
            return;
        const double w = width();
        double x = 0;
        const std::pair<core::TimeNs, QColor> parts[] = {
            {m_b->computeOnly, palette::computeOnlyColor()},
            {m_b->overlapped, palette::overlappedColor()},
            {m_b->exposed, palette::exposedColor()},
            {m_b->memoryOnly, palette::memoryOnlyColor()},
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

// The five parts of a breakdown as table rows (docs/design.md: they add up to |W|).
QString partsTable(const core::StepBreakdown& b, bool multiRank)
{
    auto pct = [&](core::TimeNs v) {
        return b.wall > 0 ? QStringLiteral("%1 %").arg(100.0 * double(v) / double(b.wall), 0, 'f', 1) : QString();
    };
    auto line = [&](const QString& k, core::TimeNs v, QColor c, bool applicable = true) {
        return QStringLiteral("<tr><td><span style='color:%4'>■</span> %1</td><td align='right'>&nbsp;%2</td><td align='right'>&nbsp;%3</td></tr>")
            .arg(k.toHtmlEscaped(), applicable ? formatDuration(double(v)) : QStringLiteral("—"), applicable ? pct(v) : QString(), c.name());
    };
    QString t = QStringLiteral("<table cellspacing='0' cellpadding='1'>");
    t += line(QObject::tr("compute only"), b.computeOnly, palette::computeOnlyColor());
    t += line(QObject::tr("overlapped"), b.overlapped, palette::overlappedColor(), multiRank);
    t += line(QObject::tr("exposed comm"), b.exposed, palette::exposedColor(), multiRank);
    t += line(QObject::tr("memory only"), b.memoryOnly, palette::memoryOnlyColor());
    t += line(QObject::tr("idle"), b.idle, palette::idleColor());
    t += QStringLiteral("<tr><td><b>%1</b></td><td align='right'>&nbsp;<b>%2</b></td><td></td></tr>")
             .arg(QObject::tr("window"), formatDuration(double(b.wall)));
    t += QStringLiteral("</table>");
    if (multiRank && b.communication > 0)
        t += QObject::tr("overlap %1 of %2 communication").arg(formatPercent(b.overlapRatio), formatDuration(double(b.communication)));
    else if (!multiRank)
        t += QObject::tr("one rank: no communication to hide (overlap not applicable)");
    return t;
}

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
    std::vector<core::StepBreakdown> range;
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
    // Names can be long: the label elides by cutting (displayText), and wraps anywhere so it
    // never widens the panel.
    d.title->setWordWrap(true);
    d.title->setTextFormat(Qt::PlainText);
    d.table = new QLabel(this);
    d.table->setTextFormat(Qt::RichText);
    d.table->setTextInteractionFlags(Qt::TextSelectableByMouse);
    d.table->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    d.table->setWordWrap(true);
    d.stepTitle = new QLabel(tr("Step breakdown"), this);
    d.stepTitle->setFont(f);
    d.bar = new BreakdownBar(this);
    d.stepTable = new QLabel(this);
    d.stepTable->setTextFormat(Qt::RichText);
    d.stepTable->setWordWrap(true);
    d.paramsTitle = new QLabel(tr("Bucket parameters"), this);
    d.paramsTitle->setFont(f);
    d.params = new QListWidget(this);
    d.params->setSelectionMode(QAbstractItemView::NoSelection);
    d.params->setTextElideMode(Qt::ElideMiddle);
    layout->addWidget(d.title);
    layout->addWidget(d.table);
    layout->addWidget(d.stepTitle);
    layout->addWidget(d.bar);
    layout->addWidget(d.stepTable);
    layout->addWidget(d.paramsTitle);
    layout->addWidget(d.params, 1);
    layout->addStretch(0);
    setMinimumWidth(220);
    clear();
}

SpanDetailsPanel::~SpanDetailsPanel() = default;

void SpanDetailsPanel::clear(const QString& hint)
{
    auto& d = *m_impl;
    d.title->setText(tr("No span selected"));
    d.table->setText(hint.isEmpty() ? tr("Click a span in the timeline to see its details; Shift+drag to measure a time range.")
                                    : hint);
    d.summary.clear();
    d.paramNames.clear();
    d.params->clear();
    d.breakdown.reset();
    d.range.clear();
    d.bar->setBreakdown(std::nullopt);
    d.stepTable->clear();
    d.stepTitle->hide();
    d.bar->hide();
    d.stepTable->hide();
    d.paramsTitle->hide();
    d.params->hide();
}

void SpanDetailsPanel::setSelection(const TimelineRunModel& model, qint64 spanIndex)
{
    auto& d = *m_impl;
    const core::Run& run = model.run();
    if (spanIndex < 0 || spanIndex >= qint64(run.spans.size())) {
        clear();
        return;
    }
    d.range.clear();
    const core::Span& s = run.spans[size_t(spanIndex)];
    const core::Lane* lane = s.lane.v < run.lanes.size() ? &run.lanes[s.lane.v] : nullptr;
    const bool multiRank = model.analysis().summary.multiRank;

    QList<QPair<QString, QString>> rows;
    rows << qMakePair(tr("kind"), QString::fromUtf8(core::spanKindName(s.kind)));
    rows << qMakePair(tr("duration"), formatDuration(double(s.duration())));
    // Where the span starts, in words: against its own step's start on its rank when it has one
    // ("14.4 ms into step 6"), else against the timeline's 0 (the first steady step).
    {
        const core::Step* own = nullptr;
        if (lane && s.step != core::kNoStep)
            for (const core::Step& st : run.steps)
                if (st.rank == lane->rank && st.step == s.step) {
                    own = &st;
                    break;
                }
        const core::TimeNs ref = own ? own->start : model.origin();
        const int32_t refStep = own ? s.step : model.alignStep();
        const core::TimeNs d = s.start - ref;
        const QString where = d >= 0 ? tr("%1 into step %2").arg(formatDuration(double(d))).arg(refStep)
                                     : tr("%1 before step %2 began").arg(formatDuration(double(-d))).arg(refStep);
        rows << qMakePair(tr("start"), where);
    }
    if (lane)
        rows << qMakePair(tr("rank / lane"), QStringLiteral("%1 / %2").arg(lane->rank).arg(displayText(lane->name, 60)));
    if (s.step != core::kNoStep)
        rows << qMakePair(tr("step"), QString::number(s.step));
    if (s.bucket != core::kNoBucket)
        rows << qMakePair(tr("bucket"), QString::number(s.bucket));
    // Bytes and bandwidth are core's (core::spanBandwidth, docs/metrics.md "Buckets"): a bucket's
    // collective shows the collective's (report --json's bucket_steps[].ranks[]), any other
    // communication span its own bytes over its duration; one rank has nothing to cross a link.
    const core::SpanBandwidth bw = core::spanBandwidth(run, model.analysis().buckets, s);
    const int64_t bytes = bw.applicable && core::isCommunication(s.kind) ? bw.bytes : s.bytes;
    if (bytes > 0)
        rows << qMakePair(tr("bytes"), formatBytes(double(bytes)) + QStringLiteral(" (%1)").arg(bytes));
    else if (core::isCommunication(s.kind) && s.bucket >= 0)
        rows << qMakePair(tr("bytes"), tr("unknown (the run does not give this collective's size)"));
    if (core::isCommunication(s.kind) && !bw.applicable) {
        rows << qMakePair(tr("bandwidth"), tr("not applicable (one rank)"));
    } else if (core::isCommunication(s.kind) && std::isfinite(bw.algbwGBps)) {
        const QString of = bw.collective ? tr(" (the collective: launch to completion, %1)").arg(formatDuration(double(bw.duration)))
                                         : QString();
        rows << qMakePair(tr("algbw"), formatBandwidth(bw.algbwGBps) + of);
        rows << qMakePair(tr("busbw"), formatBandwidth(bw.busbwGBps) + tr(" (N = %1)").arg(bw.worldSize));
    }
    // The bucket across ranks: core's arrival skew, late rank and the wait it caused.
    if (core::isCommunication(s.kind) && s.bucket >= 0 && s.step != core::kNoStep) {
        if (!multiRank) {
            rows << qMakePair(tr("arrival skew"), tr("not applicable (one rank)"));
        } else if (const core::BucketSkew* k = model.bucketSkew(s.step, s.bucket)) {
            rows << qMakePair(tr("arrival skew"), formatDuration(double(k->skew)));
            rows << qMakePair(tr("late rank"), k->lateRank == (lane ? lane->rank : -1) ? tr("%1 (this rank)").arg(k->lateRank)
                                                                                       : QString::number(k->lateRank));
            rows << qMakePair(tr("wait caused"), tr("%1 (mean over the other ranks)").arg(formatDuration(double(k->waitCaused))));
            rows << qMakePair(tr("rank-time lost"), tr("%1 (sum over the other ranks)").arg(formatDuration(double(k->rankTimeLost))));
        }
    }

    QString html = QStringLiteral("<table cellspacing='0' cellpadding='2'>");
    d.summary.clear();
    for (const auto& [k, v] : rows) {
        html += QStringLiteral("<tr><td style='color:#667'>%1</td><td>&nbsp;%2</td></tr>").arg(k.toHtmlEscaped(), v.toHtmlEscaped());
        d.summary += k + QStringLiteral(": ") + v + QLatin1Char('\n');
    }
    html += QStringLiteral("</table>");
    const QString name = displayText(run.strings.text(s.name));
    d.title->setText(name.isEmpty() ? tr("(unnamed span)") : name);
    d.table->setText(html);

    // The bucket's parameters.
    d.paramNames.clear();
    d.params->clear();
    if (s.bucket != core::kNoBucket) {
        auto b = std::lower_bound(run.buckets.begin(), run.buckets.end(), s.bucket,
                                  [](const core::Bucket& x, int32_t v) { return x.index < v; });
        if (b != run.buckets.end() && b->index == s.bucket)
            for (const std::string& p : b->params)
                d.paramNames << displayText(p);
    }
    d.params->addItems(d.paramNames);
    d.paramsTitle->setText(tr("Bucket %1 parameters (%2)").arg(s.bucket).arg(d.paramNames.size()));
    d.paramsTitle->setVisible(!d.paramNames.isEmpty());
    d.params->setVisible(!d.paramNames.isEmpty());

    // The step's breakdown on this rank (core::RunIndex: the same numbers as `lockstep report`).
    d.breakdown.reset();
    if (lane && s.step != core::kNoStep)
        d.breakdown = model.index().stepBreakdown(lane->rank, s.step);
    if (d.breakdown) {
        const core::StepBreakdown& b = *d.breakdown;
        d.stepTitle->setText(tr("Step %1 on rank %2%3").arg(b.step).arg(b.rank).arg(b.warmup ? tr(" (warm-up)") : QString()));
        d.stepTable->setText(partsTable(b, multiRank));
        d.bar->setBreakdown(b);
        d.summary += QStringLiteral("step %1: compute only %2, overlapped %3, exposed %4, memory only %5, idle %6\n")
                         .arg(b.step)
                         .arg(formatDuration(double(b.computeOnly)), formatDuration(double(b.overlapped)),
                              formatDuration(double(b.exposed)), formatDuration(double(b.memoryOnly)), formatDuration(double(b.idle)));
    }
    d.stepTitle->setVisible(d.breakdown.has_value());
    d.bar->setVisible(d.breakdown.has_value());
    d.stepTable->setVisible(d.breakdown.has_value());
}

void SpanDetailsPanel::setRange(const TimelineRunModel& model, core::TimeNs t0, core::TimeNs t1)
{
    auto& d = *m_impl;
    clear();
    if (t1 < t0)
        std::swap(t0, t1);
    const bool multiRank = model.analysis().summary.multiRank;
    d.title->setText(tr("Range of %1").arg(formatDuration(double(t1 - t0))));
    d.table->setText(tr("from %1 to %2 (aligned on step %3)")
                         .arg(formatDuration(double(t0 - model.origin())), formatDuration(double(t1 - model.origin())))
                         .arg(model.alignStep()));
    d.summary = tr("range %1\n").arg(formatDuration(double(t1 - t0)));
    // Each rank's five parts of the range (core::RunIndex::rangeBreakdown).
    QString html = QStringLiteral("<table cellspacing='0' cellpadding='1'><tr><th align='left'>%1</th><th align='right'>&nbsp;%2</th>"
                                  "<th align='right'>&nbsp;%3</th><th align='right'>&nbsp;%4</th><th align='right'>&nbsp;%5</th>"
                                  "<th align='right'>&nbsp;%6</th></tr>")
                       .arg(tr("rank"), tr("compute only"), tr("overlapped"), tr("exposed"), tr("memory only"), tr("idle"));
    for (const auto& rl : model.ranks()) {
        const core::StepBreakdown b = model.index().rangeBreakdown(rl->rank, t0, t1);
        d.range.push_back(b);
        auto cell = [&](core::TimeNs v, bool applicable = true) {
            return QStringLiteral("<td align='right'>&nbsp;%1</td>").arg(applicable ? formatDuration(double(v)) : QStringLiteral("—"));
        };
        html += QStringLiteral("<tr><td>%1</td>").arg(rl->rank) + cell(b.computeOnly) + cell(b.overlapped, multiRank)
              + cell(b.exposed, multiRank) + cell(b.memoryOnly) + cell(b.idle) + QStringLiteral("</tr>");
        d.summary += QStringLiteral("rank %1: compute only %2, overlapped %3, exposed %4, memory only %5, idle %6\n")
                         .arg(rl->rank)
                         .arg(formatDuration(double(b.computeOnly)), formatDuration(double(b.overlapped)),
                              formatDuration(double(b.exposed)), formatDuration(double(b.memoryOnly)), formatDuration(double(b.idle)));
    }
    html += QStringLiteral("</table>");
    d.stepTitle->setText(tr("Breakdown of the range per rank"));
    d.stepTable->setText(html);
    d.stepTitle->show();
    d.stepTable->show();
    if (!d.range.empty()) {
        d.bar->setBreakdown(d.range.front());
        d.bar->show();
    }
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

const std::vector<core::StepBreakdown>& SpanDetailsPanel::rangeBreakdown() const
{
    return m_impl->range;
}

} // namespace lockstep::ui
