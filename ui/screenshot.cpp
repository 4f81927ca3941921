// Headless rendering (see screenshot.h).
#include "screenshot.h"

#include "compare_page.h"
#include "main_window.h"
#include "run_browser_page.h"
#include "timeline_page.h"
#include "whatif_panel.h"

#include "timeline/timeline_model.h"
#include "timeline/timeline_widget.h"

#include "lockstep/core/output_file.h"

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QSet>
#include <QThread>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sys/resource.h>
#include <unistd.h>
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

// Resident memory of this process now, MB (Linux; 0 elsewhere).
double residentMb()
{
    QFile status(QStringLiteral("/proc/self/status"));
    if (!status.open(QIODevice::ReadOnly))
        return 0;
    for (const QByteArray& line : status.readAll().split('\n'))
        if (line.startsWith("VmRSS:"))
            return line.mid(6).trimmed().split(' ').front().toDouble() / 1024.0;
    return 0;
}

double percentile(std::vector<double> v, double p)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

// --pan-frames: a session of navigation over the whole run, zoom levels from the whole run down to
// 1/4096 of it, each swept in 16 views across the run (one way, then back), one repaint per view
// change (the on-screen path, into the window's backing store). Three times in each sweep the view
// rests, repainting, until the spans streamed for it (a run too big to load whole) are in, as a
// user pausing would; and the session goes on while a run's spans are still loading. Between
// frames the GUI thread's events run (where streamed spans and loaded runs are taken): the
// longest of those is the worst stall the user could feel.
//
// A frame over the 16 ms budget is painted once more at once, its draw lists built again: the same
// work on the same model. The program's cost repeats; a stall of the machine does not (on a
// virtual machine a busy host takes the CPU away, or its memory, for tens of milliseconds: an
// identical repaint of a cached view was seen to take 43 ms against 1.2-1.8 ms for the five
// before it). So the session prints both the raw maximum and the maximum of what repeats, and the
// time the machine reported stolen.
void measurePanning(MainWindow& window, int frames)
{
    constexpr double kBudgetMs = 16;
    TimelineWidget* timeline = window.timelinePage()->timeline();
    std::vector<double> loading, loaded;
    double stallMs = 0, rssMb = residentMb(), repeatableMax = 0;
    int overBudget = 0, overBudgetRepeated = 0;
    const int windowsBefore = window.timelinePage()->streamedWindows();
    static constexpr double kZoom[] = {1.0, 1.0 / 8, 1.0 / 64, 1.0 / 512, 1.0 / 4096};
    const bool verbose = qEnvironmentVariableIsSet("LOCKSTEP_PAN_VERBOSE");
    auto busy = [&] { return window.detailPending() || window.timelinePage()->streamingSpans(); };
    // The GUI thread's own account of a frame (Linux): user and system CPU, page faults, context
    // switches; and the machine's stolen time (/proc/stat, in clock ticks summed over the CPUs).
    auto usage = [] {
        rusage u{};
#ifdef RUSAGE_THREAD
        getrusage(RUSAGE_THREAD, &u);
#endif
        return u;
    };
    auto stolenTicks = [] {
        QFile stat(QStringLiteral("/proc/stat"));
        if (!stat.open(QIODevice::ReadOnly))
            return 0LL;
        const QList<QByteArray> f = stat.readLine().simplified().split(' ');
        return f.size() > 8 ? f[8].toLongLong() : 0LL;
    };
    const long long stolenBefore = stolenTicks();
    auto msOf = [](const timeval& tv) { return double(tv.tv_sec) * 1e3 + double(tv.tv_usec) / 1e3; };
    struct Paint {
        double ms = 0, cpuMs = 0, userMs = 0, sysMs = 0;
        long faults = 0, majorFaults = 0, switches = 0;
        long long stolen = 0;
    };
    auto paint = [&] {
        Paint r;
        QElapsedTimer t;
        timespec c0{}, c1{};
        const long long steal0 = verbose ? stolenTicks() : 0;
        const rusage u0 = usage();
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        t.start();
        timeline->repaint();
        r.ms = double(t.nsecsElapsed()) / 1e6;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        const rusage u1 = usage();
        r.stolen = verbose ? stolenTicks() - steal0 : 0;
        // The precise total; the user/system split is the kernel's (tick-sampled on some kernels).
        r.cpuMs = double(c1.tv_sec - c0.tv_sec) * 1e3 + double(c1.tv_nsec - c0.tv_nsec) / 1e6;
        r.userMs = msOf(u1.ru_utime) - msOf(u0.ru_utime);
        r.sysMs = msOf(u1.ru_stime) - msOf(u0.ru_stime);
        r.faults = u1.ru_minflt - u0.ru_minflt + u1.ru_majflt - u0.ru_majflt;
        r.majorFaults = u1.ru_majflt - u0.ru_majflt;
        r.switches = u1.ru_nvcsw - u0.ru_nvcsw + u1.ru_nivcsw - u0.ru_nivcsw;
        return r;
    };
    // Where the slowest frame was: its view, and the windows streamed in before it.
    double worstMs = -1, cpuMax = 0;
    QString worst;
    auto frame = [&](int i) {
        const bool pending = busy();
        const Paint p = paint();
        // A frame over budget, painted again from its draw lists' building on.
        double repeatMs = -1;
        if (p.ms > kBudgetMs) {
            ++overBudget;
            timeline->forgetDrawList();
            repeatMs = paint().ms;
            overBudgetRepeated += repeatMs > kBudgetMs;
        }
        repeatableMax = std::max(repeatableMax, repeatMs < 0 ? p.ms : std::min(p.ms, repeatMs));
        (pending ? loading : loaded).push_back(p.ms);
        cpuMax = std::max(cpuMax, p.cpuMs);
        if (p.ms > worstMs) {
            worstMs = p.ms;
            worst = QStringLiteral("view %1 (zoom 1/%2), %5 ms of it on the CPU (%6 ms user, %7 ms system; %8 page faults, "
                                   "%9 major; %10 context switches), after %3 streamed windows, %4 items drawn%11")
                        .arg(i)
                        .arg(int(std::lround(1.0 / kZoom[(i / 16) % std::size(kZoom)])))
                        .arg(window.timelinePage()->streamedWindows() - windowsBefore)
                        .arg(timeline->lastFrameItemCount())
                        .arg(p.cpuMs, 0, 'f', 2)
                        .arg(p.userMs, 0, 'f', 2)
                        .arg(p.sysMs, 0, 'f', 2)
                        .arg(p.faults)
                        .arg(p.majorFaults)
                        .arg(p.switches)
                        .arg(repeatMs < 0 ? QString() : QStringLiteral("; painted again: %1 ms").arg(repeatMs, 0, 'f', 2));
        }
        QElapsedTimer t;
        t.start();
        QApplication::processEvents();
        const double eventsMs = double(t.nsecsElapsed()) / 1e6;
        if (verbose)
            std::fprintf(stderr, "# frame %d (%s): %.2f ms (%.2f ms CPU, %.1f user, %.1f system, %ld faults, %lld ticks stolen)%s, then events %.2f ms\n",
                         i, pending ? "loading" : "loaded", p.ms, p.cpuMs, p.userMs, p.sysMs, p.faults, p.stolen,
                         repeatMs < 0 ? "" : qPrintable(QStringLiteral(", painted again %1 ms").arg(repeatMs, 0, 'f', 2)), eventsMs);
        stallMs = std::max(stallMs, eventsMs);
        rssMb = std::max(rssMb, residentMb());
    };
    for (int i = 0; i < frames || window.detailPending(); ++i) {
        const TimelineRunModel* model = timeline->runModel(0);
        if (!model)
            break;
        const double begin = double(model->alignedBegin()), extent = double(model->alignedEnd() - model->alignedBegin());
        const double width = extent * kZoom[(i / 16) % std::size(kZoom)];
        // Sweeps alternate direction: each rests in other places.
        const int k = (i / 16) % 2 ? 15 - i % 16 : i % 16;
        const double at = begin + (extent - width) * double(k) / 15.0;
        timeline->setViewRange(core::TimeNs(at), core::TimeNs(at + width));
        frame(i);
        if (i % 16 != 5 && i % 16 != 10 && i % 16 != 15)
            continue;
        // The view rests: repaint while what it asked for streams in (at most a minute).
        QElapsedTimer rest;
        rest.start();
        while (window.timelinePage()->streamingSpans() && rest.elapsed() < 60'000) {
            frame(i);
            QThread::msleep(4);
        }
    }
    std::vector<double> all = loading;
    all.insert(all.end(), loaded.begin(), loaded.end());
    const double tickMs = 1000.0 / double(sysconf(_SC_CLK_TCK));
    std::fprintf(stderr, "ui_pan_frames: %zu frames\n", all.size());
    std::fprintf(stderr, "ui_pan_frames_while_loading: %zu frames\n", loading.size());
    std::fprintf(stderr, "ui_pan_windows_streamed: %d windows\n", window.timelinePage()->streamedWindows() - windowsBefore);
    std::fprintf(stderr, "ui_pan_frame_ms_median: %.2f ms\n", percentile(all, 0.5));
    std::fprintf(stderr, "ui_pan_frame_ms_p95: %.2f ms\n", percentile(all, 0.95));
    std::fprintf(stderr, "ui_pan_frame_ms_max: %.2f ms\n", all.empty() ? 0.0 : *std::max_element(all.begin(), all.end()));
    std::fprintf(stderr, "ui_pan_frame_ms_max_while_loading: %.2f ms\n",
                 loading.empty() ? 0.0 : *std::max_element(loading.begin(), loading.end()));
    std::fprintf(stderr, "ui_pan_frame_ms_max_repeatable: %.2f ms\n", repeatableMax);
    std::fprintf(stderr, "ui_pan_frames_over_16ms: %d frames\n", overBudget);
    std::fprintf(stderr, "ui_pan_frames_over_16ms_again: %d frames\n", overBudgetRepeated);
    std::fprintf(stderr, "ui_pan_frame_cpu_ms_max: %.2f ms\n", cpuMax);
    std::fprintf(stderr, "ui_pan_gui_stall_ms_max: %.2f ms\n", stallMs);
    std::fprintf(stderr, "ui_pan_machine_stolen_ms: %.0f ms\n", double(stolenTicks() - stolenBefore) * tickMs);
    std::fprintf(stderr, "# the slowest frame: %s\n", qPrintable(worst));
    std::fprintf(stderr, "ui_pan_rss_mb_max: %.1f MB\n", rssMb);
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
    // As the app opens runs: from their stored overview first (the first frame), then their spans.
    if (!options.runs.isEmpty() && !window.openFilesBlocking(options.runs, &loadError, true))
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
    bool firstFrameReported = false;
    const bool pan = options.panFrames > 0 && page == MainWindow::TimelinePageIndex && !window.openRuns().empty();
    if (window.detailPending() || pan) {
        window.setAttribute(Qt::WA_DontShowOnScreen, QGuiApplication::platformName() != QLatin1String("offscreen"));
        window.show();
        // The first frame: the timeline has painted its spans (not only the window its frame).
        for (int k = 0; k < 100; ++k) {
            QApplication::processEvents();
            if (page != MainWindow::TimelinePageIndex || window.timelinePage()->timeline()->lastFrameItemCount() > 0)
                break;
            QThread::msleep(1);
        }
        reportFirstFrame();
        firstFrameReported = true;
        if (pan) {
            measurePanning(window, options.panFrames);
            window.timelinePage()->fitAll();
        }
        while (window.detailPending()) {
            QEventLoop loop;
            QObject::connect(&window, &MainWindow::runDetailed, &loop, &QEventLoop::quit);
            if (window.detailPending())
                loop.exec();
        }
        for (const auto& r : window.openRuns())
            if (!r->detailError.isEmpty())
                return fail(QStringLiteral("%1: %2").arg(r->path, r->detailError));
    }
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
        if (i == 0 && !firstFrameReported)
            reportFirstFrame();
        QThread::msleep(10);
    }
    // Spans streamed for the view (a run too big to load whole, zoomed in by --step): drawn before
    // the picture is taken.
    for (QElapsedTimer t; page == MainWindow::TimelinePageIndex && window.timelinePage()->streamingSpans();) {
        if (!t.isValid())
            t.start();
        if (t.elapsed() > 120'000)
            return fail(QStringLiteral("streaming the view's spans did not finish"));
        QApplication::processEvents(QEventLoop::AllEvents, 20);
        QThread::msleep(2);
    }
    QApplication::processEvents();
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
