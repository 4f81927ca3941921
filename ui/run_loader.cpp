// Background run loading (see run_loader.h).
#include "run_loader.h"

#include "format.h"
#include "timeline/timeline_model.h"

#include "lockstep/core/run_db.h"

#include <QFileInfo>
#include <QFutureWatcher>
#include <QPointer>
#include <QtConcurrent>

#include <algorithm>
#include <unordered_map>

namespace lockstep::ui {

namespace {

// Shards of a run still being recorded: each holds some ranks. They are stitched into one Run
// in memory (lanes renumbered, strings re-interned) so the live view can draw them before the
// launcher merges the shards into the run file.
void appendRun(core::Run& into, const core::Run& from)
{
    std::vector<core::LaneId> laneMap(from.lanes.size());
    for (size_t i = 0; i < from.lanes.size(); ++i) {
        core::Lane lane = from.lanes[i];
        lane.id = core::LaneId{uint32_t(into.lanes.size())};
        laneMap[i] = lane.id;
        into.lanes.push_back(lane);
    }
    auto remap = [&](core::StringId id) { return into.strings.intern(from.strings.text(id)); };
    for (core::Span s : from.spans) {
        s.lane = laneMap[s.lane.v];
        s.name = remap(s.name);
        into.spans.push_back(s);
    }
    for (core::Instant i : from.instants) {
        i.lane = laneMap[i.lane.v];
        i.name = remap(i.name);
        into.instants.push_back(i);
    }
    into.steps.insert(into.steps.end(), from.steps.begin(), from.steps.end());
    into.ranks.insert(into.ranks.end(), from.ranks.begin(), from.ranks.end());
    for (const core::Bucket& b : from.buckets) {
        if (std::none_of(into.buckets.begin(), into.buckets.end(), [&](const core::Bucket& x) { return x.index == b.index; }))
            into.buckets.push_back(b);
    }
    into.diagnostics.insert(into.diagnostics.end(), from.diagnostics.begin(), from.diagnostics.end());
}

} // namespace

core::Result<LoadedRunPtr> loadAndAnalyze(const QStringList& paths, std::stop_token stop)
{
    if (paths.isEmpty())
        return core::fail("no run file given");
    const auto cancelled = [] { return core::fail("cancelled: a newer load of this run superseded it"); };
    core::Run run;
    bool first = true;
    QString firstError;
    for (const QString& path : paths) {
        if (stop.stop_requested())
            return cancelled();
        auto loaded = core::loadRun(path.toStdString());
        if (!loaded) {
            if (paths.size() == 1)
                return core::fail(loaded.error().message);
            if (firstError.isEmpty())
                firstError = QString::fromStdString(loaded.error().message);
            continue; // a shard not yet readable (just created): skip it this round
        }
        if (first) {
            run = std::move(*loaded);
            first = false;
        } else {
            appendRun(run, *loaded);
        }
    }
    if (first)
        return core::fail(firstError.toStdString());
    if (paths.size() > 1) {
        run.normalize();
        std::sort(run.ranks.begin(), run.ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
        run.config.worldSize = std::max<int32_t>(run.config.worldSize, int32_t(run.ranks.size()));
    }
    if (stop.stop_requested())
        return cancelled();

    auto out = std::make_shared<LoadedRun>();
    out->path = paths.front();
    out->label = displayText(run.config.name.empty() ? QFileInfo(paths.front()).completeBaseName().toStdString() : run.config.name, 80);
    out->run = std::make_shared<const core::Run>(std::move(run));
    out->analysis = std::make_shared<const core::RunAnalysis>(core::analyze(*out->run));
    if (stop.stop_requested())
        return cancelled();
    out->timeline = TimelineRunModel::build(out->run, out->analysis, stop);
    if (!out->timeline)
        return cancelled();
    return LoadedRunPtr(std::move(out));
}

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
