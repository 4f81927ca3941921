// The What-if page's answer time (issue 13: "updated within a frame or two"; goal <= 33 ms): from a
// field change (the bucket-cap slider moved one step) to the page painted with the new prediction
// — the replay (core's WhatIfModel::predict), core::analyze of the predicted run and its timeline
// model in the worker thread, then the numbers, the stacked timeline and a synchronous repaint of
// the whole page on the GUI thread. Each change waits for the previous one to land, so every
// sample is one whole answer, never a coalesced one.
//
// The run is a real one: LOCKSTEP_BENCH_RUN=run.db, else a 2-rank mlp (8 x 512, the demo run's
// model) recorded here with `lockstep run` (needs the runtime). Run with QT_QPA_PLATFORM=offscreen.
// Prints `name: value unit` lines.
#include "launch_panel.h"
#include "run_loader.h"
#include "whatif_panel.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QProcess>
#include <QSlider>
#include <QTemporaryDir>

#include <algorithm>
#include <cstdio>
#include <vector>

using namespace lockstep;

namespace {
double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}
double p95(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, v.size() * 95 / 100)];
}
// Enough samples for a steady median and a p95 on a shared 2-core machine, in a few seconds.
constexpr int kSamples = 41;
} // namespace

int main(int argc, char** argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    QTemporaryDir dir;
    QString path = qEnvironmentVariable("LOCKSTEP_BENCH_RUN");
    if (path.isEmpty()) {
        path = dir.filePath(QStringLiteral("mlp.db"));
        QProcess run;
        run.start(ui::lockstepCliPath(), {"run", "--nproc", "2", "--model", "mlp", "--layers", "8", "--width", "512", "--batch",
                                          "32", "--steps", "12", "--bucket-mb", "1", "--progress", "none", "--out", path});
        if (!run.waitForFinished(600'000) || run.exitCode() != 0) {
            std::fprintf(stderr, "bench_whatif_panel: recording failed (needs `lockstep run`): %s\n",
                         run.readAllStandardError().constData());
            return 1;
        }
    }
    auto loaded = ui::loadAndAnalyze(path);
    if (!loaded) {
        std::fprintf(stderr, "bench_whatif_panel: %s\n", loaded.error().message.c_str());
        return 1;
    }
    ui::WhatIfPanel panel;
    panel.resize(1400, 800);
    panel.show();
    QElapsedTimer clock;
    clock.start();
    panel.setRun(*loaded);
    while (panel.busy())
        QApplication::processEvents(QEventLoop::WaitForMoreEvents);
    const double firstMs = clock.nsecsElapsed() / 1e6;
    if (!panel.shown()) {
        std::fprintf(stderr, "bench_whatif_panel: %s\n", qPrintable(panel.message()));
        return 1;
    }

    std::vector<double> samples;
    QSlider* slider = panel.bucketSlider();
    for (int i = 0; i < kSamples; ++i) {
        // Alternate up and down the slider so every sample is a new layout or cap.
        const int position = i % 2 == 0 ? (slider->value() + 3) % (slider->maximum() + 1) : (slider->value() + 7) % (slider->maximum() + 1);
        bool shown = false;
        const auto c = QObject::connect(&panel, &ui::WhatIfPanel::predictionShown, [&] { shown = !panel.busy(); });
        clock.restart();
        slider->setValue(position);
        while (!shown)
            QApplication::processEvents(QEventLoop::WaitForMoreEvents);
        panel.repaint(); // painted: the page as the user sees it
        samples.push_back(clock.nsecsElapsed() / 1e6);
        QObject::disconnect(c);
    }
    std::printf("whatif_panel_run_spans: %zu spans\n", (*loaded)->run->spans.size());
    std::printf("whatif_panel_first_prediction_ms: %.2f ms (model build + first prediction, worker thread)\n", firstMs);
    std::printf("whatif_panel_update_ms: %.2f ms (median of %d; field change to painted)\n", median(samples), kSamples);
    std::printf("whatif_panel_update_p95_ms: %.2f ms\n", p95(samples));
    return 0;
}
