// Headless rendering for docs and tests: `lockstep-ui --screenshot OUT.png --view V RUN...`
// builds the main window offscreen, opens the runs (blocking), shows one page and saves it.
#pragma once

#include <QImage>
#include <QSize>
#include <QString>
#include <QStringList>

namespace lockstep::ui {

struct ScreenshotOptions {
    QString output;                  // .png
    QString view = QStringLiteral("timeline"); // one of screenshotViews()
    QSize size{1400, 860};
    QStringList runs;
    QString workspace;               // browser view; default: the first run's folder
    int step = -1;                   // timeline/compare: zoom to this step (-1: whole run)
    // timeline: after the first frame, this many pan and zoom frames across the whole run (and
    // as many more as it takes the run's spans to load), each rendered and timed; statistics
    // on stderr as `ui_pan_*: value unit` lines (bench/big/bench_big.cpp reads them).
    int panFrames = 0;
};

// The views --screenshot renders: timeline, summary (the Timeline page with its Summary tab),
// ranks, charts, compare, browser, launch, whatif (the What-if page: the first run's prediction at
// its recorded configuration over the measured run).
QStringList screenshotViews();
// The main window's page a view shows (MainWindow::Page), -1 for an unknown view; the app opens
// on it with `lockstep-ui RUN --view V`.
int viewPage(const QString& view);
// Renders and saves; returns 0, or 1 with `error` set.
int renderScreenshot(const ScreenshotOptions& options, QString* error);
// True when the image has at least `minColors` distinct colours (a blank or flat image has 1–2).
bool imageHasContent(const QImage& image, int minColors = 8);

} // namespace lockstep::ui
