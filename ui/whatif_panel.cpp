// The What-if page (see whatif_panel.h).
#include "whatif_panel.h"

#include "flow_layout.h"
#include "format.h"
#include "timeline/timeline_widget.h"

#include "lockstep/core/run_db.h"
#include "lockstep/job/flags.h"

#include <QComboBox>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>

#include "lockstep/core/whatif_settings.h"
#include <QSplitter>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent>

#include <cmath>

namespace lockstep::ui {

namespace {

// The bucket-cap slider moves in quarter octaves from 0.25 MiB to 256 MiB: the range where DDP's
// cap matters (below it, launch latency dominates; above it, one bucket holds any model here),
// fine enough that a step is a visible change, coarse enough to sweep with the keyboard. The
// spin box beside it takes any value.
constexpr double kSliderBaseMb = 0.25;
constexpr int kSliderStepsPerOctave = 4;
constexpr int kSliderMax = 10 * kSliderStepsPerOctave; // 0.25 MiB * 2^10 = 256 MiB

int sliderPosition(double mb)
{
    const double p = std::log2(std::max(mb, 1e-9) / kSliderBaseMb) * kSliderStepsPerOctave;
    return std::clamp(int(std::lround(p)), 0, kSliderMax);
}

double sliderMb(int position) { return kSliderBaseMb * std::exp2(double(position) / kSliderStepsPerOctave); }

double toMib(int64_t bytes) { return double(bytes) / (1 << 20); }

// docs/design.md: a 1-rank run has no communication to hide; its overlap and exposed communication
// are "not applicable", never numbers.
const QString kNotApplicable = QStringLiteral("n/a");

QDoubleSpinBox* mibBox(QWidget* parent, const QString& tip)
{
    auto* box = new QDoubleSpinBox(parent);
    // The flag table's range (--bucket-mb: (0, 65536] MiB); two decimals reach 0.01 MiB.
    box->setDecimals(4);
    box->setRange(core::kBucketCapSetting.min, core::kBucketCapSetting.max);
    box->setDecimals(2);
    box->setSuffix(QStringLiteral(" MiB"));
    box->setToolTip(tip);
    // A number being typed ("1", "10", "100") is not three configurations: predict on Enter,
    // on leaving the field or on the arrows.
    box->setKeyboardTracking(false);
    return box;
}

} // namespace

int64_t mibToBytes(double mb) { return std::max<int64_t>(1, static_cast<int64_t>(mb * 1024 * 1024)); }

WhatIfPanel::WhatIfPanel(QWidget* parent)
    : QWidget(parent)
    , m_title(new QLabel(this))
    , m_bucket(mibBox(this, tr("Bucket cap: gradients are grouped into buckets of at most this size, each reduced by one all-reduce")))
    , m_bucketSlider(new QSlider(Qt::Horizontal, this))
    , m_first(mibBox(this, tr("Cap of the first bucket (the last layers' gradients, ready first)")))
    , m_world(new QSpinBox(this))
    , m_link(new QDoubleSpinBox(this))
    , m_compress(new QComboBox(this))
    , m_compute(new QDoubleSpinBox(this))
    , m_reset(new QPushButton(tr("Recorded"), this))
    , m_runIt(new QPushButton(tr("Run it"), this))
    , m_measure(new QPushButton(tr("Measure"), this))
    , m_save(new QPushButton(tr("Save prediction…"), this))
    , m_body(new QStackedWidget(this))
    , m_message(new QLabel(this))
    , m_headline(new QLabel(this))
    , m_modelLine(new QLabel(this))
    , m_numbers(new QTableWidget(RowCount, ColumnCount, this))
    , m_notes(new QLabel(this))
    , m_timeline(new TimelineWidget(this))
{
    buildForm();
    showMessage(tr("Open a run (Ctrl+O, or double-click one in Runs) to ask what another bucket cap, world size, "
                   "link speed or compression would do to its step."));
}

WhatIfPanel::~WhatIfPanel() = default;

// The page: the title row with its actions, the fields, and below them the message or the
// predicted timeline beside the numbers.
void WhatIfPanel::buildForm()
{
    setUpFields();
    FlowLayout* form = fieldRows();
    QHBoxLayout* top = titleRow();
    setUpResults();
    QSplitter* split = resultsSplit();

    m_message->setWordWrap(true);
    m_message->setAlignment(Qt::AlignCenter);
    m_message->setStyleSheet(QStringLiteral("font-size:12pt;color:#374151;padding:40px"));
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_message->setTextFormat(Qt::PlainText); // messages quote run names and errors
    m_body->addWidget(m_message);
    m_body->addWidget(split);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addLayout(form);
    layout->addWidget(m_body, 1);
    connectFields();
    updateButtons();
}

// The fields' ranges, formats and tooltips, and the title's.
void WhatIfPanel::setUpFields()
{
    m_title->setStyleSheet(QStringLiteral("font-size:13pt;font-weight:600"));
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_title->setTextFormat(Qt::PlainText); // the run's name is text, never markup
    // A long run name must not widen the window: the label gives up width and cuts its text.
    m_title->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);

