// Replay controller, its bar and the bucket status list (see replay.h).
#include "replay.h"

#include "format.h"
#include "timeline_palette.h"
#include "timeline_widget.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSlider>
#include <QSpinBox>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace lockstep::ui {

namespace {
constexpr int kTickMs = 16;           // one frame at 60 Hz
constexpr int kSliderSteps = 1000;
} // namespace

// ---------------------------------------------------------------------------------------------
// ReplayController

ReplayController::ReplayController(QObject* parent)
    : QObject(parent)
{
    m_timer.setInterval(kTickMs);
    m_timer.setTimerType(Qt::PreciseTimer);
    connect(&m_timer, &QTimer::timeout, this, &ReplayController::tick);
}

void ReplayController::setTimeline(TimelineWidget* timeline)
{
    m_timeline = timeline;
    if (m_timeline && m_cursor)
        m_timeline->setReplayCursor(m_cursor);
}

bool ReplayController::setStep(int step)
{
    if (!m_timeline)
        return false;
    const auto r = m_timeline->stepRange(step);
    if (!r)
        return false;
    m_step = step;
    // Show what is replayed: the step fills the view, the cursor starts at its left edge.
    m_timeline->zoomToStep(step);
    setRange(r->first, r->second);
    emit stepChanged(step);
    return true;
}

void ReplayController::setRange(core::TimeNs t0, core::TimeNs t1)
{
    if (t1 < t0)
        std::swap(t0, t1);
    m_t0 = t0;
    m_t1 = t1;
    m_carry = 0;
    setCursor(t0);
}

void ReplayController::setSpeed(double speed)
{
    if (speed > 0 && std::isfinite(speed))
        m_speed = speed;
}

void ReplayController::play()
{
    // A freshly opened run has no step chosen yet: replay the first steady step (the one the
    // runs are aligned on), or the step set before.
    if (m_t1 <= m_t0 && !(m_timeline && setStep(m_step >= 0 ? m_step : m_timeline->alignStepOverride() >= 0 ? m_timeline->alignStepOverride() : firstSteadyStep())))
        return;
    if (!m_cursor || *m_cursor >= m_t1)
        setCursor(m_t0); // at the end: play again from the start
    m_clock.start();
    m_timer.start();
    emit playingChanged(true);
}

void ReplayController::pause()
{
    if (!m_timer.isActive())
        return;
    m_timer.stop();
    emit playingChanged(false);
}

void ReplayController::togglePlaying()
{
    if (isPlaying())
        pause();
    else
        play();
}

void ReplayController::stop()
{
    pause();
    m_carry = 0;
    if (!m_cursor)
        return;
    m_cursor.reset();
    if (m_timeline)
        m_timeline->setReplayCursor(std::nullopt);
    emit cursorCleared();
}

int ReplayController::firstSteadyStep() const
{
    const TimelineRunModel* m = m_timeline ? m_timeline->runModel(0) : nullptr;
    return m ? m->alignStep() : 0;
}

void ReplayController::setCursor(core::TimeNs aligned)
{
    if (m_t1 > m_t0)
        aligned = std::clamp(aligned, m_t0, m_t1);
    if (m_cursor == aligned)
        return;
    m_cursor = aligned;
    if (m_timeline)
        m_timeline->setReplayCursor(aligned);
    emit cursorChanged(aligned);
}

void ReplayController::setFraction(double f)
{
    f = std::clamp(f, 0.0, 1.0);
    setCursor(m_t0 + core::TimeNs(std::llround(double(m_t1 - m_t0) * f)));
}

double ReplayController::fraction() const
{
    if (!m_cursor || m_t1 <= m_t0)
        return 0;
    return double(*m_cursor - m_t0) / double(m_t1 - m_t0);
}

void ReplayController::advance(core::TimeNs wallNs)
{
    const double moved = double(wallNs) * m_speed + m_carry;
    const core::TimeNs whole = core::TimeNs(std::floor(moved));
    m_carry = moved - double(whole);
    const core::TimeNs next = (m_cursor ? *m_cursor : m_t0) + whole;
    setCursor(next);
    if (next >= m_t1)
        pause();
}

