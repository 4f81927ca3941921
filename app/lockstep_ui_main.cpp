// lockstep-ui: the desktop app. `lockstep-ui [RUN.db...]` opens runs;
// `lockstep-ui [--view V] RUN...` opens on page V (whatif, charts, ...);
// `lockstep-ui --screenshot OUT.png [--view V] [--size WxH] RUN...` renders one page headless;
// --help and --version need no display either.
#include "exit_status.h"
#include "main_window.h"
#include "screenshot.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QRegularExpression>

#include <signal.h>
#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv)
{
    // A write past a file-size limit fails like one to a full disk (EFBIG) instead of killing the
    // app, so a screenshot that cannot be written leaves nothing behind (core/output_file.h).
    signal(SIGXFSZ, SIG_IGN);
    // Screenshots, --help and --version must work without a display: pick the offscreen platform
    // for them unless one was chosen.
    bool headless = false;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        headless = headless || std::strcmp(a, "--screenshot") == 0 || std::strncmp(a, "--screenshot=", 13) == 0
                || std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0 || std::strcmp(a, "--help-all") == 0
                || std::strcmp(a, "--version") == 0 || std::strcmp(a, "-v") == 0;
    }
    if (headless && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");

    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Lockstep"));
    QApplication::setApplicationName(QStringLiteral("lockstep-ui"));
    QApplication::setApplicationVersion(QStringLiteral(LOCKSTEP_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Lockstep: see how DDP training overlaps communication with computation."));
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption shotOpt("screenshot", "Render a view to OUT.png without a window and exit.", "OUT.png");
    QCommandLineOption viewOpt("view", QStringLiteral("Page to open, or to render with --screenshot: %1.").arg(lockstep::ui::screenshotViews().join(", ")), "view", "timeline");
    QCommandLineOption sizeOpt("size", "Size of the rendered window, WxH.", "WxH", "1400x860");
    QCommandLineOption wsOpt("workspace", "Workspace folder shown in the run browser.", "folder");
    QCommandLineOption stepOpt("step", "Screenshot: zoom the timeline (or compare) view to this step and select its largest bucket.", "N", "-1");
    QCommandLineOption panOpt("pan-frames", "Screenshot of the timeline: first pan and zoom across the whole run N times (and until its spans are loaded), timing each frame; statistics on stderr.", "N", "0");
    parser.addOptions({shotOpt, viewOpt, sizeOpt, wsOpt, stepOpt, panOpt});
    parser.addPositionalArgument("runs", "Run databases to open.", "[RUN.db...]");
    parser.process(app);

    if (parser.isSet(shotOpt)) {
        lockstep::ui::ScreenshotOptions o;
        o.output = parser.value(shotOpt);
        o.view = parser.value(viewOpt).toLower();
        o.runs = parser.positionalArguments();
        o.workspace = parser.value(wsOpt);
        bool stepOk = false;
        o.step = parser.value(stepOpt).toInt(&stepOk);
        if (!stepOk) {
            std::fprintf(stderr, "lockstep-ui: --step must be a step number\n");
            return lockstep::app::exitStatusFor(lockstep::core::ErrorCode::Usage);
        }
        bool panOk = false;
        o.panFrames = parser.value(panOpt).toInt(&panOk);
        if (!panOk || o.panFrames < 0) {
            std::fprintf(stderr, "lockstep-ui: --pan-frames must be a count of frames\n");
            return lockstep::app::exitStatusFor(lockstep::core::ErrorCode::Usage);
        }
        const auto m = QRegularExpression(QStringLiteral("^(\\d+)x(\\d+)$")).match(parser.value(sizeOpt));
        if (!m.hasMatch()) {
            std::fprintf(stderr, "lockstep-ui: --size must be WxH, e.g. 1400x860\n");
            return lockstep::app::exitStatusFor(lockstep::core::ErrorCode::Usage);
        }
        o.size = QSize(std::clamp(m.captured(1).toInt(), 320, 8192), std::clamp(m.captured(2).toInt(), 240, 8192));
        QString error;
        const int rc = lockstep::ui::renderScreenshot(o, &error);
        if (rc != 0)
            std::fprintf(stderr, "lockstep-ui: %s\n", qPrintable(error));
        return rc;
    }

    lockstep::ui::MainWindow::Options options;
    options.workspace = parser.value(wsOpt);
    // Runs named on the command line: the run browser shows their folder (not ./runs, which
    // may not exist and would list nothing beside the runs that are open).
    if (options.workspace.isEmpty() && !parser.positionalArguments().isEmpty())
        options.workspace = QFileInfo(parser.positionalArguments().first()).absolutePath();
    int page = -1;
    if (parser.isSet(viewOpt)) {
        page = lockstep::ui::viewPage(parser.value(viewOpt).toLower());
        if (page < 0) {
            std::fprintf(stderr, "lockstep-ui: unknown view '%s' (%s)\n", qPrintable(parser.value(viewOpt)),
                         qPrintable(lockstep::ui::screenshotViews().join(", ")));
            return lockstep::app::exitStatusFor(lockstep::core::ErrorCode::Usage);
        }
    }
    lockstep::ui::MainWindow window(options);
    window.show();
    if (page >= 0) {
        window.showPage(page);
        // Opening a run shows the Timeline; --view asked for another page: back to it once the
        // run is in (queued: after the window's own switch).
        QObject::connect(&window, &lockstep::ui::MainWindow::runOpened, &window, [&window, page] { window.showPage(page); },
                         Qt::QueuedConnection);
    }
    if (!parser.positionalArguments().isEmpty())
        window.openFiles(parser.positionalArguments(), true);
    return app.exec();
}
