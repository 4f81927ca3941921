// The run browser page: the workspace folder's runs in a sortable, filterable table.
#pragma once

#include "run_browser_model.h"

#include <QWidget>

class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;

namespace lockstep::ui {

class RunBrowserPage : public QWidget {
    Q_OBJECT
public:
    explicit RunBrowserPage(QWidget* parent = nullptr);

    void setWorkspace(const QString& folder); // starts a background scan
    QString workspace() const { return m_workspace; }
    void rescan();
    void scanBlocking(); // screenshot mode, tests
    QStringList selectedPaths() const;

    RunBrowserModel* model() const { return m_model; }
    QSortFilterProxyModel* proxy() const { return m_proxy; }
    QTableView* view() const { return m_view; }
    QLineEdit* filterEdit() const { return m_filter; }
    WorkspaceScanner* scanner() const { return m_scanner; }

signals:
    void openRequested(const QString& path);
    void compareRequested(const QStringList& paths);
    void changeWorkspaceRequested();
    void scanned(int rows);

private:
    void updateCount();
    void applyEntries(const std::vector<BrowserEntry>& entries);

    QString m_workspace;
    WorkspaceScanner* m_scanner;
    RunBrowserModel* m_model;
    QSortFilterProxyModel* m_proxy;
    QTableView* m_view;
    QLineEdit* m_filter;
    QLabel* m_folderLabel;
    QLabel* m_countLabel;
};

} // namespace lockstep::ui
