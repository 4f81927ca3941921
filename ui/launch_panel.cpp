// Launch panel (see launch_panel.h).
#include "launch_panel.h"

#include "timeline/format.h"
#include "timeline/timeline_widget.h"

#include "lockstep/core/run_files.h"
#include "lockstep/job/flags.h"
#include "lockstep/job/progress.h"
#include "lockstep/job/shard_layout.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFutureWatcher>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent>

#include <climits>
#include <cmath>

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

QStringList toQt(const std::vector<std::string>& v)
{
    QStringList out;
    for (const auto& s : v)
        out << QString::fromStdString(s);
    return out;
}

// The training flags as arguments, without --bucket-mb (the run and sweep commands place it).
QStringList trainingArguments(job::TrainingOptions t)
{
    t.bucketMb = job::TrainingOptions{}.bucketMb;
    return toQt(job::toArguments(t));
}

// A flag's range for its tooltip: "1 to 1024", "more than 0 to 65536 MiB".
QString rangeText(const job::Flag& f)
{
    switch (f.type) {
    case job::FlagType::Integer:
        return QStringLiteral("%1 to %2").arg(f.intMin).arg(f.intMax);
    case job::FlagType::Number:
        return QStringLiteral("%1%2 to %3 %4")
            .arg(f.minOpen ? QStringLiteral("more than ") : QString())
            .arg(f.min)
            .arg(f.max)
            .arg(QString::fromUtf8(f.unit.data(), qsizetype(f.unit.size())));
    default:
        return {};
    }
}

QString qs(std::string_view v) { return QString::fromUtf8(v.data(), qsizetype(v.size())); }

// The value widget of a Number flag. When the default lies outside the flag's range (an emulated
// link speed of 0 = not emulated) the widget's minimum is the default, shown as "off", and reads
// as "not given".
QDoubleSpinBox* numberBox(QWidget* parent, double lo, double hi, bool minOpen, double defaultValue, std::string_view unit)
{
    auto* box = new QDoubleSpinBox(parent);
    box->setDecimals(4);
    const double step = 0.0001; // the widget's resolution at 4 decimals
    const bool offAtDefault = defaultValue < lo || (minOpen && defaultValue == lo) || defaultValue > hi;
    box->setRange(offAtDefault ? defaultValue : (minOpen ? lo + step : lo), hi);
    if (offAtDefault)
        box->setSpecialValueText(QObject::tr("off"));
    if (!unit.empty())
        box->setSuffix(QStringLiteral(" ") + qs(unit));
    return box;
}

QSpinBox* integerBox(QWidget* parent, int64_t lo, int64_t hi)
{
    auto* box = new QSpinBox(parent);
    // A spin box holds an int: the form offers up to INT_MAX (the CLI takes the table's full range).
    box->setRange(int(std::max<int64_t>(lo, INT_MIN)), int(std::min<int64_t>(hi, INT_MAX)));
    return box;
}

} // namespace

QStringList bucketList(const QString& text, QString* error)
{
    QStringList out;
    const job::Flag* flag = job::findFlag("--bucket-mb");
    for (const QString& part : text.split(',', Qt::SkipEmptyParts)) {
        const QString v = part.trimmed();
        if (v.isEmpty())
            continue;
        if (auto ok = job::parseFlagValue(*flag, v.toStdString()); !ok) {
            if (error)
                *error = QString::fromStdString(ok.error().message);
            return {};
        }
        out << v;
    }
    if (out.isEmpty() && error)
        *error = QObject::tr("--bucket-mb: give one cap, or a comma list for a sweep");
    return out;
}

QStringList runArguments(const LaunchSettings& s, const QString& outFile)
{
    QStringList a{"run", "--nproc", QString::number(s.worldSize), "--out", outFile, "--progress", "protocol"};
    const QStringList buckets = bucketList(s.bucketMb);
    if (!buckets.isEmpty() && job::parseFlagValue(*job::findFlag("--bucket-mb"), buckets.front().toStdString())->number
                                  != job::TrainingOptions{}.bucketMb)
        a << "--bucket-mb" << buckets.front();
    return a + trainingArguments(s.training);
}

QStringList sweepArguments(const LaunchSettings& s, const QString& outDir)
{
    QStringList a{"sweep", "--nproc", QString::number(s.worldSize), "--bucket-mb", bucketList(s.bucketMb).join(','),
                  "--out-dir", outDir, "--progress", "protocol"};
    return a + trainingArguments(s.training);
}

