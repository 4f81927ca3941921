// Launch panel (see launch_panel.h).
#include "launch_panel.h"

#include "timeline/timeline_widget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QSplitter>
#include <QTimer>
#include <QVBoxLayout>

#include "lockstep/core/run_db.h"

namespace lockstep::ui {

QString lockstepCliPath()
{
    const QString env = qEnvironmentVariable("LOCKSTEP_CLI");
    if (!env.isEmpty())
        return env;
    const QString beside = QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("lockstep"));
    if (QFileInfo(beside).isExecutable())
        return beside;
    // Build tree: tests live in build/tests/<area>/, the CLI in build/app/.
    const QString build = QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("../../app/lockstep"));
    if (QFileInfo(build).isExecutable())
        return QFileInfo(build).canonicalFilePath();
    return beside;
}

namespace {
void appendCommon(QStringList& a, const LaunchSettings& s)
{
    a << "--model" << s.model << "--layers" << QString::number(s.layers) << "--width" << QString::number(s.width)
      << "--steps" << QString::number(s.steps) << "--batch" << QString::number(s.batch)
      << "--backend" << s.backend << "--device" << s.device << "--progress" << "plain";
    if (s.stragglerRank >= 0 && s.stragglerMs > 0)
        a << "--straggler" << QStringLiteral("%1:%2").arg(s.stragglerRank).arg(s.stragglerMs);
    if (s.linkGbps > 0)
        a << "--link-gbps" << QString::number(s.linkGbps);
}

QStringList bucketList(const QString& text)
{
    QStringList out;
    for (const QString& part : text.split(',', Qt::SkipEmptyParts))
        if (!part.trimmed().isEmpty())
            out << part.trimmed();
    return out;
}
} // namespace

QStringList runArguments(const LaunchSettings& s, const QString& outFile)
{
    QStringList a{"run", "--nproc", QString::number(s.worldSize), "--out", outFile};
    const QStringList buckets = bucketList(s.bucketMb);
    a << "--bucket-mb" << (buckets.isEmpty() ? QStringLiteral("25") : buckets.front());
    appendCommon(a, s);
    return a;
}

QStringList sweepArguments(const LaunchSettings& s, const QString& outDir)
{
    QStringList a{"sweep", "--nproc", QString::number(s.worldSize), "--bucket-mb", bucketList(s.bucketMb).join(','),
                  "--out-dir", outDir};
    appendCommon(a, s);
    return a;
}

bool parseProgressLine(const QString& line, ProgressLine* out)
{
    // Two spellings: the workers' protocol line, and the launcher's plain progress line
    // ("step K/N loss=… step_ms=…", K counted from 1) that it prints when stderr is not a terminal.
    static const QRegularExpression worker(
        QStringLiteral(R"(LOCKSTEP\s+step=(\d+)\s+rank=(\d+)(?:\s+loss=(\S+))?(?:\s+step_ms=(\S+))?)"));
    static const QRegularExpression launcher(
        QStringLiteral(R"(^step\s+(\d+)(?:/(\d+))?\s+loss=(\S+)\s+step_ms=(\S+))"));
    if (const auto m = worker.match(line); m.hasMatch()) {
        out->step = m.captured(1).toInt();
        out->rank = m.captured(2).toInt();
        out->loss = m.captured(3).toDouble();
        out->stepMs = m.captured(4).toDouble();
        return true;
    }
    if (const auto m = launcher.match(line); m.hasMatch()) {
        out->step = m.captured(1).toInt() - 1;
        out->rank = 0;
        out->loss = m.captured(3).toDouble();
        out->stepMs = m.captured(4).toDouble();
        return true;
    }
    return false;
}

namespace {
// The launcher keeps rank shards in a hidden folder beside the run file:
// ".<RUN.db>.shards-XXXXXX/rank-<r>.db" (app/launcher.cpp). Newest folder first.
QStringList shardsIn(const QDir& parent, const QString& runFileName)
{
    const QString prefix = runFileName.isEmpty() ? QStringLiteral(".") : QStringLiteral(".%1.shards").arg(runFileName);
    const auto dirs = parent.entryInfoList(QDir::Dirs | QDir::Hidden | QDir::NoDotAndDotDot, QDir::Time);
    for (const QFileInfo& d : dirs) {
        if (!d.fileName().startsWith(prefix) || !d.fileName().contains(QLatin1String(".shards")))
            continue;
        QStringList files;
        for (const QFileInfo& f : QDir(d.absoluteFilePath()).entryInfoList({"rank-*.db"}, QDir::Files, QDir::Name))
            if (f.size() > 0)
                files << f.absoluteFilePath();
        if (!files.isEmpty())
            return files;
    }
    return {};
}
} // namespace

