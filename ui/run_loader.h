// Loading a run, analysing it and building its timeline model, off the GUI thread (hotspot's
// habit): the GUI thread only receives finished, immutable results.
//
// loadAndAnalyze() is the pure, blocking step (core::loadRun, core::analyze, the timeline's
// draw model) that the screenshot mode and the tests can call directly. RunLoader runs it in
// the thread pool and answers through typed signals. Each request carries a key (by default the
// path); a newer request with the same key (the live view re-reading a growing run every second,
// the user opening a file again) supersedes the older one: the older job's stop token is
// requested, so it gives up at its next checkpoint instead of running to the end (hotspot's
// JobTracker), and its result, if it was already done, is dropped.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <QHash>
#include <QObject>
#include <QString>
#include <QStringList>

#include <memory>
#include <stop_token>
#include <vector>

namespace lockstep::ui {

class TimelineRunModel;

// One opened run with everything every page shows. Immutable once built, shared by pages.
struct LoadedRun {
    QString path;
    QString label; // short name shown in lists (config name or file stem), cut to a sane length;
                   // "[predicted] …" for a predicted run (markPredicted)
    std::shared_ptr<const core::Run> run;
    std::shared_ptr<const core::RunAnalysis> analysis;      // core::analyze(run)
    std::shared_ptr<const TimelineRunModel> timeline;       // the timeline's draw model
    const core::RunSummary& summary() const { return analysis->summary; }
};
using LoadedRunPtr = std::shared_ptr<const LoadedRun>;

// Blocking: loads `paths` (one run file, or several rank shards of a run still recording, shown
// as one run by core's stitching rule, core::loadShards), analyses it (a run file with a fresh stored
// summary, core/summary_store.h, is not analysed again: its analysis is read) and builds its timeline
// model. Fails with ErrorCode::Cancelled when `stop` is requested before it is done.
core::Result<LoadedRunPtr> loadAndAnalyze(const QStringList& paths, std::stop_token stop = {});
inline core::Result<LoadedRunPtr> loadAndAnalyze(const QString& path) { return loadAndAnalyze(QStringList{path}); }
// The analysing half of loadAndAnalyze for a run already in memory (a what-if prediction);
// `path` names it (its file, or where it came from).
core::Result<LoadedRunPtr> analyzeRun(core::Run run, const QString& path, std::stop_token stop = {});

// The mark of a predicted run (core::isPredicted) wherever a run is listed or titled: LoadedRun's
// label carries it, so every page that names a run shows it; the run browser adds it to its rows.
QString markPredicted(const QString& label, bool predicted);
QString predictedToolTip();

class RunLoader : public QObject {
    Q_OBJECT
public:
    explicit RunLoader(QObject* parent = nullptr);
    // Requests stop of every job still running; their results are dropped.
    ~RunLoader() override;

    // Starts a background load. `key` names the request slot (default: the first path); a newer
    // request with the same key cancels older ones.
    void load(const QStringList& paths, const QString& key = {});
    void load(const QString& path) { load(QStringList{path}); }
    int pendingJobs() const { return m_pending; }
    // Jobs whose stop was requested because a newer request superseded them (tests).
    quint64 cancelledJobs() const { return m_cancelled; }

signals:
    void runLoaded(const QString& key, lockstep::ui::LoadedRunPtr run);
    void loadFailed(const QString& key, const QString& message);

private:
    struct Slot {
        quint64 generation = 0;
        std::stop_source stop;
        bool running = false; // the newest job of this key has not finished
    };
    QHash<QString, Slot> m_slots;
    int m_pending = 0;
    quint64 m_cancelled = 0;
};

} // namespace lockstep::ui

Q_DECLARE_METATYPE(lockstep::ui::LoadedRunPtr)
