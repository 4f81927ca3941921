// The run summary and its bucket table (see summary_panel.h).
#include "summary_panel.h"

#include "format.h"
#include "timeline/timeline_palette.h"

#include <QCoreApplication>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QPixmap>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTextDocument>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace lockstep::ui {

namespace {

// The steady step as one stacked bar of the five parts (means over steady steps and ranks).
class FivePartBar : public QWidget {
public:
    explicit FivePartBar(QWidget* parent) : QWidget(parent) { setFixedHeight(18); }
    void setSummary(const core::RunSummary* s)
    {
        m_s = s;
        update();
    }

protected:
    void paintEvent(QPaintEvent*) override
    {
        QPainter p(this);
        p.fillRect(rect(), palette::background());
        if (!m_s || !(m_s->stepTimeMs > 0))
            return;
        auto ok = [](double v) { return std::isfinite(v) ? v : 0.0; };
        const std::pair<double, QColor> parts[] = {
            {ok(m_s->computeOnlyMs), palette::computeOnlyColor()}, {ok(m_s->overlappedMs), palette::overlappedColor()},
            {ok(m_s->exposedCommMs), palette::exposedColor()},     {ok(m_s->memoryOnlyMs), palette::memoryOnlyColor()},
            {ok(m_s->idleMs), palette::idleColor()},
        };
        double total = 0;
        for (const auto& [v, c] : parts)
            total += v;
        double x = 0;
        for (const auto& [v, c] : parts) {
            const double w = width() * v / std::max(total, 1e-12);
            p.fillRect(QRectF(x, 0, w, height()), c);
            x += w;
        }
    }

private:
    const core::RunSummary* m_s = nullptr;
};

QString ms(double v)
{
    return std::isfinite(v) ? formatMs(v) : QStringLiteral("—");
}

} // namespace

// ---------------------------------------------------------------------------------------------
// BucketTableModel

BucketTableModel::BucketTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void BucketTableModel::setSummary(const core::RunSummary* summary)
{
    beginResetModel();
    m_rows = summary ? summary->buckets : std::vector<core::BucketSummary>{};
    m_multiRank = summary && summary->multiRank;
    endResetModel();
}

int BucketTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int BucketTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant BucketTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::DisplayRole) {
        switch (section) {
        case Bucket: return tr("Bucket");
        case Bytes: return tr("Size");
        case Params: return tr("Params");
        case ReadyToLaunch: return tr("Ready→launch");
        case Duration: return tr("Duration");
        case Exposed: return tr("Exposed");
        case Hidden: return tr("Hidden");
        case Algbw: return tr("algbw");
        case Busbw: return tr("busbw");
        case Skew: return tr("Skew");
        case WaitCaused: return tr("Wait caused");
        case LateRank: return tr("Late rank");
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case ReadyToLaunch: return tr("From the bucket's last gradient-ready instant to its all-reduce's launch");
        case Duration: return tr("All-reduce duration, from each rank's own launch to its completion: an early rank's "
                                 "includes waiting for the late one (see Skew)");
        case Exposed: return tr("The bucket's own time (from its launch, or the end of the all-reduces launched before it, "
                                "to its completion) with no compute of the rank beside it: the buckets' exposed times "
                                "add up to the step's exposed bucket communication");
        case Hidden: return tr("The bucket's own time with compute of the rank beside it");
        case Algbw: return tr("bytes / mean duration; with a large skew it measures the waiting more than the link");
        case Busbw: return tr("algbw × 2(N−1)/N (the nccl-tests convention)");
        case Skew: return tr("Arrival skew: last rank's launch − first rank's launch");
        case WaitCaused: return tr("Mean over the other ranks of (late launch − their launch)");
        case LateRank: return tr("The rank that launched it last most often");
        }
        return tr("Means over steady steps and ranks; click a row to show the bucket in the timeline");
    }
    return {};
}

