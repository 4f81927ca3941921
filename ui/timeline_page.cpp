// Timeline page (see timeline_page.h).
#include "timeline_page.h"

#include "format.h"

#include "timeline/timeline_widget.h"
#if __has_include("timeline/span_details.h")
#include "timeline/span_details.h"
#define LOCKSTEP_HAVE_SPAN_DETAILS 1
#endif
#if __has_include("timeline/replay.h")
#include "timeline/replay.h"
#define LOCKSTEP_HAVE_REPLAY 1
#endif

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>

namespace lockstep::ui {

struct TimelinePage::Extras {
#ifdef LOCKSTEP_HAVE_SPAN_DETAILS
    SpanDetailsPanel* details = nullptr;
#endif
#ifdef LOCKSTEP_HAVE_REPLAY
    ReplayController* replay = nullptr;
    ReplayBar* bar = nullptr;
    BucketStatusView* buckets = nullptr;
#endif
};

TimelinePage::TimelinePage(QWidget* parent)
    : QWidget(parent)
    , m_timeline(new TimelineWidget(this))
    , m_step(new QSpinBox(this))
    , m_title(new QLabel(this))
    , m_live(new QLabel(this))
    , m_extras(std::make_unique<Extras>())
{
    m_timeline->setFocusPolicy(Qt::StrongFocus);
    m_timeline->setToolTip(QString()); // the widget's own hover tooltips describe spans
    m_timeline->setMinimumHeight(200);

    auto* fit = new QToolButton(this);
    fit->setText(tr("Fit all"));
    fit->setToolTip(tr("Show the whole run (F)"));
    connect(fit, &QToolButton::clicked, this, &TimelinePage::fitAll);
    m_step->setRange(0, 0);
    m_step->setPrefix(tr("step "));
    m_step->setToolTip(tr("Step to zoom to"));
    auto* zoomStep = new QToolButton(this);
    zoomStep->setText(tr("Zoom to step"));
    zoomStep->setToolTip(tr("Zoom the view to the chosen step (Z)"));
    connect(zoomStep, &QToolButton::clicked, this, &TimelinePage::zoomToStep);
    m_live->setStyleSheet("color:#b91c1c;font-weight:bold");
    m_live->hide();
    QFont titleFont = m_title->font();
    titleFont.setBold(true);
    m_title->setFont(titleFont);

    auto* bar = new QHBoxLayout;
    bar->addWidget(m_title, 1);
    bar->addWidget(m_live);
    bar->addWidget(fit);
    bar->addWidget(m_step);
    bar->addWidget(zoomStep);

    // Left: the timeline over the replay bar. Right: the span details over the bucket states.
    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_timeline, 1);
    auto* side = new QSplitter(Qt::Vertical, this);
#ifdef LOCKSTEP_HAVE_SPAN_DETAILS
    m_extras->details = new SpanDetailsPanel(side);
    m_details = m_extras->details;
#else
    m_fallbackDetails = new QTextBrowser(side);
    m_fallbackDetails->setPlaceholderText(tr("Click a span to see its details"));
    m_details = m_fallbackDetails;
#endif
    side->addWidget(m_details);
#ifdef LOCKSTEP_HAVE_REPLAY
    m_extras->replay = new ReplayController(this);
    m_extras->replay->setTimeline(m_timeline);
    m_extras->bar = new ReplayBar(m_extras->replay, left);
    m_extras->bar->setToolTip(tr("Replay one step in slowed time: which gradients are ready, which all-reduces wait, run or are done"));
    m_replay = m_extras->bar;
    leftLayout->addWidget(m_extras->bar);
    m_extras->buckets = new BucketStatusView(side);
    m_extras->buckets->follow(m_extras->replay);
    side->addWidget(m_extras->buckets);
    side->setStretchFactor(0, 3);
    side->setStretchFactor(1, 2);
#endif
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(left);
    split->addWidget(side);
    split->setStretchFactor(0, 4);
    split->setStretchFactor(1, 1);
    split->setSizes({960, 400});

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(split, 1);

    connect(m_timeline, &TimelineWidget::selectionChanged, this, [this](SpanRef) { showSelection(); });
}

TimelinePage::~TimelinePage() = default;