QStringList liveFilesFor(const QString& outFile)
{
    const QFileInfo out(outFile);
    if (out.exists() && core::validateRunFile(outFile.toStdString()))
        return {out.absoluteFilePath()};
    return shardsIn(out.dir(), out.fileName());
}

LaunchPanel::LaunchPanel(QWidget* parent)
    : QWidget(parent)
    , m_liveTimer(new QTimer(this))
    , m_liveLoader(new RunLoader(this))
    , m_name(new QLineEdit(this))
    , m_model(new QComboBox(this))
    , m_layers(new QSpinBox(this))
    , m_width(new QSpinBox(this))
    , m_world(new QSpinBox(this))
    , m_bucket(new QLineEdit(this))
    , m_steps(new QSpinBox(this))
    , m_batch(new QSpinBox(this))
    , m_backend(new QComboBox(this))
    , m_stragglerRank(new QSpinBox(this))
    , m_stragglerMs(new QSpinBox(this))
    , m_link(new QDoubleSpinBox(this))
    , m_runButton(new QPushButton(tr("Run"), this))
    , m_sweepButton(new QPushButton(tr("Sweep"), this))
    , m_cancelButton(new QPushButton(tr("Cancel"), this))
    , m_progress(new QProgressBar(this))
    , m_status(new QLabel(this))
    , m_log(new QPlainTextEdit(this))
    , m_liveTimeline(new TimelineWidget(this))
    , m_follow(new QCheckBox(tr("Follow"), this))
{
    m_name->setPlaceholderText(tr("automatic (model-ranks-bucket-time)"));
    m_name->setToolTip(tr("Name of the run file written into the workspace folder"));
    m_model->addItems({"mlp", "transformer", "convnet"});
    m_model->setToolTip(tr("Model trained by every rank"));
    m_layers->setRange(1, 256);
    m_layers->setValue(4);
    m_layers->setToolTip(tr("Number of layers (--layers)"));
    m_width->setRange(8, 16384);
    m_width->setValue(256);
    m_width->setSingleStep(64);
    m_width->setToolTip(tr("Hidden width (--width)"));
    m_world->setRange(1, 64);
    m_world->setValue(2);
    m_world->setToolTip(tr("Number of local ranks (--nproc)"));
    m_bucket->setText("25");
    m_bucket->setToolTip(tr("Gradient bucket cap in MiB (--bucket-mb). A comma list (1,4,25) is a sweep"));
    m_steps->setRange(1, 100000);
    m_steps->setValue(20);
    m_steps->setToolTip(tr("Training steps (--steps)"));
    m_batch->setRange(1, 65536);
    m_batch->setValue(32);
    m_batch->setToolTip(tr("Per-rank batch size (--batch)"));
    m_backend->addItem("gloo / cpu", QStringList{"gloo", "cpu"});
    m_backend->addItem("nccl / cuda", QStringList{"nccl", "cuda"});
    m_backend->setToolTip(tr("Process group backend and device"));
    m_stragglerRank->setRange(-1, 63);
    m_stragglerRank->setValue(-1);
    m_stragglerRank->setSpecialValueText(tr("none"));
    m_stragglerRank->setToolTip(tr("Rank that gets extra compute every step (--straggler RANK:MS)"));
    m_stragglerMs->setRange(0, 100000);
    m_stragglerMs->setSuffix(" ms");
    m_stragglerMs->setToolTip(tr("Extra compute of the straggler rank per step"));
    m_link->setRange(0, 1000);
    m_link->setDecimals(2);
    m_link->setSpecialValueText(tr("not emulated"));
    m_link->setSuffix(" Gbps");
    m_link->setToolTip(tr("Emulated link speed for communication (--link-gbps)"));

    auto* form = new QFormLayout;
    form->addRow(tr("Name"), m_name);
    form->addRow(tr("Model"), m_model);
    auto* size = new QHBoxLayout;
    size->addWidget(new QLabel(tr("layers"), this));
    size->addWidget(m_layers);
    size->addWidget(new QLabel(tr("width"), this));
    size->addWidget(m_width);
    form->addRow(tr("Model size"), size);
    form->addRow(tr("World size"), m_world);
    form->addRow(tr("Bucket cap (MiB)"), m_bucket);
    form->addRow(tr("Steps"), m_steps);
    form->addRow(tr("Batch per rank"), m_batch);
    form->addRow(tr("Backend / device"), m_backend);
    auto* straggler = new QHBoxLayout;
    straggler->addWidget(m_stragglerRank);
    straggler->addWidget(m_stragglerMs);
    form->addRow(tr("Straggler rank, delay"), straggler);
    form->addRow(tr("Link speed"), m_link);
    auto* box = new QGroupBox(tr("Training run"), this);
    box->setLayout(form);
    box->setMaximumWidth(460);

    m_runButton->setToolTip(tr("Record one run with these settings (Ctrl+R)"));
    m_sweepButton->setToolTip(tr("Record one run per bucket cap in the list (Ctrl+Shift+R)"));
    m_cancelButton->setToolTip(tr("Stop the running job (terminates the launcher and its ranks)"));
    m_cancelButton->setEnabled(false);
    connect(m_runButton, &QPushButton::clicked, this, &LaunchPanel::startRun);
    connect(m_sweepButton, &QPushButton::clicked, this, &LaunchPanel::startSweep);
    connect(m_cancelButton, &QPushButton::clicked, this, &LaunchPanel::cancel);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_runButton);
    buttons->addWidget(m_sweepButton);
    buttons->addWidget(m_cancelButton);
    buttons->addStretch(1);

    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    m_progress->setFormat(tr("idle"));
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    m_log->setPlaceholderText(tr("Output of the lockstep command appears here"));
    QFont mono("monospace");
    mono.setStyleHint(QFont::TypeWriter);
    m_log->setFont(mono);
    m_status->setWordWrap(true);

    auto* left = new QVBoxLayout;
    left->addWidget(box);
    left->addLayout(buttons);
    left->addStretch(1);
    m_follow->setChecked(true);
    m_follow->setToolTip(tr("Keep the whole recorded part of the run in view as it grows"));
    m_liveTimeline->setMinimumHeight(160);
    m_liveTimeline->setFocusPolicy(Qt::StrongFocus);
    auto* liveHeader = new QHBoxLayout;
    liveHeader->addWidget(new QLabel(tr("<b>Live timeline</b> (re-read every second while the run records)"), this), 1);
    liveHeader->addWidget(m_follow);
    auto* liveBox = new QWidget(this);
    auto* liveLayout = new QVBoxLayout(liveBox);
    liveLayout->setContentsMargins(0, 0, 0, 0);
    liveLayout->addLayout(liveHeader);
    liveLayout->addWidget(m_liveTimeline, 1);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(liveBox);
    split->addWidget(m_log);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* right = new QVBoxLayout;
    right->addWidget(m_progress);
    right->addWidget(m_status);
    right->addWidget(split, 1);
    auto* layout = new QHBoxLayout(this);
    layout->addLayout(left);
    layout->addLayout(right, 1);

    // Live view: the run file (or its shards) is re-read once a second while the job records.
    // One second keeps the timeline fresh while the reads stay a small fraction of the time.
    m_liveTimer->setInterval(1000);
    connect(m_liveTimer, &QTimer::timeout, this, &LaunchPanel::pollLive);
    connect(m_liveLoader, &RunLoader::runLoaded, this, [this](const QString&, LoadedRunPtr run) {
        if (!isRunning())
            return;
        // The same file growing: update in place (keeps the user's zoom unless following).
        const bool same = m_liveRun && m_liveRun->path == run->path && !m_liveTimeline->runs().empty();
        m_liveRun = run;
        if (same)
            m_liveTimeline->updateRun(0, TimelineRun{run->run, run->label, run->timeline});
        else
            m_liveTimeline->setRuns({TimelineRun{run->run, run->label, run->timeline}});
        if (m_follow->isChecked() || !same)
            m_liveTimeline->fitAll();
        emit liveRunUpdated(run);
    });
}

