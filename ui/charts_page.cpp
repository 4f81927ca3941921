// Charts page (see charts_page.h).
#include "charts_page.h"

#include "format.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QBoxPlotSeries>
#include <QBoxSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMessageBox>
#include <QPainter>
#include <QPushButton>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QSvgGenerator>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <map>

namespace lockstep::ui {

namespace {

// Steps beyond this many make a bar chart unreadable; the chart shows the first ones and says so.
constexpr int kMaxBarSteps = 60;

const QColor kComputeOnly(0x60, 0xa5, 0xfa);
const QColor kOverlapped(0x34, 0xd3, 0x99);
const QColor kExposed(0xf8, 0x71, 0x71);
const QColor kIdle(0xd1, 0xd5, 0xdb);

double ms(core::TimeNs ns) { return double(ns) / 1e6; }

// A run contributes to the cross-run charts only with measured steps (a run that failed before
// its first step has no step time or throughput to plot).
bool hasMeasuredSteps(const core::RunSummary& s)
{
    return s.steps > 0 && std::isfinite(s.stepTimeMs) && s.stepTimeMs > 0;
}

QString noStepsText(const LoadedRunPtr& run)
{
    if (!run)
        return QObject::tr("open a run with recorded steps");
    QString text = QObject::tr("%1 has no recorded steps").arg(run->label);
    if (!run->summary.failureCause.empty())
        text += QStringLiteral("<br>") + QString::fromStdString(run->summary.failureCause).toHtmlEscaped().left(160);
    return text;
}

QChart* newChart(const QString& title)
{
    auto* chart = new QChart;
    chart->setTitle(title);
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setMargins(QMargins(6, 6, 6, 6));
    return chart;
}

void setChart(QChartView* view, QChart* chart)
{
    QChart* old = view->chart();
    view->setChart(chart);
    delete old;
}

// Quartiles by linear interpolation between order statistics (the "type 7" rule spreadsheets use).
double quantile(const std::vector<double>& sorted, double q)
{
    if (sorted.empty())
        return 0;
    const double pos = q * double(sorted.size() - 1);
    const size_t lo = size_t(std::floor(pos));
    const size_t hi = std::min(sorted.size() - 1, lo + 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - double(lo));
}

QChart* placeholderChart(const QString& title, const QString& text)
{
    QChart* chart = newChart(title);
    chart->legend()->hide();
    auto* series = new QLineSeries;
    chart->addSeries(series);
    chart->createDefaultAxes();
    for (QAbstractAxis* axis : chart->axes())
        axis->hide();
    chart->setTitle(QStringLiteral("%1<br><span style='font-size:10pt;color:#6b7280'>%2</span>").arg(title, text));
    return chart;
}

} // namespace

ChartsPage::ChartsPage(QWidget* parent)
    : QWidget(parent)
    , m_rankBox(new QComboBox(this))
    , m_exportWhich(new QComboBox(this))
{
    m_rankBox->setToolTip(tr("Rank shown in the per-step breakdown (mean = mean over ranks)"));
    connect(m_rankBox, &QComboBox::activated, this, [this](int) { setRank(m_rankBox->currentData().toInt()); });
    m_exportWhich->addItems({tr("Per-step breakdown"), tr("Step-time distribution"), tr("Bucket size sweep"), tr("Scaling")});
    m_exportWhich->setToolTip(tr("Chart to export"));
    auto* exportButton = new QPushButton(tr("Export…"), this);
    exportButton->setToolTip(tr("Save the chosen chart as PNG or SVG (Ctrl+E)"));
    connect(exportButton, &QPushButton::clicked, this, &ChartsPage::exportCurrentChart);

    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Breakdown rank:"), this));
    bar->addWidget(m_rankBox);
    bar->addStretch(1);
    bar->addWidget(new QLabel(tr("Export:"), this));
    bar->addWidget(m_exportWhich);
    bar->addWidget(exportButton);

    auto* grid = new QGridLayout;
    for (int i = 0; i < ChartCount; ++i) {
        auto* view = new QChartView(this);
        view->setRenderHint(QPainter::Antialiasing);
        view->setMinimumSize(300, 220);
        m_views[size_t(i)] = view;
        grid->addWidget(view, i / 2, i % 2);
    }
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addLayout(grid, 1);
    setRuns(nullptr, {});
}

QChart* ChartsPage::chart(ChartId id) const
{
    return m_views[size_t(id)]->chart();
}

int ChartsPage::currentChart() const
{
    return m_exportWhich->currentIndex();
}

void ChartsPage::setRuns(LoadedRunPtr current, std::vector<LoadedRunPtr> all)
{
    m_current = std::move(current);
    m_all = std::move(all);
    m_rankBox->clear();
    m_rankBox->addItem(tr("mean of ranks"), -1);
    if (m_current)
        for (const auto& r : m_current->run->ranks)
            m_rankBox->addItem(tr("rank %1").arg(r.rank), r.rank);
    const int idx = m_rankBox->findData(m_rank);
    if (idx < 0)
        m_rank = -1;
    m_rankBox->setCurrentIndex(std::max(0, idx));
    rebuildBreakdown();
    rebuildDistribution();
    rebuildSweep();
    rebuildScaling();
}

void ChartsPage::setRank(int rank)
{
    m_rank = rank;
    const int idx = m_rankBox->findData(rank);
    if (idx >= 0)
        m_rankBox->setCurrentIndex(idx);
    rebuildBreakdown();
}

void ChartsPage::rebuildBreakdown()
{
    const QString title = tr("Per-step breakdown");
    if (!m_current || m_current->breakdown.empty()) {
        setChart(m_views[Breakdown], placeholderChart(title, noStepsText(m_current)));
        return;
    }
    // Per step: the chosen rank's numbers, or the mean over ranks.
    struct Acc { double computeOnly = 0, overlapped = 0, exposed = 0, idle = 0; int n = 0; };
    std::map<int, Acc> perStep;
    for (const auto& b : m_current->breakdown) {
        if (m_rank >= 0 && b.rank != m_rank)
            continue;
        Acc& a = perStep[b.step];
        a.computeOnly += ms(b.computeOnly);
        a.overlapped += ms(b.overlapped);
        a.exposed += ms(b.exposed);
        a.idle += ms(b.idle);
        ++a.n;
    }
    auto* series = new QStackedBarSeries;
    QBarSet* sets[4] = {new QBarSet(tr("compute only")), new QBarSet(tr("overlapped comm")),
                        new QBarSet(tr("exposed comm")), new QBarSet(tr("idle"))};
    const QColor colors[4] = {kComputeOnly, kOverlapped, kExposed, kIdle};
    QStringList categories;
    int shown = 0;
    for (const auto& [step, a] : perStep) {
        if (shown++ >= kMaxBarSteps)
            break;
        categories << QString::number(step);
        sets[0]->append(a.computeOnly / a.n);
        sets[1]->append(a.overlapped / a.n);
        sets[2]->append(a.exposed / a.n);
        sets[3]->append(a.idle / a.n);
    }
    for (int i = 0; i < 4; ++i) {
        sets[i]->setColor(colors[i]);
        sets[i]->setBorderColor(colors[i].darker(115));
        series->append(sets[i]);
    }
    series->setBarWidth(0.8);
    QString full = QStringLiteral("%1 — %2, %3").arg(title, m_current->label,
                                                     m_rank < 0 ? tr("mean of ranks") : tr("rank %1").arg(m_rank));
    if (int(perStep.size()) > kMaxBarSteps)
        full += tr(" (first %1 of %2 steps)").arg(kMaxBarSteps).arg(perStep.size());
    QChart* chart = newChart(full);
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(categories);
    x->setTitleText(tr("step"));
    if (categories.size() > 30)
        x->setLabelsAngle(-90);
    auto* y = new QValueAxis;
    y->setTitleText(tr("ms"));
    y->setLabelFormat("%.1f");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    y->applyNiceNumbers();
    setChart(m_views[Breakdown], chart);
}

void ChartsPage::rebuildDistribution()
{
    const QString title = tr("Step-time distribution per rank");
    if (!m_current || m_current->breakdown.empty()) {
        setChart(m_views[Distribution], placeholderChart(title, noStepsText(m_current)));
        return;
    }
    bool anySteady = false;
    for (const auto& b : m_current->breakdown)
        anySteady |= !b.warmup;
    std::map<int, std::vector<double>> perRank;
    for (const auto& b : m_current->breakdown)
        if (!anySteady || !b.warmup)
            perRank[b.rank].push_back(ms(b.wall));
    auto* series = new QBoxPlotSeries;
    series->setName(anySteady ? tr("steady steps") : tr("all steps"));
    QStringList categories;
    double lo = std::numeric_limits<double>::max(), hi = 0;
    for (auto& [rank, values] : perRank) {
        std::sort(values.begin(), values.end());
        auto* set = new QBoxSet(values.front(), quantile(values, 0.25), quantile(values, 0.5),
                                quantile(values, 0.75), values.back(), tr("rank %1").arg(rank));
        set->setBrush(QColor(0x93, 0xc5, 0xfd));
        set->setPen(QPen(QColor(0x1e, 0x40, 0xaf), 1.2));
        series->append(set);
        categories << tr("rank %1").arg(rank);
        lo = std::min(lo, values.front());
        hi = std::max(hi, values.back());
    }
    QChart* chart = newChart(QStringLiteral("%1 — %2").arg(title, m_current->label));
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(categories);
    auto* y = new QValueAxis;
    y->setTitleText(tr("step time (ms)"));
    const double pad = std::max(0.05 * (hi - lo), 0.01 * hi);
    y->setRange(std::max(0.0, lo - pad), hi + pad);
    y->applyNiceNumbers();
    y->setLabelFormat("%.1f");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    setChart(m_views[Distribution], chart);
}

void ChartsPage::rebuildSweep()
{
    const QString title = tr("Overlap and step time vs bucket size");
    // Runs of the current run's model and world size (a bucket-size sweep); all runs otherwise.
    std::vector<LoadedRunPtr> runs;
    for (const auto& r : m_all) {
        if (!hasMeasuredSteps(r->summary))
            continue;
        if (m_current && (r->summary.model != m_current->summary.model || r->summary.worldSize != m_current->summary.worldSize))
            continue;
        runs.push_back(r);
    }
    if (runs.empty()) {
        setChart(m_views[BucketSweep], placeholderChart(title, tr("open runs that differ in bucket size")));
        return;
    }
    std::sort(runs.begin(), runs.end(), [](auto& a, auto& b) { return a->summary.bucketCapBytes < b->summary.bucketCapBytes; });
    auto* overlap = new QLineSeries;
    overlap->setName(tr("overlap %"));
    overlap->setPointsVisible(true);
    overlap->setColor(QColor(0x05, 0x96, 0x69));
    auto* step = new QLineSeries;
    step->setName(tr("step time (ms)"));
    step->setPointsVisible(true);
    step->setColor(QColor(0x25, 0x63, 0xeb));
    double maxMs = 0, minMb = 1e18, maxMb = 0;
    for (const auto& r : runs) {
        const double mb = double(r->summary.bucketCapBytes) / (1024.0 * 1024.0);
        const double ov = std::isfinite(r->summary.overlapRatio) ? r->summary.overlapRatio * 100.0 : 0.0;
        overlap->append(mb, ov);
        step->append(mb, r->summary.stepTimeMs);
        maxMs = std::max(maxMs, r->summary.stepTimeMs);
        minMb = std::min(minMb, mb);
        maxMb = std::max(maxMb, mb);
    }
    QString full = title;
    if (m_current)
        full += tr(" — %1, %2 ranks, %3 runs").arg(qs(m_current->summary.model)).arg(m_current->summary.worldSize).arg(runs.size());
    QChart* chart = newChart(full);
    chart->addSeries(overlap);
    chart->addSeries(step);
    // Bucket sizes of a sweep are usually powers of two apart: a log axis spaces them evenly.
    auto* x = new QLogValueAxis;
    x->setBase(2);
    x->setTitleText(tr("bucket cap (MiB)"));
    x->setLabelFormat("%g");
    x->setRange(minMb / 1.5, maxMb * 1.5);
    auto* yOverlap = new QValueAxis;
    yOverlap->setRange(0, 100);
    yOverlap->setTitleText(tr("overlap %"));
    yOverlap->setLabelFormat("%.0f");
    auto* yStep = new QValueAxis;
    yStep->setRange(0, maxMs * 1.15 + 1e-9);
    yStep->setTitleText(tr("step time (ms)"));
    yStep->setLabelFormat("%.1f");
    yStep->applyNiceNumbers();
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(yOverlap, Qt::AlignLeft);
    chart->addAxis(yStep, Qt::AlignRight);
    overlap->attachAxis(x);
    overlap->attachAxis(yOverlap);
    step->attachAxis(x);
    step->attachAxis(yStep);
    setChart(m_views[BucketSweep], chart);
}

void ChartsPage::rebuildScaling()
{
    const QString title = tr("Throughput and weak-scaling efficiency vs world size");
    // One point per world size: a scaling curve through several runs at one N (a bucket sweep)
    // would zig-zag. Prefer the run with the current run's bucket cap, else the fastest.
    std::map<int32_t, core::RunSummary> byWorld;
    for (const auto& r : m_all) {
        const core::RunSummary& s = r->summary;
        if (!hasMeasuredSteps(s) || (m_current && s.model != m_current->summary.model))
            continue;
        auto it = byWorld.find(s.worldSize);
        if (it == byWorld.end()) {
            byWorld.emplace(s.worldSize, s);
            continue;
        }
        const int64_t cap = m_current ? m_current->summary.bucketCapBytes : -1;
        const bool itMatches = it->second.bucketCapBytes == cap, sMatches = s.bucketCapBytes == cap;
        if ((sMatches && !itMatches) || (sMatches == itMatches && s.throughput > it->second.throughput))
            it->second = s;
    }
    std::vector<core::RunSummary> summaries;
    for (auto& [n, s] : byWorld)
        summaries.push_back(s);
    if (summaries.empty()) {
        setChart(m_views[Scaling], placeholderChart(title, tr("open runs that differ in world size")));
        return;
    }
    const auto points = core::scalingEfficiency(summaries, core::ScalingMode::Weak);
    auto* throughput = new QLineSeries;
    throughput->setName(tr("throughput (samples/s)"));
    throughput->setPointsVisible(true);
    throughput->setColor(QColor(0x7c, 0x3a, 0xed));
    auto* efficiency = new QLineSeries;
    efficiency->setName(tr("efficiency %"));
    efficiency->setPointsVisible(true);
    efficiency->setColor(QColor(0xea, 0x58, 0x0c));
    double maxThr = 0, maxEff = 100;
    int minN = 1 << 30, maxN = 0;
    for (const auto& p : points) {
        if (!std::isfinite(p.throughput) || !std::isfinite(p.efficiency))
            continue;
        throughput->append(p.worldSize, p.throughput);
        efficiency->append(p.worldSize, p.efficiency * 100.0);
        maxThr = std::max(maxThr, p.throughput);
        maxEff = std::max(maxEff, p.efficiency * 100.0);
        minN = std::min(minN, p.worldSize);
        maxN = std::max(maxN, p.worldSize);
    }
    QChart* chart = newChart(m_current ? QStringLiteral("%1 — %2").arg(title, qs(m_current->summary.model)) : title);
    chart->addSeries(throughput);
    chart->addSeries(efficiency);
    auto* x = new QValueAxis;
    x->setTitleText(tr("world size (ranks)"));
    x->setRange(std::max(0, minN - 1), maxN + 1);
    x->setTickInterval(1);
    x->setTickType(QValueAxis::TicksDynamic);
    x->setTickAnchor(0);
    x->setLabelFormat("%d");
    auto* yThr = new QValueAxis;
    yThr->setRange(0, maxThr * 1.15 + 1e-9);
    yThr->setTitleText(tr("samples/s"));
    yThr->setLabelFormat("%.0f");
    yThr->applyNiceNumbers();
    auto* yEff = new QValueAxis;
    yEff->setRange(0, std::ceil(maxEff * 1.1 / 20.0) * 20.0); // multiples of 20 % read well
    yEff->setTitleText(tr("efficiency %"));
    yEff->setLabelFormat("%.0f");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(yThr, Qt::AlignLeft);
    chart->addAxis(yEff, Qt::AlignRight);
    throughput->attachAxis(x);
    throughput->attachAxis(yThr);
    efficiency->attachAxis(x);
    efficiency->attachAxis(yEff);
    setChart(m_views[Scaling], chart);
}

QImage ChartsPage::renderChart(ChartId id, QSize size) const
{
    QChartView* view = m_views[size_t(id)];
    const QSize old = view->size();
    if (size.isValid() && size != old)
        view->resize(size);
    QImage image(view->size(), QImage::Format_ARGB32);
    image.fill(Qt::white);
    QPainter painter(&image);
    painter.setRenderHint(QPainter::Antialiasing);
    view->render(&painter);
    painter.end();
    if (size.isValid() && size != old)
        view->resize(old);
    return image;
}

bool ChartsPage::exportChart(ChartId id, const QString& path, QString* error) const
{
    QChartView* view = m_views[size_t(id)];
    const QString suffix = QFileInfo(path).suffix().toLower();
    QSize size = view->size();
    if (size.width() < 200 || size.height() < 150)
        size = QSize(900, 560); // a hidden page has no useful size yet
    if (suffix == QLatin1String("svg")) {
        QSvgGenerator generator;
        generator.setFileName(path);
        generator.setSize(size);
        generator.setViewBox(QRect(QPoint(0, 0), size));
        generator.setTitle(view->chart()->title());
        generator.setDescription(QStringLiteral("Lockstep chart"));
        const QSize old = view->size();
        view->resize(size);
        QPainter painter;
        if (!painter.begin(&generator)) {
            if (error)
                *error = tr("cannot write %1").arg(path);
            view->resize(old);
            return false;
        }
        view->render(&painter);
        painter.end();
        view->resize(old);
        if (!QFileInfo::exists(path)) {
            if (error)
                *error = tr("cannot write %1").arg(path);
            return false;
        }
        return true;
    }
    const QImage image = renderChart(id, size);
    if (!image.save(path, suffix == QLatin1String("png") || suffix.isEmpty() ? "PNG" : nullptr)) {
        if (error)
            *error = tr("cannot write %1 (use .png or .svg)").arg(path);
        return false;
    }
    return true;
}

void ChartsPage::exportCurrentChart()
{
    QString selected;
    const QString path = QFileDialog::getSaveFileName(this, tr("Export chart"), QStringLiteral("chart.png"),
                                                      tr("PNG image (*.png);;SVG image (*.svg)"), &selected);
    if (path.isEmpty())
        return;
    QString file = path;
    if (QFileInfo(file).suffix().isEmpty())
        file += selected.contains("svg") ? ".svg" : ".png";
    QString error;
    if (!exportChart(ChartId(currentChart()), file, &error))
        QMessageBox::warning(this, tr("Export chart"), error);
}

} // namespace lockstep::ui