void ReplayController::tick()
{
    // Real elapsed time, not the nominal interval: a late timer does not slow the replay.
    const core::TimeNs wall = m_clock.nsecsElapsed();
    m_clock.restart();
    advance(wall);
}

// ---------------------------------------------------------------------------------------------
// ReplayBar

ReplayBar::ReplayBar(ReplayController* controller, QWidget* parent)
    : QWidget(parent)
    , m_controller(controller)
{
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(6, 2, 6, 2);
    m_play = new QToolButton(this);
    m_play->setText(tr("Play"));
    m_play->setToolTip(tr("Play / pause the replay of the step (Space)"));
    m_stop = new QToolButton(this);
    m_stop->setText(tr("Stop"));
    m_stop->setToolTip(tr("Stop the replay and remove its cursor"));
    m_speed = new QComboBox(this);
    const std::pair<const char*, double> speeds[] = {
        {"1/10000×", 1e-4}, {"1/1000×", 1e-3}, {"1/100×", 1e-2}, {"1/10×", 1e-1}, {"1×", 1.0}};
    for (const auto& [label, v] : speeds)
        m_speed->addItem(QString::fromUtf8(label), v);
    m_speed->setCurrentIndex(1);
    m_speed->setToolTip(tr("Replay speed relative to the recorded time"));
    m_step = new QSpinBox(this);
    m_step->setPrefix(tr("step "));
    m_step->setRange(0, 0);
    m_slider = new QSlider(Qt::Horizontal, this);
    m_slider->setRange(0, kSliderSteps);
    m_time = new QLabel(this);
    m_time->setMinimumWidth(90);
    layout->addWidget(m_play);
    layout->addWidget(m_stop);
    layout->addWidget(m_speed);
    layout->addWidget(m_step);
    layout->addWidget(m_slider, 1);
    layout->addWidget(m_time);

    connect(m_play, &QToolButton::clicked, this, [this] {
        // Play replays the step in the box; the controller may not have one yet.
        if (!m_controller->cursor() && m_controller->step() != m_step->value())
            m_controller->setStep(m_step->value());
        m_controller->togglePlaying();
    });
    connect(m_stop, &QToolButton::clicked, controller, &ReplayController::stop);
    connect(controller, &ReplayController::cursorCleared, this, &ReplayBar::syncFromController);
    connect(m_speed, &QComboBox::currentIndexChanged, this,
            [this](int i) { m_controller->setSpeed(m_speed->itemData(i).toDouble()); });
    m_controller->setSpeed(m_speed->currentData().toDouble());
    connect(m_step, &QSpinBox::valueChanged, this, [this](int s) {
        if (!m_syncing)
            m_controller->setStep(s);
    });
    connect(m_slider, &QSlider::valueChanged, this, [this](int v) {
        if (!m_syncing)
            m_controller->setFraction(double(v) / kSliderSteps);
    });
    connect(controller, &ReplayController::cursorChanged, this, &ReplayBar::syncFromController);
    connect(controller, &ReplayController::stepChanged, this, &ReplayBar::syncFromController);
    connect(controller, &ReplayController::playingChanged, this,
            [this](bool playing) { m_play->setText(playing ? tr("Pause") : tr("Play")); });
    syncFromController();
}

void ReplayBar::setStepRange(int first, int last)
{
    m_syncing = true;
    m_step->setRange(first, std::max(first, last));
    m_syncing = false;
    syncFromController(); // the controller's step may have been out of the old range
}

void ReplayBar::syncFromController()
{
    m_syncing = true;
    if (m_controller->step() >= 0)
        m_step->setValue(m_controller->step());
    m_stop->setEnabled(m_controller->cursor().has_value());
    m_slider->setValue(int(std::lround(m_controller->fraction() * kSliderSteps)));
    const auto c = m_controller->cursor();
    m_time->setText(c ? QStringLiteral("+%1").arg(formatDuration(double(*c - m_controller->range().first))) : QString());
    m_syncing = false;
}