LaunchPanel::~LaunchPanel()
{
    if (m_process && m_process->state() != QProcess::NotRunning) {
        m_process->disconnect(this);
        m_process->terminate();
        if (!m_process->waitForFinished(3000))
            m_process->kill();
    }
}

LaunchSettings LaunchPanel::settings() const
{
    LaunchSettings s;
    s.name = m_name->text().trimmed();
    s.model = m_model->currentText();
    s.layers = m_layers->value();
    s.width = m_width->value();
    s.worldSize = m_world->value();
    s.bucketMb = m_bucket->text().trimmed();
    s.steps = m_steps->value();
    s.batch = m_batch->value();
    const QStringList bd = m_backend->currentData().toStringList();
    s.backend = bd.value(0);
    s.device = bd.value(1);
    s.stragglerRank = m_stragglerRank->value();
    s.stragglerMs = m_stragglerMs->value();
    s.linkGbps = m_link->value();
    return s;
}

void LaunchPanel::setSettings(const LaunchSettings& s)
{
    m_name->setText(s.name);
    m_model->setCurrentText(s.model);
    m_layers->setValue(s.layers);
    m_width->setValue(s.width);
    m_world->setValue(s.worldSize);
    m_bucket->setText(s.bucketMb);
    m_steps->setValue(s.steps);
    m_batch->setValue(s.batch);
    m_backend->setCurrentIndex(s.backend == QLatin1String("nccl") ? 1 : 0);
    m_stragglerRank->setValue(s.stragglerRank);
    m_stragglerMs->setValue(s.stragglerMs);
    m_link->setValue(s.linkGbps);
}

