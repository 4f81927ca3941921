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
    case CompareModel::Compute: return "Compute";
    case CompareModel::Comm: return "Communication";
    case CompareModel::Overlapped: return "Overlapped";
    case CompareModel::Exposed: return "Exposed communication";
    case CompareModel::Idle: return "Idle";
    case CompareModel::OverlapPct: return "Overlap";
    case CompareModel::Throughput: return "Throughput";
    case CompareModel::Stragglers: return "Stragglers";
    case CompareModel::MetricCount: break;
    }
    return "";
}
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
        m_labels << QString::fromStdString(m_runs[size_t(m_labels.size())].name);
    endResetModel();
}

int CompareModel::valueColumn(int run) const
{
    return run == 0 ? 1 : 2 * run;
}

int CompareModel::diffColumn(int run) const
{
    return run == 0 ? -1 : 2 * run + 1;
}

double CompareModel::metricValue(const core::RunSummary& s, Metric m)
{
    switch (m) {
    case StepTime: return s.stepTimeMs;
    case Compute: return s.computeMs;
    case Comm: return s.commMs;
    case Overlapped: return s.overlappedMs;
    case Exposed: return s.exposedCommMs;
    case Idle: return s.idleMs;
    case OverlapPct: return s.overlapRatio * 100.0;
    case Throughput: return s.throughput;
    case Stragglers: return double(s.stragglers.size());
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
    return 2 * int(m_runs.size()); // name + first value + (value, diff) per further run
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    if (section == 0)
        return tr("Metric");
    const int run = section / 2;
    if (section == 1)
        return m_labels.value(0);
    if (section % 2 == 0)
        return m_labels.value(run);
    return tr("Δ vs %1").arg(m_labels.value(0));
}

QVariant CompareModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const auto metric = Metric(index.row());
    const int col = index.column();
    if (col == 0) {
        if (role == Qt::DisplayRole)
            return tr(metricName(metric));
        if (role == Qt::ToolTipRole)
            return lowerIsBetter(metric) ? tr("lower is better") : tr("higher is better");
        return {};
    }
    const bool isDiff = col >= 3 && col % 2 == 1;
    const int run = col == 1 ? 0 : col / 2;
    const core::RunSummary& s = m_runs[size_t(run)];
    const double value = metricValue(s, metric);
    if (!isDiff) {
        if (role == ValueRole)
            return value;
        if (role == Qt::DisplayRole) {
            switch (metric) {
            case OverlapPct: return std::isfinite(value) ? QStringLiteral("%1 %").arg(value, 0, 'f', 1) : QStringLiteral("—");
            case Throughput: return QStringLiteral("%1 samples/s").arg(value, 0, 'f', 1);
            case Stragglers: {
                QStringList ranks;
                for (int32_t r : s.stragglers)
                    ranks << QString::number(r);
                return ranks.isEmpty() ? tr("none") : tr("rank %1").arg(ranks.join(", "));
            }
            default: return formatMs(value);
            }
        }
        if (role == Qt::TextAlignmentRole)
            return int(Qt::AlignRight | Qt::AlignVCenter);
        return {};
    }
    const double base = metricValue(m_runs.front(), metric);
    // Overlap is already a percentage: its difference is shown in percentage points.
    const bool points = metric == OverlapPct || metric == Stragglers;
    const double diff = points ? value - base : relativeDifference(base, value);
    if (role == ValueRole)
        return diff;
    if (role == Qt::DisplayRole) {
        if (!std::isfinite(diff))
            return QStringLiteral("—");
        if (metric == Stragglers) {
            if (diff != 0)
                return QStringLiteral("%1%2").arg(diff > 0 ? "+" : "").arg(int(diff));
            return s.stragglers == m_runs.front().stragglers ? tr("same") : tr("other rank");
        }
        if (points)
            return QStringLiteral("%1%2 pt").arg(diff > 0 ? "+" : "").arg(diff, 0, 'f', 1);
        return QStringLiteral("%1%2 %").arg(diff > 0 ? "+" : "").arg(diff * 100.0, 0, 'f', 1);
    }
    if (role == Qt::ForegroundRole) {
        // Differences under 0.5 % are noise between repeated runs: left uncoloured.
        const double magnitude = points ? std::abs(diff) / 100.0 : std::abs(diff);
        if (!std::isfinite(diff) || magnitude < 0.005)
            return {};
        const bool better = lowerIsBetter(metric) ? diff < 0 : diff > 0;
        return QBrush(better ? QColor(0x15, 0x80, 0x3d) : QColor(0xb9, 0x1c, 0x1c));
    }
    if (role == Qt::TextAlignmentRole)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

} // namespace lockstep::ui