QStringList recordArguments(const ScriptSettings& s, const QString& outFile)
{
    QStringList a{"record", "--nproc", QString::number(s.worldSize), "--out", outFile,
                  "--run-name", s.name.isEmpty() ? QFileInfo(outFile).completeBaseName() : s.name,
                  "--progress", "protocol"};
    if (!s.python.isEmpty())
        a << "--python" << s.python;
    if (s.quiet)
        a << "--quiet";
    // Everything after "--" is the script's: its arguments are never read as the CLI's flags.
    return a << "--" << s.script << QProcess::splitCommand(s.arguments);
}

QString scriptProblem(const ScriptSettings& s)
{
    if (s.script.trimmed().isEmpty())
        return QObject::tr("choose a script (a .py file) to record");
    const QFileInfo script(s.script);
    // The CLI's own checks and words (cli_record.cpp, --nproc's range), before anything starts.
    if (!script.isFile())
        return QObject::tr("no such script: %1").arg(s.script);
    if (script.suffix() != QStringLiteral("py"))
        return QObject::tr("%1 is not a Python script (.py)").arg(s.script);
    if (auto n = job::parseInteger("--nproc", std::to_string(s.worldSize), 1, job::kMaxLocalRanks); !n)
        return QString::fromStdString(n.error().message);
    if (!s.python.isEmpty() && !QFileInfo(s.python).isExecutable())
        return QObject::tr("the Python interpreter %1 cannot be run; choose one with torch").arg(s.python);
    return {};
}

QStringList liveFilesFor(const QString& outFile) { return toQt(job::liveFilesFor(outFile.toStdString())); }

QString LaunchPanel::FlagField::text() const
{
    using job::FlagType;
    switch (flag->type) {
    case FlagType::Integer:
        return QString::number(static_cast<QSpinBox*>(widget)->value());
    case FlagType::Number: {
        auto* box = static_cast<QDoubleSpinBox*>(widget);
        if (!box->specialValueText().isEmpty() && box->value() == box->minimum())
            return {};
        return QString::fromStdString(job::formatNumber(box->value()));
    }
    case FlagType::Choice:
        return static_cast<QComboBox*>(widget)->currentText();
    case FlagType::Switch:
        return static_cast<QCheckBox*>(widget)->isChecked() ? QStringLiteral("true") : QString();
    case FlagType::RankValue: {
        if (rank->value() < 0)
            return {};
        const QString value = flag->valueInteger ? QString::number(static_cast<QSpinBox*>(widget)->value())
                                                 : QString::fromStdString(job::formatNumber(
                                                       static_cast<QDoubleSpinBox*>(widget)->value()));
        return QStringLiteral("%1:%2").arg(rank->value()).arg(value);
    }
    case FlagType::Text:
        return static_cast<QLineEdit*>(widget)->text();
    }
    return {};
}

void LaunchPanel::FlagField::setText(const QString& t)
{
    using job::FlagType;
    const auto parsed = t.isEmpty() ? core::Result<job::FlagValue>(job::FlagValue{})
                                    : job::parseFlagValue(*flag, t.toStdString());
    const job::FlagValue v = parsed ? *parsed : job::FlagValue{};
    switch (flag->type) {
    case FlagType::Integer:
        static_cast<QSpinBox*>(widget)->setValue(int(v.integer));
        break;
    case FlagType::Number: {
        auto* box = static_cast<QDoubleSpinBox*>(widget);
        box->setValue(t.isEmpty() ? box->minimum() : v.number);
        break;
    }
    case FlagType::Choice:
        static_cast<QComboBox*>(widget)->setCurrentText(t);
        break;
    case FlagType::Switch:
        static_cast<QCheckBox*>(widget)->setChecked(v.on);
        break;
    case FlagType::RankValue:
        // Cleared (""): no rank, and the value back at its start so nothing stale is kept.
        rank->setValue(t.isEmpty() ? -1 : v.rank);
        if (flag->valueInteger)
            static_cast<QSpinBox*>(widget)->setValue(t.isEmpty() ? int(flag->intMin) : int(v.integer));
        else
            static_cast<QDoubleSpinBox*>(widget)->setValue(t.isEmpty() ? flag->min : v.number);
        widget->setEnabled(!t.isEmpty());
        break;
    case FlagType::Text:
        static_cast<QLineEdit*>(widget)->setText(t);
        break;
    }
}

