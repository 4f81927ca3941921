// Charts page (see charts_page.h).
#include "charts_page.h"

#include "format.h"
#include "timeline/timeline_palette.h"

#include "lockstep/core/step_stats.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QBoxPlotSeries>
#include <QBoxSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QGraphicsItem>
#include <QGraphicsLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QListWidget>
#include <QLogValueAxis>
#include <QMessageBox>
#include <QPainter>
#include <QPushButton>
#include <QRegularExpression>
#include <QScatterSeries>
#include <QScrollArea>
#include <QSet>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QSvgGenerator>
#include <QToolTip>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace lockstep::ui {

namespace {

// Steps beyond this many make a bar chart unreadable; the chart shows the first ones and says so.
constexpr int kMaxBarSteps = 60;
// A legend entry names the runs of its curve, cut to this many characters.
constexpr int kMaxLegendChars = 70;
// A plot shorter than this shows its axes' ticks as "...".
constexpr int kMinPlotHeight = 150;
// The views' minimum height before a chart is laid out (the grid's old minimum).
constexpr int kMinChartHeight = 220;
// Chart or series property: not in the legend (a placeholder chart, an error bar).
constexpr const char* kNoLegend = "lockstepNoLegend";
// Series property holding one tooltip text per point.
constexpr const char* kPointTexts = "lockstepPointTexts";

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
    if (!run->summary().config.failureCause.empty())
        text += QStringLiteral("<br>") + displayText(run->summary().config.failureCause, 160).toHtmlEscaped();
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

// A legend that wraps (see charts_page.h): the chart's visible legend markers (their names,
// colours and order; error bars are left out), flowed left to right into centred rows as wide as
// the chart, under the plot. The chart's bottom margin grows by the rows' height, so the plot and
// the axis titles make room instead of being drawn over. Relaid out whenever the chart is resized.
class FlowLegend : public QGraphicsItem {
public:
    static constexpr int kType = UserType + 71;
    explicit FlowLegend(QChart* chart)
        : QGraphicsItem(chart)
        , m_chart(chart)
        , m_font(chart->legend()->font())
        , m_labelColor(chart->legend()->labelColor())
    {
        // (QLegendMarker::isVisible() is false for every marker until the chart is on screen.)
        for (QLegendMarker* m : chart->legend()->markers())
            if (!m->series()->property(kNoLegend).toBool())
                m_entries.push_back({m->label(), m->label(), m->brush(), m->pen(), {}});
        m_baseMargins = chart->margins();
        chart->legend()->hide();
        QObject::connect(chart, &QGraphicsWidget::geometryChanged, chart, [this] { relayout(); });
        relayout();
    }
    int type() const override { return kType; }
    QRectF boundingRect() const override { return m_bounds; }
    const auto& entries() const { return m_entries; }

    void paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) override
    {
        painter->setFont(m_font);
        const QFontMetricsF fm(m_font);
        for (const Entry& e : m_entries) {
            const QRectF marker(e.rect.left(), e.rect.center().y() - kMarker / 2, kMarker, kMarker);
            painter->setPen(e.pen.style() == Qt::NoPen ? QPen(e.brush.color().darker(115)) : QPen(e.pen.color(), 1));
            painter->setBrush(e.brush);
            painter->drawRect(marker);
            painter->setPen(m_labelColor);
            painter->drawText(QRectF(marker.right() + kGap, e.rect.top(), e.rect.width() - kMarker - kGap, e.rect.height()),
                              Qt::AlignLeft | Qt::AlignVCenter, e.shown);
        }
    }

    void relayout()
    {
        qreal left = 0, top = 0, right = 0, bottom = 0;
        if (QGraphicsLayout* l = m_chart->layout())
            l->getContentsMargins(&left, &top, &right, &bottom);
        const QRectF area = m_chart->rect().adjusted(left, top, -right, -bottom);
        const qreal width = std::max<qreal>(40, area.width() - 2 * kSide);
        const QFontMetricsF fm(m_font);
        const qreal rowHeight = std::max<qreal>(fm.height(), kMarker) + 4;
        prepareGeometryChange();
        // Rows: entries in order, a new row when the next does not fit.
        std::vector<std::pair<size_t, size_t>> rows; // [first, last)
        qreal x = 0;
        QStringList full;
        bool elided = false;
        for (size_t i = 0; i < m_entries.size(); ++i) {
            Entry& e = m_entries[i];
            full << e.name;
            e.shown = e.name;
            qreal w = kMarker + kGap + fm.horizontalAdvance(e.name) + 1;
            if (w > width) { // alone wider than the chart: the one case that elides
                e.shown = fm.elidedText(e.name, Qt::ElideMiddle, width - kMarker - kGap - 1);
                w = kMarker + kGap + fm.horizontalAdvance(e.shown) + 1;
                elided = true;
            }
            if (rows.empty() || x + w > width) {
                rows.push_back({i, i});
                x = 0;
            }
            e.rect = QRectF(x, qreal(rows.size() - 1) * rowHeight, w, rowHeight);
            rows.back().second = i + 1;
            x += w + kSpacing;
        }
        for (const auto& [first, last] : rows) { // centre each row, as Qt's legend does
            const qreal used = m_entries[last - 1].rect.right() - m_entries[first].rect.left();
            for (size_t i = first; i < last; ++i)
                m_entries[i].rect.translate((width - used) / 2, 0);
        }
        const qreal height = qreal(rows.size()) * rowHeight;
        m_bounds = QRectF(0, 0, width, height);
        setPos(area.left() + kSide, area.bottom() - height - kBelow);
        setToolTip(elided ? plainToolTip(full.join(QLatin1Char('\n'))) : QString());
        QMargins margins = m_baseMargins;
        margins.setBottom(m_baseMargins.bottom() + int(std::ceil(height + kBelow + kAbove)));
        if (margins != m_chart->margins())
            m_chart->setMargins(margins);
        update();
    }

private:
    static constexpr qreal kMarker = 12;  // Qt's legend draws 12-pixel squares too
    static constexpr qreal kGap = 5;      // marker to its text
    static constexpr qreal kSpacing = 14; // between entries of a row
    static constexpr qreal kSide = 6;     // from the chart's edges
    static constexpr qreal kBelow = 4;    // under the last row
    static constexpr qreal kAbove = 4;    // between the axis title and the first row
    struct Entry {
        QString name, shown;
        QBrush brush;
        QPen pen;
        QRectF rect; // in the legend's coordinates
    };
    QChart* m_chart;
    QFont m_font;
    QColor m_labelColor;
    std::vector<Entry> m_entries;
    QMargins m_baseMargins;
    QRectF m_bounds;
};

