// The Launch panel: sets up a training run (or a bucket-size sweep), starts the `lockstep` CLI
// through QProcess with an argument list (never a shell string), follows its progress lines,
// and while it records re-reads the growing run every second for the live timeline.
#pragma once

#include "run_loader.h"

#include <QProcess>
#include <QStringList>
#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;
class QCheckBox;

namespace lockstep::ui {

class TimelineWidget;

struct LaunchSettings {
    QString name;           // run name; file name in the workspace
    QString model = QStringLiteral("mlp");
    int layers = 4;
    int width = 256;
    int worldSize = 2;
    QString bucketMb = QStringLiteral("25"); // one value, or a comma list for a sweep
    int steps = 20;
    int batch = 32;
    QString backend = QStringLiteral("gloo");
    QString device = QStringLiteral("cpu");
    int stragglerRank = -1; // -1: none
    int stragglerMs = 0;
    double linkGbps = 0;    // 0: not emulated
};

// Where the `lockstep` CLI is: $LOCKSTEP_CLI, else next to this executable.
QString lockstepCliPath();
// Argument lists (pure, for tests): `lockstep run …` into outFile, `lockstep sweep …` into outDir.
QStringList runArguments(const LaunchSettings& s, const QString& outFile);
QStringList sweepArguments(const LaunchSettings& s, const QString& outDir);
// Parses "LOCKSTEP step=<s> rank=<r> loss=<f> step_ms=<f>"; false for any other line.
struct ProgressLine {
    int step = -1;
    int rank = -1;
    double loss = 0;
    double stepMs = 0;
};
bool parseProgressLine(const QString& line, ProgressLine* out);
// Files to read for the live view of a run writing `outFile`: the run file once it is readable,
// else its rank shards (whatever *.db files the recorder keeps in the run's shard folder).
QStringList liveFilesFor(const QString& outFile);

class LaunchPanel : public QWidget {
    Q_OBJECT
public:
    explicit LaunchPanel(QWidget* parent = nullptr);
    ~LaunchPanel() override;

    void setWorkspace(const QString& folder) { m_workspace = folder; }
    LaunchSettings settings() const;
    void setSettings(const LaunchSettings& s);
    bool isRunning() const;
    QString outputPath() const { return m_outPath; }
    QProcess* process() const { return m_process; }

    QPushButton* runButton() const { return m_runButton; }
    QPushButton* sweepButton() const { return m_sweepButton; }
    QPushButton* cancelButton() const { return m_cancelButton; }
    QProgressBar* progressBar() const { return m_progress; }
    QPlainTextEdit* log() const { return m_log; }
    TimelineWidget* liveTimeline() const { return m_liveTimeline; }
    LoadedRunPtr liveRun() const { return m_liveRun; }

public slots:
    void startRun();
    void startSweep();
    void cancel();

signals:
    void started(const QString& outPath, bool sweep);
    void liveRunUpdated(lockstep::ui::LoadedRunPtr run);
    // exitCode 0 = success; `outputs` are the run files written (one for run, several for sweep).
    void finished(int exitCode, const QString& message, const QStringList& outputs);

private:
    void start(bool sweep);
    void readOutput(QProcess::ProcessChannel channel);
    void handleLine(const QString& line);
    void pollLive();

    QString m_workspace;
    QProcess* m_process = nullptr;
    QTimer* m_liveTimer;
    RunLoader* m_liveLoader;
    QString m_outPath;
    bool m_sweep = false;
    int m_sweepRuns = 1;
    int m_sweepIndex = 0;
    int m_lastStep = -1;
    QByteArray m_partial[2];

    QLineEdit* m_name;
    QComboBox* m_model;
    QSpinBox* m_layers;
    QSpinBox* m_width;
    QSpinBox* m_world;
    QLineEdit* m_bucket;
    QSpinBox* m_steps;
    QSpinBox* m_batch;
    QComboBox* m_backend;
    QSpinBox* m_stragglerRank;
    QSpinBox* m_stragglerMs;
    QDoubleSpinBox* m_link;
    QPushButton* m_runButton;
    QPushButton* m_sweepButton;
    QPushButton* m_cancelButton;
    QProgressBar* m_progress;
    QLabel* m_status;
    QPlainTextEdit* m_log;
    TimelineWidget* m_liveTimeline;
    QCheckBox* m_follow;
    LoadedRunPtr m_liveRun;
};

} // namespace lockstep::ui