// Long (~135 lines): the page laid out widget by widget as it reads, left column then right;
// the two forms are built apart (buildForm, buildScriptForm); last, the live view's reader.
LaunchPanel::LaunchPanel(QWidget* parent)
    : QWidget(parent)
    , m_liveTimer(new QTimer(this))
    , m_liveLoader(new RunLoader(this))
    , m_name(new QLineEdit(this))
    , m_world(new QSpinBox(this))
    , m_bucket(new QLineEdit(this))
    , m_modeTabs(new QTabWidget(this))
    , m_script(new QLineEdit(this))
    , m_scriptArgs(new QLineEdit(this))
    , m_scriptWorld(new QSpinBox(this))
    , m_scriptName(new QLineEdit(this))
    , m_python(new QLineEdit(this))
    , m_quiet(new QCheckBox(tr("Hide the script's output"), this))
    , m_runButton(new QPushButton(tr("Run"), this))
    , m_sweepButton(new QPushButton(tr("Sweep"), this))
    , m_cancelButton(new QPushButton(tr("Cancel"), this))
    , m_progress(new QProgressBar(this))
    , m_status(new QLabel(this))
    , m_log(new QPlainTextEdit(this))
    , m_sweepTable(new QTableWidget(this))
    , m_liveTimeline(new TimelineWidget(this))
    , m_follow(new QCheckBox(tr("Follow"), this))
{
    m_name->setPlaceholderText(tr("automatic (model-ranks-bucket-time)"));
    m_name->setToolTip(tr("Name of the run file written into the workspace folder"));
    m_world->setRange(1, job::kMaxLocalRanks);
    m_world->setValue(2);
    m_world->setToolTip(tr("Number of local ranks (--nproc, 1 to %1)").arg(job::kMaxLocalRanks));
    m_bucket->setText(QString::fromStdString(job::formatNumber(job::TrainingOptions{}.bucketMb)));
    m_bucket->setToolTip(tr("%1 (--bucket-mb, MiB, %2). A comma list (1,4,25) is a sweep")
                             .arg(qs(job::findFlag("--bucket-mb")->help), rangeText(*job::findFlag("--bucket-mb"))));

    auto* formWidget = new QWidget(this);
    buildForm(formWidget);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(formWidget);
    scroll->setWidgetResizable(true);
    // Two forms, one shown: the built-in models' and the user's own script's.
    m_modeTabs->addTab(scroll, tr("Built-in model"));
    m_modeTabs->addTab(buildScriptForm(), tr("Your script"));
    m_modeTabs->setTabToolTip(0, tr("Train one of Lockstep's own models (lockstep run / sweep)"));
    m_modeTabs->setTabToolTip(1, tr("Record your own PyTorch DDP script, unchanged (lockstep record)"));
    m_modeTabs->setMaximumWidth(480);
    m_modeTabs->setMinimumWidth(360);
    connect(m_modeTabs, &QTabWidget::currentChanged, this, [this](int index) { showMode(LaunchMode(index)); });

    m_sweepButton->setToolTip(tr("Record one run per bucket cap in the list (Ctrl+Shift+R)"));
    m_cancelButton->setToolTip(tr("Stop the running job (terminates the launcher and its ranks)"));
    m_cancelButton->setEnabled(false);
    connect(m_runButton, &QPushButton::clicked, this, &LaunchPanel::startShown);
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

    // The sweep's results: one row per run, sortable.
    const QStringList columns{tr("Run"), tr("Ranks"), tr("Bucket cap (MiB)"), tr("Status"), tr("Step time (ms)"),
                              tr("Overlap (%)"), tr("Exposed comm. (ms)"), tr("Throughput (samples/s)")};
    m_sweepTable->setColumnCount(int(columns.size()));
    m_sweepTable->setHorizontalHeaderLabels(columns);
    m_sweepTable->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_sweepTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_sweepTable->setSortingEnabled(true);
    m_sweepTable->horizontalHeader()->setStretchLastSection(true);
    m_sweepTable->verticalHeader()->hide();
    m_sweepTable->hide();

    auto* left = new QVBoxLayout;
    left->addWidget(m_modeTabs, 1);
    left->addLayout(buttons);
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
    split->addWidget(m_sweepTable);
    split->addWidget(m_log);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setStretchFactor(2, 2);
    auto* right = new QVBoxLayout;
    right->addWidget(m_progress);
    right->addWidget(m_status);
    right->addWidget(split, 1);
    auto* layout = new QHBoxLayout(this);
    layout->addLayout(left);
    layout->addLayout(right, 1);

    // Live view: the run's shards (or the run file) are re-read once a second while the job
    // records. One second keeps the timeline fresh while the reads stay a small fraction of the time.
    m_liveTimer->setInterval(1000);
    connect(m_liveTimer, &QTimer::timeout, this, &LaunchPanel::pollLive);
    // A run file with a stored overview (once merged) is answered twice: its overview, then its
    // spans; both go the same way.
    const auto shown = [this](const QString&, LoadedRunPtr run) {
        // Shards exist from the ranks' first moments; until a step is committed there is nothing to show.
        if (!isRunning() || run->run->steps.empty())
            return;
        // The same run growing: update in place (keeps the user's zoom unless following).
        const bool same = m_liveRun && m_liveRun->path == run->path && !m_liveTimeline->runs().empty();
        m_liveRun = run;
        if (same)
            m_liveTimeline->updateRun(0, TimelineRun{run->run, run->label, run->timeline});
        else
            m_liveTimeline->setRuns({TimelineRun{run->run, run->label, run->timeline}});
        if (m_follow->isChecked() || !same)
            m_liveTimeline->fitAll();
        emit liveRunUpdated(run);
    };
    connect(m_liveLoader, &RunLoader::runLoaded, this, shown);
    connect(m_liveLoader, &RunLoader::detailLoaded, this, shown);
    showMode(LaunchMode::BuiltIn);
}