    m_bucketSlider->setRange(0, kSliderMax);
    m_bucketSlider->setPageStep(kSliderStepsPerOctave);
    m_bucketSlider->setToolTip(tr("Bucket cap, 0.25 MiB to 256 MiB in quarter octaves (arrows, Page Up/Down)"));
    // Every range from core's one table of what-if settings (whatif_settings.h).
    m_world->setRange(int(core::kWorldSizeSetting.min), int(core::kWorldSizeSetting.max));
    // "1 rank", "2 ranks": the suffix follows the number.
    const auto worldSuffix = [box = m_world](int n) { box->setSuffix(n == 1 ? tr(" rank") : tr(" ranks")); };
    worldSuffix(m_world->value());
    connect(m_world, &QSpinBox::valueChanged, m_world, worldSuffix);
    m_world->setToolTip(tr("World size: ranks beyond the recorded ones are modelled on the recorded ranks' compute"));
    m_world->setKeyboardTracking(false);
    m_link->setRange(0, core::kLinkSetting.max); // 0 = the real link, not emulated
    m_link->setDecimals(2);
    m_link->setSuffix(tr(" Gbit/s"));
    m_link->setSpecialValueText(tr("real link"));
    m_link->setToolTip(tr("Emulated link speed (lockstep run --link-gbps); 0 = not emulated: the link the run was recorded on"));
    m_link->setKeyboardTracking(false);
    m_compress->addItems({QStringLiteral("none"), QStringLiteral("fp16"), QStringLiteral("bf16")});
    m_compress->setToolTip(tr("Gradient compression on the wire"));
    m_compute->setRange(core::kComputeScaleSetting.min, core::kComputeScaleSetting.max);
    m_compute->setDecimals(2);
    m_compute->setSingleStep(0.05);
    m_compute->setValue(1);
    m_compute->setPrefix(QStringLiteral("×"));
    m_compute->setToolTip(tr("Compute time: the training thread's work (forward, backward, optimizer) takes this many "
                             "times its recorded time; 0.5 = a device twice as fast. Communication keeps its cost."));
    m_compute->setKeyboardTracking(false);
    m_reset->setToolTip(tr("Back to the run's recorded configuration"));
    m_runIt->setToolTip(tr("Launch the real run of this configuration (Launch page), then compare prediction and truth in Compare"));
    m_save->setToolTip(tr("Write the predicted run to a file: it opens, compares and charts like any run, marked predicted"));
}

