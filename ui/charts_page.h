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
#pragma once

#include "run_loader.h"

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
    QListWidget* runPicker() const { return m_picker; }

    QChart* chart(ChartId id) const;
    QChartView* chartView(ChartId id) const { return m_views[size_t(id)]; }
    int currentChart() const;
    // Writes the chart as PNG or SVG (by the file's suffix); false with `error` set on failure.
    bool exportChart(ChartId id, const QString& path, QString* error = nullptr) const;
    QImage renderChart(ChartId id, QSize size) const;
    // The tooltip text a hover over point `index` of `series` of a chart shows (tests).
    static QString pointText(QChart* chart, int series, int index);

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