FlowLegend* flowLegend(QChart* chart)
{
    if (!chart)
        return nullptr;
    for (QGraphicsItem* item : chart->childItems())
        if (item->type() == FlowLegend::kType)
            return static_cast<FlowLegend*>(item);
    return nullptr;
}

// Titles wrap too. A chart's title is its name and, one per "<br>", small grey or orange lines
// under it (the groups, a caution, the runs left out; see chartNote). Qt Charts cuts every line
// wider than the chart with "...", and at 1024 pixels a chart is 350 wide: each line is wrapped
// at spaces to the chart's width instead, up to kTitleLines rows, the last elided only if the
// text goes on; then the whole title is the chart's tooltip. Redone when the chart is resized.
constexpr int kTitleLines = 3;
constexpr const char* kFullTitle = "lockstepFullTitle";

QStringList wrapWords(const QString& text, const QFontMetricsF& fm, qreal width, int maxLines, bool* elided)
{
    QStringList lines;
    QString line;
    const QStringList words = text.split(QLatin1Char(' '), Qt::SkipEmptyParts);
    for (qsizetype i = 0; i < words.size(); ++i) {
        const QString candidate = line.isEmpty() ? words[i] : line + QLatin1Char(' ') + words[i];
        if (line.isEmpty() || fm.horizontalAdvance(candidate) <= width) {
            line = candidate;
            continue;
        }
        if (lines.size() == maxLines - 1) { // the last row: the rest, elided
            line = candidate;
            for (qsizetype j = i + 1; j < words.size(); ++j)
                line += QLatin1Char(' ') + words[j];
            break;
        }
        lines << line;
        line = words[i];
    }
    if (!line.isEmpty())
        lines << line;
    for (QString& l : lines) {
        if (fm.horizontalAdvance(l) > width) {
            l = fm.elidedText(l, Qt::ElideRight, width);
            *elided = true;
        }
    }
    return lines;
}

void fitTitle(QChart* chart, QChartView* view)
{
    const QString full = chart->property(kFullTitle).toString();
    qreal left = 0, top = 0, right = 0, bottom = 0;
    if (QGraphicsLayout* l = chart->layout())
        l->getContentsMargins(&left, &top, &right, &bottom);
    const qreal width = chart->size().width() - left - right - chart->margins().left() - chart->margins().right() - 12;
    if (width < 60)
        return;
    static const QRegularExpression span(QStringLiteral("^<span style='([^']*)'>(.*)</span>$"));
    static const QRegularExpression size(QStringLiteral("font-size:([0-9.]+)pt"));
    QStringList out, plain;
    bool elided = false;
    for (const QString& segment : full.split(QStringLiteral("<br>"))) {
        QFont font = chart->titleFont();
        QString style, text = segment;
        if (const auto m = span.match(segment); m.hasMatch()) {
            style = m.captured(1);
            text = m.captured(2);
            if (const auto sm = size.match(style); sm.hasMatch())
                font.setPointSizeF(sm.captured(1).toDouble());
        }
        // The text is HTML-escaped; measure and wrap it as shown.
        QString shown = text;
        shown.replace(QStringLiteral("&lt;"), QStringLiteral("<")).replace(QStringLiteral("&gt;"), QStringLiteral(">"))
            .replace(QStringLiteral("&quot;"), QStringLiteral("\"")).replace(QStringLiteral("&#39;"), QStringLiteral("'"))
            .replace(QStringLiteral("&amp;"), QStringLiteral("&"));
        plain << shown;
        for (const QString& line : wrapWords(shown, QFontMetricsF(font), width, kTitleLines, &elided))
            out << (style.isEmpty() ? line.toHtmlEscaped() : QStringLiteral("<span style='%1'>%2</span>").arg(style, line.toHtmlEscaped()));
    }
    const QString fitted = out.join(QStringLiteral("<br>"));
    if (fitted != chart->title())
        chart->setTitle(fitted);
    view->setToolTip(elided ? plainToolTip(plain.join(QLatin1Char('\n'))) : QString());
}

