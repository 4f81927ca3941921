// Timeline page (see timeline_page.h).
#include "timeline_page.h"
#include "kernel_panel.h"
#include "run_loader.h"

#include "format.h"
#include "step_box.h"
#include "summary_panel.h"
#include "timeline/replay.h"
#include "timeline/span_details.h"
#include "timeline/timeline_model.h"
#include "timeline/timeline_widget.h"

#include <QComboBox>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>

namespace lockstep::ui {

namespace {
// How long the view must rest before a window of spans is asked for (a wheel spin asks once).
constexpr int kStreamDelayMs = 150;
// The most spans one streamed window holds (about 100 bytes each with its model): the window
// spans three views when that fits, else the view alone.
constexpr qint64 kStreamWindowSpans = 4'000'000;

} // namespace

namespace {
// Typing in the search box waits this long for the next key before scanning the spans (a
// 10 M-span run takes tens of milliseconds per scan).
constexpr int kSearchDelayMs = 200;

// A one-line label that shows as much of its text as fits, ending in "…" (a run's title can be
// long; a QLabel would cut it mid-word or widen the window).
class ElidedLabel : public QLabel {
public:
    explicit ElidedLabel(QWidget* parent) : QLabel(parent)
    {
        setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
        setMinimumWidth(80);
        setTextFormat(Qt::PlainText); // a run's name is text, never markup
    }
    void setFullText(const QString& text)
    {
        m_full = text;
        setToolTip(plainToolTip(text));
        refresh();
    }
    QString fullText() const { return m_full; }

protected:
    void resizeEvent(QResizeEvent* event) override
    {
        QLabel::resizeEvent(event);
        refresh();
    }

private:
    void refresh() { setText(fontMetrics().elidedText(m_full, Qt::ElideRight, std::max(0, width() - 2))); }
    QString m_full;
};

QToolButton* toolButton(const QString& text, const QString& tip, QWidget* parent)
{
    auto* b = new QToolButton(parent);
    b->setText(text);
    b->setToolTip(tip);
    return b;
}
} // namespace

TimelinePage::TimelinePage(QWidget* parent)
    : QWidget(parent)
    , m_timeline(new TimelineWidget(this))
    , m_summary(new SummaryPanel(this))
    , m_details(new SpanDetailsPanel(this))
    , m_kernels(new KernelPanel(this))
    , m_replay(new ReplayController(this))
    , m_side(new QTabWidget(this))
    , m_step(new StepBox(this))
    , m_order(new QComboBox(this))
    , m_search(new QLineEdit(this))
    , m_searchCount(new QLabel(this))
    , m_searchTimer(new QTimer(this))
    , m_title(new ElidedLabel(this))
    , m_live(new QLabel(this))
    , m_overviewNote(new QLabel(this))
    , m_windowLoader(new RunLoader(this))
    , m_windowTimer(new QTimer(this))
{
    m_timeline->setFocusPolicy(Qt::StrongFocus);
    m_timeline->setMinimumHeight(200);

    QHBoxLayout* bar = buildToolRow();
    buildPanes();
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(m_split, 1);
    connectNavigation();
}

// The tool row: fit, step, rank order, collapse/expand, the search box and the run's title.
QHBoxLayout* TimelinePage::buildToolRow()
{
    auto* fit = toolButton(tr("Fit all"), tr("Show the whole run (F)"), this);
    connect(fit, &QToolButton::clicked, this, &TimelinePage::fitAll);
    m_step->setRange(0, 0);
    m_step->setToolTip(tr("Step to zoom to: type its number and press Enter (digit keys in the timeline type one too)"));
    auto* zoomStep = toolButton(tr("Zoom to step"), tr("Zoom the view to the chosen step (Z)"), this);
    connect(zoomStep, &QToolButton::clicked, this, &TimelinePage::zoomToStep);
    m_order->addItem(tr("ranks in order"), int(RankOrder::ByRank));
    m_order->addItem(tr("most wait caused first"), int(RankOrder::ByWaitCaused));
    m_order->addItem(tr("slowest step first"), int(RankOrder::ByStepTime));
    m_order->setToolTip(tr("Order of the ranks (core's per-rank means over steady steps)"));
    // As wide as "ranks in order", not as the longest choice: the tool row must fit a 1024-pixel
    // window with room left for the run's title (the list shows every choice whole).
    m_order->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_order->setMinimumContentsLength(14);
    connect(m_order, &QComboBox::activated, this,
            [this](int i) { m_timeline->setRankOrder(RankOrder(m_order->itemData(i).toInt())); });
    auto* collapse = toolButton(tr("Collapse all"), tr("Show only each rank's header and strip (C); click a rank's name to open it"), this);
    auto* expand = toolButton(tr("Expand all"), tr("Show every rank's lanes (E)"), this);
    connect(collapse, &QToolButton::clicked, this, [this] { m_timeline->setAllCollapsed(true); });
    connect(expand, &QToolButton::clicked, this, [this] { m_timeline->setAllCollapsed(false); });

    m_search->setPlaceholderText(tr("Search span names (Ctrl+F)"));
    m_search->setClearButtonEnabled(true);
    m_search->setMaximumWidth(260);
    m_search->setToolTip(tr("Spans whose name contains this text are outlined; Enter: next, Shift+Enter: previous"));
    m_search->installEventFilter(this);
    auto* prev = toolButton(QStringLiteral("◀"), tr("Previous match (Shift+Enter)"), this);
    auto* next = toolButton(QStringLiteral("▶"), tr("Next match (Enter)"), this);
    connect(prev, &QToolButton::clicked, this, &TimelinePage::previousMatch);
    connect(next, &QToolButton::clicked, this, &TimelinePage::nextMatch);
    m_searchTimer->setSingleShot(true);
    m_searchTimer->setInterval(kSearchDelayMs);
    connect(m_searchTimer, &QTimer::timeout, this, &TimelinePage::runSearch);
    connect(m_search, &QLineEdit::textChanged, m_searchTimer, qOverload<>(&QTimer::start));
    connect(m_search, &QLineEdit::returnPressed, this, [this] {
        if (m_searchTimer->isActive()) {
            m_searchTimer->stop();
            runSearch();
        }
        if (QGuiApplication::keyboardModifiers() & Qt::ShiftModifier)
            previousMatch();
        else
            nextMatch();
    });

    m_live->setStyleSheet("color:#b91c1c;font-weight:bold");
    m_live->hide();
    m_overviewNote->setStyleSheet("color:#6b7280");
    m_overviewNote->hide();
    QFont titleFont = m_title->font();
    titleFont.setBold(true);
    m_title->setFont(titleFont);

    auto* bar = new QHBoxLayout;
    bar->addWidget(m_title, 1);
    bar->addWidget(m_live);
    bar->addWidget(m_overviewNote);
    bar->addWidget(fit);
    bar->addWidget(m_step);
    bar->addWidget(zoomStep);
    bar->addWidget(m_order);
    bar->addWidget(collapse);
    bar->addWidget(expand);
    bar->addSpacing(8);
    bar->addWidget(m_search);
    bar->addWidget(prev);
    bar->addWidget(next);
    bar->addWidget(m_searchCount);
    return bar;
}

// Left: the timeline over the replay bar. Right: summary | details over bucket states | kernels.
void TimelinePage::buildPanes()
{
    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_timeline, 1);
    m_replay->setTimeline(m_timeline);
    m_replayBar = new ReplayBar(m_replay, left);
    m_replayBar->setToolTip(tr("Replay one step in slowed time: which gradients are ready, which all-reduces wait, run or are done"));
    leftLayout->addWidget(m_replayBar);
    auto* detailsSide = new QSplitter(Qt::Vertical, this);
    detailsSide->addWidget(m_details);
    m_bucketStates = new BucketStatusView(detailsSide);
    m_bucketStates->follow(m_replay);
    detailsSide->addWidget(m_bucketStates);
    detailsSide->setStretchFactor(0, 3);
    detailsSide->setStretchFactor(1, 2);
    m_side->addTab(m_summary, tr("Summary"));
    m_side->addTab(detailsSide, tr("Details"));
    m_side->addTab(m_kernels, tr("Kernels"));
    m_side->setTabToolTip(2, tr("Which kernels take the step: device work by name, count, time, share"));
    // A kernel's row finds its launches in the timeline (the search outlines them; Enter steps on).
    // The kernel's own spans only (its exact name): the box shows the name without starting the
    // box's own search, which matches parts of names.
    const auto findKernel = [this](const QString& name) {
        {
            const QSignalBlocker block(m_search);
            m_search->setText(name);
        }
        m_searchTimer->stop();
        m_timeline->setSearchText(name, true);
        m_match = -1;
        updateSearchCount();
    };
    connect(m_kernels, &KernelPanel::kernelActivated, this, [this, findKernel](const QString& name) {
        findKernel(name);
        nextMatch();
    });
    connect(m_kernels, &KernelPanel::kernelSelected, this, findKernel);
    m_side->setMinimumWidth(260);
    m_split = new QSplitter(Qt::Horizontal, this);
    auto* split = m_split;
    split->addWidget(left);
    split->addWidget(m_side);
    split->setStretchFactor(0, 4);
    split->setStretchFactor(1, 1);
    split->setSizes({960, 420});
}

