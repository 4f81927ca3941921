// Nsight Systems SQLite import on nsys-like exports this test writes (trace_writer.h lists the
// tables and columns mirrored from `nsys export --type sqlite`): kernels, memcpy, memset with
// names from StringIds, steps from NVTX ranges (inline text and textId), NCCL kernels as
// communication, session start time, one report per rank.
#include "trace_writer.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/run_db.h"
#include "lockstep/import/import.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>

using namespace lockstep::core;
using namespace lockstep::testing;

namespace {

constexpr int64_t kSession = 1'700'000'000'000'000'000;
constexpr int64_t kTid = (int64_t(4242) << 24) | 4242; // nsys globalTid packs pid and tid

// Step s = [s*1000, s*1000 + 1000) µs... in ns: compute kernel [100, 500] µs of the step, NCCL
// all-reduce [300, 700] µs: 200 µs overlapped of 400 µs communication.
void writeRank(const std::string& path, int64_t shiftNs, bool textIds)
{
    NsysWriter w(path);
    w.sessionStart(kSession);
    for (int s = 0; s < 3; ++s) {
        const int64_t t0 = shiftNs + s * 1'000'000;
        w.range(t0, t0 + 1'000'000, "ProfilerStep#" + std::to_string(s + 10), kTid, textIds);
        w.range(t0 + 10'000, t0 + 90'000, "forward", kTid, textIds);
        w.kernel(t0 + 100'000, t0 + 500'000, 0, 7, "ampere_sgemm_128x64_tn");
        w.kernel(t0 + 300'000, t0 + 700'000, 0, 21, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
        w.memcpy(t0 + 800'000, t0 + 810'000, 0, 7, 4096);
        w.memset(t0 + 820'000, t0 + 821'000, 0, 7, 64);
    }
}

int countKind(const Run& run, SpanKind kind)
{
    return static_cast<int>(std::count_if(run.spans.begin(), run.spans.end(), [&](const Span& s) { return s.kind == kind; }));
}

} // namespace

class TestNsysImport : public QObject {
    Q_OBJECT

private slots:
    void oneRank()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath("rank0.sqlite").toStdString();
        writeRank(path, 0, false);
        QCOMPARE(*detectTraceFormat(path), TraceFormat::NsysSqlite);
        auto run = importTracesToRun({path});
        QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
        QCOMPARE(run->config.source, std::string("nsys"));
        QCOMPARE(run->config.backend, std::string("nccl"));
        QCOMPARE(run->config.device, std::string("cuda"));
        QCOMPARE(run->steps.size(), size_t(3));
        QCOMPARE(run->steps[0].step, 10);
        QCOMPARE(run->steps[0].start, TimeNs(kSession));
        QCOMPARE(run->steps[0].end, TimeNs(kSession + 1'000'000));
        QCOMPARE(countKind(*run, SpanKind::Kernel), 3);
        QCOMPARE(countKind(*run, SpanKind::CommKernel), 3);
        QCOMPARE(countKind(*run, SpanKind::Memcpy), 3);
        QCOMPARE(countKind(*run, SpanKind::Memset), 3);
        int gpu = 0, host = 0;
        for (const Lane& l : run->lanes) {
            gpu += l.kind == LaneKind::GpuStream;
            host += l.kind == LaneKind::HostThread;
            if (l.kind == LaneKind::HostThread)
                QCOMPARE(l.stream, int64_t(4242));
        }
        QCOMPARE(gpu, 2);
        QCOMPARE(host, 1);
        for (const Span& s : run->spans) {
            if (s.kind == SpanKind::Memcpy)
                QCOMPARE(s.bytes, int64_t(4096));
            if (s.kind == SpanKind::CommKernel) {
                QCOMPARE(s.bucket, 0);
                QCOMPARE(run->strings.text(s.name), std::string("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
            }
        }
        const auto b = stepBreakdown(*run);
        QCOMPARE(b.size(), size_t(3));
        for (const auto& s : b) {
            QCOMPARE(s.communication, TimeNs(400'000));
            QCOMPARE(s.overlapped, TimeNs(200'000));
            QCOMPARE(s.overlapRatio, 0.5);
        }
    }

    void twoReportsTwoRanksIntoADatabase()
    {
        QTemporaryDir dir;
        const std::string r0 = dir.filePath("r0.sqlite").toStdString();
        const std::string r1 = dir.filePath("r1.nsys-rep.sqlite").toStdString();
        writeRank(r0, 0, false);
        writeRank(r1, 25'000, true); // names through StringIds (textId), rank 1 late by 25 µs
        const std::string out = dir.filePath("run.db").toStdString();
        auto stats = importTraces({r0, r1}, out);
        QVERIFY2(stats.has_value(), stats ? "" : stats.error().message.c_str());
        QCOMPARE(stats->ranks, 2);
        auto run = loadRun(out);
        QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
        QCOMPARE(run->config.worldSize, 2);
        QCOMPARE(run->config.source, std::string("nsys"));
        QCOMPARE(run->ranks.size(), size_t(2));
        QCOMPARE(run->steps.size(), size_t(6));
        QCOMPARE(run->steps[3].rank, 1);
        QCOMPARE(run->steps[3].step, 10);
        const auto report = stragglers(*run);
        QVERIFY(!report.skews.empty());
        QCOMPARE(report.skews[0].skew, TimeNs(25'000));
        QCOMPARE(report.skews[0].lateRank, 1);
        // Mixed inputs: an nsys report and a Kineto trace as two ranks of one run.
        const std::string k = dir.filePath("k.json").toStdString();
        writeFile(k, arrayTrace({xEvent("user_annotation", "ProfilerStep#10", 1.7e12, 1000, "1", "1")}));
        auto mixed = importTracesToRun({r0, k});
        QVERIFY(mixed);
        QCOMPARE(mixed->config.source, std::string("mixed"));
        QCOMPARE(mixed->ranks.size(), size_t(2));
    }
};

QTEST_GUILESS_MAIN(TestNsysImport)
#include "test_nsys_import.moc"