FlowLayout* WhatIfPanel::fieldRows()
{
    // The fields flow into a second row in a narrow window (in one row they made the window at
    // least 1191 pixels wide: the stack is as wide as its widest page's minimum). A field's
    // label stays with its box.
    auto* form = new FlowLayout(nullptr, 12, 4);
    auto addField = [&](const QString& label, QWidget* w, QWidget* extra = nullptr) {
        auto* field = new QWidget(this);
        auto* row = new QHBoxLayout(field);
        row->setContentsMargins(0, 0, 0, 0);
        row->setSpacing(6);
        auto* l = new QLabel(label, field);
        l->setBuddy(w);
        row->addWidget(l);
        row->addWidget(w);
        if (extra)
            row->addWidget(extra);
        form->addWidget(field);
    };
    m_bucketSlider->setMinimumWidth(140);
    addField(tr("&Bucket cap"), m_bucket, m_bucketSlider);
    addField(tr("&First bucket"), m_first);
    addField(tr("&World"), m_world);
    addField(tr("&Link"), m_link);
    addField(tr("&Compression"), m_compress);
    addField(tr("Com&pute"), m_compute);
    return form;
}

QHBoxLayout* WhatIfPanel::titleRow()
{
    // The actions share the title's row.
    auto* top = new QHBoxLayout;
    top->addWidget(m_title, 1);
    top->addWidget(m_reset);
    top->addWidget(m_save);
    top->addWidget(m_runIt);
    top->addWidget(m_measure);
    return top;
}

// The headline, the model line, the notes and the measured/predicted numbers table.
void WhatIfPanel::setUpResults()
{
    m_headline->setWordWrap(true);
    m_headline->setStyleSheet(QStringLiteral("font-size:12pt"));
    m_modelLine->setWordWrap(true);
    m_modelLine->setStyleSheet(QStringLiteral("color:#4b5563"));
    m_notes->setWordWrap(true);
    m_notes->setStyleSheet(QStringLiteral("color:#4b5563"));
    m_notes->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_numbers->setHorizontalHeaderLabels({tr("Measured"), tr("Predicted"), tr("Δ"), tr("Δ %")});
    m_numbers->setVerticalHeaderLabels({tr("Step time"), tr("Overlap"), tr("Exposed comm."), tr("Communication"),
                                        tr("Throughput"), tr("Buckets")});
    m_numbers->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_numbers->setSelectionMode(QAbstractItemView::NoSelection);
    m_numbers->setFocusPolicy(Qt::NoFocus);
    m_numbers->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_numbers->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_numbers->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_numbers->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    for (int r = 0; r < RowCount; ++r)
        for (int c = 0; c < ColumnCount; ++c) {
            auto* item = new QTableWidgetItem;
            item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_numbers->setItem(r, c, item);
        }
    m_numbers->setFixedHeight(m_numbers->horizontalHeader()->sizeHint().height()
                              + RowCount * m_numbers->verticalHeader()->defaultSectionSize() + 4);
}

// The predicted timeline beside the headline, numbers and notes.
QSplitter* WhatIfPanel::resultsSplit()
{
    auto* side = new QWidget(this);
    auto* sideLayout = new QVBoxLayout(side);
    sideLayout->setContentsMargins(6, 0, 0, 0);
    sideLayout->addWidget(m_headline);
    sideLayout->addWidget(m_numbers);
    sideLayout->addWidget(m_modelLine);
    sideLayout->addWidget(m_notes, 1);
    side->setMinimumWidth(430); // the numbers table's five columns without wrapping "−4.24 ms"

    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(m_timeline);
    split->addWidget(side);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setChildrenCollapsible(false);
    return split;
}

void WhatIfPanel::connectFields()
{
    connect(m_bucketSlider, &QSlider::valueChanged, this, [this](int p) { m_bucket->setValue(sliderMb(p)); });
    connect(m_bucket, &QDoubleSpinBox::valueChanged, this, [this](double mb) {
        QSignalBlocker block(m_bucketSlider);
        m_bucketSlider->setValue(sliderPosition(mb));
        fieldsChanged();
    });
    connect(m_first, &QDoubleSpinBox::valueChanged, this, &WhatIfPanel::fieldsChanged);
    connect(m_world, &QSpinBox::valueChanged, this, &WhatIfPanel::fieldsChanged);
    connect(m_link, &QDoubleSpinBox::valueChanged, this, &WhatIfPanel::fieldsChanged);
    connect(m_compress, &QComboBox::currentIndexChanged, this, &WhatIfPanel::fieldsChanged);
    connect(m_compute, &QDoubleSpinBox::valueChanged, this, &WhatIfPanel::fieldsChanged);
    connect(m_reset, &QPushButton::clicked, this, &WhatIfPanel::resetToRecorded);
    connect(m_save, &QPushButton::clicked, this, &WhatIfPanel::saveDialog);
    connect(m_runIt, &QPushButton::clicked, this, [this] {
        auto settings = launchSettings(config());
        if (settings)
            emit runRequested(*settings);
    });
    connect(m_measure, &QPushButton::clicked, this, [this] {
        auto settings = measureSettings(config());
        if (settings)
            emit runRequested(*settings);
    });
}

