// The Charts page (Qt Charts): the current run's per-step breakdown and step-time distribution
// per rank, and, over the open runs, overlap and step time against bucket size and throughput
// and weak-scaling efficiency against world size. Each chart exports to PNG and SVG.
#pragma once

#include "run_loader.h"

#include <QWidget>

#include <array>
#include <vector>

class QComboBox;
class QLabel;
class QImage;

class QChartView;
class QChart;

namespace lockstep::ui {

class ChartsPage : public QWidget {
    Q_OBJECT
public:
    enum ChartId { Breakdown, Distribution, BucketSweep, Scaling, ChartCount };

    explicit ChartsPage(QWidget* parent = nullptr);
    // `current` is the run the per-run charts show; `all` the open runs the sweep charts use.
    void setRuns(LoadedRunPtr current, std::vector<LoadedRunPtr> all);
    void setRank(int rank); // -1 = mean over ranks
    int rank() const { return m_rank; }

    QChart* chart(ChartId id) const;
    QChartView* chartView(ChartId id) const { return m_views[size_t(id)]; }
    int currentChart() const;
    // Writes the chart as PNG or SVG (by the file's suffix); false with `error` set on failure.
    bool exportChart(ChartId id, const QString& path, QString* error = nullptr) const;
    QImage renderChart(ChartId id, QSize size) const;

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
};

} // namespace lockstep::ui
