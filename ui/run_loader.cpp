// Background run loading (see run_loader.h).
#include "run_loader.h"

#include "format.h"
#include "timeline/timeline_model.h"

#include "lockstep/core/run_db.h"
#include "lockstep/core/summary_store.h"
#include "lockstep/core/whatif.h"

#include <QFileInfo>
#include <QFutureWatcher>
#include <QPointer>
#include <QThread>
#include <QThreadPool>
#include <QtConcurrent>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace lockstep::ui {

namespace {
// Threads for the work that runs while the user looks at a run already shown (a big run's spans,
// streamed windows, freeing replaced models), at a lower priority than the GUI thread (nice 10): on
// a machine with two cores a model being built or freed took the GUI thread's core for most of a
// frame (a 3 ms frame took 17 ms of wall time while a window of spans streamed in). Opening a run
// and the live view's re-reads stay on Qt's pool at normal priority: niced, a recording's own
// workers starved the live view of a sweep on two cores.
QThreadPool* backgroundPool()
{
    static QThreadPool* pool = [] {
        auto* p = new QThreadPool;
        p->setMaxThreadCount(std::max(2, QThread::idealThreadCount()));
        return p;
    }();
    return pool;
}

void lowerThisThread()
{
    thread_local bool lowered = false;
    if (!lowered) {
        lowered = true;
        setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10); // best effort
    }
}
} // namespace

void releaseInBackground(std::shared_ptr<const void> object)
{
    if (object)
        backgroundPool()->start([object = std::move(object)]() mutable {
            lowerThisThread();
            object.reset();
        });
}

namespace {
auto cancelled() { return core::fail(core::ErrorCode::Cancelled, "cancelled: a newer load of this run superseded it"); }
// A LoadedRun of `run` and its analysis: the label, the shared pointers, the timeline's model.
core::Result<LoadedRunPtr> buildLoadedRun(core::Run run, core::RunAnalysis analysis, const QString& path,
                                          std::stop_token stop);
QString labelOf(const core::Run& run, const QString& path)
{
    return markPredicted(displayText(run.config.name.empty() ? QFileInfo(path).completeBaseName().toStdString() : run.config.name, 80),
                         core::isPredicted(run.config));
}
} // namespace

qint64 maxDetailSpans()
{
    bool ok = false;
    const qint64 v = qEnvironmentVariableIntValue("LOCKSTEP_MAX_DETAIL_SPANS", &ok);
    return ok && v >= 0 ? v : qint64{20'000'000};
}

QString waitingForSpans(const LoadedRun& run)
{
    if (!run.detailError.isEmpty())
        return QObject::tr("Loading the run's spans failed (%1): this needs them.").arg(run.detailError);
    if (run.detailPending)
        return QObject::tr("Loading the run's %1 spans: this needs them, and shows once they are in.")
            .arg(formatCount(run.summary().spans));
    return QObject::tr("This run has %1 spans, more than the app loads into memory (%2; set LOCKSTEP_MAX_DETAIL_SPANS "
                       "to change it): it is shown from its stored analysis and overview, and this needs its spans.")
        .arg(formatCount(run.summary().spans), formatCount(maxDetailSpans()));
}

