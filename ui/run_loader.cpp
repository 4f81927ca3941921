// Background run loading (see run_loader.h).
#include "run_loader.h"

#include "lockstep/core/run_db.h"

#include <QFileInfo>
#include <QFutureWatcher>
#include <QPointer>
#include <QtConcurrent>

namespace lockstep::ui {

core::Result<LoadedRunPtr> loadAndAnalyze(const QStringList& paths)
{
    if (paths.isEmpty())
        return core::fail("no run file given");
    // One run file, or the shards of a run still recording stitched by core's one rule
    // (core::loadShards, the rule `lockstep merge` applies).
    std::vector<std::string> files;
    for (const QString& path : paths)
        files.push_back(path.toStdString());
    auto loaded = files.size() == 1 ? core::loadRun(files.front()) : core::loadShards(files);
    if (!loaded)
        return core::fail(loaded.error().message);
    core::Run run = std::move(*loaded);

    auto out = std::make_shared<LoadedRun>();
    out->path = paths.front();
    out->label = run.config.name.empty() ? QFileInfo(paths.front()).completeBaseName()
                                         : QString::fromStdString(run.config.name);
    out->summary = core::summarize(run);
    out->breakdown = core::stepBreakdown(run);
    out->stragglers = core::stragglers(run);
    out->run = std::make_shared<const core::Run>(std::move(run));
    return LoadedRunPtr(std::move(out));
}

RunLoader::RunLoader(QObject* parent)
    : QObject(parent)
{
    qRegisterMetaType<LoadedRunPtr>();
}

// The watchers are children: a load still running when the loader goes away finishes in the
// pool and its result is dropped with its watcher; nothing reaches a deleted object.
RunLoader::~RunLoader() = default;

void RunLoader::load(const QStringList& paths, const QString& keyIn)
{
    const QString key = keyIn.isEmpty() ? (paths.isEmpty() ? QString() : paths.front()) : keyIn;
    const quint64 generation = ++m_generation[key];
    ++m_pending;
    auto* watcher = new QFutureWatcher<core::Result<LoadedRunPtr>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, key, generation] {
        watcher->deleteLater();
        --m_pending;
        if (m_generation.value(key) != generation)
            return; // superseded by a newer request for the same key
        const auto result = watcher->result();
        if (result)
            emit runLoaded(key, *result);
        else
            emit loadFailed(key, QString::fromStdString(result.error().message));
    });
    watcher->setFuture(QtConcurrent::run([paths] { return loadAndAnalyze(paths); }));
}

} // namespace lockstep::ui
