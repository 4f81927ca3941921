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
#include "lockstep/core/run_overview.h"
#include "lockstep/core/types.h"

#include <QHash>
#include <QObject>
#include <QString>
#include <QStringList>

#include <functional>
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
    // false: opened from its stored analysis and overview (core/summary_store.h) without its
    // spans: `run` holds the small tables only (no spans, no instants) and `timeline` draws the
    // overview. Pages that need spans (kernels, what-if, span details, measuring, search, What
    // changed) say so (waitingForSpans) until the detailed run replaces this one.
    bool detailed = true;
    // !detailed and the spans are being loaded (false: more spans than maxDetailSpans()).
    bool detailPending = false;
    QString detailError; // !detailed: why loading its spans failed
    // A run of more than kOverviewFirstSpans spans loaded whole because its file has no fresh
    // stored analysis and overview: why, and how to make it open in a second (`lockstep index`).
    QString indexHint;
    // !detailed: the stored overview the timeline was built from (windows of spans are streamed
    // into it: loadWindow).
    std::shared_ptr<const core::RunOverview> overview;
    const core::RunSummary& summary() const { return analysis->summary; }
};
using LoadedRunPtr = std::shared_ptr<const LoadedRun>;

// The most spans the app loads into memory (about 100 bytes each with the timeline's model):
// 20 M, or LOCKSTEP_MAX_DETAIL_SPANS. A bigger run is shown from its stored overview.
qint64 maxDetailSpans();
// Runs up to this many spans load whole at once (a fraction of a second): an overview first would
// only flicker.
inline constexpr qint64 kOverviewFirstSpans = 1'000'000;
// Frees `object` (a replaced model: millions of items) on a loader thread, not the caller's.
void releaseInBackground(std::shared_ptr<const void> object);
// What a page that needs spans says while a run has none loaded.
QString waitingForSpans(const LoadedRun& run);

// Blocking: loads `paths` (one run file, or several rank shards of a run still recording, shown
// as one run by core's stitching rule, core::loadShards), analyses it (a run file with a fresh stored
// summary, core/summary_store.h, is not analysed again: its analysis is read) and builds its timeline
// model. Fails with ErrorCode::Cancelled when `stop` is requested before it is done.
core::Result<LoadedRunPtr> loadAndAnalyze(const QStringList& paths, std::stop_token stop = {});
inline core::Result<LoadedRunPtr> loadAndAnalyze(const QString& path) { return loadAndAnalyze(QStringList{path}); }
// The first half of opening a run, what the app shows first: a run file of more than
// kOverviewFirstSpans spans with a fresh stored analysis and overview opens from those (no spans:
// detailed false; a fraction of a second on any run), anything else as loadAndAnalyze does.
core::Result<LoadedRunPtr> loadFirstView(const QStringList& paths, std::stop_token stop = {});
// The second half: `first` (not detailed) with its spans, a detailed run.
core::Result<LoadedRunPtr> loadDetail(const LoadedRun& first, std::stop_token stop = {});
// A run shown from its overview, with the spans of `lanes` over [t0, t1) (absolute times; each lane's
// window widened to whole overview items, core::detailRange) streamed from its file into its
// timeline model (only `timeline` differs from `base`). What the Timeline page asks for when the
// view is zoomed in past what the overview draws exactly; one window at a time keeps memory bound.
core::Result<LoadedRunPtr> loadWindow(const LoadedRun& base, const std::vector<core::LaneId>& lanes, core::TimeNs t0,
                                      core::TimeNs t1, std::stop_token stop = {});
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
    // request with the same key cancels older ones. A run that opens from its overview is
    // answered twice: runLoaded with it, then (when detailPending) detailLoaded with its spans.
    void load(const QStringList& paths, const QString& key = {});
    // Loads the spans of `first` (detailPending) in the background: detailLoaded.
    void loadDetailOf(LoadedRunPtr first, const QString& key = {});
    // loadWindow in the background: windowLoaded (a newer request of the same key supersedes).
    void loadWindowOf(LoadedRunPtr base, std::vector<core::LaneId> lanes, core::TimeNs t0, core::TimeNs t1,
                      const QString& key);
    void load(const QString& path) { load(QStringList{path}); }
    int pendingJobs() const { return m_pending; }
    // Jobs whose stop was requested because a newer request superseded them (tests).
    quint64 cancelledJobs() const { return m_cancelled; }

signals:
    void runLoaded(const QString& key, lockstep::ui::LoadedRunPtr run);
    void detailLoaded(const QString& key, lockstep::ui::LoadedRunPtr run);
    void windowLoaded(const QString& key, lockstep::ui::LoadedRunPtr run);
    void loadFailed(const QString& key, const QString& message);

private:
    enum class Phase { First, Detail, Window };
    void start(const QString& key, Phase phase, std::function<core::Result<LoadedRunPtr>(std::stop_token)> job,
               bool newRequest);
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