QWidget* LaunchPanel::buildScriptForm()
{
    auto* page = new QWidget(this);
    auto* layout = new QVBoxLayout(page);
    auto* intro = new QLabel(tr("Records your own PyTorch DistributedDataParallel script, unchanged: it runs as N "
                                "local ranks with the environment torchrun sets, every DistributedDataParallel it "
                                "builds is recorded, and the ranks' shards become one run file "
                                "(<tt>lockstep record</tt>)."),
                             page);
    intro->setWordWrap(true);
    layout->addWidget(intro);

    auto* box = new QGroupBox(tr("Script"), page);
    auto* form = new QFormLayout(box);
    m_script->setPlaceholderText(tr("train.py"));
    m_script->setToolTip(tr("The training script (a .py file) that builds a DistributedDataParallel"));
    auto* browse = new QPushButton(tr("Browse…"), box);
    browse->setToolTip(tr("Choose the script"));
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString start = m_script->text().isEmpty() ? QDir::homePath() : QFileInfo(m_script->text()).absolutePath();
        const QString file = QFileDialog::getOpenFileName(this, tr("Choose a training script"), start,
                                                          tr("Python scripts (*.py)"));
        if (!file.isEmpty())
            m_script->setText(file);
    });
    auto* scriptRow = new QWidget(box);
    auto* h = new QHBoxLayout(scriptRow);
    h->setContentsMargins(0, 0, 0, 0);
    h->addWidget(m_script, 1);
    h->addWidget(browse);
    form->addRow(tr("Script"), scriptRow);
    m_scriptArgs->setPlaceholderText(tr("--epochs 1 --lr 0.1"));
    m_scriptArgs->setToolTip(tr("The script's arguments, split at spaces; \"double quotes\" keep spaces in one "
                                "argument, \"\"\" is a quote character. No shell runs them: no $VARIABLES, ~, "
                                "globs or pipes"));
    form->addRow(tr("Arguments"), m_scriptArgs);
    m_scriptWorld->setRange(1, job::kMaxLocalRanks);
    m_scriptWorld->setValue(ScriptSettings{}.worldSize);
    m_scriptWorld->setToolTip(tr("Number of local ranks (--nproc, 1 to %1)").arg(job::kMaxLocalRanks));
    form->addRow(tr("World size"), m_scriptWorld);
    m_scriptName->setPlaceholderText(tr("automatic (script-ranks-time)"));
    m_scriptName->setToolTip(tr("Name of the run, and of its file in the workspace folder"));
    form->addRow(tr("Name"), m_scriptName);
    m_python->setPlaceholderText(tr("the lockstep CLI's default"));
    m_python->setToolTip(tr("Python interpreter with torch (--python); empty: $LOCKSTEP_PYTHON, else the one "
                            "Lockstep was built for"));
    form->addRow(tr("Python"), m_python);
    m_quiet->setToolTip(tr("Do not show the script's own output in the log (--quiet)"));
    form->addRow(QString(), m_quiet);
    layout->addWidget(box);
    layout->addStretch(1);

    // The last script and its arguments come back next time.
    QSettings settings;
    m_script->setText(settings.value("launch/script").toString());
    m_scriptArgs->setText(settings.value("launch/scriptArguments").toString());
    return page;
}