// ---------------------------------------------------------------------------------------------
// BucketStatusModel

BucketStatusModel::BucketStatusModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void BucketStatusModel::setRun(std::shared_ptr<const core::Run> run)
{
    m_run = std::move(run);
    m_origin = m_run ? core::alignmentOrigin(*m_run) : 0;
    recompute();
}

void BucketStatusModel::setRank(int rank)
{
    m_rank = rank;
    recompute();
}

void BucketStatusModel::setStep(int32_t step)
{
    m_shownStep = step;
    recompute();
}

void BucketStatusModel::setAlignedTime(std::optional<core::TimeNs> aligned)
{
    m_aligned = aligned;
    recompute();
}

void BucketStatusModel::recompute()
{
    std::vector<core::BucketStatus> rows;
    m_step = core::kNoStep;
    if (m_run && m_aligned) {
        const core::TimeNs t = *m_aligned + m_origin;
        m_step = core::stepAt(*m_run, m_rank, t);
        if (m_step != core::kNoStep)
            rows = core::bucketStatesAt(*m_run, m_rank, m_step, t);
    } else if (m_run && m_shownStep != core::kNoStep) {
        // No replay cursor: the chosen step as it ended (every bucket's launch and completion).
        auto it = std::find_if(m_run->steps.begin(), m_run->steps.end(),
                               [&](const core::Step& s) { return s.rank == m_rank && s.step == m_shownStep; });
        if (it != m_run->steps.end()) {
            m_step = m_shownStep;
            rows = core::bucketStatesAt(*m_run, m_rank, m_step, std::numeric_limits<core::TimeNs>::max());
        }
    }
    // Same bucket set: update cells in place (a replay changes them 60 times a second and a
    // reset would lose the view's scroll position); otherwise reset wholesale.
    const bool sameShape = rows.size() == m_rows.size()
        && std::equal(rows.begin(), rows.end(), m_rows.begin(),
                      [](const core::BucketStatus& a, const core::BucketStatus& b) { return a.bucket == b.bucket; });
    if (sameShape) {
        m_rows = std::move(rows);
        if (!m_rows.empty())
            emit dataChanged(index(0, 0), index(int(m_rows.size()) - 1, ColumnCount - 1));
    } else {
        beginResetModel();
        m_rows = std::move(rows);
        endResetModel();
    }
}

int BucketStatusModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int BucketStatusModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QColor BucketStatusModel::stateColor(core::BucketState state)
{
    switch (state) {
    case core::BucketState::Pending: return palette::bucketStatePending();
    case core::BucketState::Waiting: return palette::bucketStateWaiting();
    case core::BucketState::InFlight: return palette::bucketStateInFlight();
    case core::BucketState::Done: return palette::bucketStateDone();
    }
    return palette::bucketStatePending();
}

QVariant BucketStatusModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= int(m_rows.size()) || index.column() >= ColumnCount)
        return {};
    const core::BucketStatus& s = m_rows[size_t(index.row())];
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case BucketColumn: return QStringLiteral("b%1").arg(s.bucket);
        case SizeColumn: return s.bytes > 0 ? formatBytes(double(s.bytes)) : tr("unknown");
        case GradientsColumn: return QStringLiteral("%1/%2").arg(s.ready).arg(s.total);
        case StateColumn:
            if (s.state == core::BucketState::Pending)
                return tr("gradients %1/%2").arg(s.ready).arg(s.total);
            return QString::fromUtf8(core::bucketStateName(s.state));
        }
        break;
    case Qt::BackgroundRole:
        if (index.column() == BucketColumn)
            return palette::bucketColor(s.bucket);
        return stateColor(s.state);
    case Qt::ForegroundRole:
        if (index.column() == BucketColumn)
            return palette::textOn(palette::bucketColor(s.bucket));
        return palette::textOn(stateColor(s.state));
    case Qt::ToolTipRole:
        if (s.launch >= 0)
            return tr("bucket %1: launched at %2, done at %3 (aligned)")
                .arg(s.bucket)
                .arg(formatDuration(double(s.launch - m_origin)), formatDuration(double(s.completion - m_origin)));
        return tr("bucket %1: not launched").arg(s.bucket);
    case StateRole:
        return int(s.state);
    case Qt::TextAlignmentRole:
        return index.column() == SizeColumn || index.column() == GradientsColumn
            ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter)) : QVariant();
    default:
        break;
    }
    return {};
}