// The timeline's and the step box's signals: selection, step requests, the bucket table.
void TimelinePage::connectNavigation()
{
    connect(m_timeline, &TimelineWidget::selectionChanged, this, [this](SpanRef) { showSelection(); });
    // Streaming a big run's spans: after the view (or the rows on screen) settles for a moment.
    m_windowTimer->setSingleShot(true);
    m_windowTimer->setInterval(kStreamDelayMs);
    connect(m_windowTimer, &QTimer::timeout, this, &TimelinePage::streamWindow);
    connect(m_timeline, &TimelineWidget::viewRangeChanged, m_windowTimer, qOverload<>(&QTimer::start));
    connect(m_timeline->verticalScrollBar(), &QScrollBar::valueChanged, m_windowTimer, qOverload<>(&QTimer::start));
    connect(m_timeline, &TimelineWidget::rowsChanged, m_windowTimer, qOverload<>(&QTimer::start));
    connect(m_windowLoader, &RunLoader::windowLoaded, this, [this](const QString& key, LoadedRunPtr run) {
        if (!m_run || m_run->detailed || key != m_run->path || run->path != m_run->path)
            return; // another run now, or its spans arrived whole meanwhile
        // Only the drawing model changes: the page's run stays the one the window opened. The
        // model it replaces is freed in the pool: its millions of items took 6–14 ms to free,
        // a stall on the GUI thread.
        std::shared_ptr<const TimelineRunModel> previous = m_timeline->runs().empty() ? nullptr : m_timeline->runs().front().model;
        m_timeline->updateRun(0, TimelineRun{run->run, run->label, run->timeline});
        releaseInBackground(std::move(previous));
        ++m_streamedWindows;
        updateOverviewNote();
    });
    connect(m_windowLoader, &RunLoader::loadFailed, this, [this](const QString&, const QString& message) {
        m_windowNote = tr("Streaming spans failed: %1").arg(message);
        announce(m_windowNote);
        updateOverviewNote();
    });
    connect(m_timeline, &TimelineWidget::measureRangeChanged, this, &TimelinePage::showSelection);
    connect(m_timeline, &TimelineWidget::stepRequested, this, [this](int step) {
        if (step <= m_step->maximum())
            m_step->setValue(step);
        else if (m_run) // the timeline stays where it was: say why
            announce(tr("no step %1: %2").arg(step).arg(m_step->rangeText()));
    });
    // Enter in the step box goes to the step; a text that is not one of the run's steps is
    // refused with the reason, never read as some other step.
    connect(m_step, &StepBox::stepEntered, this, [this](int step) {
        if (m_run) {
            m_timeline->zoomToStep(step);
            announce(tr("step %1 (%2)").arg(step).arg(m_step->rangeText())); // replaces a refusal's message
        }
    });
    connect(m_step, &StepBox::stepRejected, this, [this](const QString& why) {
        announce(m_run ? why : tr("no run open: open one to go to its steps"));
        QToolTip::showText(m_step->mapToGlobal(QPoint(0, m_step->height())), m_lastMessage, m_step);
    });
    // The step box drives the bucket states shown when no replay runs, and a running replay.
    connect(m_step, &QSpinBox::valueChanged, this, [this](int step) {
        if (m_replay->cursor())
            m_replay->setStep(step);
        else
            m_bucketStates->setStep(step);
    });
    connect(m_summary, &SummaryPanel::bucketActivated, this, [this](int bucket) {
        // The bucket in the chosen step, on every rank: zoom to the step, select it.
        m_timeline->zoomToStep(m_step->value());
        m_timeline->selectBucket(0, m_step->value(), bucket);
        showSideTab(DetailsTab);
    });
}

