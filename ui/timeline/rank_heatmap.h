// The rank × step heatmap: one cell per (rank, step) coloured by core's step time, the wait the
// rank caused, or its exposed communication (TimelineRunModel::rankStepMatrix). Made for many
// ranks: when there are more ranks (or steps) than pixels, a pixel shows the largest value of the
// cells it covers (heaptrack's thinning: the maxima survive, so one straggling rank among 1024
// still shows as a dark line), and the picture is built once per size and metric, so a repaint
// is a blit (one per run of pixel columns that show the same steps). Clicking a cell asks to
// show (rank, step) in the timeline. A run whose ranks ran on several hosts has its rows grouped
// by host (host_groups.h), each group under a host label in a band left of the rank labels; a run
// on one host looks as it does without grouping.
#pragma once

#include "host_groups.h"
#include "timeline_model.h"

#include <QImage>
#include <QWidget>

#include <memory>
#include <vector>

namespace lockstep::ui {

class RankHeatmap : public QWidget {
    Q_OBJECT
public:
    explicit RankHeatmap(QWidget* parent = nullptr);

    void setModel(std::shared_ptr<const TimelineRunModel> model);
    const TimelineRunModel* model() const { return m_model.get(); }
    void setMetric(RankStepMatrix::Metric metric);
    RankStepMatrix::Metric metric() const { return m_metric; }

    // The plot area (cells) inside the widget, and the (rank, step) under a point in it:
    // for a pixel that stands for several ranks, the rank with the largest value there.
    QRect plotRect() const;
    struct Cell {
        int32_t rank = -1;
        int32_t step = -1;
        float value = 0; // ms; NaN when the rank has no such step
        int ranksCovered = 1;
    };
    Cell cellAt(QPoint p) const;
    // The colour scale: values at the light and the dark end (ms), over steady steps.
    std::pair<float, float> scale() const { return {m_lo, m_hi}; }
    // The colour a value gets.
    QColor colorFor(float value) const;
    // The colour the picture shows at a point of the plot: the colour of cellAt's value, in grey
    // where every step under the point is a warm-up step (off the colour scale; rescale()).
    QColor colorAt(QPoint p) const;
    QSize sizeHint() const override { return QSize(700, 420); }
    // The host bands (several hosts only): each host's title and the rect of its label band, whose
    // top and bottom are those of its ranks' rows in the plot.
    struct HostBand {
        QString title;
        QRect rect;
    };
    std::vector<HostBand> hostBands() const;

signals:
    void cellClicked(int rank, int step);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override; // tooltips

private:
    void rescale();
    void rebuildImage(); // needs a model with at least one cell
    // Ranges of matrix rows / columns that pixel row y / column x of the plot covers.
    std::pair<size_t, size_t> ranksOfPixel(int y) const;
    std::pair<size_t, size_t> stepsOfPixel(int x) const;
    // Steps [s0, s1) of the matrix are all warm-up steps of a run that has steady ones.
    bool warmupOnly(size_t s0, size_t s1) const;

    std::shared_ptr<const TimelineRunModel> m_model;
    RankStepMatrix::Metric m_metric = RankStepMatrix::StepTime;
    float m_lo = 0, m_hi = 1;
    // The plot area, one column per strip of pixel columns that cover the same steps
    // (m_stripStarts[j] .. m_stripStarts[j + 1]), built by the first paint after the model, the
    // metric or the size changed: setting a model and then a size builds it once, not twice.
    QImage m_image;
    std::vector<int> m_stripStarts;
    QSize m_imageFor;
    bool m_imageStale = true;
    // Plot row i (top to bottom) shows the matrix's rank m_rows[i]: the ranks host by host when
    // they ran on several hosts (m_hosts), else in the matrix's order.
    std::vector<size_t> m_rows;
    std::vector<HostGroup> m_hosts;      // empty on one host
    std::vector<size_t> m_hostFirstRow;  // parallel to m_hosts: its first plot row
};

} // namespace lockstep::ui