core::PredictOptions WhatIfPanel::predictOptions()
{
    return core::PredictOptions{.keepTimeline = true, .maxSteadySteps = kMaxSteadySteps};
}

core::WhatIfConfig WhatIfPanel::config() const
{
    core::WhatIfConfig c;
    c.bucketCapBytes = mibToBytes(m_bucket->value());
    c.firstBucketCapBytes = mibToBytes(m_first->value());
    c.worldSize = m_world->value();
    c.linkGbps = m_link->value();
    c.compress = m_compress->currentText().toStdString();
    c.computeScale = m_compute->value();
    return c;
}

void WhatIfPanel::setConfig(const core::WhatIfConfig& c)
{
    {
        const QSignalBlocker b1(m_bucket), b2(m_bucketSlider), b3(m_first), b4(m_world), b5(m_link), b6(m_compress),
            b7(m_compute);
        m_bucket->setValue(toMib(c.bucketCapBytes));
        m_bucketSlider->setValue(sliderPosition(m_bucket->value()));
        m_first->setValue(toMib(c.firstBucketCapBytes));
        m_world->setValue(c.worldSize);
        m_link->setValue(c.linkGbps);
        const int i = m_compress->findText(QString::fromStdString(c.compress));
        m_compress->setCurrentIndex(i >= 0 ? i : 0);
        m_compute->setValue(c.computeScale);
    }
    fieldsChanged();
}

void WhatIfPanel::resetToRecorded()
{
    if (m_model)
        setConfig(m_model->recorded());
}

bool WhatIfPanel::busy() const { return m_building || m_inFlight || m_wanted.has_value(); }

QString WhatIfPanel::message() const { return m_body->currentWidget() == m_message ? m_message->text() : QString(); }

void WhatIfPanel::showMessage(const QString& text)
{
    m_message->setText(text);
    m_body->setCurrentWidget(m_message);
}

void WhatIfPanel::setRun(LoadedRunPtr run)
{
    if (run == m_run)
        return;
    m_run = run;
    ++m_generation;
    m_model.reset();
    m_modelError.clear();
    m_shown.reset();
    m_wanted.reset();
    m_viewSet = false;
    m_timeline->setRuns({});
    updateButtons();
    if (!run) {
        m_building = false;
        m_title->setText(tr("What if"));
        showMessage(tr("Open a run (Ctrl+O, or double-click one in Runs) to ask what another bucket cap, world size, "
                       "link speed or compression would do to its step."));
        return;
    }
    m_title->setText(tr("What if — %1").arg(run->label));
    m_title->setToolTip(plainToolTip(run->path));
    if (!run->detailed) { // the model is fitted to the spans
        m_building = false;
        showMessage(waitingForSpans(*run));
        return;
    }
    m_building = true;
    showMessage(tr("Building the what-if model of %1…").arg(run->label));
    // The model indexes the run and fits its link: O(run), off the GUI thread. Its prediction of
    // the recorded configuration is the baseline gains are measured from (model against model,
    // as `lockstep advise` does: the model's own error cancels out).
    using Built = core::Result<std::pair<core::WhatIfModel, core::WhatIfNumbers>>;
    auto* watcher = new QFutureWatcher<Built>(this);
    const quint64 generation = m_generation;
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        if (generation != m_generation)
            return; // another run was chosen meanwhile
        m_building = false;
        auto built = watcher->result();
        if (!built) {
            m_modelError = QString::fromStdString(built.error().message);
            showMessage(tr("⚠ %1\n\n%2").arg(m_run->label, m_modelError));
            updateButtons();
            emit modelReady(false);
            return;
        }
        m_model = std::move(built->first);
        m_baseline = built->second;
        emit modelReady(true);
        setConfig(m_model->recorded()); // prefilled with what was recorded; the first prediction follows
    });
    std::shared_ptr<const core::Run> recorded = run->run;
    watcher->setFuture(QtConcurrent::run([recorded]() -> Built {
        auto model = core::WhatIfModel::build(*recorded);
        if (!model)
            return std::unexpected(model.error());
        core::PredictOptions options = predictOptions();
        options.keepTimeline = false;
        auto baseline = model->predict(model->recorded(), options);
        if (!baseline)
            return std::unexpected(baseline.error());
        return std::pair{*model, baseline->numbers};
    }));
}