void LaunchPanel::buildForm(QWidget* into)
{
    auto* layout = new QVBoxLayout(into);
    auto* runBox = new QGroupBox(tr("Run"), into);
    auto* runForm = new QFormLayout(runBox);
    runForm->addRow(tr("Name"), m_name);
    runForm->addRow(tr("World size"), m_world);
    runForm->addRow(tr("Bucket cap (MiB)"), m_bucket);
    layout->addWidget(runBox);

    // One section per group of the table, one row per flag of the Training scope.
    const job::TrainingOptions defaults;
    QGroupBox* box = nullptr;
    QFormLayout* form = nullptr;
    std::string_view group;
    for (const job::Flag& flag : job::trainingFlags()) {
        if (flag.scope != job::FlagScope::Training || flag.name == "--bucket-mb")
            continue;
        if (!box || flag.group != group) {
            group = flag.group;
            box = new QGroupBox(qs(group), into);
            form = new QFormLayout(box);
            layout->addWidget(box);
        }
        FlagField field;
        field.flag = &flag;
        QWidget* row = nullptr;
        const double defaultNumber = flag.type == job::FlagType::Number
            ? job::parseNumber("", flag.text(defaults), -HUGE_VAL, HUGE_VAL).value_or(0)
            : 0;
        switch (flag.type) {
        case job::FlagType::Integer:
            field.widget = integerBox(box, flag.intMin, flag.intMax);
            break;
        case job::FlagType::Number:
            field.widget = numberBox(box, flag.min, flag.max, flag.minOpen, defaultNumber, flag.unit);
            break;
        case job::FlagType::Choice: {
            auto* combo = new QComboBox(box);
            for (std::string_view c : flag.choices)
                combo->addItem(qs(c));
            field.widget = combo;
            break;
        }
        case job::FlagType::Switch:
            field.widget = new QCheckBox(box);
            break;
        case job::FlagType::RankValue: {
            field.rank = new QSpinBox(box);
            field.rank->setRange(-1, job::kMaxLocalRanks - 1);
            field.rank->setSpecialValueText(tr("none"));
            field.rank->setToolTip(tr("Rank (none: not injected)"));
            field.widget = flag.valueInteger ? static_cast<QWidget*>(integerBox(box, flag.intMin, flag.intMax))
                                             : numberBox(box, flag.min, flag.max, false, flag.min, flag.unit);
            auto* pair = new QWidget(box);
            auto* h = new QHBoxLayout(pair);
            h->setContentsMargins(0, 0, 0, 0);
            h->addWidget(field.rank);
            h->addWidget(field.widget, 1);
            row = pair;
            QWidget* value = field.widget;
            connect(field.rank, &QSpinBox::valueChanged, value, [value](int r) { value->setEnabled(r >= 0); });
            break;
        }
        case job::FlagType::Text:
            field.widget = new QLineEdit(box);
            break;
        }
        field.widget->setObjectName(qs(flag.name));
        QString tip = qs(flag.help) + QStringLiteral(" (") + qs(flag.name);
        if (const QString range = rangeText(flag); !range.isEmpty())
            tip += QStringLiteral(", ") + range;
        tip += QStringLiteral(")");
        field.widget->setToolTip(tip);
        if (field.rank)
            field.rank->setToolTip(tip);
        form->addRow(qs(flag.label), row ? row : field.widget);
        field.setText(QString::fromStdString(flag.text(defaults)));
        m_fields.push_back(field);
    }
    layout->addStretch(1);
}

QWidget* LaunchPanel::flagWidget(const QString& name) const
{
    for (const FlagField& f : m_fields)
        if (qs(f.flag->name) == name)
            return f.widget;
    return nullptr;
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
    s.worldSize = m_world->value();
    s.bucketMb = m_bucket->text().trimmed();
    for (const FlagField& f : m_fields) {
        const QString t = f.text();
        if (!t.isEmpty())
            (void)job::setFlag(s.training, *f.flag, t.toStdString()); // the widget's range is the flag's
    }
    const QStringList buckets = bucketList(s.bucketMb);
    if (!buckets.isEmpty())
        s.training.bucketMb = buckets.front().toDouble();
    return s;
}

void LaunchPanel::setSettings(const LaunchSettings& s)
{
    setMode(LaunchMode::BuiltIn);
    m_name->setText(s.name);
    m_world->setValue(s.worldSize);
    m_bucket->setText(s.bucketMb);
    for (FlagField& f : m_fields)
        f.setText(QString::fromStdString(f.flag->text(s.training)));
}

