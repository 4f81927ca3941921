// Loading a run and computing its analyses, off the GUI thread (hotspot's habit).
//
// loadAndAnalyze() is the pure, blocking step (core::loadRun + summarize + stepBreakdown +
// stragglers) that the screenshot mode and the tests can call directly. RunLoader wraps it in
// QtConcurrent and answers through typed signals; each request carries a key (by default the
// path) and a generation number per key, so when the same key is requested again (the live view
// re-reading a growing run every second) the results of superseded jobs are dropped.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <QHash>
#include <QObject>
#include <QString>
#include <QStringList>

#include <memory>
#include <vector>

namespace lockstep::ui {

// One opened run with the analyses every page needs. Immutable once built, shared by pages.
struct LoadedRun {
    QString path;
    QString label; // short name shown in lists (config name or file stem)
    std::shared_ptr<const core::Run> run;
    core::RunSummary summary;
    std::vector<core::StepBreakdown> breakdown;
    core::StragglerReport stragglers;
};
using LoadedRunPtr = std::shared_ptr<const LoadedRun>;

// Blocking: loads `paths` (one run file, or several rank shards of a run still recording, shown
// as one run by core's stitching rule, core::loadShards) and analyses it.
core::Result<LoadedRunPtr> loadAndAnalyze(const QStringList& paths);
inline core::Result<LoadedRunPtr> loadAndAnalyze(const QString& path) { return loadAndAnalyze(QStringList{path}); }

class RunLoader : public QObject {
    Q_OBJECT
public:
    explicit RunLoader(QObject* parent = nullptr);
    ~RunLoader() override;

    // Starts a background load. `key` names the request slot (default: the first path); a newer
    // request with the same key supersedes older ones.
    void load(const QStringList& paths, const QString& key = {});
    void load(const QString& path) { load(QStringList{path}); }
    int pendingJobs() const { return m_pending; }

signals:
    void runLoaded(const QString& key, lockstep::ui::LoadedRunPtr run);
    void loadFailed(const QString& key, const QString& message);

private:
    QHash<QString, quint64> m_generation;
    int m_pending = 0;
};

} // namespace lockstep::ui

Q_DECLARE_METATYPE(lockstep::ui::LoadedRunPtr)