TimelinePage::~TimelinePage() = default;

bool TimelinePage::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == m_search && event->type() == QEvent::KeyPress && static_cast<QKeyEvent*>(event)->key() == Qt::Key_Escape) {
        m_search->clear();
        m_timeline->setFocus();
        return true;
    }
    return QWidget::eventFilter(watched, event);
}

void TimelinePage::setRun(LoadedRunPtr run)
{
    const bool other = !m_run || !run || m_run->path != run->path;
    m_run = std::move(run);
    m_replay->stop();
    m_summary->setRun(m_run);
    m_kernels->setRun(m_run);
    if (other) {
        // What belongs to the run before: its search, its selection's details.
        m_search->clear();
        runSearch();
        m_details->clear();
    }
    if (!m_run) {
        m_bucketStates->setRun(nullptr);
        m_timeline->setRuns({});
        static_cast<ElidedLabel*>(m_title)->setFullText(QString());
        m_details->clear();
        updateOverviewNote();
        return;
    }
    m_timeline->setRuns({TimelineRun{m_run->run, m_run->label, m_run->timeline}});
    m_timeline->setRankOrder(RankOrder(m_order->currentData().toInt()));
    m_timeline->fitAll();
    const auto& s = m_run->summary();
    static_cast<ElidedLabel*>(m_title)->setFullText(tr("%1 — %2, %3, bucket %4, step %5, overlap %6")
                                                        .arg(m_run->label, displayText(s.config.model, 40))
                                                        .arg(formatRanks(s.worldSize))
                                                        .arg(s.config.bucketCapBytes > 0 ? formatBytes(double(s.config.bucketCapBytes)) : tr("cap unknown"),
                                                             formatMs(s.stepTimeMs),
                                                             s.multiRank ? formatPercent(s.overlapRatio) : tr("n/a (one rank)")));
    {
        const QSignalBlocker block(m_step);
        m_step->setRange(0, std::max(0, s.steps - 1));
        m_step->setValue(std::clamp(m_run->timeline->alignStep(), 0, std::max(0, s.steps - 1)));
    }
    m_replayBar->setStepRange(0, std::max(0, s.steps - 1));
    m_bucketStates->setRun(m_run->detailed ? m_run->run : nullptr); // bucket states are read from spans
    m_bucketStates->setStep(m_step->value());
    if (!m_search->text().isEmpty())
        runSearch();
    m_windowNote.clear();
    updateOverviewNote();
    showSelection();
    m_windowTimer->start(); // a view zoomed in already (a step asked for) streams at once
}