core::Result<LoadedRunPtr> loadFirstView(const QStringList& paths, std::stop_token stop)
{
    if (paths.size() != 1)
        return loadAndAnalyze(paths, stop);
    const std::string file = paths.front().toStdString();
    {
        auto reader = core::RunReader::open(file);
        if (!reader)
            return core::fail(reader.error());
        auto spans = (*reader)->spanCount();
        if (!spans)
            return core::fail(spans.error());
        if (*spans <= kOverviewFirstSpans)
            return loadAndAnalyze(paths, stop);
    }
    // Not the per (rank, step, bucket) part: only what needs spans reads it (span tooltips and
    // details, bucket links), and it is most of the analysis's bytes (0.3 s of 0.4 at 10 M spans).
    auto loaded = core::loadAnalyzedRun(file, core::AnalyzedRunOptions{.parts = core::kSummaryRun | core::kSummarySteps | core::kSummaryOverview,
                                                                        .spans = false,
                                                                        .keepComputedSpans = true,
                                                                        .stop = stop});
    if (stop.stop_requested())
        return cancelled();
    if (!loaded)
        return core::fail(loaded.error());
    if (!loaded->stored) { // analysed here: the spans it was computed from are loaded
        const QString why = QString::fromStdString(loaded->whyComputed);
        auto whole = buildLoadedRun(std::move(loaded->run), std::move(loaded->analysis), paths.front(), stop);
        if (!whole)
            return whole;
        auto hinted = std::make_shared<LoadedRun>(**whole);
        hinted->indexHint = QObject::tr("%1: all %2 spans were loaded and analysed (%3). `lockstep index %4` stores its "
                                        "analysis and overview in the file; it then opens in about a second.")
                                .arg(hinted->label, formatCount(hinted->summary().spans), why, paths.front());
        return LoadedRunPtr(std::move(hinted));
    }

    auto out = std::make_shared<LoadedRun>();
    out->path = paths.front();
    out->label = labelOf(loaded->run, out->path);
    out->analysis = std::make_shared<const core::RunAnalysis>(std::move(loaded->analysis));
    out->timeline = TimelineRunModel::buildOverview(loaded->run, loaded->overview, out->analysis, stop);
    if (stop.stop_requested())
        return cancelled();
    if (!out->timeline) // an overview that does not fit its run: never drawn, the spans are
        return loadAndAnalyze(paths, stop);
    out->run = std::make_shared<const core::Run>(std::move(loaded->run));
    out->overview = std::make_shared<const core::RunOverview>(std::move(loaded->overview));
    out->detailed = false;
    out->detailPending = out->summary().spans <= maxDetailSpans();
    return LoadedRunPtr(std::move(out));
}

core::Result<LoadedRunPtr> loadWindow(const LoadedRun& base, const std::vector<core::LaneId>& lanes, core::TimeNs t0,
                                      core::TimeNs t1, std::stop_token stop)
{
    if (base.detailed || !base.overview || !base.run)
        return core::fail("no overview to stream spans into");
    core::OverviewDetail detail;
    for (core::LaneId lane : lanes)
        if (lane.v < base.overview->lanes.size())
            if (const auto w = core::detailRange(base.overview->lanes[lane.v], lane, t0, t1); w.end > w.start)
                detail.windows.push_back(w);
    auto reader = core::RunReader::open(base.path.toStdString());
    if (!reader)
        return core::fail(reader.error());
    auto spans = (*reader)->laneSpans(*base.run, detail.windows);
    if (!spans)
        return core::fail(spans.error());
    if (stop.stop_requested())
        return cancelled();
    detail.spans = std::move(*spans);
    auto out = std::make_shared<LoadedRun>(base);
    out->timeline = TimelineRunModel::buildOverview(*base.run, *base.overview, base.analysis, stop, &detail);
    if (stop.stop_requested())
        return cancelled();
    if (!out->timeline)
        return core::fail("the run file changed: its spans no longer fit its overview (open it again)");
    return LoadedRunPtr(std::move(out));
}

core::Result<LoadedRunPtr> loadDetail(const LoadedRun& first, std::stop_token stop)
{
    auto run = loadAndAnalyze(QStringList{first.path}, stop);
    if (!run)
        return run;
    if ((*run)->label == first.label)
        return run;
    auto copy = std::make_shared<LoadedRun>(**run);
    copy->label = first.label;
    return LoadedRunPtr(std::move(copy));
}

core::Result<LoadedRunPtr> loadAndAnalyze(const QStringList& paths, std::stop_token stop)
{
    if (paths.isEmpty())
        return core::fail("no run file given");
    // One run file, or the shards of a run still recording stitched by core's one rule
    // (core::loadShards, the rule `lockstep merge` applies). Core's load and analysis check the
    // stop token as they go (every 65 k rows, between analyses), the model build per lane.
    std::vector<std::string> files;
    for (const QString& path : paths)
        files.push_back(path.toStdString());
    if (files.size() == 1) {
        // A run file: its stored analysis when it has a fresh one (core/summary_store.h), else
        // analysed here; the timeline reads every span either way.
        auto loaded = core::loadAnalyzedRun(files.front(), core::AnalyzedRunOptions{.spans = true, .stop = stop});
        if (stop.stop_requested())
            return cancelled();
        if (!loaded)
            return core::fail(loaded.error());
        return buildLoadedRun(std::move(loaded->run), std::move(loaded->analysis), paths.front(), stop);
    }
    auto loaded = core::loadShards(files, stop);
    if (stop.stop_requested())
        return cancelled();
    if (!loaded)
        return core::fail(loaded.error());
    return analyzeRun(std::move(*loaded), paths.front(), stop);
}

QString markPredicted(const QString& label, bool predicted)
{
    return predicted ? QObject::tr("[predicted] %1").arg(label) : label;
}

