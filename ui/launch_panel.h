// The Launch panel: sets up a training run of a built-in model (or a sweep over bucket caps), or
// the recording of the user's own DDP script (`lockstep record`), starts the `lockstep` CLI
// through QProcess with an argument list (never a shell string), follows its progress, and while
// it records re-reads the growing run every second for the live timeline.
//
// Everything about the job comes from the job library: the form is built from its flag table
// (a widget per flag by type, ranges and choices from the table, the help as tooltip), the
// options are checked by its rules before anything starts, the progress is its protocol
// (`--progress protocol`: job, progress and sweep point lines), and the files of the live view
// are found by its shard layout. A script's recording speaks the same protocol through the same
// launcher, so it is followed the same way; only its number of steps is unknown beforehand.
#pragma once

#include "run_loader.h"

#include "lockstep/job/progress.h"
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
class QTabWidget;
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

// "Your script": `lockstep record` on the user's own PyTorch DDP script.
struct ScriptSettings {
    QString script;     // the training script (.py)
    QString arguments;  // its arguments on one line, split by QProcess::splitCommand (spaces, "quotes"); no shell
    int worldSize = 2;  // --nproc
    QString name;       // run name; file name in the workspace ("" = automatic)
    QString python;     // --python ("" = the CLI's default interpreter)
    bool quiet = false; // --quiet: the script's output is not shown
};

enum class LaunchMode { BuiltIn, Script };

// Where the `lockstep` CLI is: $LOCKSTEP_CLI, else next to this executable.
QString lockstepCliPath();
// Argument lists (pure, for tests): `lockstep run …` into outFile, `lockstep sweep …` into outDir.
// Only the flags that differ from the defaults are passed (job::toArguments).
QStringList runArguments(const LaunchSettings& s, const QString& outFile);
QStringList sweepArguments(const LaunchSettings& s, const QString& outDir);
// `lockstep record …` into outFile; the run is named s.name, else after outFile's stem.
QStringList recordArguments(const ScriptSettings& s, const QString& outFile);
// Why a script cannot be recorded, checked before anything starts (no script, no such file, not
// a .py, world size out of range, an interpreter that cannot run); empty when it can.
QString scriptProblem(const ScriptSettings& s);
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
    // The built-in model's form. setSettings shows that form.
    LaunchSettings settings() const;
    void setSettings(const LaunchSettings& s);
    // The "Your script" form. setScriptSettings shows that form.
    ScriptSettings scriptSettings() const;
    void setScriptSettings(const ScriptSettings& s);
    LaunchMode mode() const;
    void setMode(LaunchMode mode);
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
    // A run (sweep) of the built-in model's form; shows that form.
    void startRun();
    void startSweep();
    // `lockstep record` of the script form; shows that form.
    void startRecord();
    // Whichever form is shown: a built-in run or a script's recording (the Run menu, Ctrl+R).
    void startShown();
    void cancel();

signals:
    void started(const QString& outPath, bool sweep);
    void liveRunUpdated(lockstep::ui::LoadedRunPtr run);
    // exitCode 0 = success; `outputs` are the run files written (one for run, several for sweep).
    void finished(int exitCode, const QString& message, const QStringList& outputs);
    // Before the first step of a run (or of a sweep's point): what the progress bar now says
    // ("starting workers…", "rendezvous…", "warm-up…", "step 1/N…").
    void phaseShown(const QString& text);

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
    QWidget* buildScriptForm();
    void start(bool sweep);
    // Starts the CLI with `args` in `workspace` (m_outPath, m_liveOut, m_steps etc. set before).
    void launch(const QStringList& args, const QString& workspace);
    void showMode(LaunchMode mode);
    void readOutput(QProcess::ProcessChannel channel);
    // The progress bar's words before the first step (progress.h's phases).
    void showPhase(job::Phase phase, int ranksPast, int nproc);
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
    int m_steps = 0;         // planned steps per run; 0 = unknown (a script)
    QString m_verdict;       // the CLI's own line saying why it failed
    QByteArray m_partial[2];

    QLineEdit* m_name;
    QSpinBox* m_world;
    QLineEdit* m_bucket;
    std::vector<FlagField> m_fields;
    QTabWidget* m_modeTabs;
    QLineEdit* m_script;
    QLineEdit* m_scriptArgs;
    QSpinBox* m_scriptWorld;
    QLineEdit* m_scriptName;
    QLineEdit* m_python;
    QCheckBox* m_quiet;
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
