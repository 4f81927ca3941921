// The Launch panel: sets up a training run (or a sweep over bucket caps), starts the `lockstep`
// CLI through QProcess with an argument list (never a shell string), follows its progress, and
// while it records re-reads the growing run every second for the live timeline.
//
// Everything about the job comes from the job library: the form is built from its flag table
// (a widget per flag by type, ranges and choices from the table, the help as tooltip), the
// options are checked by its rules before anything starts, the progress is its protocol
// (`--progress protocol`: job, progress and sweep point lines), and the files of the live view
// are found by its shard layout.
#pragma once

#include "run_loader.h"

#include "lockstep/job/training_options.h"

#include <QProcess>
#include <QStringList>
#include <QWidget>

#include <vector>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTimer;
class QCheckBox;

namespace lockstep::job {
struct Flag;
}

namespace lockstep::ui {

class TimelineWidget;

struct LaunchSettings {
    QString name;                 // run name; file name in the workspace
    int worldSize = 2;            // --nproc
    QString bucketMb = QStringLiteral("25"); // one value, or a comma list for a sweep
    job::TrainingOptions training; // every other training flag (bucketMb is taken from above)
};

// Where the `lockstep` CLI is: $LOCKSTEP_CLI, else next to this executable.
QString lockstepCliPath();
// Argument lists (pure, for tests): `lockstep run …` into outFile, `lockstep sweep …` into outDir.
// Only the flags that differ from the defaults are passed (job::toArguments).
QStringList runArguments(const LaunchSettings& s, const QString& outFile);
QStringList sweepArguments(const LaunchSettings& s, const QString& outDir);
// The bucket caps of a settings' list ("1, 4,25"); an error message for an unusable one.
QStringList bucketList(const QString& text, QString* error = nullptr);
// job::liveFilesFor for Qt callers.
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
    QLabel* statusLabel() const { return m_status; }
    QPlainTextEdit* log() const { return m_log; }
    QTableWidget* sweepTable() const { return m_sweepTable; }
    TimelineWidget* liveTimeline() const { return m_liveTimeline; }
    LoadedRunPtr liveRun() const { return m_liveRun; }
    // The run file the live view follows (for a sweep: the point in progress).
    QString liveRunFile() const { return m_liveOut; }
    // The form's widget of a flag of the job library's table ("--layers"), for tests.
    QWidget* flagWidget(const QString& name) const;

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
    // One form row per flag of the table: its widgets and how to read and set them.
    struct FlagField {
        const job::Flag* flag = nullptr;
        QWidget* widget = nullptr;       // the value (spin box, combo box, check box)
        QSpinBox* rank = nullptr;        // RANK:VALUE flags: the rank (-1 = not injected)
        QString text() const;            // the value as the flag's text ("" = not set)
        void setText(const QString& t);
    };
    void buildForm(QWidget* into);
    void start(bool sweep);
    void readOutput(QProcess::ProcessChannel channel);
    void handleLine(const QString& line);
    void pollLive();
    void fillSweepTable(const QStringList& outputs);

    QString m_workspace;
    QProcess* m_process = nullptr;
    QTimer* m_liveTimer;
    RunLoader* m_liveLoader;
    QString m_outPath;
    QString m_liveOut;       // the run file being recorded (a sweep's current point)
    QString m_liveShardDir;  // its shard folder, from the launcher's job line
    bool m_sweep = false;
    int m_sweepRuns = 1;
    int m_sweepIndex = 0;
    int m_steps = 0;
    QByteArray m_partial[2];

    QLineEdit* m_name;
    QSpinBox* m_world;
    QLineEdit* m_bucket;
    std::vector<FlagField> m_fields;
    QPushButton* m_runButton;
    QPushButton* m_sweepButton;
    QPushButton* m_cancelButton;
    QProgressBar* m_progress;
    QLabel* m_status;
    QPlainTextEdit* m_log;
    QTableWidget* m_sweepTable;
    TimelineWidget* m_liveTimeline;
    QCheckBox* m_follow;
    LoadedRunPtr m_liveRun;
};

} // namespace lockstep::ui
