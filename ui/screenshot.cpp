// Headless rendering (see screenshot.h).
#include "screenshot.h"

#include "compare_page.h"
#include "main_window.h"
#include "run_browser_page.h"
#include "timeline_page.h"
#include "whatif_panel.h"

#include "timeline/timeline_widget.h"

#include "lockstep/core/output_file.h"

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileInfo>
#include <QSet>
#include <QThread>

#include <chrono>
#include <cstdio>

namespace lockstep::ui {

QStringList screenshotViews()
{
    return {"timeline", "summary", "kernels", "ranks", "charts", "compare", "browser", "launch", "whatif"};
}

bool imageHasContent(const QImage& image, int minColors)
{
    if (image.isNull())
        return false;
    QSet<QRgb> colors;
    // A coarse grid is enough to tell a drawn page from a blank one, and cheap.
    const int stepX = std::max(1, image.width() / 200), stepY = std::max(1, image.height() / 200);
    for (int y = 0; y < image.height(); y += stepY)
        for (int x = 0; x < image.width(); x += stepX) {
            colors.insert(image.pixel(x, y));
            if (colors.size() >= minColors)
                return true;
        }
    return false;
}

namespace {
// bench/big/bench_big.cpp's hook: with LOCKSTEP_FIRST_FRAME_CLOCK set, prints on stderr the moment
// the shown window's first events (its first paint) have been processed, on the steady clock.
void reportFirstFrame()
{
    if (!qEnvironmentVariableIsSet("LOCKSTEP_FIRST_FRAME_CLOCK"))
        return;
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    std::fprintf(stderr, "first_frame_steady_ns: %lld\n",
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
}

// A prediction takes milliseconds on the runs a screenshot shows; a minute means something hangs.
constexpr int kWhatIfTimeoutMs = 60'000;

bool waitForWhatIf(WhatIfPanel* panel)
{
    QElapsedTimer timer;
    timer.start();
    while (panel->busy() && timer.elapsed() < kWhatIfTimeoutMs) {
        QApplication::processEvents(QEventLoop::AllEvents, 20);
        QThread::msleep(2);
    }
    return !panel->busy();
}
} // namespace

int viewPage(const QString& view)
{
    // View name -> page; "summary" and "kernels" are the Timeline page with that tab in front.
    static const QStringList views{"browser", "timeline", "ranks", "charts", "compare", "launch", "whatif"};
    return view == QLatin1String("summary") || view == QLatin1String("kernels") ? int(MainWindow::TimelinePageIndex)
                                                                                : int(views.indexOf(view));
}

int renderScreenshot(const ScreenshotOptions& options, QString* error)
{
    const bool summary = options.view == QLatin1String("summary");
    const bool kernels = options.view == QLatin1String("kernels");
    const int page = viewPage(options.view);
    auto fail = [&](const QString& message) {
        if (error)
            *error = message;
        return 1;
    };
    if (page < 0)
        return fail(QStringLiteral("unknown view '%1' (%2)").arg(options.view, screenshotViews().join(QStringLiteral(", "))));
    if (options.output.isEmpty())
        return fail(QStringLiteral("no output file given"));
    if (page != MainWindow::RunsPage && page != MainWindow::LaunchPageIndex && options.runs.isEmpty())
        return fail(QStringLiteral("the %1 view needs at least one run file").arg(options.view));
    if (page == MainWindow::ComparePageIndex && options.runs.size() < 2)
        return fail(QStringLiteral("the compare view needs two or more run files"));

    MainWindow::Options wo;
    wo.persistent = false;
    wo.scanWorkspace = false;
    wo.workspace = !options.workspace.isEmpty() ? options.workspace
                   : !options.runs.isEmpty()    ? QFileInfo(options.runs.front()).absolutePath()
                                                : QDir::currentPath();
    MainWindow window(wo);
    window.setErrorDialogsEnabled(false);
    window.resize(options.size);
    QString loadError;
    if (!options.runs.isEmpty() && !window.openFilesBlocking(options.runs, &loadError))
        return fail(loadError);
    if (page == MainWindow::RunsPage) {
        window.browserPage()->setWorkspace(wo.workspace);
        window.browserPage()->scanBlocking();
    }
    if (page == MainWindow::ComparePageIndex) {
        QStringList all;
        for (const auto& r : window.openRuns())
            all << r->path;
        window.comparePage()->setChecked(all);
    }
    // The timeline shows the first run given (the others are there for charts and compare).
    if (!window.openRuns().empty())
        window.setCurrentRun(0);
    window.showPage(page);
    // The what-if page builds its model and predicts off the GUI thread: wait for the first
    // prediction (or the model's refusal) before the picture is taken.
    if (page == MainWindow::WhatIfPageIndex && !waitForWhatIf(window.whatIfPanel()))
        return fail(QStringLiteral("the what-if page did not finish its prediction"));
    // Compare's "What changed" is computed off the GUI thread: wait for it (it always ends).
    while (page == MainWindow::ComparePageIndex && window.comparePage()->changesPending()) {
        QEventLoop loop;
        QObject::connect(window.comparePage(), &ComparePage::changesReady, &loop, &QEventLoop::quit);
        if (window.comparePage()->changesPending())
            loop.exec();
    }
    if (options.step >= 0 && page == MainWindow::TimelinePageIndex)
        window.timelinePage()->focusStep(options.step);
    // The side panel shows the summary for the summary view and the selection's details for
    // the timeline view (focusStep selected a bucket).
    if (page == MainWindow::TimelinePageIndex)
        window.timelinePage()->showSideTab(kernels                        ? TimelinePage::KernelsTab
                                           : summary || options.step < 0 ? TimelinePage::SummaryTab
                                                                         : TimelinePage::DetailsTab);
    if (summary || kernels)
        window.timelinePage()->setSideWidth(options.size.width() * 45 / 100);
    if (options.step >= 0 && page == MainWindow::ComparePageIndex)
        window.comparePage()->timeline()->zoomToStep(options.step);
    window.setAttribute(Qt::WA_DontShowOnScreen, QGuiApplication::platformName() != QLatin1String("offscreen"));
    window.show();
    // Let layouts settle and the pages paint (charts lay out on the first show, then grow to
    // the height their wrapped titles and legends leave a plot: a few rounds).
    for (int i = 0; i < 12; ++i) {
        QApplication::processEvents();
        if (i == 0)
            reportFirstFrame();
        QThread::msleep(10);
    }
    const QImage image = window.grab().toImage();
    if (!imageHasContent(image))
        return fail(QStringLiteral("the rendered %1 view is blank").arg(options.view));
    const QFileInfo out(options.output);
    QDir().mkpath(out.absolutePath());
    // Whole or absent, and never over one of the runs it shows (core/output_file.h).
    std::vector<std::string> inputs;
    for (const QString& r : options.runs)
        inputs.push_back(r.toStdString());
    auto file = core::OutputFile::create(options.output.toStdString(), true, inputs);
    if (!file)
        return fail(QString::fromStdString(file.error().message));
    if (!image.save(QString::fromStdString(file->path()), "PNG"))
        return fail(QStringLiteral("cannot write %1").arg(options.output));
    if (auto s = file->commit(); !s)
        return fail(QString::fromStdString(s.error().message));
    return 0;
}

} // namespace lockstep::ui