void WhatIfPanel::fieldsChanged()
{
    if (!m_model)
        return;
    m_wanted = config();
    if (!m_inFlight)
        startPrediction();
}

void WhatIfPanel::startPrediction()
{
    if (!m_model || !m_wanted)
        return;
    const core::WhatIfConfig cfg = *m_wanted;
    m_wanted.reset();
    m_inFlight = true;
    const quint64 generation = m_generation;
    const core::WhatIfModel model = *m_model; // copies share the indexed recording
    const QString origin = m_run->path;
    auto* watcher = new QFutureWatcher<WhatIfResult>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        if (generation != m_generation)
            return; // a prediction for a run no longer shown (its replacement has its own jobs)
        m_inFlight = false;
        WhatIfResult result = watcher->result();
        // Changes made meanwhile: the newest starts now, and this result is painted while it runs.
        if (m_wanted)
            startPrediction();
        showResult(std::move(result));
    });
    watcher->setFuture(QtConcurrent::run([model, cfg, origin] {
        WhatIfResult r;
        r.config = cfg;
        auto p = model.predict(cfg, predictOptions());
        if (!p) {
            r.error = QString::fromStdString(p.error().message);
            return r;
        }
        r.numbers = p->numbers;
        r.notes = p->notes;
        r.interval = p->interval;
        auto loaded = analyzeRun(std::move(p->run), origin);
        if (!loaded)
            r.error = QString::fromStdString(loaded.error().message);
        else
            r.predicted = *loaded;
        return r;
    }));
}

void WhatIfPanel::showResult(WhatIfResult result)
{
    if (!result.error.isEmpty()) {
        m_shown.reset();
        showMessage(tr("⚠ The model cannot predict %1:\n%2")
                        .arg(QString::fromStdString(core::describe(result.config)), result.error));
        updateButtons();
        emit predictionShown();
        return;
    }
    // The predicted run over the measured one, on one time axis (each aligned on its first steady
    // step, TimelineWidget's rule for stacked runs), so step k of each starts at the same x.
    const auto view = m_timeline->viewRange();
    m_timeline->setRuns({TimelineRun{result.predicted->run, tr("predicted: %1").arg(QString::fromStdString(core::describe(result.config))),
                                     result.predicted->timeline},
                         TimelineRun{m_run->run, tr("measured"), m_run->timeline}});
    if (!m_viewSet) {
        // A steady step to start with: the user compares one step, then zooms out (F) if wanted.
        const auto& steady = m_run->summary().steady.steps;
        m_timeline->zoomToStep(steady.empty() ? 0 : steady.front());
        m_viewSet = true;
    } else {
        m_timeline->setViewRange(view.first, view.second);
    }
    fillNumbers(result);
    m_shown = std::move(result);
    m_body->setCurrentIndex(1);
    updateButtons();
    emit predictionShown();
}

