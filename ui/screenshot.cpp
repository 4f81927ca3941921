// Headless rendering (see screenshot.h).
#include "screenshot.h"

#include "compare_page.h"
#include "main_window.h"
#include "run_browser_page.h"
#include "timeline_page.h"

#include "timeline/timeline_widget.h"

#include "lockstep/core/output_file.h"

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QSet>
#include <QThread>

namespace lockstep::ui {

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

int renderScreenshot(const ScreenshotOptions& options, QString* error)
{
    static const QStringList views{"browser", "timeline", "charts", "compare", "launch"};
    const int page = int(views.indexOf(options.view));
    auto fail = [&](const QString& message) {
        if (error)
            *error = message;
        return 1;
    };
    if (page < 0)
        return fail(QStringLiteral("unknown view '%1' (timeline, charts, compare, browser, launch)").arg(options.view));
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
    if (options.step >= 0 && page == MainWindow::TimelinePageIndex)
        window.timelinePage()->focusStep(options.step);
    if (options.step >= 0 && page == MainWindow::ComparePageIndex)
        window.comparePage()->timeline()->zoomToStep(options.step);
    window.setAttribute(Qt::WA_DontShowOnScreen, QGuiApplication::platformName() != QLatin1String("offscreen"));
    window.show();
    // Let layouts settle and the pages paint (charts lay out on the first show).
    for (int i = 0; i < 5; ++i) {
        QApplication::processEvents();
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
