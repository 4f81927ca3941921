// Compare metrics model (see compare_model.h).
#include "compare_model.h"

#include "format.h"

#include <QBrush>
#include <QColor>

#include <cmath>

namespace lockstep::ui {

namespace {
const char* metricName(CompareModel::Metric m)
{
    switch (m) {
    case CompareModel::StepTime: return "Step time";
    case CompareModel::ComputeOnly: return "Compute only";
    case CompareModel::Overlapped: return "Overlapped comm";
    case CompareModel::Exposed: return "Exposed comm";
    case CompareModel::MemoryOnly: return "Memory only";
    case CompareModel::Idle: return "Idle";
    case CompareModel::Comm: return "Communication";
    case CompareModel::OverlapPct: return "Overlap";
    case CompareModel::Throughput: return "Throughput";
    case CompareModel::Stragglers: return "Straggler";
    case CompareModel::MetricCount: break;
    }
    return "";
}
bool inMs(CompareModel::Metric m)
{
    return m != CompareModel::OverlapPct && m != CompareModel::Throughput && m != CompareModel::Stragglers;
}
// Differences under 0.5 % are noise between repeated runs: left uncoloured.
constexpr double kNoise = 0.005;
} // namespace

CompareModel::CompareModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void CompareModel::setRuns(std::vector<core::RunSummary> runs, QStringList labels)
{
    beginResetModel();
    m_runs = std::move(runs);
    m_labels = std::move(labels);
    while (m_labels.size() < qsizetype(m_runs.size()))
        m_labels << displayText(m_runs[size_t(m_labels.size())].config.name, 80);
    m_baseline = std::clamp(m_baseline, 0, std::max(0, int(m_runs.size()) - 1));
    endResetModel();
}

void CompareModel::setBaseline(int run)
{
    beginResetModel();
    m_baseline = std::clamp(run, 0, std::max(0, int(m_runs.size()) - 1));
    endResetModel();
}

int CompareModel::valueColumn(int run) const
{
    return 1 + run + (run > m_baseline ? run - 1 : run);
}

int CompareModel::diffColumn(int run) const
{
    return run == m_baseline ? -1 : valueColumn(run) + 1;
}

std::pair<int, bool> CompareModel::columnRun(int column) const
{
    for (int r = 0; r < int(m_runs.size()); ++r) {
        if (valueColumn(r) == column)
            return {r, false};
        if (diffColumn(r) == column)
            return {r, true};
    }
    return {-1, false};
}

double CompareModel::metricValue(const core::RunSummary& s, Metric m)
{
    switch (m) {
    case StepTime: return s.stepTimeMs;
    case ComputeOnly: return s.computeOnlyMs;
    case Overlapped: return s.overlappedMs;
    case Exposed: return s.exposedCommMs;
    case MemoryOnly: return s.memoryOnlyMs;
    case Idle: return s.idleMs;
    case Comm: return s.commMs;
    case OverlapPct: return s.overlapRatio * 100.0;
    case Throughput: return s.throughput;
    case Stragglers: return s.multiRank ? double(s.stragglers.size()) : std::nan("");
    case MetricCount: break;
    }
    return std::nan("");
}

double CompareModel::relativeDifference(double base, double value)
{
    if (!std::isfinite(base) || !std::isfinite(value) || base == 0.0)
        return std::nan("");
    return (value - base) / std::abs(base);
}

bool CompareModel::lowerIsBetter(Metric m)
{
    return !(m == Overlapped || m == OverlapPct || m == Throughput);
}

int CompareModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || m_runs.empty() ? 0 : MetricCount;
}