ScriptSettings LaunchPanel::scriptSettings() const
{
    ScriptSettings s;
    s.script = m_script->text().trimmed();
    s.arguments = m_scriptArgs->text();
    s.worldSize = m_scriptWorld->value();
    s.name = m_scriptName->text().trimmed();
    s.python = m_python->text().trimmed();
    s.quiet = m_quiet->isChecked();
    return s;
}

void LaunchPanel::setScriptSettings(const ScriptSettings& s)
{
    setMode(LaunchMode::Script);
    m_script->setText(s.script);
    m_scriptArgs->setText(s.arguments);
    m_scriptWorld->setValue(s.worldSize);
    m_scriptName->setText(s.name);
    m_python->setText(s.python);
    m_quiet->setChecked(s.quiet);
}

LaunchMode LaunchPanel::mode() const
{
    return LaunchMode(m_modeTabs->currentIndex());
}

void LaunchPanel::setMode(LaunchMode mode)
{
    m_modeTabs->setCurrentIndex(int(mode)); // showMode follows through currentChanged
}

// The buttons follow the form shown: a script is recorded, not swept.
void LaunchPanel::showMode(LaunchMode mode)
{
    const bool script = mode == LaunchMode::Script;
    m_runButton->setText(script ? tr("Record") : tr("Run"));
    m_runButton->setToolTip(script ? tr("Record the script with lockstep record (Ctrl+R)")
                                   : tr("Record one run with these settings (Ctrl+R)"));
    m_sweepButton->setVisible(!script);
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

void LaunchPanel::startShown()
{
    if (mode() == LaunchMode::Script)
        startRecord();
    else
        startRun();
}

void LaunchPanel::startRecord()
{
    if (isRunning())
        return;
    setMode(LaunchMode::Script);
    ScriptSettings s = scriptSettings();
    if (const QString problem = scriptProblem(s); !problem.isEmpty()) {
        m_status->setText(tr("⚠ %1").arg(problem));
        return;
    }
    QString name = s.name;
    name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]")), QStringLiteral("_"));
    if (name.isEmpty()) {
        name = QStringLiteral("%1-n%2-%3")
                   .arg(QFileInfo(s.script).completeBaseName())
                   .arg(s.worldSize)
                   .arg(QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss"));
        s.name = name;
    }
    const QString workspace = m_workspace.isEmpty() ? QDir::currentPath() : m_workspace;
    QDir().mkpath(workspace);
    m_outPath = QDir(workspace).filePath(name + ".db");
    if (QFileInfo::exists(m_outPath)) {
        m_status->setText(tr("⚠ %1 already exists; choose another name").arg(m_outPath));
        return;
    }
    QSettings settings;
    settings.setValue("launch/script", s.script);
    settings.setValue("launch/scriptArguments", s.arguments);
    m_sweep = false;
    m_sweepRuns = 1;
    m_sweepIndex = 0;
    m_steps = 0; // a script's steps are known only as they come
    m_liveOut = m_outPath;
    // A relative script path means the one the user sees from here, not from the workspace.
    s.script = QFileInfo(s.script).absoluteFilePath();
    launch(recordArguments(s, m_outPath), workspace);
}

void LaunchPanel::start(bool sweep)
{
    if (isRunning())
        return;
    setMode(LaunchMode::BuiltIn);
    const LaunchSettings s = settings();
    // The job library's rules, for every point, before anything starts.
    QString bucketError;
    const QStringList buckets = bucketList(s.bucketMb, &bucketError);
    if (buckets.isEmpty()) {
        m_status->setText(tr("⚠ %1").arg(bucketError));
        return;
    }
    for (const QString& b : sweep ? buckets : buckets.mid(0, 1)) {
        job::TrainingOptions t = s.training;
        t.bucketMb = b.toDouble();
        if (auto ok = job::checkOptions(t, s.worldSize); !ok) {
            m_status->setText(tr("⚠ %1").arg(QString::fromStdString(ok.error().message)));
            return;
        }
    }
    QString name = s.name;
    name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]")), QStringLiteral("_"));
    if (name.isEmpty()) {
        name = QStringLiteral("%1-n%2-b%3-%4")
                   .arg(QString::fromStdString(s.training.model))
                   .arg(s.worldSize)
                   .arg(sweep ? QStringLiteral("sweep") : buckets.front())
                   .arg(QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss"));
    }
    const QString workspace = m_workspace.isEmpty() ? QDir::currentPath() : m_workspace;
    QDir().mkpath(workspace);
    m_sweep = sweep;
    m_sweepRuns = sweep ? int(buckets.size()) : 1;
    m_sweepIndex = 0;
    m_steps = s.training.steps;
    QStringList args;
    if (sweep) {
        m_outPath = QDir(workspace).filePath(name);
        args = sweepArguments(s, m_outPath);
        m_liveOut.clear();
    } else {
        m_outPath = QDir(workspace).filePath(name + ".db");
        if (QFileInfo::exists(m_outPath)) {
            m_status->setText(tr("⚠ %1 already exists; choose another name").arg(m_outPath));
            return;
        }
        args = runArguments(s, m_outPath);
        m_liveOut = m_outPath;
    }
    launch(args, workspace);
}

void LaunchPanel::launch(const QStringList& args, const QString& workspace)
{
    m_liveShardDir.clear();
    m_verdict.clear();
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
            fillSweepTable(outputs);
        } else if (QFileInfo::exists(m_outPath)) {
            outputs << m_outPath;
        }
        const bool ok = status == QProcess::NormalExit && code == 0;
        QString message = ok ? tr("finished: %1").arg(m_outPath)
            : status == QProcess::CrashExit ? tr("⚠ stopped (%1)").arg(m_outPath)
            : m_verdict.isEmpty()           ? tr("⚠ lockstep exited with status %1").arg(code)
                                            : tr("⚠ lockstep exited with status %1: %2").arg(code).arg(m_verdict);
        m_status->setText(message);
        if (m_progress->maximum() == 0) // a busy bar (steps unknown) stops
            m_progress->setRange(0, 1);
        m_progress->setFormat(ok ? tr("done") : tr("stopped"));
        if (ok)
            m_progress->setValue(m_progress->maximum());
        emit finished(ok ? 0 : (code != 0 ? code : 1), message, outputs);
    });

    m_liveRun.reset();
    m_log->clear();
    m_sweepTable->setRowCount(0);
    m_sweepTable->setVisible(m_sweep);
    m_log->appendPlainText(QStringLiteral("$ %1 %2").arg(cli, args.join(' ')));
    m_status->setText(tr("recording %1").arg(m_outPath));
    // Steps not known beforehand (a script): a busy bar; the status line counts the steps.
    m_progress->setRange(0, m_steps > 0 ? m_steps * m_sweepRuns : 0);
    m_progress->setValue(0);
    m_progress->setFormat(tr("starting…"));
    m_runButton->setEnabled(false);
    m_sweepButton->setEnabled(false);
    m_cancelButton->setEnabled(true);
    m_process->start();
    m_liveTimer->start();
    emit started(m_outPath, m_sweep);
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
    const job::ProgressLine p = job::parseProgressLine(line.toStdString());
    switch (p.kind) {
    case job::ProgressLine::Kind::Job:
        // The shard folder of the run now recording: what the live view reads.
        m_liveShardDir = QString::fromStdString(p.text);
        if (p.steps > 0)
            m_steps = p.steps;
        showPhase(job::Phase::Starting, 0, p.nproc);
        return;
    case job::ProgressLine::Kind::Phase:
        // Before the first step: the slowest rank's phase (rendezvous, warm-up, first step).
        if (p.rank < 0)
            showPhase(p.phase, p.ranksPast, p.nproc);
        return;
    case job::ProgressLine::Kind::Point:
        // A sweep moved to its next point: the live view follows it.
        m_sweepIndex = p.index;
        m_sweepRuns = std::max(1, p.points);
        m_liveOut = QString::fromStdString(p.text);
        m_liveShardDir.clear();
        m_progress->setRange(0, std::max(1, m_steps * m_sweepRuns));
        m_log->appendPlainText(tr("— run %1 of %2: %3 —").arg(p.index + 1).arg(p.points).arg(QFileInfo(m_liveOut).fileName()));
        return;
    case job::ProgressLine::Kind::Progress: {
        const int perRun = p.steps > 0 ? p.steps : m_steps;
        if (perRun <= 0) { // steps unknown (a script): the bar stays busy, the format counts
            m_progress->setFormat(tr("step %1").arg(p.step + 1));
        } else {
            m_progress->setValue(std::min(m_progress->maximum(), m_sweepIndex * perRun + p.step + 1));
            m_progress->setFormat(m_sweep ? tr("run %1/%2, step %3/%4")
                                                .arg(m_sweepIndex + 1)
                                                .arg(m_sweepRuns)
                                                .arg(p.step + 1)
                                                .arg(perRun)
                                          : tr("step %1/%2").arg(p.step + 1).arg(perRun));
        }
        m_status->setText(tr("step %1: loss %2, %3 ms/step").arg(p.step).arg(p.loss, 0, 'g', 4).arg(p.stepMs, 0, 'f', 1));
        return;
    }
    default:
        // The CLI's verdict on a failure ("lockstep run: run FAILED: …", "lockstep record:
        // FAILED: …"), else its last own message (a usage error): what the status says.
        if (line.startsWith(QStringLiteral("lockstep ")) && (line.contains(QStringLiteral("FAILED: "))
                                                             || !m_verdict.contains(QStringLiteral("FAILED: "))))
            m_verdict = line;
        m_log->appendPlainText(line);
        return;
    }
}

