// Replay (issue item 6): a cursor swept through one step in slowed time, and a per-bucket view
// of what the reducer was doing at the cursor: how many gradients of each bucket were ready,
// which all-reduces were waiting (ready, but an earlier bucket had not launched yet), which were
// in flight and which were done.
//
// ReplayController owns the cursor and a QTimer; it drives TimelineWidget::setReplayCursor.
// ReplayBar is its small control strip; BucketStatusView (over BucketStatusModel) lists the
// buckets of one rank at the cursor.
#pragma once

#include "lockstep/core/types.h"
#include "timeline_model.h"

#include <QAbstractTableModel>
#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <QTimer>
#include <QWidget>

#include <memory>
#include <optional>

class QComboBox;
class QLabel;
class QSlider;
class QSpinBox;
class QTableView;
class QToolButton;

namespace lockstep::ui {

class TimelineWidget;

class ReplayController : public QObject {
    Q_OBJECT
public:
    explicit ReplayController(QObject* parent = nullptr);

    // The timeline whose cursor is driven (and whose step ranges are used); may be null.
    void setTimeline(TimelineWidget* timeline);
    // Replays step `step` (aligned range over all runs of the timeline). Returns false if the
    // timeline has no such step. Zooms the timeline to the step and puts the cursor at its start.
    bool setStep(int step);
    int step() const { return m_step; }
    // An explicit aligned range (without a timeline, or for a custom window).
    void setRange(core::TimeNs t0, core::TimeNs t1);
    std::pair<core::TimeNs, core::TimeNs> range() const { return {m_t0, m_t1}; }

    // Replay speed relative to real time: 0.001 = one recorded millisecond takes a second.
    void setSpeed(double speed);
    double speed() const { return m_speed; }

    void play();
    void pause();
    void togglePlaying();
    bool isPlaying() const { return m_timer.isActive(); }

    void setCursor(core::TimeNs aligned);
    std::optional<core::TimeNs> cursor() const { return m_cursor; }
    void setFraction(double f);   // 0..1 over the range
    double fraction() const;
    // Moves the cursor as if `wallNs` of real time passed at the current speed (the timer's
    // step; public so tests need not wait on wall time).
    void advance(core::TimeNs wallNs);
    // Removes the cursor from the timeline and stops.
    void stop();

signals:
    void cursorChanged(qint64 alignedNs);
    void cursorCleared(); // stop(): no cursor, nothing dimmed
    void playingChanged(bool playing);
    void stepChanged(int step);

private:
    void tick();
    int firstSteadyStep() const;

    QPointer<TimelineWidget> m_timeline;
    QTimer m_timer;
    QElapsedTimer m_clock;
    int m_step = -1;
    core::TimeNs m_t0 = 0;
    core::TimeNs m_t1 = 0;
    double m_speed = 0.001;
    double m_carry = 0; // sub-nanosecond remainder of slowed time
    std::optional<core::TimeNs> m_cursor;
};

// Play/Pause, speed, step and a slider over the step.
class ReplayBar : public QWidget {
    Q_OBJECT
public:
    explicit ReplayBar(ReplayController* controller, QWidget* parent = nullptr);
    void setStepRange(int first, int last);

private:
    void syncFromController();

    ReplayController* m_controller;
    QToolButton* m_play = nullptr;
    QToolButton* m_stop = nullptr;
    QComboBox* m_speed = nullptr;
    QSpinBox* m_step = nullptr;
    QSlider* m_slider = nullptr;
    QLabel* m_time = nullptr;
    bool m_syncing = false;
};

// The buckets of one rank at one (absolute) time; rows = buckets.
class BucketStatusModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { BucketColumn, SizeColumn, GradientsColumn, StateColumn, ColumnCount };
    static constexpr int StateRole = Qt::UserRole + 1; // core::BucketState as int

    explicit BucketStatusModel(QObject* parent = nullptr);
    void setRun(std::shared_ptr<const core::Run> run);
    void setRank(int rank);
    int rank() const { return m_rank; }
    // Aligned time (the timeline's axis); the step is the rank's step at that time.
    void setAlignedTime(std::optional<core::TimeNs> aligned);
    // Without a time: the buckets of this step as it ended.
    void setStep(int32_t step);
    int32_t currentStep() const { return m_step; }
    const std::vector<core::BucketStatus>& statuses() const { return m_rows; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    static QColor stateColor(core::BucketState state);

private:
    void recompute();

    std::shared_ptr<const core::Run> m_run;
    core::TimeNs m_origin = 0;
    int m_rank = 0;
    std::optional<core::TimeNs> m_aligned;
    int32_t m_shownStep = core::kNoStep;
    int32_t m_step = core::kNoStep;
    std::vector<core::BucketStatus> m_rows;
};

class BucketStatusView : public QWidget {
    Q_OBJECT
public:
    explicit BucketStatusView(QWidget* parent = nullptr);
    void setRun(std::shared_ptr<const core::Run> run);
    void setRank(int rank);
    void setCursor(std::optional<core::TimeNs> aligned);
    void setStep(int32_t step); // the step shown when there is no cursor
    // Follows a controller's cursor and step.
    void follow(ReplayController* controller);
    BucketStatusModel* model() const { return m_model; }
    // The state of bucket `bucket` at the current cursor; nullopt if unknown.
    std::optional<core::BucketState> stateOf(int bucket) const;

private:
    BucketStatusModel* m_model = nullptr;
    QComboBox* m_rank = nullptr;
    QLabel* m_caption = nullptr;
    QTableView* m_table = nullptr;
};

} // namespace lockstep::ui
