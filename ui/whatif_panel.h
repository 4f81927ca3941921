// The What-if page: beside the current run, fields for the knobs core's what-if model replays
// (bucket cap, first-bucket cap, world size, emulated link, compression), prefilled with the
// run's recorded configuration; on every change the predicted timeline is stacked over the
// measured one on one time axis, and the predicted numbers stand next to the measured ones with
// the model's self-error and notes. "Run it" hands the configuration to the Launch panel, so the
// prediction can be checked against the real run in Compare; "Save prediction…" writes the
// predicted run file (marked predicted wherever the app lists it).
//
// Threads (hotspot's habit, as RunLoader): the model is built once per run in the thread pool
// (O(run)); each prediction (the replay, core::analyze of the predicted run and its timeline
// model) runs there too, and the GUI thread only paints finished results. At most one prediction
// is in flight: changes made meanwhile collapse into the newest configuration, which starts when
// the one in flight lands, so a slider dragged across twenty values costs two or three replays,
// not twenty, and the page never falls behind the hand. Results of a model that was replaced
// (another run chosen) are dropped by a generation counter.
#pragma once

#include "launch_panel.h"
#include "run_loader.h"

#include "lockstep/core/whatif.h"

#include <QWidget>

#include <optional>
#include <string>
#include <vector>

class QComboBox;
class QDoubleSpinBox;
class QHBoxLayout;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;
class QSplitter;
class QStackedWidget;
class QTableWidget;

namespace lockstep::ui {

class FlowLayout;
class TimelineWidget;

// The MiB of a field as the runtime converts --bucket-mb to bytes (floor, at least one byte), so
// a cap typed here gives the layout the runtime would build.
int64_t mibToBytes(double mb);

// What one prediction job hands back to the GUI thread.
struct WhatIfResult {
    core::WhatIfConfig config;
    QString error;                  // the model refused this configuration
    core::WhatIfNumbers numbers;
    std::vector<std::string> notes; // where this prediction extrapolates
    LoadedRunPtr predicted;         // the predicted run, analysed, with its timeline model
    core::PredictionInterval interval; // where a real run is expected to measure (whatif_error.h)
};

class WhatIfPanel : public QWidget {
    Q_OBJECT
public:
    // A long run's prediction replays at most this many steady steps (PredictOptions::
    // maxSteadySteps): the numbers of 64 steady steps are as steady as those of thousands, and the
    // replay costs O(spans replayed), so the page answers within a frame or two whatever the run.
    static constexpr int32_t kMaxSteadySteps = 64;

    explicit WhatIfPanel(QWidget* parent = nullptr);
    ~WhatIfPanel() override;

    // Builds the run's model off the GUI thread; the fields take its recorded configuration.
    void setRun(LoadedRunPtr run);
    LoadedRunPtr run() const { return m_run; }

    // The configuration the fields say.
    core::WhatIfConfig config() const;
    // Sets the fields (one prediction follows).
    void setConfig(const core::WhatIfConfig& config);
    // The options every prediction of this page uses (the tests predict independently with them).
    static core::PredictOptions predictOptions();

    // The model of the current run, once built; nullopt while building or when refused.
    const std::optional<core::WhatIfModel>& model() const { return m_model; }
    // The prediction on screen; nullopt before the first lands.
    const std::optional<WhatIfResult>& shown() const { return m_shown; }
    // A model build or a prediction is running or queued.
    bool busy() const;
    // What the page says instead of the prediction (building, refused, no run); empty when the
    // prediction is shown.
    QString message() const;

    // The launch settings of a configuration: the recorded run's training options with the
    // configuration's knobs; an error when the runtime cannot run it again (not its run).
    core::Result<LaunchSettings> launchSettings(const core::WhatIfConfig& config) const;
    // Writes the prediction on screen as a run file (core's writer: whole or absent; an existing
    // file is replaced only when `overwrite`). Returns the error, or an empty string.
    QString savePrediction(const QString& path, bool overwrite) const;