QVariant BucketStatusModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case BucketColumn: return tr("Bucket");
    case SizeColumn: return tr("Size");
    case GradientsColumn: return tr("Ready");
    case StateColumn: return tr("State");
    }
    return {};
}

// ---------------------------------------------------------------------------------------------
// BucketStatusView

BucketStatusView::BucketStatusView(QWidget* parent)
    : QWidget(parent)
    , m_model(new BucketStatusModel(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    auto* top = new QHBoxLayout;
    m_caption = new QLabel(tr("Buckets"), this);
    m_rank = new QComboBox(this);
    top->addWidget(m_caption, 1);
    top->addWidget(m_rank);
    m_table = new QTableView(this);
    m_table->setModel(m_model);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(BucketStatusModel::StateColumn, QHeaderView::Stretch);
    m_table->setSelectionMode(QAbstractItemView::NoSelection);
    m_table->verticalHeader()->setDefaultSectionSize(20);
    layout->addLayout(top);
    layout->addWidget(m_table, 1);
    connect(m_rank, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0)
            m_model->setRank(m_rank->itemData(i).toInt());
    });
    connect(m_model, &QAbstractItemModel::modelReset, this, [this] {
        m_caption->setText(m_model->currentStep() == core::kNoStep ? tr("Buckets")
                                                                  : tr("Buckets in step %1").arg(m_model->currentStep()));
    });
}

void BucketStatusView::setRun(std::shared_ptr<const core::Run> run)
{
    std::set<int> ranks;
    if (run)
        for (const core::Lane& l : run->lanes)
            ranks.insert(l.rank);
    const QSignalBlocker block(m_rank);
    m_rank->clear();
    for (int r : ranks)
        m_rank->addItem(tr("rank %1").arg(r), r);
    m_model->setRun(std::move(run));
    if (!ranks.empty())
        m_model->setRank(*ranks.begin());
}

void BucketStatusView::setRank(int rank)
{
    const int i = m_rank->findData(rank);
    if (i >= 0)
        m_rank->setCurrentIndex(i);
    m_model->setRank(rank);
}

void BucketStatusView::setCursor(std::optional<core::TimeNs> aligned)
{
    m_model->setAlignedTime(aligned);
    m_caption->setText(m_model->currentStep() == core::kNoStep ? tr("Buckets") : tr("Buckets in step %1").arg(m_model->currentStep()));
}

void BucketStatusView::setStep(int32_t step)
{
    m_model->setStep(step);
    m_caption->setText(m_model->currentStep() == core::kNoStep ? tr("Buckets") : tr("Buckets in step %1").arg(m_model->currentStep()));
}

void BucketStatusView::follow(ReplayController* controller)
{
    connect(controller, &ReplayController::cursorChanged, this, [this](qint64 t) { setCursor(t); });
    connect(controller, &ReplayController::cursorCleared, this, [this] { setCursor(std::nullopt); });
    connect(controller, &ReplayController::stepChanged, this, [this](int step) { setStep(step); });
    setCursor(controller->cursor());
}

std::optional<core::BucketState> BucketStatusView::stateOf(int bucket) const
{
    for (const core::BucketStatus& s : m_model->statuses())
        if (s.bucket == bucket)
            return s.state;
    return std::nullopt;
}

} // namespace lockstep::ui