void TimelinePage::updateLiveRun(LoadedRunPtr run)
{
    if (!m_run || m_timeline->runs().empty()) {
        setRun(std::move(run));
        return;
    }
    m_run = std::move(run);
    m_timeline->updateRun(0, TimelineRun{m_run->run, m_run->label, m_run->timeline});
    const int steps = std::max(0, m_run->summary().steps - 1);
    m_step->setRange(0, steps);
    m_replayBar->setStepRange(0, steps);
    m_bucketStates->setRun(m_run->detailed ? m_run->run : nullptr);
    m_bucketStates->setStep(m_step->value());
    m_summary->setRun(m_run);
    m_kernels->setRun(m_run);
    if (!m_search->text().isEmpty())
        runSearch();
    updateOverviewNote();
    if (!m_timeline->selection().valid() && !m_timeline->measureRange())
        m_details->clear(m_run->detailed ? QString() : needsSpansText());
}

void TimelinePage::announce(const QString& text)
{
    m_lastMessage = text;
    emit message(text);
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

void TimelinePage::showSideTab(SideTab tab)
{
    m_side->setCurrentIndex(int(tab));
}

void TimelinePage::setSideWidth(int width)
{
    const int total = m_split->width() > 0 ? m_split->width() : 1380;
    m_split->setSizes({std::max(200, total - width), width});
}

void TimelinePage::focusStep(int step, double replayFraction)
{
    if (!m_run)
        return;
    m_step->setValue(step);
    m_timeline->zoomToStep(step);
    selectLargestCollective(0, step);
    if (m_replay->setStep(step))
        m_replay->setFraction(replayFraction);
    showSelection();
}

// The rank's largest all-reduce of the step: the bucket whose cost is most worth seeing (core's
// RunIndex searches the rank's lanes around the step, not every span of the run).
void TimelinePage::selectLargestCollective(int rank, int step)
{
    if (!m_run->detailed)
        return; // an overview has no spans to select
    if (const auto best = m_run->timeline->index().largestCollective(rank, step))
        m_timeline->select(SpanRef{0, qint64(*best)});
}

void TimelinePage::jumpTo(int rank, int step)
{
    if (step >= 0 && m_run) {
        m_step->setValue(step);
        m_timeline->zoomToStep(step);
        // The details panel and the replay follow the jump (they showed the old step).
        selectLargestCollective(rank, step);
        m_replay->setStep(step);
        showSelection();
    }
    m_timeline->revealRank(0, rank);
}

void TimelinePage::showSelection()
{
    if (!m_run) {
        m_details->clear();
        return;
    }
    const SpanRef ref = m_timeline->selection();
    if (ref.valid()) {
        // The step box follows the selection (a click, the arrow keys, a search match).
        const core::Run& run = *m_run->run;
        if (size_t(ref.span) < run.spans.size()) {
            const int32_t step = run.spans[size_t(ref.span)].step;
            if (step >= 0 && step <= m_step->maximum() && step != m_step->value())
                m_step->setValue(step);
        }
        m_details->setSelection(*m_run->timeline, ref.span);
        showSideTab(DetailsTab);
    } else if (const auto range = m_timeline->measureRange(); range && !m_run->detailed) {
        m_details->clear(needsSpansText());
        announce(tr("Measuring: %1").arg(waitingForSpans(*m_run)));
    } else if (const auto range = m_timeline->measureRange()) {
        const TimelineRunModel& m = *m_run->timeline;
        m_details->setRange(m, m.toAbsolute(range->first), m.toAbsolute(range->second));
        showSideTab(DetailsTab);
    } else if (!m_run->detailed) {
        m_details->clear(needsSpansText());
    } else {
        m_details->clear();
    }
}

void TimelinePage::focusSearch()
{
    m_search->setFocus(Qt::ShortcutFocusReason);
    m_search->selectAll();
}

void TimelinePage::runSearch()
{
    m_timeline->setSearchText(m_search->text());
    m_match = -1;
    updateSearchCount();
}

void TimelinePage::nextMatch()
{
    const int n = int(m_timeline->searchMatches().size());
    if (n == 0)
        return;
    m_match = (m_match + 1) % n;
    m_timeline->showSearchMatch(m_match);
    updateSearchCount();
}

void TimelinePage::previousMatch()
{
    const int n = int(m_timeline->searchMatches().size());
    if (n == 0)
        return;
    m_match = m_match <= 0 ? n - 1 : m_match - 1;
    m_timeline->showSearchMatch(m_match);
    updateSearchCount();
}

void TimelinePage::updateSearchCount()
{
    const int n = int(m_timeline->searchMatches().size());
    if (m_search->text().isEmpty())
        m_searchCount->clear();
    else if (n == 0)
        m_searchCount->setText(tr("no match"));
    else if (m_match < 0)
        m_searchCount->setText(tr("%1 matches").arg(formatCount(n)));
    else
        m_searchCount->setText(tr("%1 of %2").arg(m_match + 1).arg(formatCount(n)));
    if (m_run && !m_run->detailed && !m_search->text().isEmpty()) {
        m_searchCount->setText(tr("needs the spans"));
        m_searchCount->setToolTip(waitingForSpans(*m_run));
    } else {
        m_searchCount->setToolTip(QString());
    }
}

QString TimelinePage::needsSpansText() const
{
    return tr("Selecting and measuring: %1").arg(waitingForSpans(*m_run));
}

// The spans are all there, or on their way: nothing is streamed.
bool TimelinePage::streamsSpans() const
{
    return m_run && !m_run->detailed && !m_run->detailPending && m_run->overview;
}

bool TimelinePage::streamingSpans() const
{
    return streamsSpans() && (m_windowTimer->isActive() || m_windowLoader->pendingJobs() > 0);
}

void TimelinePage::streamWindow()
{
    if (!streamsSpans())
        return;
    const TimelineRunModel* shown = m_timeline->runModel(0);
    if (!shown)
        return;
    const auto [v0, v1] = m_timeline->viewRange();
    const core::TimeNs t0 = shown->toAbsolute(v0), t1 = shown->toAbsolute(v1);
    const double threshold = m_timeline->nsPerPixel() * TimelineWidget::kMinPixels;
    // The lanes on screen that the overview does not draw exactly at this zoom and whose spans
    // the model shown does not have for the view.
    std::vector<core::LaneId> lanes;
    double spans = 0;
    const double extent = std::max<double>(1.0, double(shown->alignedEnd() - shown->alignedBegin()));
    for (core::LaneId lane : m_timeline->visibleLanes(0))
        if (double(shown->overviewGap(lane)) > threshold) {
            lanes.push_back(lane);
            if (lane.v < m_run->overview->lanes.size())
                spans += double(m_run->overview->lanes[lane.v].work.spans);
        }
    const bool covered = std::all_of(lanes.begin(), lanes.end(), [&](core::LaneId l) { return shown->hasSpans(l, t0, t1); });
    if (lanes.empty() || covered)
        return;
    const core::TimeNs width = t1 - t0;
    // Spans of these lanes in a window, if they are spread evenly over the run.
    auto inWindow = [&](core::TimeNs w) { return spans * std::min(1.0, double(w) / extent); };
    core::TimeNs margin = width;
    if (inWindow(width + 2 * margin) > double(kStreamWindowSpans))
        margin = 0;
    if (inWindow(width) > double(kStreamWindowSpans)) {
        m_windowNote = tr("Zoom in further, or show fewer lanes, to stream spans: the %1 lanes on screen hold about %2 "
                          "spans in this view (at most %3 are streamed at once).")
                           .arg(lanes.size())
                           .arg(formatCount(qint64(inWindow(width))))
                           .arg(formatCount(kStreamWindowSpans));
        updateOverviewNote();
        return;
    }
    m_windowNote = tr("Streaming the spans of %1 lanes around the view…").arg(lanes.size());
    updateOverviewNote();
    m_windowLoader->loadWindowOf(m_run, std::move(lanes), t0 - margin, t1 + margin, m_run->path);
}

// Drawn from the stored overview: say so, and whether the spans are coming.
void TimelinePage::updateOverviewNote()
{
    const bool overview = m_run && !m_run->detailed;
    m_overviewNote->setVisible(overview);
    if (!overview)
        return;
    const TimelineRunModel* shown = m_timeline->runModel(0);
    const bool streaming = m_windowLoader->pendingJobs() > 0;
    const bool streamed = shown && shown != m_run->timeline.get();
    m_overviewNote->setText(m_run->detailPending ? tr("◐ overview · loading %1 spans…").arg(formatCount(m_run->summary().spans))
                            : streaming          ? tr("◐ overview · streaming spans…")
                            : streamed           ? tr("◐ overview · spans around the view")
                                                 : tr("◐ overview of %1 spans").arg(formatCount(m_run->summary().spans)));
    m_overviewNote->setToolTip(tr("Drawn from the run's stored overview: zoomed out, exactly what its spans draw; zoomed "
                                  "in, folded items until spans are loaded (runs too big to load whole stream the spans "
                                  "of the lanes on screen around the view). %1 %2")
                                   .arg(waitingForSpans(*m_run), m_windowNote));
}

} // namespace lockstep::ui
