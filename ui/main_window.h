// The main window of lockstep-ui: a page list on the left (Runs, Timeline, Ranks, Charts,
// Compare, Launch, What if), menus File/View/Run/Help, a status bar. Owns the open runs (plain values from
// core, shared with the pages) and loads them off the GUI thread. A run still being recorded
// (its status says running, or only its rank shards exist yet) is re-read every second, off the
// GUI thread, and grows on the Timeline page while the recorder writes it.
#pragma once

#include "run_loader.h"

#include <QDateTime>
#include <QHash>
#include <QColor>
#include <QMainWindow>
#include <QStringList>

#include <vector>

class QComboBox;
class QLabel;
class QListWidget;
class QMenu;
class QStackedWidget;
class QTimer;

namespace lockstep::ui {

class ChartsPage;
class ComparePage;
class LaunchPanel;
class RanksPage;
class RunBrowserPage;
class TimelinePage;
class WhatIfPanel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum Page { RunsPage, TimelinePageIndex, RanksPageIndex, ChartsPageIndex, ComparePageIndex, LaunchPageIndex, WhatIfPageIndex, PageCount };

    struct Options {
        bool persistent = true; // read and write QSettings (off for screenshots)
        QString workspace;      // empty: from settings, else ./runs (lockstep-ui RUN.db...: the
                                //   first run's folder, app/lockstep_ui_main.cpp)
        bool scanWorkspace = true;
    };
    explicit MainWindow(const Options& options);
    MainWindow() : MainWindow(Options{}) {}
    ~MainWindow() override;

    // Opens files in the background; `explicitly` (File > Open, command line) shows a dialog
    // for a file that cannot be opened, the status bar says it in any case.
    void openFiles(const QStringList& paths, bool explicitly = true);
    // Opens the runs and, once all are loaded, shows them stacked in Compare.
    void compareFiles(const QStringList& paths);
    // The runs picked for comparison, wherever they were picked (the Runs page's selection, the
    // command line, Compare selected): opened if need be, then checked on the Compare page and
    // picked for the Charts page's cross-run charts, and `page` shown.
    void pickRuns(const QStringList& paths, int page);
    // Blocking open (screenshot mode, tests); false with `error` on the first failure. With
    // `firstView`, as the app opens a run: a run with a stored overview opens from it and its
    // spans load in the background (detailPending(), runDetailed); else each run whole.
    bool openFilesBlocking(const QStringList& paths, QString* error, bool firstView = false);
    // Runs opened from their overview whose spans are still loading.
    bool detailPending() const;

    // Imports torch.profiler / Nsight Systems traces (one file per rank) into a run file in the
    // workspace, off the GUI thread, then opens it. Returns false when this build has no importers.
    bool importFiles(const QStringList& traces);

    void setWorkspace(const QString& folder);
    QString workspace() const { return m_workspace; }
    void showPage(int page);
    int currentPage() const;
    void setCurrentRun(int index);
    // Closes the current run (File > Close Run): it leaves every page.
    void closeCurrentRun();
    // Runs being followed while they record (paths), for tests.
    QStringList liveRuns() const { return m_live.keys(); }
    const std::vector<LoadedRunPtr>& openRuns() const { return m_open; }
    LoadedRunPtr currentRun() const { return m_current; }
    QStringList recentFiles() const { return m_recent; }
    void setErrorDialogsEnabled(bool on) { m_errorDialogs = on; } // tests: no modal dialogs
    QString lastError() const { return m_lastError; }

    RunBrowserPage* browserPage() const { return m_browser; }
    TimelinePage* timelinePage() const { return m_timeline; }
    RanksPage* ranksPage() const { return m_ranks; }
    ChartsPage* chartsPage() const { return m_charts; }
    ComparePage* comparePage() const { return m_compare; }
    LaunchPanel* launchPanel() const { return m_launch; }
    WhatIfPanel* whatIfPanel() const { return m_whatif; }

    // The shortcut table shown by Help > Shortcuts: (keys or gesture, what). Every key and mouse
    // gesture of the app is in it.
    static QList<QPair<QString, QString>> shortcutList();
    // Help > Shortcuts and colours: what each colour of the timeline and the breakdowns means.
    static QList<QPair<QColor, QString>> colourLegend();

signals:
    void runOpened(lockstep::ui::LoadedRunPtr run);
    // A run opened from its overview now has its spans (it replaced the overview in openRuns()),
    // or loading them failed (run->detailError).
    void runDetailed(lockstep::ui::LoadedRunPtr run);
    void openFailed(const QString& path, const QString& message);
    void importFinished(const QString& runFile, const QString& error);

public slots:
    void openDialog();
    void chooseWorkspace();
    void importDialog();
    void showShortcuts();
    void showAbout();

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    // The constructor's steps, in order.
    void setUpPages();
    void setUpCentralAndToolbar();
    void connectLoaders();
    void connectPages();
    void connectLaunch();
    void restoreSettingsAndWorkspace();
    void buildMenus();
    void addRun(LoadedRunPtr run);
    void refreshPages();
    void addRecent(const QString& path);
    void updateRecentMenu();
    void reportError(const QString& path, const QString& message, bool dialog);
    void pollLive();
    void liveRunLoaded(const QString& path, LoadedRunPtr run);
    // The spans of a run opened from its overview arrived: it replaces the overview in place.
    void runDetailLoaded(const QString& path, LoadedRunPtr run);
    // `run` takes the place of `open` (an entry of m_open); when that was the current run, the
    // Timeline page takes it in place. True when it was the current run.
    bool replaceInPlace(LoadedRunPtr& open, LoadedRunPtr run);

    Options m_options;
    QString m_workspace;
    RunLoader* m_loader;
    RunLoader* m_liveLoader;          // re-reads runs being recorded
    QTimer* m_liveTimer;
    QHash<QString, QStringList> m_live; // run path -> the files to read for it (the run, or its shards)
    QHash<QString, QDateTime> m_liveStamp;   // newest modification time read, per live run
    QHash<QString, QStringList> m_liveFiles; // the files read last, per live run
    std::vector<LoadedRunPtr> m_open;
    LoadedRunPtr m_current;
    QStringList m_recent;
    QStringList m_explicitPending; // paths opened explicitly, for the error dialog
    QStringList m_comparePending;  // compareFiles(): still loading
    QStringList m_compareSet;
    int m_pickPage = 0;            // the page pickRuns() shows once the picked runs are open
    void applyPicked();
    bool m_errorDialogs = true;
    bool m_launchLive = false; // the Timeline page shows the Launch panel's recording
    QString m_lastError;

    QListWidget* m_pageList;
    QStackedWidget* m_stack;
    RunBrowserPage* m_browser;
    TimelinePage* m_timeline;
    RanksPage* m_ranks;
    ChartsPage* m_charts;
    ComparePage* m_compare;
    LaunchPanel* m_launch;
    WhatIfPanel* m_whatif;
    QComboBox* m_runBox;
    QLabel* m_statusRuns;
    QMenu* m_recentMenu = nullptr;
};

} // namespace lockstep::ui
