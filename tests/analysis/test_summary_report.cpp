// Run summary, scaling efficiency, the text/JSON/table reports, and synthetic runs.
#include "lockstep/core/analysis.h"
#include "lockstep/core/report.h"
#include "lockstep/core/synthetic.h"
#include "run_builder.h"

#include <QtTest/QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <set>

using namespace lockstep::core;
using lockstep::test::RunBuilder;

namespace {
constexpr TimeNs kU = 1000; // 1 µs: the hand-built run below is written in µs

// Two ranks, warm-up 1, steps 0 (warm-up, 5 ms long), 1 and 2 (1 ms each). At each step's
// base time, in µs: forward [0,400), backward [400,800), optimizer [900,950); gradients of
// bucket 0 ready at 550 and 580; bucket 0's all-reduce (3 MB): rank 0 [600,900), rank 1
// [700,900). Per steady (rank, step):
//   C = [0,800) + [900,950) = 850 µs.
//   rank 0: M = 300, C ∩ M = [600,800) = 200, exposed 100, idle 1000 - (850+300-200) = 50
//   rank 1: M = 200, C ∩ M = [700,800) = 100, exposed 100, idle 1000 - (850+200-100) = 50
// Means over the 4 steady (rank, step): step 1 ms, compute 0.85, comm 0.25, overlapped 0.15,
// exposed 0.1, idle 0.05; overlap ratio = (200+100+200+100) / (300+200+300+200) = 0.6.
// Throughput: 16 samples on rank 0 + 0 recorded on rank 1 (-> batch per rank, 16) = 32 per
// step, over 1 ms = 32000 samples/s.
// Bucket 0: ready->launch 20 and 120 µs -> 0.07 ms; duration 300 and 200 -> 0.25 ms; algbw
// 3e6/3e5 = 10 and 3e6/2e5 = 15 GB/s -> 12.5 (busbw equal, N = 2); skew 100 µs = 0.1 ms.
// Rank 1 launches last in every step and makes rank 0 wait 100 µs = 10% of the step: straggler.
Run handRun(int32_t warmup = 1)
{
    RunBuilder b(2, warmup);
    Run& r = b.run();
    r.config.name = "hand-run";
    r.config.model = "mlp";
    r.config.source = "lockstep";
    r.config.backend = "gloo";
    r.config.device = "cpu";
    r.config.bucketCapBytes = 1 << 20;
    r.config.batchPerRank = 16;
    r.config.status = RunStatus::Completed;
    r.diagnostics.push_back({"replica drift", Severity::Warning, 3, "x"});
    r.diagnostics.push_back({"late end", Severity::Info, 4, "y"});
    b.bucket(0, 3'000'000, {"fc.weight", "fc.bias"});
    const TimeNs bases[3] = {0, 5000 * kU, 6000 * kU};
    const TimeNs walls[3] = {5000 * kU, 1000 * kU, 1000 * kU};
    for (int32_t rank = 0; rank < 2; ++rank) {
        const auto c = b.lane(rank, LaneKind::Compute);
        const auto m = b.lane(rank, LaneKind::Comm);
        for (int32_t s = 0; s < 3; ++s) {
            const TimeNs t = bases[s];
            b.step(rank, s, t, t + walls[s], rank == 0 ? 16 : 0);
            b.span(c, SpanKind::Forward, t, t + 400 * kU, s);
            b.span(c, SpanKind::Backward, t + 400 * kU, t + 800 * kU, s);
            b.span(c, SpanKind::Optimizer, t + 900 * kU, t + 950 * kU, s);
            b.ready(c, t + 550 * kU, s, 0).ready(c, t + 580 * kU, s, 0);
            const TimeNs launch = t + (rank == 0 ? 600 : 700) * kU;
            b.span(m, SpanKind::Comm, launch, t + 900 * kU, s, 0, 3'000'000);
        }
    }
    return b.build();
}

RunSummary point(const char* name, int32_t n, double throughput, double stepMs)
{
    RunSummary s;
    s.name = name;
    s.worldSize = n;
    s.throughput = throughput;
    s.stepTimeMs = stepMs;
    return s;
}
} // namespace