bool LaunchPanel::isRunning() const
{
    return m_process && m_process->state() != QProcess::NotRunning;
}

void LaunchPanel::startRun()
{
    start(false);
}

void LaunchPanel::startSweep()
{
    start(true);
}

void LaunchPanel::start(bool sweep)
{
    if (isRunning())
        return;
    const LaunchSettings s = settings();
    QString name = s.name;
    name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]")), QStringLiteral("_"));
    if (name.isEmpty()) {
        name = QStringLiteral("%1-n%2-b%3-%4")
                   .arg(s.model)
                   .arg(s.worldSize)
                   .arg(sweep ? QStringLiteral("sweep") : QString(s.bucketMb).replace(',', '_'))
                   .arg(QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss"));
    }
    const QString workspace = m_workspace.isEmpty() ? QDir::currentPath() : m_workspace;
    QDir().mkpath(workspace);
    m_sweep = sweep;
    m_sweepRuns = sweep ? std::max<int>(1, int(s.bucketMb.split(',', Qt::SkipEmptyParts).size())) : 1;
    m_sweepIndex = 0;
    m_lastStep = -1;
    QStringList args;
    if (sweep) {
        m_outPath = QDir(workspace).filePath(name);
        args = sweepArguments(s, m_outPath);
    } else {
        m_outPath = QDir(workspace).filePath(name + ".db");
        if (QFileInfo::exists(m_outPath)) {
            m_status->setText(tr("⚠ %1 already exists; choose another name").arg(m_outPath));
            return;
        }
        args = runArguments(s, m_outPath);
    }
    const QString cli = lockstepCliPath();
    if (!QFileInfo(cli).isExecutable()) {
        m_status->setText(tr("⚠ lockstep CLI not found at %1 (set LOCKSTEP_CLI)").arg(cli));
        emit finished(-1, m_status->text(), {});
        return;
    }

    delete m_process;
    m_process = new QProcess(this);
    m_process->setProgram(cli);
    m_process->setArguments(args); // an argument list: nothing is ever parsed by a shell
    m_process->setWorkingDirectory(workspace);
    m_partial[0].clear();
    m_partial[1].clear();
    connect(m_process, &QProcess::readyReadStandardOutput, this, [this] { readOutput(QProcess::StandardOutput); });
    connect(m_process, &QProcess::readyReadStandardError, this, [this] { readOutput(QProcess::StandardError); });
    connect(m_process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
        if (error == QProcess::FailedToStart) {
            m_liveTimer->stop();
            m_status->setText(tr("⚠ could not start %1: %2").arg(m_process->program(), m_process->errorString()));
            m_runButton->setEnabled(true);
            m_sweepButton->setEnabled(true);
            m_cancelButton->setEnabled(false);
            emit finished(-1, m_status->text(), {});
        }
    });
    connect(m_process, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
        readOutput(QProcess::StandardOutput);
        readOutput(QProcess::StandardError);
        m_liveTimer->stop();
        m_runButton->setEnabled(true);
        m_sweepButton->setEnabled(true);
        m_cancelButton->setEnabled(false);
        QStringList outputs;
        if (m_sweep) {
            QDir dir(m_outPath);
            for (const QFileInfo& f : dir.entryInfoList({"*.db"}, QDir::Files, QDir::Name))
                outputs << f.absoluteFilePath();
        } else if (QFileInfo::exists(m_outPath)) {
            outputs << m_outPath;
        }
        const bool ok = status == QProcess::NormalExit && code == 0;
        QString message = ok ? tr("finished: %1").arg(m_outPath)
                             : status == QProcess::CrashExit ? tr("⚠ stopped (%1)").arg(m_outPath)
                                                             : tr("⚠ lockstep exited with status %1").arg(code);
        m_status->setText(message);
        m_progress->setFormat(ok ? tr("done") : tr("stopped"));
        if (ok) {
            m_progress->setRange(0, 1);
            m_progress->setValue(1);
        }
        emit finished(ok ? 0 : (code != 0 ? code : 1), message, outputs);
    });

    m_liveRun.reset();
    m_log->clear();
    m_log->appendPlainText(QStringLiteral("$ %1 %2").arg(cli, args.join(' ')));
    m_status->setText(tr("recording %1").arg(m_outPath));
    const int total = s.steps * m_sweepRuns;
    m_progress->setRange(0, total);
    m_progress->setValue(0);
    m_progress->setFormat(tr("starting…"));
    m_runButton->setEnabled(false);
    m_sweepButton->setEnabled(false);
    m_cancelButton->setEnabled(true);
    m_process->start();
    m_liveTimer->start();
    emit started(m_outPath, sweep);
}