// A chart with a legend gets the wrapping one (placeholders hide theirs); every title wraps.
void setChart(QChartView* view, QChart* chart)
{
    QChart* old = view->chart();
    if (!chart->property(kNoLegend).toBool())
        new FlowLegend(chart);
    chart->setProperty(kFullTitle, chart->title());
    QObject::connect(chart, &QGraphicsWidget::geometryChanged, chart, [chart, view] { fitTitle(chart, view); });
    // The view is at least as tall as the title, legend and axes above and below the plot, plus
    // kMinPlotHeight (they depend on the width only, so this settles in one step).
    QObject::connect(chart, &QChart::plotAreaChanged, view, [chart, view](const QRectF& plot) {
        const int need = std::max(kMinChartHeight, int(std::ceil(chart->size().height() - plot.height())) + kMinPlotHeight);
        if (std::abs(need - view->minimumHeight()) > 2)
            view->setMinimumHeight(need);
    });
    view->setChart(chart);
    fitTitle(chart, view);
    delete old;
}

QChart* placeholderChart(const QString& title, const QString& text)
{
    QChart* chart = newChart(title);
    chart->legend()->hide();
    chart->setProperty(kNoLegend, true);
    auto* series = new QLineSeries;
    chart->addSeries(series);
    chart->createDefaultAxes();
    for (QAbstractAxis* axis : chart->axes())
        axis->hide();
    chart->setTitle(QStringLiteral("%1<br><span style='font-size:10pt;color:#6b7280'>%2</span>").arg(title, text));
    return chart;
}

// The run's step-to-step spread (core::stepSpread over core::stepMeans: the error bars and the
// "±" in the tooltips, report --json's *_sd).
core::StepSpread spreadOf(const LoadedRun& run)
{
    const std::vector<core::StepMean> steps = core::stepMeans(*run.run, *run.analysis);
    return core::stepSpread(steps);
}

// An error bar: a vertical line from y - sd to y + sd at x, not in the legend.
void addErrorBar(QChart* chart, QAbstractAxis* x, QAbstractAxis* y, double px, double py, double sd, QColor color)
{
    if (!(sd > 0) || !std::isfinite(py))
        return;
    auto* bar = new QLineSeries;
    bar->append(px, py - sd);
    bar->append(px, py + sd);
    QPen pen(color, 1.5);
    bar->setPen(pen);
    chart->addSeries(bar);
    bar->attachAxis(x);
    bar->attachAxis(y);
    bar->setProperty(kNoLegend, true);
    for (QLegendMarker* m : chart->legend()->markers(bar))
        m->setVisible(false);
}

// Names of a curve's runs for its legend, short enough to be read there: what the names share
// is written once and what differs in braces, "mlp-n{1,2}-b25" for mlp-n1-b25 and mlp-n2-b25
// (a sweep's names differ in one field); otherwise "a, b, c". The shared start stops before a
// number (run10, run12: "run{10,12}") and the shared end starts at a separator ("-b25", never
// the "0" of b10 and b20), so each brace holds whole values. Cut at kMaxLegendChars.
QString runNames(const std::vector<const LoadedRun*>& runs)
{
    QStringList names;
    for (const auto* r : runs)
        names << r->label;
    if (names.size() < 2)
        return displayText(names.join(QString()), kMaxLegendChars);
    const QString& first = names.front();
    qsizetype shortest = first.size();
    for (const QString& n : names)
        shortest = std::min(shortest, n.size());
    qsizetype prefix = shortest;
    for (const QString& n : names) {
        qsizetype k = 0;
        while (k < prefix && n[k] == first[k])
            ++k;
        prefix = k;
    }
    while (prefix > 0 && first[prefix - 1].isDigit())
        --prefix;
    qsizetype suffix = shortest - prefix;
    for (const QString& n : names) {
        qsizetype k = 0;
        while (k < suffix && n[n.size() - 1 - k] == first[first.size() - 1 - k])
            ++k;
        suffix = k;
    }
    while (suffix > 0 && first[first.size() - suffix].isLetterOrNumber())
        --suffix;
    if (prefix < 3 && suffix < 3)
        return displayText(names.join(QStringLiteral(", ")), kMaxLegendChars);
    QStringList middles;
    for (const QString& n : names)
        middles << n.mid(prefix, n.size() - prefix - suffix);
    return displayText(first.left(prefix) + QLatin1Char('{') + middles.join(QLatin1Char(',')) + QLatin1Char('}')
                           + first.right(suffix),
                       kMaxLegendChars);
}