void TimelinePage::setRun(LoadedRunPtr run)
{
    m_run = std::move(run);
    if (!m_run) {
#ifdef LOCKSTEP_HAVE_REPLAY
        m_extras->replay->stop();
        m_extras->buckets->setRun(nullptr);
#endif
        m_timeline->setRuns({});
        m_title->clear();
        return;
    }
    m_timeline->setRuns({TimelineRun{m_run->run, m_run->label}});
    m_timeline->fitAll();
    const auto& s = m_run->summary;
    m_title->setText(tr("%1 — %2, %3 ranks, bucket %4, step %5, overlap %6")
                         .arg(m_run->label, qs(s.model))
                         .arg(s.worldSize)
                         .arg(formatBytes(s.bucketCapBytes), formatMs(s.stepTimeMs), formatPercent(s.overlapRatio)));
    m_step->setRange(0, std::max(0, s.steps - 1));
#ifdef LOCKSTEP_HAVE_REPLAY
    m_extras->replay->stop();
    m_extras->bar->setStepRange(0, std::max(0, s.steps - 1));
    m_extras->buckets->setRun(m_run->run);
#endif
    showSelection();
}

void TimelinePage::updateLiveRun(LoadedRunPtr run)
{
    if (!m_run || m_timeline->runs().empty()) {
        setRun(std::move(run));
        return;
    }
    m_run = std::move(run);
    m_timeline->updateRun(0, m_run->run);
    m_step->setRange(0, std::max(0, m_run->summary.steps - 1));
#ifdef LOCKSTEP_HAVE_REPLAY
    m_extras->bar->setStepRange(0, std::max(0, m_run->summary.steps - 1));
    m_extras->buckets->setRun(m_run->run);
#endif
}

void TimelinePage::setLive(bool live, const QString& text)
{
    m_live->setVisible(live);
    m_live->setText(text.isEmpty() ? tr("● live") : text);
}

void TimelinePage::fitAll()
{
    m_timeline->fitAll();
}

void TimelinePage::zoomToStep()
{
    m_timeline->zoomToStep(m_step->value());
}

void TimelinePage::focusStep(int step, double replayFraction)
{
    if (!m_run)
        return;
    m_step->setValue(step);
    m_timeline->zoomToStep(step);
    const core::Run& run = *m_run->run;
    qint64 best = -1;
    for (size_t i = 0; i < run.spans.size(); ++i) {
        const core::Span& s = run.spans[i];
        if (s.step != step || !core::isCommunication(s.kind) || run.lanes[s.lane.v].rank != 0)
            continue;
        if (best < 0 || s.bytes > run.spans[size_t(best)].bytes)
            best = qint64(i);
    }
    if (best >= 0)
        m_timeline->select(SpanRef{0, best});
#ifdef LOCKSTEP_HAVE_REPLAY
    if (m_extras->replay->setStep(step))
        m_extras->replay->setFraction(replayFraction);
#else
    (void)replayFraction;
#endif
    showSelection();
}

void TimelinePage::showSelection()
{
    const SpanRef ref = m_timeline->selection();
#ifdef LOCKSTEP_HAVE_SPAN_DETAILS
    if (m_run && ref.valid())
        m_extras->details->setSelection(*m_run->run, ref.span);
    else
        m_extras->details->clear();
#else
    if (!m_run || !ref.valid() || size_t(ref.span) >= m_run->run->spans.size()) {
        m_fallbackDetails->clear();
        return;
    }
    const core::Run& run = *m_run->run;
    const core::Span& s = run.spans[size_t(ref.span)];
    QString html = QStringLiteral("<h3>%1</h3><table>").arg(qs(run.strings.text(s.name)).toHtmlEscaped());
    auto row = [&](const QString& k, const QString& v) { html += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>").arg(k, v); };
    row(tr("kind"), QString::fromLatin1(core::spanKindName(s.kind)));
    row(tr("rank"), QString::number(run.lanes[s.lane.v].rank));
    row(tr("step"), QString::number(s.step));
    row(tr("duration"), formatNs(s.duration()));
    if (s.bucket >= 0)
        row(tr("bucket"), QString::number(s.bucket));
    if (s.bytes > 0) {
        row(tr("bytes"), formatBytes(s.bytes));
        if (s.duration() > 0)
            row(tr("bandwidth"), QStringLiteral("%1 GB/s").arg(double(s.bytes) / double(s.duration()), 0, 'f', 2));
    }
    html += "</table>";
    m_fallbackDetails->setHtml(html);
#endif
}

} // namespace lockstep::ui