QVariant BucketTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const core::BucketSummary& b = m_rows[size_t(index.row())];
    if (role == BucketRole)
        return b.bucket;
    if (role == SortRole) {
        auto num = [](double v) { return std::isfinite(v) ? v : -1.0; };
        switch (index.column()) {
        case Bucket: return b.bucket;
        case Bytes: return qlonglong(b.bytes);
        case Params: return b.params;
        case ReadyToLaunch: return num(b.meanReadyToLaunchMs);
        case Duration: return num(b.meanDurationMs);
        case Exposed: return num(b.meanExposedMs);
        case Hidden: return num(b.meanHiddenMs);
        case Algbw: return num(b.meanAlgbwGBps);
        case Busbw: return num(b.meanBusbwGBps);
        case Skew: return num(m_multiRank ? b.meanSkewMs : std::nan(""));
        case WaitCaused: return num(b.meanWaitCausedMs);
        case LateRank: return b.lateRank;
        }
    }
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Bucket: return QStringLiteral("b%1").arg(b.bucket);
        // A size the run does not give (imported traces) is unknown, not 0 (docs/design.md).
        case Bytes: return b.bytes > 0 ? formatBytes(double(b.bytes)) : tr("unknown");
        case Params: return b.params > 0 ? QVariant(b.params) : QVariant(tr("unknown"));
        case ReadyToLaunch: return ms(b.meanReadyToLaunchMs);
        case Duration: return ms(b.meanDurationMs);
        case Exposed: return ms(b.meanExposedMs);
        case Hidden: return ms(b.meanHiddenMs);
        case Algbw: return formatBandwidth(b.meanAlgbwGBps);
        case Busbw: return m_multiRank ? formatBandwidth(b.meanBusbwGBps) : QStringLiteral("—");
        case Skew: return m_multiRank ? ms(b.meanSkewMs) : QStringLiteral("—");
        case WaitCaused: return ms(b.meanWaitCausedMs);
        case LateRank: return b.lateRank >= 0 ? QVariant(b.lateRank) : QVariant(QStringLiteral("—"));
        }
    }
    if (role == Qt::TextAlignmentRole)
        return index.column() == Bucket ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::BackgroundRole && index.column() == Bucket) {
        // The colour key: the bucket's colour, and past the sixth bucket its pattern over it, as
        // the timeline draws its all-reduces.
        const QColor fill = palette::bucketColor(b.bucket);
        const Qt::BrushStyle pattern = palette::bucketPattern(b.bucket);
        if (pattern == Qt::NoBrush)
            return fill;
        QPixmap tile(16, 16);
        tile.fill(fill);
        QPainter painter(&tile);
        painter.fillRect(tile.rect(), QBrush(palette::patternInk(fill), pattern));
        painter.end();
        return QBrush(tile);
    }
    if (role == Qt::ForegroundRole && index.column() == Bucket)
        return palette::textOn(palette::bucketColor(b.bucket));
    if (role == Qt::ToolTipRole) {
        QStringList names;
        for (const std::string& n : b.paramNames)
            names << displayText(n, 80);
        if (names.size() > 12)
            names = names.mid(0, 12) << tr("… %1 more").arg(b.paramNames.size() - 12);
        return tr("bucket %1: %2 parameters\n%3").arg(b.bucket).arg(b.params).arg(names.join(QLatin1Char('\n')));
    }
    return {};
}

// ---------------------------------------------------------------------------------------------
// SummaryPanel