// "not on a curve: a (differs in: threads), b (one rank)": the picked runs no curve holds, and
// why (core::differingFields against the first run of the first curve).
QString leftOutText(const std::vector<const LoadedRun*>& runs, const std::vector<core::RunSummary>& summaries,
                    const std::vector<bool>& onCurve, const core::RunSummary* reference, bool oneRankHasNoCurve)
{
    QStringList out;
    for (size_t i = 0; i < runs.size(); ++i) {
        if (onCurve[i])
            continue;
        QString why;
        if (oneRankHasNoCurve && !summaries[i].multiRank)
            why = QObject::tr("one rank: nothing to overlap");
        else if (reference) {
            QStringList fields;
            for (const std::string& f : core::differingFields(reference->signature, summaries[i].signature))
                fields << QString::fromStdString(f);
            why = fields.isEmpty() ? QObject::tr("no other run to pair with") : QObject::tr("differs in %1").arg(fields.join(", "));
        }
        out << QStringLiteral("%1 (%2)").arg(runs[i]->label, why);
    }
    if (out.isEmpty())
        return {};
    return QStringLiteral("<br><span style='font-size:8pt;color:#6b7280'>%1</span>")
        .arg(displayText(QObject::tr("not on a curve: %1").arg(out.join(QStringLiteral("; "))), 160).toHtmlEscaped());
}

// Under a chart's title (a long first line would be elided with everything after it): how many
// groups of like-for-like runs the curves are.
QString groupsText(size_t groups)
{
    return groups < 2 ? QString()
                      : QStringLiteral("<br><span style='font-size:8pt;color:#6b7280'>%1</span>")
                            .arg(QObject::tr("%1 groups of like-for-like runs, one curve each").arg(groups));
}

// A caution under a chart's title, in the same small grey line as leftOutText.
QString chartNote(const QString& text)
{
    return QStringLiteral("<br><span style='font-size:8pt;color:#9a3412'>%1</span>").arg(displayText(text, 200).toHtmlEscaped());
}

// Hover: the point's run and values, from the texts stored on the series.
void attachHover(QXYSeries* series, QStringList texts, QWidget* tipParent)
{
    series->setProperty(kPointTexts, texts);
    QObject::connect(series, &QXYSeries::hovered, tipParent, [series, tipParent](const QPointF& p, bool on) {
        if (!on) {
            QToolTip::hideText();
            return;
        }
        const QStringList t = series->property(kPointTexts).toStringList();
        int best = -1;
        double bestD = 0;
        for (int i = 0; i < series->count() && i < t.size(); ++i) {
            const QPointF q = series->at(i);
            const double d = std::hypot((q.x() - p.x()) / std::max(1e-12, std::abs(q.x()) + 1e-12), (q.y() - p.y()) / std::max(1e-12, std::abs(q.y()) + 1e-12));
            if (best < 0 || d < bestD) {
                best = i;
                bestD = d;
            }
        }
        if (best >= 0)
            QToolTip::showText(QCursor::pos(), t[best], tipParent);
    });
}

// Caps that give the same buckets (every cap below the model's largest tensors, say) are one
// configuration: whatever separates their points is the machine, not the cap. The note under the
// bucket-size chart's title that says so (empty when no two caps of a curve give the same buckets).
QString sameLayoutNote(const std::vector<std::vector<size_t>>& groups, const std::vector<core::RunSummary>& summaries)
{
    QStringList sameLayout;
    for (const auto& group : groups) {
        std::map<std::vector<int64_t>, std::set<int64_t>> capsByLayout;
        for (size_t i : group) {
            std::vector<int64_t> layout;
            for (const core::BucketSummary& b : summaries[i].buckets)
                layout.push_back(b.bytes);
            capsByLayout[layout].insert(summaries[i].config.bucketCapBytes);
        }
        for (const auto& [layout, caps] : capsByLayout) {
            if (caps.size() < 2 || layout.empty())
                continue;
            QStringList c;
            for (int64_t cap : caps)
                c << formatBytes(double(cap));
            sameLayout << QObject::tr("caps %1: the same buckets").arg(c.join(", "));
        }
    }
    return sameLayout.isEmpty() ? QString()
                                : chartNote(QObject::tr("%1 (their gap is noise, not the cap)").arg(sameLayout.join("; ")));
}

} // namespace

ChartsPage::ChartsPage(QWidget* parent)
    : QWidget(parent)
    , m_rankBox(new QComboBox(this))
    , m_exportWhich(new QComboBox(this))
    , m_picker(new QListWidget(this))
{
    m_rankBox->setToolTip(tr("Rank shown in the per-step breakdown (mean = mean over ranks)"));
    connect(m_rankBox, &QComboBox::activated, this, [this](int) { setRank(m_rankBox->currentData().toInt()); });
    m_exportWhich->addItems({tr("Per-step breakdown"), tr("Step-time distribution"), tr("Bucket size sweep"), tr("Scaling")});
    m_exportWhich->setToolTip(tr("Chart to export"));
    auto* exportButton = new QPushButton(tr("Export…"), this);
    exportButton->setToolTip(tr("Save the chosen chart as PNG or SVG (Ctrl+E)"));
    connect(exportButton, &QPushButton::clicked, this, &ChartsPage::exportCurrentChart);
    m_picker->setToolTip(tr("Runs shown in the bucket-size and scaling charts; only like-for-like runs share a curve"));
    connect(m_picker, &QListWidget::itemChanged, this, [this](QListWidgetItem*) {
        rebuildSweep();
        rebuildScaling();
    });

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
    auto* charts = new QWidget(this);
    charts->setLayout(grid);
    // A chart keeps room for its plot under its wrapped title and legend (setChart): in a small
    // window the charts scroll rather than squeeze the plot to a strip of elided tick labels.
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(charts);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto* pickerBox = new QWidget(this);
    auto* pickerLayout = new QVBoxLayout(pickerBox);
    pickerLayout->setContentsMargins(0, 0, 0, 0);
    pickerLayout->addWidget(new QLabel(tr("Runs in the sweep and\nscaling charts:"), pickerBox));
    pickerLayout->addWidget(m_picker, 1);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(pickerBox);
    split->addWidget(scroll);
    split->setStretchFactor(1, 1);
    split->setSizes({180, 1100});
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(split, 1);
    setRuns(nullptr, {});
}