void LaunchPanel::cancel()
{
    if (!isRunning())
        return;
    m_log->appendPlainText(tr("— cancelled —"));
    // The launcher stops its ranks on SIGTERM; kill it if it does not within a few seconds.
    m_process->terminate();
    QTimer::singleShot(5000, m_process, [p = m_process] {
        if (p->state() != QProcess::NotRunning)
            p->kill();
    });
}

void LaunchPanel::readOutput(QProcess::ProcessChannel channel)
{
    if (!m_process)
        return;
    QByteArray& partial = m_partial[channel == QProcess::StandardOutput ? 0 : 1];
    m_process->setReadChannel(channel);
    partial += m_process->readAll();
    // Progress bars redraw with '\r'; treat it as a line end too.
    partial.replace('\r', '\n');
    qsizetype nl;
    while ((nl = partial.indexOf('\n')) >= 0) {
        const QString line = QString::fromUtf8(partial.left(nl)).trimmed();
        partial.remove(0, nl + 1);
        if (!line.isEmpty())
            handleLine(line);
    }
}

void LaunchPanel::handleLine(const QString& line)
{
    ProgressLine p;
    if (!parseProgressLine(line, &p)) {
        m_log->appendPlainText(line);
        return;
    }
    if (p.rank != 0)
        return; // rank 0 speaks for the step; the others only add noise to the log
    if (m_sweep && p.step < m_lastStep)
        m_sweepIndex = std::min(m_sweepIndex + 1, m_sweepRuns - 1); // the sweep moved to its next run
    m_lastStep = p.step;
    const int perRun = m_progress->maximum() / std::max(1, m_sweepRuns);
    m_progress->setValue(std::min(m_progress->maximum(), m_sweepIndex * perRun + p.step + 1));
    m_progress->setFormat(m_sweep ? tr("run %1/%2, step %3/%4").arg(m_sweepIndex + 1).arg(m_sweepRuns).arg(p.step + 1).arg(perRun)
                                  : tr("step %1/%2").arg(p.step + 1).arg(perRun));
    m_status->setText(tr("step %1: loss %2, %3 ms/step").arg(p.step).arg(p.loss, 0, 'g', 4).arg(p.stepMs, 0, 'f', 1));
}

void LaunchPanel::pollLive()
{
    if (!isRunning() || m_liveLoader->pendingJobs() > 0)
        return; // never pile up reads behind a slow one
    QStringList files;
    if (m_sweep) {
        // The run being recorded is the one whose shards are in the sweep folder now.
        files = shardsIn(QDir(m_outPath), QString());
    } else {
        files = liveFilesFor(m_outPath);
    }
    if (!files.isEmpty())
        m_liveLoader->load(files, QStringLiteral("live"));
}

} // namespace lockstep::ui
