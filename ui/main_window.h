// The main window of lockstep-ui: a page list on the left (Runs, Timeline, Charts, Compare,
// Launch), menus File/View/Run/Help, a status bar. Owns the open runs (plain values from core,
// shared with the pages) and loads them off the GUI thread.
#pragma once

#include "run_loader.h"

#include <QMainWindow>
#include <QStringList>

#include <vector>

class QComboBox;
class QLabel;
class QListWidget;
class QMenu;
class QStackedWidget;

namespace lockstep::ui {

class ChartsPage;
class ComparePage;
class LaunchPanel;
class RunBrowserPage;
class TimelinePage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum Page { RunsPage, TimelinePageIndex, ChartsPageIndex, ComparePageIndex, LaunchPageIndex, PageCount };

    struct Options {
        bool persistent = true; // read and write QSettings (off for screenshots)
        QString workspace;      // empty: from settings, else ./runs
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
    // Blocking open (screenshot mode, tests); false with `error` on the first failure.
    bool openFilesBlocking(const QStringList& paths, QString* error);

    // Imports torch.profiler / Nsight Systems traces (one file per rank) into a run file in the
    // workspace, off the GUI thread, then opens it. Returns false when this build has no importers.
    bool importFiles(const QStringList& traces);

    void setWorkspace(const QString& folder);
    QString workspace() const { return m_workspace; }
    void showPage(int page);
    int currentPage() const;
    void setCurrentRun(int index);
    const std::vector<LoadedRunPtr>& openRuns() const { return m_open; }
    LoadedRunPtr currentRun() const { return m_current; }
    QStringList recentFiles() const { return m_recent; }
    bool errorDialogsEnabled() const { return m_errorDialogs; }
    void setErrorDialogsEnabled(bool on) { m_errorDialogs = on; } // tests: no modal dialogs
    QString lastError() const { return m_lastError; }

    RunBrowserPage* browserPage() const { return m_browser; }
    TimelinePage* timelinePage() const { return m_timeline; }
    ChartsPage* chartsPage() const { return m_charts; }
    ComparePage* comparePage() const { return m_compare; }
    LaunchPanel* launchPanel() const { return m_launch; }

    // The shortcut table shown by Help > Shortcuts: (keys, what).
    static QList<QPair<QString, QString>> shortcutList();

signals:
    void runOpened(lockstep::ui::LoadedRunPtr run);
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
    void buildMenus();
    void addRun(LoadedRunPtr run);
    void refreshPages();
    void addRecent(const QString& path);
    void updateRecentMenu();
    void reportError(const QString& path, const QString& message, bool dialog);

    Options m_options;
    QString m_workspace;
    RunLoader* m_loader;
    std::vector<LoadedRunPtr> m_open;
    LoadedRunPtr m_current;
    QStringList m_recent;
    QStringList m_explicitPending; // paths opened explicitly, for the error dialog
    QStringList m_comparePending;  // compareFiles(): still loading
    QStringList m_compareSet;
    bool m_errorDialogs = true;
    QString m_lastError;

    QListWidget* m_pageList;
    QStackedWidget* m_stack;
    RunBrowserPage* m_browser;
    TimelinePage* m_timeline;
    ChartsPage* m_charts;
    ComparePage* m_compare;
    LaunchPanel* m_launch;
    QComboBox* m_runBox;
    QLabel* m_statusRuns;
    QMenu* m_recentMenu = nullptr;
};

} // namespace lockstep::ui