QChart* ChartsPage::chart(ChartId id) const
{
    return m_views[size_t(id)]->chart();
}

QString ChartsPage::chartTitle(ChartId id) const
{
    return chart(id)->property(kFullTitle).toString();
}

int ChartsPage::currentChart() const
{
    return m_exportWhich->currentIndex();
}

void ChartsPage::setRuns(LoadedRunPtr current, std::vector<LoadedRunPtr> all)
{
    m_current = std::move(current);
    m_all = std::move(all);
    // The picker keeps each run's choice while it stays open; new runs come picked.
    QSet<QString> unpicked;
    for (int i = 0; i < m_picker->count(); ++i)
        if (m_picker->item(i)->checkState() != Qt::Checked)
            unpicked.insert(m_picker->item(i)->data(Qt::UserRole).toString());
    {
        const QSignalBlocker block(m_picker);
        m_picker->clear();
        for (const auto& r : m_all) {
            auto* item = new QListWidgetItem(r->label, m_picker);
            item->setData(Qt::UserRole, r->path);
            item->setToolTip(plainToolTip(r->path));
            item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
            item->setCheckState(unpicked.contains(r->path) ? Qt::Unchecked : Qt::Checked);
        }
    }
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

std::vector<LoadedRunPtr> ChartsPage::pickedRuns() const
{
    std::vector<LoadedRunPtr> out;
    for (int i = 0; i < m_picker->count() && size_t(i) < m_all.size(); ++i)
        if (m_picker->item(i)->checkState() == Qt::Checked)
            out.push_back(m_all[size_t(i)]);
    return out;
}

void ChartsPage::setPicked(const QStringList& paths)
{
    {
        const QSignalBlocker block(m_picker);
        for (int i = 0; i < m_picker->count(); ++i)
            m_picker->item(i)->setCheckState(paths.contains(m_picker->item(i)->data(Qt::UserRole).toString()) ? Qt::Checked
                                                                                                             : Qt::Unchecked);
    }
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

QString ChartsPage::pointText(QChart* chart, int series, int index)
{
    const auto list = chart->series();
    if (series < 0 || series >= list.size())
        return {};
    return list[series]->property(kPointTexts).toStringList().value(index);
}

void ChartsPage::rebuildBreakdown()
{
    const QString title = tr("Per-step breakdown");
    if (!m_current || m_current->analysis->steps.empty()) {
        setChart(m_views[Breakdown], placeholderChart(title, noStepsText(m_current)));
        return;
    }
    // Per step: the chosen rank's five parts (core's breakdown), or their mean over ranks
    // (core::stepMeans). Warm-up steps are drawn but labelled "(n)": they are left out of every
    // run-level number, and a first step several times slower than the rest should not read as a
    // problem.
    struct Bar { double parts[5] = {0, 0, 0, 0, 0}; bool warmup = false; };
    std::map<int, Bar> perStep;
    const bool markWarmup = !m_current->analysis->steady.fallback;
    if (m_rank >= 0) {
        for (const auto& b : m_current->analysis->steps)
            if (b.rank == m_rank)
                perStep[b.step] = {{ms(b.computeOnly), ms(b.overlapped), ms(b.exposed), ms(b.memoryOnly), ms(b.idle)},
                                   markWarmup && b.warmup};
    } else {
        for (const core::StepMean& m : core::stepMeans(*m_current->run, *m_current->analysis))
            if (m.ranks > 0)
                perStep[m.step] = {{m.computeOnlyMs, m.overlappedMs, m.exposedMs, m.memoryOnlyMs, m.idleMs}, markWarmup && m.warmup};
    }
    auto* series = new QStackedBarSeries;
    QBarSet* sets[5] = {new QBarSet(tr("compute only")), new QBarSet(tr("overlapped")), new QBarSet(tr("exposed")),
                        new QBarSet(tr("memory only")), new QBarSet(tr("idle"))};
    const QColor colors[5] = {palette::computeOnlyColor(), palette::overlappedColor(), palette::exposedColor(),
                              palette::memoryOnlyColor(), palette::idleColor()};
    QStringList categories;
    QList<int> stepOf;
    QList<bool> warmupOf;
    int shown = 0;
    bool anyWarmup = false;
    for (const auto& [step, a] : perStep) {
        if (shown++ >= kMaxBarSteps)
            break;
        categories << formatStepLabel(step, a.warmup);
        stepOf << step;
        warmupOf << a.warmup;
        anyWarmup = anyWarmup || a.warmup;
        for (int i = 0; i < 5; ++i)
            sets[i]->append(a.parts[i]);
    }
    for (int i = 0; i < 5; ++i) {
        sets[i]->setColor(colors[i]);
        sets[i]->setBorderColor(colors[i].darker(115));
        series->append(sets[i]);
    }
    series->setBarWidth(0.8);
    connect(series, &QStackedBarSeries::hovered, this, [this, stepOf, warmupOf](bool on, int index, QBarSet* set) {
        if (on)
            QToolTip::showText(QCursor::pos(),
                               tr("step %1%2, %3: %4")
                                   .arg(stepOf.value(index))
                                   .arg(warmupOf.value(index) ? tr(" (warm-up)") : QString(), set->label(),
                                        formatMs(set->at(index))),
                               this);
        else
            QToolTip::hideText();
    });
    QString full = QStringLiteral("%1 — %2, %3").arg(title, m_current->label,
                                                     m_rank < 0 ? tr("mean of ranks") : tr("rank %1").arg(m_rank));
    if (int(perStep.size()) > kMaxBarSteps)
        full += tr(" (first %1 of %2 steps)").arg(kMaxBarSteps).arg(perStep.size());
    QChart* chart = newChart(full);
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(categories);
    x->setTitleText(anyWarmup ? tr("step   ((n): warm-up, left out of the run's numbers)") : tr("step"));
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
    if (!m_current || m_current->analysis->steps.empty()) {
        setChart(m_views[Distribution], placeholderChart(title, noStepsText(m_current)));
        return;
    }
    const bool fallback = m_current->analysis->steady.fallback;
    auto* series = new QBoxPlotSeries;
    series->setName(fallback ? tr("all steps (none past the warm-up)") : tr("steady steps"));
    QStringList categories;
    double lo = std::numeric_limits<double>::max(), hi = 0;
    // Each rank's quartiles over its steady steps: core's (report --json ranks[].step_time_quartiles_ms).
    for (const core::RankStepTimes& r : core::rankStepTimes(*m_current->analysis)) {
        const core::Quartiles& q = r.stepTimeMs;
        auto* set = new QBoxSet(q.min, q.q1, q.median, q.q3, q.max, tr("rank %1").arg(r.rank));
        set->setBrush(palette::computeOnlyColor());
        set->setPen(QPen(palette::headerText(), 1.2));
        series->append(set);
        categories << tr("rank %1").arg(r.rank);
        lo = std::min(lo, q.min);
        hi = std::max(hi, q.max);
    }
    connect(series, &QBoxPlotSeries::hovered, this, [this](bool on, QBoxSet* set) {
        if (!on) {
            QToolTip::hideText();
            return;
        }
        QToolTip::showText(QCursor::pos(),
                           tr("%1: median %2, quartiles %3 – %4, range %5 – %6")
                               .arg(set->label(), formatMs(set->at(QBoxSet::Median)), formatMs(set->at(QBoxSet::LowerQuartile)),
                                    formatMs(set->at(QBoxSet::UpperQuartile)), formatMs(set->at(QBoxSet::LowerExtreme)),
                                    formatMs(set->at(QBoxSet::UpperExtreme))),
                           this);
    });
    QChart* chart = newChart(QStringLiteral("%1 — %2").arg(title, m_current->label));
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(categories);
    if (categories.size() > 16)
        x->setLabelsAngle(-90);
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
    // Picked runs with steps, grouped by core: a curve holds runs equal in all but bucket caps,
    // with more than one rank (a 1-rank run has no communication to hide).
    std::vector<const LoadedRun*> runs;
    std::vector<core::RunSummary> summaries;
    for (const auto& r : pickedRuns()) {
        if (!hasMeasuredSteps(r->summary()))
            continue;
        runs.push_back(r.get());
        summaries.push_back(r->summary());
    }
    // A curve needs two bucket sizes: a run alone in its group compares with nothing.
    std::vector<std::vector<size_t>> groups;
    for (auto& g : core::comparableGroups(summaries, core::Varied::BucketCaps, true)) {
        std::set<int64_t> caps;
        for (size_t i : g)
            caps.insert(summaries[i].config.bucketCapBytes);
        if (caps.size() >= 2)
            groups.push_back(std::move(g));
    }
    if (groups.empty()) {
        setChart(m_views[BucketSweep], placeholderChart(title, tr("pick runs of more than one rank that differ in bucket size")));
        return;
    }
    std::vector<bool> onCurve(runs.size(), false);
    for (const auto& g : groups)
        for (size_t i : g)
            onCurve[i] = true;
    const QString layoutNote = sameLayoutNote(groups, summaries);
    // Notes before the list of runs left out: a line too wide for the chart is elided with every
    // line after it.
    QChart* chart = newChart(title + groupsText(groups.size()) + layoutNote
                             + leftOutText(runs, summaries, onCurve, &summaries[groups.front().front()], true));
    auto* x = new QLogValueAxis;
    x->setBase(2);
    x->setTitleText(tr("bucket cap (MiB)"));
    x->setLabelFormat("%g");
    auto* yOverlap = new QValueAxis;
    yOverlap->setRange(0, 100);
    yOverlap->setTitleText(tr("overlap %"));
    yOverlap->setLabelFormat("%.0f");
    auto* yStep = new QValueAxis;
    yStep->setTitleText(tr("step time (ms)"));
    yStep->setLabelFormat("%.1f");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(yOverlap, Qt::AlignLeft);
    chart->addAxis(yStep, Qt::AlignRight);
    double maxMs = 0, minMb = 1e18, maxMb = 0;
    int g = 0;
    for (const auto& group : groups) {
        std::vector<size_t> idx = group;
        std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return summaries[a].config.bucketCapBytes < summaries[b].config.bucketCapBytes; });
        std::vector<const LoadedRun*> members;
        for (size_t i : idx)
            members.push_back(runs[i]);
        const QColor overlapColor = g == 0 ? palette::overlappedColor() : palette::overlappedColor().darker(100 + 40 * g);
        const QColor stepColor = g == 0 ? palette::headerText() : palette::stepLabelText().lighter(100 + 30 * g);
        auto* overlap = new QLineSeries;
        overlap->setName(tr("overlap · %1").arg(runNames(members)));
        overlap->setPointsVisible(true);
        overlap->setColor(overlapColor);
        auto* step = new QLineSeries;
        step->setName(tr("step time · %1").arg(runNames(members)));
        step->setPointsVisible(true);
        step->setColor(stepColor);
        QStringList overlapTexts, stepTexts;
        struct Bar { double x, y, sd; };
        std::vector<Bar> overlapBars, stepBars;
        for (size_t i : idx) {
            const LoadedRun& r = *runs[i];
            const core::RunSummary& s = summaries[i];
            const double mb = double(s.config.bucketCapBytes) / (1024.0 * 1024.0);
            const core::StepSpread spread = spreadOf(r);
            const double ovSd = std::isfinite(spread.overlapRatio.sd) ? spread.overlapRatio.sd * 100.0 : 0.0;
            const double stSd = std::isfinite(spread.stepTimeMs.sd) ? spread.stepTimeMs.sd : 0.0;
            if (std::isfinite(s.overlapRatio)) {
                overlap->append(mb, s.overlapRatio * 100.0);
                overlapTexts << tr("%1\nbucket cap %2\noverlap %3 (± %4 pt over steady steps)")
                                    .arg(r.label, formatBytes(double(s.config.bucketCapBytes)), formatPercent(s.overlapRatio))
                                    .arg(ovSd, 0, 'f', 1);
                overlapBars.push_back({mb, s.overlapRatio * 100.0, ovSd});
            }
            step->append(mb, s.stepTimeMs);
            stepTexts << tr("%1\nbucket cap %2\nstep time %3 (± %4 over steady steps)")
                             .arg(r.label, formatBytes(double(s.config.bucketCapBytes)), formatMs(s.stepTimeMs), formatMs(stSd));
            stepBars.push_back({mb, s.stepTimeMs, stSd});
            maxMs = std::max(maxMs, s.stepTimeMs + stSd);
            minMb = std::min(minMb, mb);
            maxMb = std::max(maxMb, mb);
        }
        chart->addSeries(overlap);
        chart->addSeries(step);
        overlap->attachAxis(x);
        overlap->attachAxis(yOverlap);
        step->attachAxis(x);
        step->attachAxis(yStep);
        attachHover(overlap, overlapTexts, this);
        attachHover(step, stepTexts, this);
        for (const Bar& b : overlapBars)
            addErrorBar(chart, x, yOverlap, b.x, b.y, b.sd, overlapColor);
        for (const Bar& b : stepBars)
            addErrorBar(chart, x, yStep, b.x, b.y, b.sd, stepColor);
        ++g;
    }
    // Bucket sizes of a sweep are usually powers of two apart: a log axis spaces them evenly.
    x->setRange(minMb / 1.5, maxMb * 1.5);
    yStep->setRange(0, maxMs * 1.15 + 1e-9);
    yStep->applyNiceNumbers();
    setChart(m_views[BucketSweep], chart);
}