void WhatIfPanel::fillNumbers(const WhatIfResult& r)
{
    const core::WhatIfNumbers measured = m_model->measured();
    const core::WhatIfNumbers& p = r.numbers;
    const bool measuredMulti = m_run->summary().multiRank;
    const bool predictedMulti = r.config.worldSize > 1;
    auto set = [this](int row, int col, const QString& text) { m_numbers->item(row, col)->setText(text); };
    auto pct = [](double diff, double base) {
        return base != 0 && std::isfinite(diff) ? QStringLiteral("%1%2 %").arg(diff > 0 ? "+" : diff < 0 ? "−" : "").arg(std::fabs(diff / base * 100), 0, 'f', 1)
                                                : QStringLiteral("—");
    };
    auto msRow = [&](int row, double m, double pv, bool mOk, bool pOk) {
        set(row, MeasuredColumn, mOk ? formatMs(m) : kNotApplicable);
        set(row, PredictedColumn, pOk ? formatMs(pv) : kNotApplicable);
        set(row, DiffColumn, mOk && pOk ? formatSignedMs(pv - m) : QString());
        set(row, DiffPctColumn, mOk && pOk ? pct(pv - m, m) : QString());
    };
    msRow(StepTimeRow, measured.stepTimeMs, p.stepTimeMs, true, true);
    // Overlap is a ratio: its difference is in percentage points, not a percentage of a percentage.
    const bool mOverlap = measuredMulti && std::isfinite(measured.overlapRatio);
    const bool pOverlap = predictedMulti && std::isfinite(p.overlapRatio);
    set(OverlapRow, MeasuredColumn, mOverlap ? formatPercent(measured.overlapRatio) : kNotApplicable);
    set(OverlapRow, PredictedColumn, pOverlap ? formatPercent(p.overlapRatio) : kNotApplicable);
    const double pp = (p.overlapRatio - measured.overlapRatio) * 100;
    set(OverlapRow, DiffColumn, mOverlap && pOverlap ? tr("%1%2 pp").arg(pp > 0 ? "+" : pp < 0 ? "−" : "").arg(std::fabs(pp), 0, 'f', 1) : QString());
    set(OverlapRow, DiffPctColumn, QString());
    msRow(ExposedRow, measured.exposedCommMs, p.exposedCommMs, measuredMulti && std::isfinite(measured.exposedCommMs),
          predictedMulti && std::isfinite(p.exposedCommMs));
    msRow(CommRow, measured.commMs, p.commMs, true, true);
    set(ThroughputRow, MeasuredColumn, tr("%1 /s").arg(measured.throughput, 0, 'f', 1));
    set(ThroughputRow, PredictedColumn, tr("%1 /s").arg(p.throughput, 0, 'f', 1));
    const double dt = p.throughput - measured.throughput;
    set(ThroughputRow, DiffColumn, tr("%1%2 /s").arg(dt > 0 ? "+" : dt < 0 ? "−" : "").arg(std::fabs(dt), 0, 'f', 1));
    set(ThroughputRow, DiffPctColumn, pct(dt, measured.throughput));
    set(BucketsRow, MeasuredColumn, QString::number(measured.buckets));
    set(BucketsRow, PredictedColumn, QString::number(p.buckets));
    set(BucketsRow, DiffColumn, QStringLiteral("%1%2").arg(p.buckets > measured.buckets ? "+" : "").arg(p.buckets - measured.buckets));
    set(BucketsRow, DiffPctColumn, QString());

    // At a glance: how much faster than the recorded configuration, model against model (both
    // replayed), and whether the prediction's interval (the model's error on held-out runs of this
    // kind of change, widened by the recording's noise: whatif_error.h) clears the recorded step
    // time. The self-replay error is a consistency check, exact by construction, never confidence.
    const double self = m_model->selfErrorPct();
    const double base = m_baseline.stepTimeMs;
    const double gain = base - p.stepTimeMs;
    const double gainPct = base > 0 ? gain / base * 100 : 0;
    const core::PredictionInterval& iv = r.interval;
    const QString range = tr("a real run is expected at %1 to %2 (90 %, ±%3 %: %4)")
                              .arg(formatMs(iv.lowMs), std::isfinite(iv.highMs) ? formatMs(iv.highMs) : tr("?"))
                              .arg(iv.halfWidthPct, 0, 'f', 0)
                              .arg(QString::fromStdString(core::describeKinds(iv.kinds)).toHtmlEscaped());
    QString verdict;
    m_cannotTell = false;
    if (r.config == m_model->recorded()) {
        verdict = tr("the recorded configuration, as the model replays it; %1").arg(range);
    } else {
        verdict = std::fabs(gain) < 1e-9 ? tr("the same as the recorded configuration")
            : gain > 0 ? tr("<b>%1 (%2 %) faster</b> than the recorded configuration").arg(formatMs(gain)).arg(gainPct, 0, 'f', 1)
                       : tr("<b>%1 (%2 %) slower</b> than the recorded configuration").arg(formatMs(-gain)).arg(-gainPct, 0, 'f', 1);
        verdict += QStringLiteral("; ") + range;
        if (iv.lowMs <= base && base <= iv.highMs) {
            m_cannotTell = true;
            verdict += tr(" — <span style='color:#b45309'>the recording cannot tell: the interval holds the recorded "
                          "step time. <b>Measure</b> runs one short run of it.</span>");
        }
        if (!iv.measured)
            verdict += tr(" (this kind of change was never measured against real runs: the widest measured error stands in)");
    }
    m_headline->setText(tr("Predicted step <b>%1</b>: %2 (%3 replayed, %4 measured).")
                            .arg(formatMs(p.stepTimeMs), verdict, formatMs(base), formatMs(measured.stepTimeMs)));

    const core::LinkFit& link = m_model->link();
    QString fit = link.fitted ? tr("link fitted from %1 all-reduces (%2 during backward)").arg(link.samples).arg(link.busySamples)
                              : tr("no link fitted (no all-reduce to fit from)");
    m_modelLine->setText(tr("Consistency check: the model replays the recorded configuration at %3 against %4 measured "
                            "(%1%2 %, close by construction: not the error of other configurations); this recording's "
                            "step-to-step noise ±%6 %; %5.")
                         .arg(self > 0 ? "+" : self < 0 ? "−" : "")
                         .arg(std::fabs(self), 0, 'f', 1)
                         .arg(formatMs(m_model->replayed().stepTimeMs), formatMs(measured.stepTimeMs), fit)
                         .arg(m_model->stepNoisePct(), 0, 'f', 1));
    updateButtons();

    QStringList notes;
    for (const std::string& n : m_model->notes())
        notes << QStringLiteral("• ") + displayText(n, 400).toHtmlEscaped();
    for (const std::string& n : r.notes)
        notes << QStringLiteral("• ") + displayText(n, 400).toHtmlEscaped();
    if (m_run->summary().steadySteps > kMaxSteadySteps)
        notes << tr("• predicted from the first %1 of the run's %2 steady steps").arg(kMaxSteadySteps).arg(m_run->summary().steadySteps);
    m_notes->setText(notes.isEmpty() ? tr("<i>Notes: none — this prediction stays within what the recording shows.</i>")
                                     : tr("<b>Where the model extrapolates</b><br>%1").arg(notes.join(QStringLiteral("<br>"))));
}

