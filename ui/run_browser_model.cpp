// Run browser scanning and model (see run_browser_model.h).
#include "run_browser_model.h"

#include "format.h"
#include "run_loader.h"

#include "lockstep/core/fields.h"
#include "lockstep/core/run_files.h"
#include "lockstep/core/whatif.h"

#include <QBrush>
#include <QColor>
#include <QDir>
#include <QDirIterator>
#include <QFont>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QtConcurrent>

#include <cmath>
#include <string_view>
#include <type_traits>

namespace lockstep::ui {

namespace {
// A prediction of the what-if model (core::isPredicted: its source is core::kPredictedSource).
bool isPredictedEntry(const BrowserEntry& e) { return e.ok() && e.summary->config.source == core::kPredictedSource; }

// A configuration column: one row of core::kRunConfigFields gives its header (the row's label)
// and its value (the row's, formatted by its unit). Adding a RunConfig field to the browser is
// one entry here and its Column.
struct ConfigColumn {
    RunBrowserModel::Column column;
    std::string_view field;       // its row's name in core::kRunConfigFields
    int width = 40;               // display cut (displayText)
    // A second row shown after the first when not empty (the device after the backend, the
    // failure cause after the status), joined by `separator`.
    std::string_view detail = {};
    const char* separator = " / ";
    bool detailInHeader = false;  // the header names both rows ("Backend / device"), and the
                                  // column sorts by both
};

constexpr ConfigColumn kConfigColumns[] = {
    {RunBrowserModel::Model, "model"},
    {RunBrowserModel::BucketCap, "bucket_cap_bytes"},
    {RunBrowserModel::Backend, "backend", 20, "device", " / ", true},
    {RunBrowserModel::Status, "status", 160, "failure_cause", ": "},
};

const ConfigColumn* configColumn(int column)
{
    for (const ConfigColumn& c : kConfigColumns)
        if (c.column == column)
            return &c;
    return nullptr;
}

const core::RunConfigField& configField(std::string_view name)
{
    const core::RunConfigField* f = core::findRunConfigField(name);
    Q_ASSERT(f); // kConfigColumns names rows of kRunConfigFields
    return *f;
}

// A row's label as a header: "bucket cap" -> "Bucket cap".
QString fieldHeader(std::string_view name)
{
    QString label = QString::fromUtf8(configField(name).label);
    if (!label.isEmpty())
        label[0] = label[0].toUpper();
    return label;
}

QString columnHeader(const ConfigColumn& c)
{
    QString h = fieldHeader(c.field);
    if (c.detailInHeader)
        h += QStringLiteral(" / ") + QString::fromUtf8(configField(c.detail).label);
    return h;
}

// A numeric row's value (an integer or a real); invalid for a text or an enum.
QVariant fieldNumber(const core::RunConfigField& f, const core::RunConfig& config)
{
    return core::visitField(f, config, [](const auto& v) -> QVariant {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>)
            return qlonglong(v);
        else if constexpr (std::is_same_v<T, double>)
            return v;
        else
            return {};
    });
}

// The row's value for people: by its unit (bytes as "25.0 MiB"), else its text cut to `width`.
QString fieldDisplay(const core::RunConfigField& f, const core::RunConfig& config, int width)
{
    if (std::string_view(f.unit) == "bytes")
        return formatBytes(fieldNumber(f, config).toDouble());
    const std::string text = core::fieldText(f, config);
    if (*f.unit && !text.empty())
        return QStringLiteral("%1 %2").arg(displayText(text, width), QString::fromUtf8(f.unit));
    return displayText(text, width);
}

QVariant columnDisplay(const ConfigColumn& c, const core::RunConfig& config)
{
    QString v = fieldDisplay(configField(c.field), config, c.width);
    if (!c.detail.empty()) {
        const core::RunConfigField& d = configField(c.detail);
        if (!core::fieldText(d, config).empty())
            v += QString::fromLatin1(c.separator) + fieldDisplay(d, config, c.width);
    }
    return v;
}

// Sorting: a number by its value, a text as it is (with the detail's when the header names it).
QVariant columnSortKey(const ConfigColumn& c, const core::RunConfig& config)
{
    const core::RunConfigField& f = configField(c.field);
    if (QVariant number = fieldNumber(f, config); number.isValid())
        return number;
    std::string text = core::fieldText(f, config);
    if (c.detailInHeader)
        text += "/" + core::fieldText(configField(c.detail), config);
    return qs(text);
}
} // namespace

BrowserEntry summarizeFile(const QString& path)
{
    BrowserEntry e;
    const QFileInfo info(path);
    e.path = info.absoluteFilePath();
    e.fileName = info.fileName();
    e.modified = info.lastModified();
    e.created = e.modified;
    auto file = core::summarizeFile(path.toStdString());
    if (!file) {
        e.error = QString::fromStdString(file.error().message);
        // The row already names the file; keep core's message without its path prefix.
        for (const QString& prefix : {path + QStringLiteral(": "), e.path + QStringLiteral(": ")})
            if (e.error.startsWith(prefix))
                e.error = e.error.mid(prefix.size());
        return e;
    }
    e.summary = file->summary;
    e.modelArgs = displayText(file->modelArgs, 80);
    if (e.summary->config.name.empty())
        e.summary->config.name = info.completeBaseName().toStdString();
    if (file->createdNs > 0)
        e.created = QDateTime::fromMSecsSinceEpoch(file->createdNs / 1'000'000);
    return e;
}