void ChartsPage::rebuildScaling()
{
    const QString title = tr("Throughput and weak-scaling efficiency vs world size");
    std::vector<const LoadedRun*> runs;
    std::vector<core::RunSummary> summaries;
    for (const auto& r : pickedRuns()) {
        if (!hasMeasuredSteps(r->summary()))
            continue;
        runs.push_back(r.get());
        summaries.push_back(r->summary());
    }
    // Core groups like-for-like runs (all equal but the world size) and scales each group.
    const auto points = core::scalingEfficiency(summaries, core::ScalingMode::Weak);
    std::map<int32_t, std::vector<const core::ScalingPoint*>> byGroup;
    for (const auto& p : points)
        if (std::isfinite(p.throughput))
            byGroup[p.group].push_back(&p);
    // A curve needs two world sizes; a lone run scales against nothing.
    for (auto it = byGroup.begin(); it != byGroup.end();) {
        std::set<int32_t> sizes;
        for (const auto* p : it->second)
            sizes.insert(p->worldSize);
        it = sizes.size() < 2 ? byGroup.erase(it) : std::next(it);
    }
    if (byGroup.empty()) {
        setChart(m_views[Scaling], placeholderChart(title, tr("pick like-for-like runs that differ in world size")));
        return;
    }
    std::vector<bool> onCurve(runs.size(), false);
    for (const auto& [group, list] : byGroup)
        for (const auto* p : list)
            onCurve[p->run] = true;
    const core::RunSummary* reference = &summaries[byGroup.begin()->second.front()->run];
    // Weak scaling above 100 % means N ranks did more than N times the smallest world size's
    // work per second: superlinear (caches) or, far more often, a baseline run that ran slow
    // (a loaded machine, warm-up left in): say so rather than draw it as good news.
    QStringList superlinear;
    for (const auto& [group, list] : byGroup)
        for (const auto* p : list)
            if (std::isfinite(p->efficiency) && p->efficiency > 1.1)
                superlinear << tr("%1 at %2").arg(formatPercent(p->efficiency), formatRanks(p->worldSize));
    const QString scalingNote = superlinear.isEmpty()
        ? QString()
        : chartNote(tr("efficiency above 100 % (%1): check the smallest world size's run — a slow baseline inflates "
                       "every efficiency").arg(superlinear.join(", ")));
    QChart* chart = newChart(title + groupsText(byGroup.size()) + scalingNote
                             + leftOutText(runs, summaries, onCurve, reference, false));
    auto* x = new QValueAxis;
    x->setTitleText(tr("world size (ranks)"));
    x->setTickType(QValueAxis::TicksDynamic);
    x->setTickInterval(1);
    x->setTickAnchor(0);
    x->setLabelFormat("%d");
    auto* yThr = new QValueAxis;
    yThr->setTitleText(tr("samples/s"));
    yThr->setLabelFormat("%.0f");
    auto* yEff = new QValueAxis;
    yEff->setTitleText(tr("efficiency %"));
    yEff->setLabelFormat("%.0f");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(yThr, Qt::AlignLeft);
    chart->addAxis(yEff, Qt::AlignRight);
    double maxThr = 0, maxEff = 100;
    int minN = 1 << 30, maxN = 0, g = 0;
    for (const auto& [group, list] : byGroup) {
        std::vector<const LoadedRun*> members;
        for (const auto* p : list)
            members.push_back(runs[p->run]);
        const QColor thrColor = g == 0 ? palette::stepLabelText() : palette::stepLabelText().lighter(100 + 40 * g);
        const QColor effColor = g == 0 ? palette::exposedColor() : palette::exposedColor().darker(100 + 40 * g);
        auto* throughput = new QLineSeries;
        throughput->setName(tr("throughput · %1").arg(runNames(members)));
        throughput->setPointsVisible(true);
        throughput->setColor(thrColor);
        auto* efficiency = new QLineSeries;
        efficiency->setName(tr("efficiency · %1").arg(runNames(members)));
        efficiency->setPointsVisible(true);
        efficiency->setColor(effColor);
        QStringList thrTexts, effTexts;
        struct Bar { double x, y, sd; };
        std::vector<Bar> bars;
        for (const auto* p : list) {
            const LoadedRun& r = *runs[p->run];
            // Throughput per steady step: the step's samples over its time (core::stepSpread).
            const core::Spread tp = spreadOf(r).throughput;
            const double thrSd = std::isfinite(tp.sd) ? tp.sd : 0.0;
            throughput->append(p->worldSize, p->throughput);
            thrTexts << tr("%1\n%2: %3 samples/s (± %4 over steady steps)")
                            .arg(r.label)
                            .arg(formatRanks(p->worldSize))
                            .arg(p->throughput, 0, 'f', 1)
                            .arg(thrSd, 0, 'f', 1);
            bars.push_back({double(p->worldSize), p->throughput, thrSd});
            maxThr = std::max(maxThr, p->throughput + thrSd);
            if (std::isfinite(p->efficiency)) {
                efficiency->append(p->worldSize, p->efficiency * 100.0);
                effTexts << tr("%1\n%2: weak-scaling efficiency %3").arg(r.label).arg(formatRanks(p->worldSize)).arg(formatPercent(p->efficiency));
                maxEff = std::max(maxEff, p->efficiency * 100.0);
            }
            minN = std::min(minN, p->worldSize);
            maxN = std::max(maxN, p->worldSize);
        }
        chart->addSeries(throughput);
        chart->addSeries(efficiency);
        throughput->attachAxis(x);
        throughput->attachAxis(yThr);
        efficiency->attachAxis(x);
        efficiency->attachAxis(yEff);
        attachHover(throughput, thrTexts, this);
        attachHover(efficiency, effTexts, this);
        for (const Bar& b : bars)
            addErrorBar(chart, x, yThr, b.x, b.y, b.sd, thrColor);
        ++g;
    }
    x->setRange(std::max(0, minN - 1), maxN + 1);
    yThr->setRange(0, maxThr * 1.15 + 1e-9);
    yThr->applyNiceNumbers();
    yEff->setRange(0, std::ceil(maxEff * 1.1 / 20.0) * 20.0); // multiples of 20 % read well
    setChart(m_views[Scaling], chart);
}

std::vector<ChartsPage::LegendEntry> ChartsPage::legendEntries(ChartId id) const
{
    std::vector<LegendEntry> out;
    if (const FlowLegend* legend = flowLegend(chart(id)))
        for (const auto& e : legend->entries())
            out.push_back({e.name, e.shown, legend->mapRectToParent(e.rect)});
    return out;
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
        generator.setTitle(chartTitle(id));
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