SummaryPanel::SummaryPanel(QWidget* parent)
    : QWidget(parent)
    , m_text(new QLabel(this))
    , m_bar(new FivePartBar(this))
    , m_buckets(new BucketTableModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_table(new QTableView(this))
{
    m_text->setTextFormat(Qt::RichText);
    m_text->setWordWrap(true);
    m_text->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_proxy->setSourceModel(m_buckets);
    m_proxy->setSortRole(BucketTableModel::SortRole);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(BucketTableModel::Bucket, Qt::AscendingOrder);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(20);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->setToolTip(tr("Click a bucket to show it in the timeline, on every rank"));
    auto* caption = new QLabel(tr("<b>Buckets</b> (means over steady steps and ranks; click one to show it)"), this);
    caption->setWordWrap(true);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->addWidget(m_text);
    layout->addWidget(m_bar);
    layout->addSpacing(6);
    layout->addWidget(caption);
    layout->addWidget(m_table, 1);
    connect(m_table, &QTableView::clicked, this, [this](const QModelIndex& index) {
        emit bucketActivated(index.data(BucketTableModel::BucketRole).toInt());
    });
    setRun(nullptr);
}

namespace {

// The summary's HTML, part by part (its texts in SummaryPanel's translation context).
class SummaryHtml {
    Q_DECLARE_TR_FUNCTIONS(lockstep::ui::SummaryPanel)

public:
    // The run's name, configuration, steady steps and clocks.
    static QString heading(const LoadedRun& run, const core::RunSummary& s)
    {
        QString h = QStringLiteral("<h3 style='margin:0'>%1</h3>").arg(run.label.toHtmlEscaped());
        h += tr("%1, %2, %3 / %4, bucket cap %5<br>")
                 .arg(displayText(s.config.model, 40).toHtmlEscaped(), formatRanks(s.worldSize))
                 .arg(displayText(s.config.backend, 20).toHtmlEscaped(), displayText(s.config.device, 20).toHtmlEscaped(),
                      s.config.bucketCapBytes > 0 ? formatBytes(double(s.config.bucketCapBytes)) : tr("unknown"));
        h += tr("Steady steps: %1<br>").arg(QString::fromStdString(s.steady.describe()).toHtmlEscaped());
        if (run.run && run.run->ranks.size() > 1)
            h += clocks(*run.run);
        return h;
    }

    // How the ranks' times were put on rank 0's clock (core/clock_sync.h): one clock on one host,
    // or measured offsets and how far they can be off.
    static QString clocks(const core::Run& run)
    {
        int shared = 0, measured = 0, named = 0, unknown = 0;
        core::TimeNs worst = 0;
        for (const core::RankInfo& r : run.ranks) {
            switch (r.clockBasis) {
            case core::ClockBasis::Reference: break;
            case core::ClockBasis::SameBoot: ++shared; break;
            case core::ClockBasis::SameHostName: ++named; break;
            case core::ClockBasis::Measured: ++measured; worst = std::max(worst, r.clockUncertaintyNs); break;
            case core::ClockBasis::NotMeasured: ++unknown; break;
            }
        }
        QStringList parts;
        if (shared > 0)
            parts << tr("%n rank(s) on rank 0's host (same boot id): one clock", nullptr, shared);
        if (named > 0)
            parts << tr("%n rank(s) taken as on rank 0's host by host name (file without boot ids)", nullptr, named);
        if (measured > 0)
            parts << tr("%n rank(s) on other hosts: offsets within \u00b1%1", nullptr, measured).arg(formatDuration(double(worst)));
        if (unknown > 0)
            parts << tr("%n rank(s) in their own clock (no offset measured)", nullptr, unknown);
        if (parts.isEmpty())
            return {};
        return tr("Clocks: %1<br>").arg(parts.join(QStringLiteral("; ")).toHtmlEscaped());
    }

    // The step time, throughput and the five parts, each with its colour and share.
    static QString partsTable(const core::RunSummary& s)
    {
        auto row = [](const QString& k, const QString& v, QColor c = QColor()) {
            const QString mark = c.isValid() ? QStringLiteral("<span style='color:%1'>■</span> ").arg(c.name()) : QString();
            return QStringLiteral("<tr><td>%1%2</td><td align='right'>&nbsp;%3</td></tr>").arg(mark, k.toHtmlEscaped(), v);
        };
        auto pct = [&](double v) {
            return std::isfinite(v) && s.stepTimeMs > 0 ? QStringLiteral(" (%1 %)").arg(100.0 * v / s.stepTimeMs, 0, 'f', 1) : QString();
        };
        QString h = QStringLiteral("<table cellspacing='0' cellpadding='1'>");
        h += row(tr("step time"), QStringLiteral("<b>%1</b>").arg(ms(s.stepTimeMs)));
        h += row(tr("throughput"), std::isfinite(s.throughput) ? tr("%1 samples/s").arg(s.throughput, 0, 'f', 1) : QStringLiteral("—"));
        h += row(tr("compute only"), ms(s.computeOnlyMs) + pct(s.computeOnlyMs), palette::computeOnlyColor());
        h += row(tr("overlapped comm"), ms(s.overlappedMs) + pct(s.overlappedMs), palette::overlappedColor());
        h += row(tr("exposed comm"), ms(s.exposedCommMs) + pct(s.exposedCommMs), palette::exposedColor());
        h += row(tr("memory only"), ms(s.memoryOnlyMs) + pct(s.memoryOnlyMs), palette::memoryOnlyColor());
        h += row(tr("idle"), ms(s.idleMs) + pct(s.idleMs), palette::idleColor());
        h += row(tr("overlap"), s.multiRank ? tr("%1 of %2 communication").arg(formatPercent(s.overlapRatio), ms(s.commMs))
                                            : tr("not applicable (one rank)"));
        h += QStringLiteral("</table>");
        return h;
    }

    // The straggler verdict and the evidence behind it (core's StragglerEvidence).
    static QString straggler(const core::RunSummary& s)
    {
        const core::StragglerEvidence& e = s.straggler;
        // One number against one bar: its systematic delay against the most the run's jitter and the
        // healthy ranks' spread explain, both in the same unit. Core tests the difference of median
        // latenesses, which is the delay times N/(N-1) (stragglers.cpp, criterion 2), so the floors
        // scale back by the same factor; the verdict is the same comparison (the report's text gives
        // the test in its own units).
        const double toDelay = s.worldSize > 1 ? double(s.worldSize - 1) / s.worldSize : 1.0;
        const double explained = std::max(e.noiseFloorNs, e.rankFloorNs) * toDelay;
        QString h = QStringLiteral("<p style='margin-top:6px'><b>%1</b> ").arg(tr("Straggler:"));
        if (!s.multiRank || !e.applicable) {
            h += tr("not applicable (%1)").arg(s.multiRank ? QString::fromStdString(e.notApplicable) : tr("one rank"));
        } else if (e.straggler) {
            h += tr("<span style='color:%1'><b>rank %2</b></span> — late in %3 of %4 steady steps; the others waited %5 per step for it "
                    "(%6 of the step time). It typically launches %7 after them, where the run's own jitter explains at most "
                    "%8 (confidence %9)")
                     .arg(palette::stragglerColor().name())
                     .arg(e.candidate)
                     .arg(e.stepsLate)
                     .arg(e.steadySteps)
                     .arg(formatDuration(e.meanWaitNs), formatPercent(e.waitFraction), formatDuration(e.systematicDelayNs),
                          formatDuration(explained),
                          // one decimal would round a 1-in-10^5 chance up to a certainty
                          e.chance < 0.0005 ? tr("> 99.9 %") : formatPercent(e.confidence()));
        } else if (e.candidate >= 0) {
            h += (e.withinClock ? tr("none (clock \u00b1%1). ").arg(formatDuration(e.clockUncertaintyNs)) : tr("none. "))
                 + tr("Rank %1 was late most often, but %2.").arg(e.candidate).arg(whyNotNamed(e, toDelay).join(tr("; ")));
        } else {
            h += tr("none");
        }
        h += cause(s);
        h += QStringLiteral("</p>");
        return h;
    }

    // The criteria the candidate missed, each with its numbers.
    static QStringList whyNotNamed(const core::StragglerEvidence& e, double toDelay)
    {
        QStringList missing;
        const double delay = std::max(0.0, e.systematicDelayNs);
        // Core's rule: late in most steady steps, and more often than noise alone would make
        // some rank late (chance <= 5 %).
        if (!e.mostSteps)
            missing << (2 * e.stepsLate > e.steadySteps
                            ? tr("late in %1 of %2 steady steps, which noise alone explains (chance %3)")
                                  .arg(e.stepsLate)
                                  .arg(e.steadySteps)
                                  .arg(formatPercent(e.chance))
                            : tr("late in only %1 of %2 steady steps").arg(e.stepsLate).arg(e.steadySteps));
        if (!e.waitAboveThreshold)
            missing << (e.waitFraction < 0.05
                            ? tr("the wait it caused, %1, is under 5 % of the step").arg(formatPercent(e.waitFraction))
                            : tr("its systematic delay, %1 (%2 of the step), is under 5 %; the rest of the wait it "
                                 "caused is jitter")
                                  .arg(formatDuration(e.systematicDelayNs), formatPercent(e.delayFraction)));
        // In the straggler sentence's units: its systematic delay against what the run's jitter
        // (noise floor) or the healthy ranks' spread (rank floor) explain.
        // The clocks (core's clock floor is the clocks' uncertainty in the lead's units; in the
        // delay's units it is the uncertainty itself).
        if (e.withinClock)
            missing << tr("its delay (%1) is within what the ranks' clocks can disagree by (\u00b1%2) on top of the "
                          "run's own jitter (%3)")
                           .arg(formatDuration(delay), formatDuration(e.clockUncertaintyNs),
                                formatDuration(std::max(e.noiseFloorNs, e.rankFloorNs) * toDelay));
        else if (!e.clearsNoise)
            missing << (e.latenessAboveOthersNs >= e.noiseFloorNs && e.latenessAboveOthersNs > 0
                            ? tr("its delay (%1) is within how far the other ranks sit apart (%2)")
                                  .arg(formatDuration(delay), formatDuration(e.rankFloorNs * toDelay))
                            : tr("its delay (%1) is within what the run's own jitter explains (%2)")
                                  .arg(formatDuration(delay), formatDuration(e.noiseFloorNs * toDelay)));
        return missing;
    }

    // Why it is late, from the kernel's scheduler statistics of the training threads.
    static QString cause(const core::RunSummary& s)
    {
        const core::StragglerEvidence& e = s.straggler;
        if (!(s.multiRank && e.applicable && e.candidate >= 0 && std::isfinite(e.cpuMs)
              && (e.straggler || e.delayFraction >= 0.05)))
            return {};
        const QString why = e.causeWorthStating() ? QString::fromUtf8(core::stragglerCauseText(e.cause)) : QString();
        return tr("<br>Rank %1's training thread per step: %2 on a CPU (others %3), %4 waiting for one (others %5)%6")
            .arg(e.candidate)
            .arg(ms(e.cpuMs), ms(e.othersCpuMs), ms(e.runqMs), ms(e.othersRunqMs),
                 why.isEmpty() ? QString() : QStringLiteral(" — ") + why);
    }

    // What the rules left out, reclassified or could not know (the run's diagnostics): never
    // silent (docs/design.md). Warnings and errors first; each with its count and reason.
    static QString diagnostics(const core::Run& run)
    {
        std::vector<const core::Diagnostic*> diags;
        for (const core::Diagnostic& d : run.diagnostics)
            diags.push_back(&d);
        std::stable_sort(diags.begin(), diags.end(), [](const core::Diagnostic* a, const core::Diagnostic* b) {
            return a->severity > b->severity;
        });
        QString h = QStringLiteral("<p style='margin-top:6px'><b>%1</b>").arg(tr("Diagnostics (left out, reclassified or unknown):"));
        constexpr size_t kShown = 12;
        for (size_t i = 0; i < diags.size() && i < kShown; ++i) {
            const core::Diagnostic& d = *diags[i];
            h += QStringLiteral("<br>%1 %2 ×%3: %4")
                     .arg(QString::fromUtf8(core::severityName(d.severity)).toHtmlEscaped(),
                          displayText(d.kind, 60).toHtmlEscaped())
                     .arg(d.count)
                     .arg(displayText(d.message, 240).toHtmlEscaped());
        }
        if (diags.size() > kShown)
            h += tr("<br>and %1 more kinds (lockstep report lists them all)").arg(diags.size() - kShown);
        h += QStringLiteral("</p>");
        return h;
    }
};

} // namespace

void SummaryPanel::setRun(LoadedRunPtr run)
{
    m_run = std::move(run);
    static_cast<FivePartBar*>(m_bar)->setSummary(m_run ? &m_run->summary() : nullptr);
    m_buckets->setSummary(m_run ? &m_run->summary() : nullptr);
    if (!m_run) {
        m_text->setText(tr("Open a run to see its summary."));
        return;
    }
    const core::RunSummary& s = m_run->summary();
    QString h = SummaryHtml::heading(*m_run, s);
    h += SummaryHtml::partsTable(s);
    h += SummaryHtml::straggler(s);
    if (const core::Run* run = m_run->run.get(); run && !run->diagnostics.empty())
        h += SummaryHtml::diagnostics(*run);
    m_text->setText(h);
}

QString SummaryPanel::summaryText() const
{
    QTextDocument doc;
    doc.setHtml(m_text->text());
    return doc.toPlainText();
}

} // namespace lockstep::ui