void WhatIfPanel::updateButtons()
{
    const bool haveModel = m_model.has_value();
    for (QWidget* w :
         std::initializer_list<QWidget*>{m_bucket, m_bucketSlider, m_first, m_world, m_link, m_compress, m_compute, m_reset})
        w->setEnabled(haveModel);
    m_save->setEnabled(m_shown.has_value());
    // Only Lockstep's runtime can run a configuration again: imported traces, `lockstep record`
    // jobs and predictions cannot be relaunched from here, and the button says why.
    if (!m_run || !haveModel) {
        m_runIt->setEnabled(false);
        m_runIt->setToolTip(tr("Launch the real run of this configuration (needs a run whose model could be built)"));
        return;
    }
    const auto settings = launchSettings(config());
    m_runIt->setEnabled(settings.has_value());
    m_runIt->setToolTip(settings ? tr("Launch the real run of this configuration (Launch page), then compare prediction and truth in Compare")
                                 : tr("Cannot run this: %1").arg(QString::fromStdString(settings.error().message)));
    const bool changed = !(config() == m_model->recorded());
    m_measure->setEnabled(settings.has_value() && changed);
    m_measure->setToolTip(!settings ? tr("Cannot run this: %1").arg(QString::fromStdString(settings.error().message))
                          : !changed ? tr("Measure a configuration other than the recorded one")
                          : m_cannotTell
                              ? tr("The recording cannot tell this configuration from the recorded one: run it for %1 steps "
                                   "(Launch page) and compare").arg(kMeasureSteps)
                              : tr("Run this configuration for %1 steps (Launch page) to check the prediction").arg(kMeasureSteps));
}

