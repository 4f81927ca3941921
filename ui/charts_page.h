// The Charts page (Qt Charts): the current run's per-step five-part breakdown and step-time
// distribution per rank, and, over the runs picked in the run list, overlap and step time
// against bucket size and throughput and weak-scaling efficiency against world size.
//
// Cross-run charts compare like with like: core's comparableGroups() / scalingEfficiency() say
// which runs may share a curve (everything equal but the bucket caps, or but the world size);
// each group is its own curve, named by the runs it holds. 1-rank runs add no point to overlap
// curves (nothing to hide). Each point carries an error bar: ± one standard deviation of the
// run's steady steps (core's per-step breakdowns). Hovering a point shows its run and values.
// Each chart exports to PNG and SVG.
//
// Legends wrap: Qt Charts puts a bottom legend on one row and elides every label when they do
// not fit (four curves' names in a 350-pixel chart read "throughput · …"), so each chart's legend
// is drawn by the page, its entries flowing into as many rows as the chart's width needs. Titles
// and their notes wrap likewise (a few rows each, then elided, the whole title in the tooltip).
#pragma once

#include "run_loader.h"

#include <QRectF>
#include <QWidget>

#include <array>
#include <vector>

class QComboBox;
class QLabel;
class QImage;
class QListWidget;

class QChartView;
class QChart;

namespace lockstep::ui {

class ChartsPage : public QWidget {
    Q_OBJECT
public:
    enum ChartId { Breakdown, Distribution, BucketSweep, Scaling, ChartCount };

    explicit ChartsPage(QWidget* parent = nullptr);
    // `current` is the run the per-run charts show; `all` the open runs the picker offers (all
    // picked at first; a run keeps its choice while it stays open).
    void setRuns(LoadedRunPtr current, std::vector<LoadedRunPtr> all);
    void setRank(int rank); // -1 = mean over ranks
    int rank() const { return m_rank; }
    // The runs picked for the cross-run charts.
    std::vector<LoadedRunPtr> pickedRuns() const;
    void setPicked(const QStringList& paths);

    QChart* chart(ChartId id) const;
    // The chart's whole title (HTML: its name, then a line per note); QChart::title() is what
    // is drawn, wrapped to the chart's width.
    QString chartTitle(ChartId id) const;
    QChartView* chartView(ChartId id) const { return m_views[size_t(id)]; }
    int currentChart() const;
    // Writes the chart as PNG or SVG (by the file's suffix); false with `error` set on failure.
    bool exportChart(ChartId id, const QString& path, QString* error = nullptr) const;
    QImage renderChart(ChartId id, QSize size) const;
    // The tooltip text a hover over point `index` of `series` of a chart shows (tests).
    static QString pointText(QChart* chart, int series, int index);
    // A chart's legend as drawn: each entry's name (its series' or bar set's), the text shown
    // (the name, unless one entry alone is wider than the chart: then elided, the names in the
    // legend's tooltip) and where, in the chart's coordinates.
    struct LegendEntry {
        QString name;
        QString shown;
        QRectF rect;
    };
    std::vector<LegendEntry> legendEntries(ChartId id) const;

public slots:
    void exportCurrentChart(); // asks for a file name

private:
    void rebuildBreakdown();
    void rebuildDistribution();
    void rebuildSweep();
    void rebuildScaling();

    LoadedRunPtr m_current;
    std::vector<LoadedRunPtr> m_all;
    int m_rank = -1;
    std::array<QChartView*, ChartCount> m_views{};
    QComboBox* m_rankBox;
    QComboBox* m_exportWhich;
    QListWidget* m_picker;
};

} // namespace lockstep::ui