void LaunchPanel::showPhase(job::Phase phase, int ranksPast, int nproc)
{
    const QString label = QString::fromUtf8(job::phaseLabel(phase).data(), qsizetype(job::phaseLabel(phase).size()));
    const QString what = phase == job::Phase::Training && m_steps > 0 ? tr("step 1/%1").arg(m_steps) : label;
    m_progress->setFormat(m_sweep ? tr("run %1/%2, %3…").arg(m_sweepIndex + 1).arg(m_sweepRuns).arg(what) : tr("%1…").arg(what));
    m_status->setText(nproc > 1 && ranksPast > 0 ? tr("%1: %2 of %3 ranks past it").arg(label).arg(ranksPast).arg(nproc)
                                                 : tr("%1").arg(label));
    emit phaseShown(m_progress->format());
}

void LaunchPanel::pollLive()
{
    if (!isRunning() || m_liveLoader->pendingJobs() > 0)
        return; // never pile up reads behind a slow one
    // The shards of the run in progress (a run file of the same name may be an old one being
    // replaced); once they are merged, the run file.
    QStringList files;
    if (!m_liveShardDir.isEmpty())
        files = toQt(job::shardFilesIn(m_liveShardDir.toStdString()));
    if (files.isEmpty() && !m_liveOut.isEmpty())
        files = liveFilesFor(m_liveOut);
    if (!files.isEmpty())
        m_liveLoader->load(files, QStringLiteral("live"));
}