QString predictedToolTip()
{
    return QObject::tr("Predicted by the what-if model (lockstep predict, or the What-if page), not measured");
}

core::Result<LoadedRunPtr> analyzeRun(core::Run run, const QString& path, std::stop_token stop)
{
    auto analysis = core::analyze(run, stop);
    if (!analysis)
        return cancelled();
    return buildLoadedRun(std::move(run), std::move(*analysis), path, stop);
}

namespace {
core::Result<LoadedRunPtr> buildLoadedRun(core::Run run, core::RunAnalysis analysis, const QString& path, std::stop_token stop)
{
    auto out = std::make_shared<LoadedRun>();
    out->path = path;
    out->label = labelOf(run, path);
    out->run = std::make_shared<const core::Run>(std::move(run));
    out->analysis = std::make_shared<const core::RunAnalysis>(std::move(analysis));
    out->timeline = TimelineRunModel::build(out->run, out->analysis, stop);
    if (!out->timeline)
        return cancelled();
    return LoadedRunPtr(std::move(out));
}
} // namespace

RunLoader::RunLoader(QObject* parent)
    : QObject(parent)
{
    qRegisterMetaType<LoadedRunPtr>();
}

// The watchers are children: a load still running when the loader goes away is told to stop,
// finishes in the pool and its result is dropped with its watcher; nothing reaches a deleted
// object.
RunLoader::~RunLoader()
{
    for (Slot& slot : m_slots)
        slot.stop.request_stop();
}

void RunLoader::load(const QStringList& paths, const QString& keyIn)
{
    const QString key = keyIn.isEmpty() ? (paths.isEmpty() ? QString() : paths.front()) : keyIn;
    start(key, Phase::First, [paths](std::stop_token token) { return loadFirstView(paths, token); }, true);
}

void RunLoader::loadDetailOf(LoadedRunPtr first, const QString& keyIn)
{
    if (!first)
        return;
    const QString key = keyIn.isEmpty() ? first->path : keyIn;
    start(key, Phase::Detail, [first](std::stop_token token) { return loadDetail(*first, token); }, true);
}

void RunLoader::loadWindowOf(LoadedRunPtr base, std::vector<core::LaneId> lanes, core::TimeNs t0, core::TimeNs t1,
                             const QString& key)
{
    if (!base)
        return;
    start(key, Phase::Window,
          [base, lanes = std::move(lanes), t0, t1](std::stop_token token) { return loadWindow(*base, lanes, t0, t1, token); },
          true);
}

// One job of a slot. A new request takes the slot (the older job of its key gives up at its next
// checkpoint); the detail job that follows a first view keeps it: the same request, its second half.
void RunLoader::start(const QString& key, Phase phase, std::function<core::Result<LoadedRunPtr>(std::stop_token)> job,
                      bool newRequest)
{
    Slot& slot = m_slots[key];
    if (newRequest) {
        if (slot.running) {
            slot.stop.request_stop();
            ++m_cancelled;
        }
        slot.stop = std::stop_source();
        ++slot.generation;
    }
    const quint64 generation = slot.generation;
    const std::stop_token token = slot.stop.get_token();
    slot.running = true;
    ++m_pending;
    auto* watcher = new QFutureWatcher<core::Result<LoadedRunPtr>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, key, generation, phase] {
        watcher->deleteLater();
        --m_pending;
        Slot& current = m_slots[key];
        if (current.generation != generation)
            return; // superseded by a newer request for the same key
        const auto result = watcher->result();
        const bool more = result && phase == Phase::First && !(*result)->detailed && (*result)->detailPending;
        current.running = more;
        if (!result) {
            emit loadFailed(key, QString::fromStdString(result.error().message));
            return;
        }
        if (phase == Phase::Detail) {
            emit detailLoaded(key, *result);
            return;
        }
        if (phase == Phase::Window) {
            emit windowLoaded(key, *result);
            return;
        }
        LoadedRunPtr first = *result;
        if (more) // before runLoaded: a slot connected to it may ask for pendingJobs()
            start(key, Phase::Detail, [first](std::stop_token t) { return loadDetail(*first, t); }, false);
        emit runLoaded(key, first);
    });
    if (phase == Phase::First)
        watcher->setFuture(QtConcurrent::run([job = std::move(job), token] { return job(token); }));
    else
        watcher->setFuture(QtConcurrent::run(backgroundPool(), [job = std::move(job), token] {
            lowerThisThread();
            return job(token);
        }));
}

} // namespace lockstep::ui
