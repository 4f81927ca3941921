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
#include <QtConcurrent>

namespace lockstep::ui {

namespace {
auto cancelled() { return core::fail(core::ErrorCode::Cancelled, "cancelled: a newer load of this run superseded it"); }
// A LoadedRun of `run` and its analysis: the label, the shared pointers, the timeline's model.
core::Result<LoadedRunPtr> buildLoadedRun(core::Run run, core::RunAnalysis analysis, const QString& path,
                                          std::stop_token stop);
} // namespace

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
    out->label = markPredicted(displayText(run.config.name.empty() ? QFileInfo(path).completeBaseName().toStdString() : run.config.name, 80),
                               core::isPredicted(run.config));
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
    Slot& slot = m_slots[key];
    if (slot.running) {
        slot.stop.request_stop(); // the older job of this key gives up at its next checkpoint
        ++m_cancelled;
    }
    slot.stop = std::stop_source();
    const quint64 generation = ++slot.generation;
    const std::stop_token token = slot.stop.get_token();
    slot.running = true;
    ++m_pending;
    auto* watcher = new QFutureWatcher<core::Result<LoadedRunPtr>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, key, generation] {
        watcher->deleteLater();
        --m_pending;
        Slot& current = m_slots[key];
        if (current.generation != generation)
            return; // superseded by a newer request for the same key
        current.running = false;
        const auto result = watcher->result();
        if (result)
            emit runLoaded(key, *result);
        else
            emit loadFailed(key, QString::fromStdString(result.error().message));
    });
    watcher->setFuture(QtConcurrent::run([paths, token] { return loadAndAnalyze(paths, token); }));
}

} // namespace lockstep::ui
