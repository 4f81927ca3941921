// The run browser: one row per run file in the workspace folder.
//
// WorkspaceScanner lists the folder and summarizes each file off the GUI thread (core::loadRun +
// core::summarize), caching by path + modification time so a rescan only reads what changed.
// A file that is not a run database becomes an error row with core's message. RunBrowserModel is
// the thin table adapter over the scan's plain value rows, replaced wholesale on every scan.
#pragma once

#include "lockstep/core/analysis.h"

#include <QAbstractTableModel>
#include <QDateTime>
#include <QHash>
#include <QMutex>
#include <QObject>
#include <QString>

#include <memory>
#include <optional>
#include <vector>

namespace lockstep::ui {

struct BrowserEntry {
    QString path;
    QString fileName;
    QString displayName;             // unique among the scanned runs (RunBrowserModel::setEntries)
    QString modelArgs;               // the model's sizes ("layers=8 width=512")
    QDateTime modified;
    QDateTime created;               // the run's creation time, or the file's time
    std::optional<core::RunSummary> summary; // empty when the file could not be read
    QString error;                   // core's message when it could not
    bool ok() const { return summary.has_value(); }
};

// Blocking: the entry of one file (used by the scanner and by tests).
BrowserEntry summarizeFile(const QString& path);
// Run files under `folder` (*.db, *.sqlite), recursing into sweep folders (depth 2) but not into
// recorder shard folders.
QStringList runFilesIn(const QString& folder);

class WorkspaceScanner : public QObject {
    Q_OBJECT
public:
    explicit WorkspaceScanner(QObject* parent = nullptr);
    // Starts a background scan; a newer scan supersedes an older one still running.
    void scan(const QString& folder);
    // Blocking scan with the same cache (screenshot mode, tests).
    std::vector<BrowserEntry> scanBlocking(const QString& folder);
    bool busy() const { return m_running > 0; }

signals:
    void scanFinished(const QString& folder, const std::vector<lockstep::ui::BrowserEntry>& entries);

private:
    struct Cache {
        QMutex mutex;
        QHash<QString, BrowserEntry> entries; // by path; valid while `modified` matches
    };
    std::shared_ptr<Cache> m_cache;
    quint64 m_job = 0;
    int m_running = 0;
};

class RunBrowserModel : public QAbstractTableModel {
    Q_OBJECT
public:
    // Status is last: an unreadable file's message is long and gets the room that is left.
    // Model, BucketCap, Backend and Status are configuration columns: the .cpp's kConfigColumns
    // names each one's row of core::kRunConfigFields, which gives its header and value.
    enum Column { Name, Folder, Model, ModelSize, WorldSize, BucketCap, Steps, StepTime, Throughput, Overlap, Exposed, Straggler,
                  Backend, Date, Status, ColumnCount };
    static constexpr int SortRole = Qt::UserRole + 1; // raw values for sorting
    static constexpr int PathRole = Qt::UserRole + 2;

    explicit RunBrowserModel(QObject* parent = nullptr);
    // Replaces the rows. Runs that share a name get their file name (and, if that is shared
    // too, their folder) added, so every row's name is unique. `root` is the workspace folder
    // the Folder column is relative to.
    void setEntries(std::vector<BrowserEntry> entries, const QString& root = {});
    const std::vector<BrowserEntry>& entries() const { return m_entries; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<BrowserEntry> m_entries;
    QString m_root;
};

} // namespace lockstep::ui

Q_DECLARE_METATYPE(std::vector<lockstep::ui::BrowserEntry>)