    QDoubleSpinBox* bucketCapBox() const { return m_bucket; }
    QSlider* bucketSlider() const { return m_bucketSlider; }
    QDoubleSpinBox* firstBucketCapBox() const { return m_first; }
    QSpinBox* worldSizeBox() const { return m_world; }
    QDoubleSpinBox* linkBox() const { return m_link; }
    QComboBox* compressBox() const { return m_compress; }
    QDoubleSpinBox* computeBox() const { return m_compute; }
    QPushButton* runItButton() const { return m_runIt; }
    // "Measure": one short run of the configuration on screen through the Launch page, the
    // measurement that tells when the prediction's interval holds the recorded step time.
    QPushButton* measureButton() const { return m_measure; }
    // The launch settings of that short run: launchSettings() with kMeasureSteps steady steps.
    core::Result<LaunchSettings> measureSettings(const core::WhatIfConfig& config) const;
    static constexpr int kMeasureSteps = 12;
    QPushButton* saveButton() const { return m_save; }
    QPushButton* resetButton() const { return m_reset; }
    TimelineWidget* timeline() const { return m_timeline; }
    QTableWidget* numbersTable() const { return m_numbers; }
    QLabel* headline() const { return m_headline; }
    QLabel* notesLabel() const { return m_notes; }

    // Rows of the numbers table.
    enum Row { StepTimeRow, OverlapRow, ExposedRow, CommRow, ThroughputRow, BucketsRow, RowCount };
    enum Column { MeasuredColumn, PredictedColumn, DiffColumn, DiffPctColumn, ColumnCount };

public slots:
    void resetToRecorded();
    void saveDialog();

signals:
    // A prediction reached the screen (its numbers, table and timeline are set).
    void predictionShown();
    // The model of the current run was built (ok) or refused (the message says why).
    void modelReady(bool ok);
    // "Run it": the Launch panel should run these settings.
    void runRequested(const lockstep::ui::LaunchSettings& settings);

private:
    void buildForm();
    // buildForm's steps, top to bottom as the page looks.
    void setUpFields();
    FlowLayout* fieldRows();
    QHBoxLayout* titleRow();
    void setUpResults();
    QSplitter* resultsSplit();
    void connectFields();
    void fieldsChanged();
    void startPrediction();
    void showResult(WhatIfResult result);
    void showMessage(const QString& text);
    void fillNumbers(const WhatIfResult& result);
    void updateButtons();

    LoadedRunPtr m_run;
    std::optional<core::WhatIfModel> m_model;
    core::WhatIfNumbers m_baseline; // the model's prediction of the recorded configuration
    QString m_modelError;
    quint64 m_generation = 0;     // bumps when the run changes: older jobs' results are dropped
    bool m_building = false;
    bool m_inFlight = false;
    std::optional<core::WhatIfConfig> m_wanted; // the newest configuration asked for, not yet started
    std::optional<WhatIfResult> m_shown;
    bool m_cannotTell = false;    // the prediction on screen: its interval holds the recorded step time
    bool m_viewSet = false;       // the timeline's view was placed for this run (kept across updates)

    QLabel* m_title;
    QDoubleSpinBox* m_bucket;
    QSlider* m_bucketSlider;
    QDoubleSpinBox* m_first;
    QSpinBox* m_world;
    QDoubleSpinBox* m_link;
    QComboBox* m_compress;
    QDoubleSpinBox* m_compute; // compute scale (WhatIfConfig::computeScale)
    QPushButton* m_reset;
    QPushButton* m_runIt;
    QPushButton* m_measure;
    QPushButton* m_save;
    QStackedWidget* m_body;
    QLabel* m_message;
    QLabel* m_headline;
    QLabel* m_modelLine;
    QTableWidget* m_numbers;
    QLabel* m_notes;
    TimelineWidget* m_timeline;
};

} // namespace lockstep::ui