core::Result<LaunchSettings> WhatIfPanel::measureSettings(const core::WhatIfConfig& c) const
{
    auto s = launchSettings(c);
    if (!s)
        return s;
    s->training.warmup = std::min(s->training.warmup, 4);
    s->training.steps = s->training.warmup + kMeasureSteps;
    s->name.replace(QStringLiteral("-check-"), QStringLiteral("-measure-"));
    return s;
}

core::Result<LaunchSettings> WhatIfPanel::launchSettings(const core::WhatIfConfig& c) const
{
    if (!m_run)
        return core::fail("no run");
    if (c.computeScale != 1.0)
        return core::fail("a compute scale other than ×1 is a hypothetical device; set Compute back to ×1 to run "
                          "this configuration");
    auto options = job::optionsFromConfig(m_run->run->config);
    if (!options)
        return core::fail(options.error().message);
    LaunchSettings s;
    s.training = std::move(*options);
    s.training.firstBucketMb = toMib(c.firstBucketCapBytes);
    s.training.bucketMb = toMib(c.bucketCapBytes);
    s.training.linkGbps = c.linkGbps;
    s.training.compress = c.compress;
    s.worldSize = c.worldSize;
    s.bucketMb = QString::fromStdString(job::formatNumber(s.training.bucketMb));
    // Named after the run it checks and the configuration; the time keeps repeated checks apart.
    QString name = QStringLiteral("%1-check-b%2-f%3-n%4")
                       .arg(QFileInfo(m_run->path).completeBaseName(), s.bucketMb,
                            QString::fromStdString(job::formatNumber(s.training.firstBucketMb)))
                       .arg(c.worldSize);
    if (c.linkGbps > 0)
        name += QStringLiteral("-l%1").arg(QString::fromStdString(job::formatNumber(c.linkGbps)));
    if (c.compress != "none")
        name += QStringLiteral("-%1").arg(QString::fromStdString(c.compress));
    s.name = name + QDateTime::currentDateTime().toString(QStringLiteral("-yyyyMMdd-HHmmss"));
    return s;
}

QString WhatIfPanel::savePrediction(const QString& path, bool overwrite) const
{
    if (!m_shown || !m_shown->predicted)
        return tr("no prediction to save");
    const auto mode = overwrite ? core::RunWriter::Mode::Overwrite : core::RunWriter::Mode::CreateNew;
    auto s = core::saveRun(*m_shown->predicted->run, path.toStdString(), mode);
    return s ? QString() : QString::fromStdString(s.error().message);
}

void WhatIfPanel::saveDialog()
{
    if (!m_shown || !m_run)
        return;
    const core::WhatIfConfig& c = m_shown->config;
    const QString suggested = QFileInfo(m_run->path).dir().filePath(
        QStringLiteral("%1.predict-b%2-n%3.db")
            .arg(QFileInfo(m_run->path).completeBaseName(), QString::fromStdString(job::formatNumber(toMib(c.bucketCapBytes))))
            .arg(c.worldSize));
    const QString path = QFileDialog::getSaveFileName(this, tr("Save prediction"), suggested, tr("Run databases (*.db)"));
    if (path.isEmpty())
        return;
    // The dialog asked before replacing a file.
    if (const QString error = savePrediction(path, true); !error.isEmpty())
        QMessageBox::warning(this, tr("Cannot save the prediction"), error);
}

} // namespace lockstep::ui