class TestSummaryReport : public QObject {
    Q_OBJECT
private slots:
    void summaryOfHandRun()
    {
        const RunSummary s = summarize(handRun());
        QCOMPARE(s.name, std::string("hand-run"));
        QCOMPARE(s.worldSize, 2);
        QCOMPARE(s.steps, 3);
        QCOMPARE(s.steadySteps, 2);
        QCOMPARE(s.stepTimeMs, 1.0);
        QCOMPARE(s.computeMs, 0.85);
        QCOMPARE(s.commMs, 0.25);
        QCOMPARE(s.overlappedMs, 0.15);
        QCOMPARE(s.exposedCommMs, 0.1);
        QCOMPARE(s.idleMs, 0.05);
        QCOMPARE(s.overlapRatio, 0.6);
        QCOMPARE(s.throughput, 32000.0);
        QCOMPARE(s.stragglers, std::vector<int32_t>{1});
        QCOMPARE(s.stragglerWaitMs.size(), size_t(1));
        QCOMPARE(s.stragglerWaitMs[0], 0.1);
        QCOMPARE(s.spans, int64_t(24));
        QCOMPARE(s.diagnostics, int64_t(7));
        QCOMPARE(s.buckets.size(), size_t(1));
        const BucketSummary& b = s.buckets[0];
        QCOMPARE(b.bytes, int64_t(3'000'000));
        QCOMPARE(b.params, 2);
        QCOMPARE(b.meanReadyToLaunchMs, 0.07);
        QCOMPARE(b.meanDurationMs, 0.25);
        QCOMPARE(b.meanAlgbwGBps, 12.5);
        QCOMPARE(b.meanBusbwGBps, 12.5);
        QCOMPARE(b.meanSkewMs, 0.1);
    }

    void allWarmupFallsBackToAllSteps()
    {
        // Warm-up 5 > 3 steps: every step counts. Step time (5 + 1 + 1) / 3 ms.
        const RunSummary s = summarize(handRun(5));
        QCOMPARE(s.steadySteps, 3);
        QCOMPARE(s.stepTimeMs, 7.0 / 3.0);
        QVERIFY(std::isfinite(s.overlapRatio));
    }