QStringList runFilesIn(const QString& folder)
{
    QStringList out;
    // Depth-limited walk: a sweep writes one folder of run files; recorder shard folders
    // (named *shards*) hold partial files that belong to a run, not runs of their own.
    std::function<void(const QDir&, int)> walk = [&](const QDir& dir, int depth) {
        const auto files = dir.entryInfoList({"*.db", "*.sqlite"}, QDir::Files | QDir::Readable, QDir::Name);
        for (const QFileInfo& f : files)
            out << f.absoluteFilePath();
        if (depth >= 2)
            return;
        const auto dirs = dir.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
        for (const QFileInfo& d : dirs) {
            if (d.fileName().contains(QLatin1String("shard"), Qt::CaseInsensitive))
                continue;
            walk(QDir(d.absoluteFilePath()), depth + 1);
        }
    };
    if (QFileInfo(folder).isDir())
        walk(QDir(folder), 0);
    return out;
}

namespace {

std::vector<BrowserEntry> scanWithCache(const QString& folder, QMutex& mutex, QHash<QString, BrowserEntry>& cache)
{
    std::vector<BrowserEntry> out;
    for (const QString& path : runFilesIn(folder)) {
        const QDateTime modified = QFileInfo(path).lastModified();
        {
            QMutexLocker lock(&mutex);
            auto it = cache.constFind(path);
            if (it != cache.constEnd() && it->modified == modified) {
                out.push_back(*it);
                continue;
            }
        }
        BrowserEntry e = summarizeFile(path);
        {
            QMutexLocker lock(&mutex);
            cache.insert(path, e);
        }
        out.push_back(std::move(e));
    }
    return out;
}

} // namespace

WorkspaceScanner::WorkspaceScanner(QObject* parent)
    : QObject(parent)
    , m_cache(std::make_shared<Cache>())
{
    qRegisterMetaType<std::vector<BrowserEntry>>();
}

void WorkspaceScanner::scan(const QString& folder)
{
    const quint64 job = ++m_job;
    ++m_running;
    auto* watcher = new QFutureWatcher<std::vector<BrowserEntry>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, job, folder] {
        watcher->deleteLater();
        --m_running;
        if (job != m_job)
            return; // a newer scan was started: its result replaces this one
        emit scanFinished(folder, watcher->result());
    });
    auto cache = m_cache;
    watcher->setFuture(QtConcurrent::run([cache, folder] {
        return scanWithCache(folder, cache->mutex, cache->entries);
    }));
}

std::vector<BrowserEntry> WorkspaceScanner::scanBlocking(const QString& folder)
{
    return scanWithCache(folder, m_cache->mutex, m_cache->entries);
}

RunBrowserModel::RunBrowserModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void RunBrowserModel::setEntries(std::vector<BrowserEntry> entries, const QString& root)
{
    // Names as the runs call themselves, cut; then made unique with the file name, then with
    // the folder (a sweep's runs are all called after the model).
    QHash<QString, int> seen;
    for (BrowserEntry& e : entries) {
        e.displayName = e.ok() && !e.summary->config.name.empty() ? displayText(e.summary->config.name, 80) : displayText(e.fileName, 80);
        e.displayName = markPredicted(e.displayName, isPredictedEntry(e));
        ++seen[e.displayName];
    }
    for (BrowserEntry& e : entries)
        if (seen.value(e.displayName) > 1 && e.displayName != e.fileName)
            e.displayName = QStringLiteral("%1 · %2").arg(e.displayName, displayText(e.fileName, 60));
    seen.clear();
    for (const BrowserEntry& e : entries)
        ++seen[e.displayName];
    const QDir base(root);
    for (BrowserEntry& e : entries)
        if (seen.value(e.displayName) > 1)
            e.displayName = QStringLiteral("%1 · %2").arg(e.displayName, displayText(base.relativeFilePath(QFileInfo(e.path).absolutePath()), 60));
    beginResetModel();
    m_entries = std::move(entries);
    m_root = root;
    endResetModel();
}

int RunBrowserModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_entries.size());
}

int RunBrowserModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunBrowserModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::DisplayRole) {
        if (const ConfigColumn* c = configColumn(section))
            return columnHeader(*c);
        switch (section) {
        case Name: return tr("Name");
        case Folder: return tr("Folder");
        case ModelSize: return tr("Model size");
        case Steps: return tr("Steps");
        case Throughput: return tr("Throughput");
        case Straggler: return tr("Straggler");
        // The row's label; its value is RunSummary::worldSize (the ranks counted when the
        // configuration does not say).
        case WorldSize: return fieldHeader("world_size");
        case StepTime: return tr("Step time");
        case Overlap: return tr("Overlap");
        case Exposed: return tr("Exposed comm");
        case Date: return tr("Date");
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case StepTime: return tr("Mean step time over steady steps and ranks");
        case Overlap: return tr("Overlapped / communication time over steady steps");
        case Exposed: return tr("Mean communication time per step not hidden behind compute");
        case BucketCap: return tr("Gradient bucket cap (all buckets but the first)");
        case Throughput: return tr("Samples per second over steady steps, all ranks");
        case Straggler: return tr("The run's straggler, when the evidence clears the run's noise");
        case Steps: return tr("Steps recorded (steady steps used for the means)");
        }
    }
    return {};
}

QVariant RunBrowserModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const BrowserEntry& e = m_entries[size_t(index.row())];
    const int col = index.column();
    if (role == PathRole)
        return e.path;
    const QString folder = QDir(m_root.isEmpty() ? QFileInfo(e.path).absolutePath() : m_root)
                               .relativeFilePath(QFileInfo(e.path).absolutePath());
    if (col == Folder && (role == Qt::DisplayRole || role == SortRole))
        return folder == QLatin1String(".") || folder.isEmpty() ? QStringLiteral("./") : displayText(folder, 60);
    if (!e.ok()) {
        if (role == Qt::DisplayRole || role == SortRole) {
            if (col == Name)
                return e.displayName;
            if (col == Status)
                return QStringLiteral("⚠ %1").arg(displayText(e.error, 200));
            if (col == Date)
                return role == SortRole ? QVariant(e.modified) : QVariant(e.modified.toString("yyyy-MM-dd HH:mm:ss"));
            return role == SortRole ? QVariant(QString()) : QVariant();
        }
        if (role == Qt::ToolTipRole)
            return plainToolTip(QStringLiteral("%1\n⚠ %2").arg(displayText(e.path, 400), displayText(e.error, 400)));
        if (role == Qt::ForegroundRole)
            return QBrush(QColor(0xb4, 0x53, 0x09));
        return {};
    }
    const core::RunSummary& s = *e.summary;
    const ConfigColumn* config = configColumn(col);
    if (config && (role == Qt::DisplayRole || role == SortRole))
        return role == SortRole ? columnSortKey(*config, s.config) : columnDisplay(*config, s.config);
    if (role == Qt::DisplayRole) {
        switch (col) {
        case Name: return e.displayName;
        case ModelSize: return e.modelArgs;
        case WorldSize: return s.worldSize;
        case Steps: return s.steadySteps != s.steps ? tr("%1 (%2 steady)").arg(s.steps).arg(s.steadySteps) : QString::number(s.steps);
        case Throughput: return std::isfinite(s.throughput) && s.throughput > 0 ? tr("%1 /s").arg(s.throughput, 0, 'f', 1) : QStringLiteral("—");
        case Straggler: {
            if (!s.multiRank)
                return QStringLiteral("—");
            QStringList ranks;
            for (int32_t r : s.stragglers)
                ranks << QString::number(r);
            return ranks.isEmpty() ? tr("none") : tr("rank %1").arg(ranks.join(QStringLiteral(", ")));
        }
        case StepTime: return formatMs(s.stepTimeMs);
        case Overlap: return formatPercent(s.overlapRatio);
        case Exposed: return formatMs(s.exposedCommMs);
        case Date: return e.created.toString("yyyy-MM-dd HH:mm:ss");
        }
    }
    if (role == SortRole) {
        auto num = [](double v) { return std::isfinite(v) ? v : -1.0; };
        switch (col) {
        case Name: return e.displayName;
        case ModelSize: return e.modelArgs;
        case WorldSize: return s.worldSize;
        case Steps: return s.steps;
        case Throughput: return num(s.throughput);
        case Straggler: return s.multiRank ? (s.stragglers.empty() ? -1 : s.stragglers.front()) : -2;
        case StepTime: return num(s.stepTimeMs);
        case Overlap: return num(s.overlapRatio);
        case Exposed: return num(s.exposedCommMs);
        case Date: return e.created;
        }
    }
    if (role == Qt::TextAlignmentRole) {
        if (col == WorldSize || col == BucketCap || col == Steps || col == StepTime || col == Throughput || col == Overlap || col == Exposed)
            return int(Qt::AlignRight | Qt::AlignVCenter);
    }
    if (role == Qt::ToolTipRole) {
        const QString tip = QStringLiteral("%1\n%2 steps, %3 spans").arg(displayText(e.path, 400)).arg(formatCount(s.steps)).arg(formatCount(s.spans));
        return plainToolTip(isPredictedEntry(e) ? QStringLiteral("%1\n%2").arg(tip, predictedToolTip()) : tip);
    }
    if (role == Qt::FontRole && col == Name && isPredictedEntry(e)) {
        QFont italic;
        italic.setItalic(true);
        return italic;
    }
    if (role == Qt::ForegroundRole && col == Status && s.config.status == core::RunStatus::Failed)
        return QBrush(QColor(0xb9, 0x1c, 0x1c));
    return {};
}

} // namespace lockstep::ui