int CompareModel::columnCount(const QModelIndex& parent) const
{
    if (parent.isValid() || m_runs.empty())
        return 0;
    return 2 * int(m_runs.size()); // name + a value per run + a difference per run but the baseline
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || (role != Qt::DisplayRole && role != Qt::ToolTipRole))
        return {};
    if (section == 0)
        return tr("Metric");
    const auto [run, diff] = columnRun(section);
    if (run < 0)
        return {};
    if (role == Qt::ToolTipRole)
        return plainToolTip(diff ? tr("%1 minus the baseline %2").arg(m_labels.value(run), m_labels.value(m_baseline))
                                 : m_labels.value(run));
    if (diff)
        return tr("Δ vs %1").arg(m_labels.value(m_baseline));
    return run == m_baseline ? tr("%1 (baseline)").arg(m_labels.value(run)) : m_labels.value(run);
}

QVariant CompareModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const auto metric = Metric(index.row());
    if (index.column() == 0) {
        if (role == Qt::DisplayRole)
            return tr(metricName(metric));
        if (role == Qt::ToolTipRole)
            return lowerIsBetter(metric) ? tr("lower is better") : tr("higher is better");
        return {};
    }
    const auto [run, isDiff] = columnRun(index.column());
    if (run < 0)
        return {};
    const core::RunSummary& s = m_runs[size_t(run)];
    const double value = metricValue(s, metric);
    if (role == Qt::TextAlignmentRole)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (!isDiff) {
        if (role == ValueRole)
            return value;
        if (role != Qt::DisplayRole)
            return {};
        switch (metric) {
        case OverlapPct: return std::isfinite(value) ? QStringLiteral("%1 %").arg(value, 0, 'f', 1) : QStringLiteral("—");
        case Throughput: return std::isfinite(value) ? tr("%1 samples/s").arg(value, 0, 'f', 1) : QStringLiteral("—");
        case Stragglers: {
            if (!s.multiRank)
                return tr("n/a (one rank)");
            QStringList ranks;
            for (int32_t r : s.stragglers)
                ranks << QString::number(r);
            return ranks.isEmpty() ? tr("none") : tr("rank %1").arg(ranks.join(", "));
        }
        default: return formatMs(value);
        }
    }
    const core::RunSummary& b = m_runs[size_t(m_baseline)];
    const double base = metricValue(b, metric);
    // Overlap is already a percentage: its difference is in percentage points.
    const bool points = metric == OverlapPct || metric == Stragglers;
    const double rel = points ? value - base : relativeDifference(base, value);
    if (role == ValueRole)
        return rel;
    if (role == Qt::DisplayRole) {
        if (metric == Stragglers) {
            // A verdict, not a quantity: say how it differs in words (a count difference, "+1",
            // reads like a measurement).
            if (!std::isfinite(rel))
                return QStringLiteral("—");
            if (s.stragglers == b.stragglers)
                return tr("same");
            if (b.stragglers.empty())
                return tr("named here");
            if (s.stragglers.empty())
                return tr("none here");
            return tr("other rank");
        }
        if (!std::isfinite(value - base))
            return QStringLiteral("—");
        if (points)
            return QStringLiteral("%1%2 pp").arg(rel > 0 ? "+" : "").arg(rel, 0, 'f', 1);
        const QString pct = std::isfinite(rel) ? QStringLiteral("%1%2 %").arg(rel > 0 ? "+" : "").arg(rel * 100.0, 0, 'f', 1)
                                               : QStringLiteral("—");
        if (inMs(metric))
            return QStringLiteral("%1 (%2)").arg(formatSignedMs(value - base), pct);
        return tr("%1%2 samples/s (%3)").arg(value - base > 0 ? "+" : "").arg(value - base, 0, 'f', 1).arg(pct);
    }
    if (role == Qt::ForegroundRole) {
        const double magnitude = points ? std::abs(rel) / 100.0 : std::abs(rel);
        if (!std::isfinite(rel) || magnitude < kNoise)
            return {};
        const bool better = lowerIsBetter(metric) ? rel < 0 : rel > 0;
        return QBrush(better ? QColor(0x15, 0x80, 0x3d) : QColor(0xb9, 0x1c, 0x1c));
    }
    return {};
}

} // namespace lockstep::ui