    void emptyRunIsHarmless()
    {
        const RunSummary s = summarize(Run{});
        QCOMPARE(s.steps, 0);
        QCOMPARE(s.stepTimeMs, 0.0);
        QVERIFY(std::isnan(s.overlapRatio));
        QVERIFY(s.stragglers.empty());
        // The JSON stays valid with NaN inside (written as null).
        const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(summaryJson(s)));
        QVERIFY(doc.isObject());
        QVERIFY(doc.object().value("overlap_ratio").isNull());
    }

    void weakScaling()
    {
        // N0 = 1: thr 100, 180, 320 at N = 1, 2, 4 -> E = 1, 180/200 = 0.9, 320/400 = 0.8.
        auto p = scalingEfficiency({point("4", 4, 320, 0), point("1", 1, 100, 0), point("2", 2, 180, 0)},
                                   ScalingMode::Weak);
        QCOMPARE(p.size(), size_t(3));
        QCOMPARE(p[0].worldSize, 1);
        QCOMPARE(p[0].efficiency, 1.0);
        QCOMPARE(p[1].efficiency, 0.9);
        QCOMPARE(p[2].efficiency, 0.8);
        // N0 = 2 (no 1-rank run): two baseline runs at N = 2 (190 and 210: mean 200, i.e. 100
        // per rank); N = 4 at 360 -> 360 / (4 · 200 / 2) = 0.9; N = 8 at 640 -> 0.8.
        p = scalingEfficiency({point("8", 8, 640, 0), point("2a", 2, 190, 0), point("4", 4, 360, 0),
                               point("2b", 2, 210, 0)},
                              ScalingMode::Weak);
        QCOMPARE(p.size(), size_t(4));
        QCOMPARE(p[0].name, std::string("2a")); // stable among equal world sizes
        QCOMPARE(p[0].efficiency, 0.95);
        QCOMPARE(p[1].efficiency, 1.05);
        QCOMPARE(p[2].efficiency, 0.9);
        QCOMPARE(p[3].efficiency, 0.8);
    }

    void strongScaling()
    {
        // N0 = 1, T(1) = 100 ms: T(2) = 55 -> 100/(55·2) = 0.90909; T(4) = 31.25 -> 100/125 = 0.8.
        auto p = scalingEfficiency({point("1", 1, 0, 100), point("2", 2, 0, 55), point("4", 4, 0, 31.25)},
                                   ScalingMode::Strong);
        QCOMPARE(p[0].efficiency, 1.0);
        QCOMPARE(p[1].efficiency, 100.0 / 110.0);
        QCOMPARE(p[2].efficiency, 0.8);
        // N0 = 2, T(2) = 50: T(4) = 31.25 -> 100/125 = 0.8; T(8) = 20 -> 100/160 = 0.625.
        p = scalingEfficiency({point("8", 8, 0, 20), point("4", 4, 0, 31.25), point("2", 2, 0, 50)},
                              ScalingMode::Strong);
        QCOMPARE(p[0].worldSize, 2);
        QCOMPARE(p[0].efficiency, 1.0);
        QCOMPARE(p[1].efficiency, 0.8);
        QCOMPARE(p[2].efficiency, 0.625);
        // A zero step time cannot give an efficiency.
        p = scalingEfficiency({point("1", 1, 0, 100), point("2", 2, 0, 0)}, ScalingMode::Strong);
        QVERIFY(std::isnan(p[1].efficiency));
        QVERIFY(scalingEfficiency({}, ScalingMode::Weak).empty());
    }

    void jsonGolden()
    {
        const std::string json = summaryJson(summarize(handRun()));
        QJsonParseError err{};
        const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(json), &err);
        QCOMPARE(err.error, QJsonParseError::NoError);
        const QJsonObject o = doc.object();
        const std::set<QString> expected = {
            "name", "model", "source", "backend", "device", "status", "failure_cause", "world_size",
            "bucket_cap_bytes", "batch_per_rank", "steps", "steady_steps", "step_time_ms", "compute_ms",
            "comm_ms", "overlapped_ms", "exposed_comm_ms", "idle_ms", "overlap_ratio",
            "throughput_samples_per_s", "throughput", "stragglers", "straggler_wait_ms", "buckets", "spans",
            "diagnostics"};
        std::set<QString> keys;
        for (const QString& k : o.keys())
            keys.insert(k);
        QCOMPARE(keys, expected);
        QCOMPARE(o["name"].toString(), QString("hand-run"));
        QCOMPARE(o["model"].toString(), QString("mlp"));
        QCOMPARE(o["source"].toString(), QString("lockstep"));
        QCOMPARE(o["status"].toString(), QString("completed"));
        QCOMPARE(o["failure_cause"].toString(), QString());
        QCOMPARE(o["world_size"].toInt(), 2);
        QCOMPARE(o["bucket_cap_bytes"].toInteger(), qint64(1 << 20));
        QCOMPARE(o["batch_per_rank"].toInt(), 16);
        QCOMPARE(o["steps"].toInt(), 3);
        QCOMPARE(o["steady_steps"].toInt(), 2);
        QCOMPARE(o["step_time_ms"].toDouble(), 1.0);
        QCOMPARE(o["compute_ms"].toDouble(), 0.85);
        QCOMPARE(o["comm_ms"].toDouble(), 0.25);
        QCOMPARE(o["overlapped_ms"].toDouble(), 0.15);
        QCOMPARE(o["exposed_comm_ms"].toDouble(), 0.1);
        QCOMPARE(o["idle_ms"].toDouble(), 0.05);
        QCOMPARE(o["overlap_ratio"].toDouble(), 0.6);
        QCOMPARE(o["throughput_samples_per_s"].toDouble(), 32000.0);
        QCOMPARE(o["stragglers"].toArray(), QJsonArray({1}));
        QCOMPARE(o["straggler_wait_ms"].toArray()[0].toDouble(), 0.1);
        QCOMPARE(o["spans"].toInt(), 24);
        QCOMPARE(o["diagnostics"].toInt(), 7);
        const QJsonArray buckets = o["buckets"].toArray();
        QCOMPARE(buckets.size(), 1);
        const QJsonObject b = buckets[0].toObject();
        QCOMPARE(b["index"].toInt(), 0);
        QCOMPARE(b["bytes"].toInteger(), qint64(3'000'000));
        QCOMPARE(b["params"].toInt(), 2);
        QCOMPARE(b["ready_to_launch_ms"].toDouble(), 0.07);
        QCOMPARE(b["duration_ms"].toDouble(), 0.25);
        QCOMPARE(b["algbw_gbps"].toDouble(), 12.5);
        QCOMPARE(b["busbw_gbps"].toDouble(), 12.5);
        QCOMPARE(b["skew_ms"].toDouble(), 0.1);
    }

    void jsonFailedRunAndEscaping()
    {
        RunSummary s;
        s.name = "quote\" and \\ backslash";
        s.status = RunStatus::Failed;
        s.failureCause = "rank 1 died: SIGKILL\nafter step 3";
        s.overlapRatio = std::nan("");
        const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(summaryJson(s)));
        QVERIFY(doc.isObject());
        const QJsonObject o = doc.object();
        QCOMPARE(o["name"].toString(), QString::fromStdString(s.name));
        QCOMPARE(o["status"].toString(), QString("failed"));
        QCOMPARE(o["failure_cause"].toString(), QString::fromStdString(s.failureCause));
        QVERIFY(o["overlap_ratio"].isNull());
    }

    void textAndTable()
    {
        const RunSummary s = summarize(handRun());
        const QString text = QString::fromStdString(summaryText(s));
        QVERIFY2(text.contains("hand-run"), qPrintable(text));
        QVERIFY2(text.contains("world size 2"), qPrintable(text));
        QVERIFY2(text.contains("1.00 MiB"), qPrintable(text));       // bucket cap
        QVERIFY2(text.contains("60.0%"), qPrintable(text));          // overlap ratio
        QVERIFY2(text.contains("rank 1: mean wait caused 0.100 ms"), qPrintable(text));
        QVERIFY2(text.contains("0.100 ms"), qPrintable(text));       // exposed communication
        QVERIFY2(text.contains("12.500"), qPrintable(text));         // bucket algbw
        QVERIFY2(text.contains("32000.0 samples/s"), qPrintable(text));

        RunSummary other = s;
        other.name = "other-run";
        other.overlapRatio = std::nan("");
        other.stragglers.clear();
        const QString table = QString::fromStdString(summaryTable({s, other}));
        const QStringList lines = table.split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 3);
        QVERIFY(lines[0].contains("overlap"));
        QVERIFY(lines[1].startsWith("hand-run"));
        QVERIFY(lines[1].contains("60.0%"));
        QVERIFY(lines[2].startsWith("other-run"));
        QVERIFY(lines[2].contains("n/a"));
    }

    void syntheticRunIsNormalizedAndPlausible()
    {
        SyntheticParams p;
        p.worldSize = 3;
        p.steps = 6;
        p.buckets = 3;
        p.backwardSegmentsPerBucket = 2;
        p.stragglerRank = 2;
        p.stragglerDelayNs = 2'000'000; // 20% of the 10 ms step
        const Run run = makeSyntheticRun(p);
        QCOMPARE(run.lanes.size(), size_t(6));
        QCOMPARE(run.steps.size(), size_t(18));
        QCOMPARE(run.buckets.size(), size_t(3));
        QCOMPARE(run.buckets[1].params.size(), size_t(2));
        QCOMPARE(run.instants.size(), size_t(3 * 6 * 3 * 2)); // ranks × steps × params
        QVERIFY(std::is_sorted(run.spans.begin(), run.spans.end(), [](const Span& a, const Span& b) {
            return std::tie(a.lane.v, a.start, a.end) < std::tie(b.lane.v, b.start, b.end);
        }));
        for (size_t i = 0; i < run.lanes.size(); ++i)
            QCOMPARE(run.lanes[i].id.v, uint32_t(i));
        int comm = 0;
        for (const Span& s : run.spans) {
            QVERIFY(s.end > s.start);
            if (s.kind == SpanKind::Comm) {
                ++comm;
                QVERIFY(s.bucket >= 0);
                QVERIFY(s.bytes > 0);
                QCOMPARE(run.lanes[s.lane.v].kind, LaneKind::Comm);
            }
        }
        QCOMPARE(comm, 3 * 6 * 3);
        // All-reduces overlap backward, the straggler is found, every step has a breakdown.
        const RunSummary s = summarize(run);
        QVERIFY(s.overlapRatio > 0.0 && s.overlapRatio <= 1.0);
        QCOMPARE(s.stragglers, std::vector<int32_t>{2});
        QCOMPARE(stepBreakdown(run).size(), size_t(18));
        // Deterministic: the same parameters give the same run.
        const Run again = makeSyntheticRun(p);
        QCOMPARE(again.spans.size(), run.spans.size());
        QCOMPARE(again.spans.back().end, run.spans.back().end);
        // Without a straggler nobody is flagged (jitter alone stays under 5% wait).
        p.stragglerRank = -1;
        QVERIFY(summarize(makeSyntheticRun(p)).stragglers.empty());
    }

    void syntheticRunOfRequestedSize()
    {
        const Run run = makeSyntheticRunWithSpans(100'000, 2);
        QVERIFY(std::abs(static_cast<double>(run.spans.size()) - 100'000.0) < 2'000.0);
        QCOMPARE(run.config.worldSize, 2);
    }
};

QTEST_GUILESS_MAIN(TestSummaryReport)
#include "test_summary_report.moc"