void LaunchPanel::fillSweepTable(const QStringList& outputs)
{
    // Summaries are read off the GUI thread; the table is filled when they are in.
    auto* watcher = new QFutureWatcher<std::vector<core::Result<core::FileSummary>>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, outputs] {
        watcher->deleteLater();
        const auto results = watcher->result();
        m_sweepTable->setSortingEnabled(false);
        m_sweepTable->setRowCount(int(outputs.size()));
        for (int row = 0; row < int(outputs.size()); ++row) {
            const auto& r = results[size_t(row)];
            // Numbers are stored as numbers: the columns sort by value.
            auto set = [&](int col, const QVariant& value) {
                auto* item = new QTableWidgetItem;
                item->setData(Qt::DisplayRole, value);
                item->setToolTip(plainToolTip(outputs[row]));
                m_sweepTable->setItem(row, col, item);
            };
            auto rounded = [](double v, int digits) { return std::round(v * std::pow(10, digits)) / std::pow(10, digits); };
            if (!r) {
                set(0, QFileInfo(outputs[row]).completeBaseName());
                set(3, QString::fromStdString(r.error().message));
                continue;
            }
            const core::RunSummary& s = r->summary;
            set(0, QString::fromStdString(s.config.name));
            set(1, s.worldSize);
            set(2, rounded(double(s.config.bucketCapBytes) / (1024.0 * 1024.0), 3));
            set(3, QString::fromLatin1(core::runStatusName(s.config.status)));
            set(4, rounded(s.stepTimeMs, 2));
            set(5, std::isfinite(s.overlapRatio) ? QVariant(rounded(100 * s.overlapRatio, 1)) : QVariant(QStringLiteral("—")));
            set(6, rounded(s.exposedCommMs, 2));
            set(7, rounded(s.throughput, 0));
        }
        m_sweepTable->setSortingEnabled(true);
        m_sweepTable->resizeColumnsToContents();
    });
    watcher->setFuture(QtConcurrent::run([outputs] {
        std::vector<core::Result<core::FileSummary>> out;
        for (const QString& f : outputs)
            out.push_back(core::summarizeFile(f.toStdString()));
        return out;
    }));
}

} // namespace lockstep::ui
