// Kineto (torch.profiler) JSON import on small traces this test writes: both JSON forms, gzip,
// relative timestamps, two ranks, communication by metadata / External id / name fallback,
// CPU-only gloo traces, and the analyses on the imported run.
#include "trace_writer.h"

#include "lockstep/core/analysis.h"
#include "lockstep/import/import.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>

using namespace lockstep::core;
using namespace lockstep::testing;

namespace {

int countKind(const Run& run, SpanKind kind)
{
    return static_cast<int>(std::count_if(run.spans.begin(), run.spans.end(), [&](const Span& s) { return s.kind == kind; }));
}

const Span* findSpan(const Run& run, const std::string& name)
{
    for (const Span& s : run.spans)
        if (run.strings.text(s.name) == name)
            return &s;
    return nullptr;
}

int64_t diagCount(const Run& run, const std::string& kind)
{
    for (const auto& d : run.diagnostics)
        if (d.kind == kind)
            return d.count;
    return 0;
}

// One GPU rank: step 5 = [1000, 2000] µs, step 6 = [2000, 3000] µs. Compute kernel on stream 7
// [1100, 1500], NCCL all-reduce kernel (collective metadata) on stream 20 [1300, 1700]: the
// step overlaps 200 µs of 400 µs communication (ratio 0.5). Memcpy, memset, CPU ops.
std::vector<std::string> gpuRankEvents(double t0 = 0)
{
    return {
        xEvent("user_annotation", "ProfilerStep#5", t0 + 1000, 1000, "100", "100"),
        xEvent("user_annotation", "ProfilerStep#6", t0 + 2000, 1000, "100", "100"),
        xEvent("cpu_op", "aten::mm", t0 + 1010, 50, "100", "100", "\"External id\": 11"),
        xEvent("cpu_op", "record_param_comms", t0 + 1100, 20, "100", "100",
               "\"External id\": 12, \"Collective name\": \"allreduce\", \"In msg nelems\": 1024, "
               "\"Out msg nelems\": 1024, \"dtype\": \"Float\", \"Group size\": 2, \"Process Group Name\": \"0\""),
        xEvent("python_function", "train.py(10): step", t0 + 1000, 900, "100", "100"),
        xEvent("kernel", "void gemm_kernel<float>(float*)", t0 + 1100, 400, "0", "7",
               "\"device\": 0, \"stream\": 7, \"External id\": 11, \"correlation\": 1"),
        xEvent("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", t0 + 1300, 400, "0", "20",
               "\"device\": 0, \"stream\": 20, \"External id\": 12, \"Collective name\": \"allreduce\", "
               "\"In msg nelems\": 1024, \"Out msg nelems\": 1024, \"dtype\": \"Float\", \"Group size\": 2"),
        xEvent("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t0 + 2100, 50, "0", "7",
               "\"device\": 0, \"stream\": 7, \"bytes\": 65536"),
        xEvent("gpu_memset", "Memset (Device)", t0 + 2200, 10, "0", "7", "\"device\": 0, \"stream\": 7, \"bytes\": 128"),
        "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 100, \"tid\": 100, \"args\": {\"name\": \"python main\"}}",
        "{\"ph\": \"i\", \"cat\": \"Trace\", \"name\": \"Iteration Start: PyTorch Profiler\", \"pid\": 100, \"tid\": 100, \"ts\": 1000, \"s\": \"g\"}",
        "{\"ph\": \"s\", \"cat\": \"ac2g\", \"id\": 1, \"name\": \"ac2g\", \"pid\": 100, \"tid\": 100, \"ts\": 1100}",
    };
}

const char* kDist1 = "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 1, \"world_size\": 2}";

} // namespace

class TestKinetoImport : public QObject {
    Q_OBJECT

private slots:
    void objectFormGpuRank()
    {
        ImportStats stats;
        auto run = importTraceBytes(objectTrace(gpuRankEvents(1.7e12), kDist1), {}, &stats);
        QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
        QCOMPARE(run->config.source, std::string("kineto"));
        QCOMPARE(run->config.worldSize, 2);
        QCOMPARE(run->config.backend, std::string("nccl"));
        QCOMPARE(run->config.device, std::string("cuda"));
        QCOMPARE(run->ranks.size(), size_t(1));
        QCOMPARE(run->ranks[0].rank, 1);
        QCOMPARE(run->ranks[0].device, std::string("cuda:0"));
        // Lanes: one host thread (named from thread_name metadata), GPU streams 7 and 20.
        int host = 0, gpu = 0;
        for (const Lane& l : run->lanes) {
            QCOMPARE(l.rank, 1);
            if (l.kind == LaneKind::HostThread) {
                ++host;
                QCOMPARE(l.name, std::string("python main"));
                QCOMPARE(l.stream, int64_t(100));
            } else if (l.kind == LaneKind::GpuStream) {
                ++gpu;
                QCOMPARE(l.device, 0);
                QVERIFY(l.stream == 7 || l.stream == 20);
            }
        }
        QCOMPARE(host, 1);
        QCOMPARE(gpu, 2);
        // Steps from ProfilerStep#N, absolute µs → ns.
        QCOMPARE(run->steps.size(), size_t(2));
        QCOMPARE(run->steps[0].step, 5);
        QCOMPARE(run->steps[0].rank, 1);
        QCOMPARE(run->steps[0].start, TimeNs(1'700'000'001'000'000LL));
        QCOMPARE(run->steps[0].end, TimeNs(1'700'000'002'000'000LL));
        QCOMPARE(run->config.warmupSteps, 6); // first imported step + 1
        // Kinds and bytes.
        QCOMPARE(countKind(*run, SpanKind::Kernel), 1);
        QCOMPARE(countKind(*run, SpanKind::CommKernel), 1);
        QCOMPARE(countKind(*run, SpanKind::Memcpy), 1);
        QCOMPARE(countKind(*run, SpanKind::Memset), 1);
        QCOMPARE(countKind(*run, SpanKind::Comm), 1); // record_param_comms
        QCOMPARE(findSpan(*run, "record_param_comms")->bytes, int64_t(4096));
        const Span* nccl = findSpan(*run, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)");
        QVERIFY(nccl);
        QCOMPARE(nccl->bytes, int64_t(4096));
        QCOMPARE(nccl->step, 5);
        QCOMPARE(nccl->bucket, 0);
        QCOMPARE(findSpan(*run, "Memcpy HtoD (Pageable -> Device)")->bytes, int64_t(65536));
        QCOMPARE(findSpan(*run, "Memcpy HtoD (Pageable -> Device)")->step, 6);
        QVERIFY(!findSpan(*run, "train.py(10): step")); // python_function skipped by default
        QCOMPARE(diagCount(*run, "python_function events skipped"), int64_t(1));
        QCOMPARE(run->buckets.size(), size_t(1));
        QCOMPARE(run->buckets[0].bytes, int64_t(4096));
        // Analyses: GPU rule → kernels only; overlap 200 µs of 400 µs.
        const auto breakdown = stepBreakdown(*run);
        QCOMPARE(breakdown.size(), size_t(2));
        QCOMPARE(breakdown[0].step, 5);
        QCOMPARE(breakdown[0].compute, TimeNs(400'000));
        QCOMPARE(breakdown[0].communication, TimeNs(400'000));
        QCOMPARE(breakdown[0].overlapped, TimeNs(200'000));
        QCOMPARE(breakdown[0].overlapRatio, 0.5);
        QCOMPARE(stats.commSpans, int64_t(2));
        QCOMPARE(stats.steps, int64_t(2));
    }

    void bareArrayFormAndGzipGiveTheSameRun()
    {
        const auto events = gpuRankEvents(1.7e12);
        auto a = importTraceBytes(arrayTrace(events));
        auto b = importTraceBytes(objectTrace(events));
        auto c = importTraceBytes(gzipBytes(objectTrace(events)));
        QVERIFY(a && b && c);
        QCOMPARE(a->spans.size(), b->spans.size());
        QCOMPARE(c->spans.size(), b->spans.size());
        QCOMPARE(a->spans.size(), size_t(8)); // python_function skipped
        for (size_t i = 0; i < a->spans.size(); ++i) {
            QCOMPARE(a->spans[i].start, c->spans[i].start);
            QCOMPARE(a->spans[i].kind, c->spans[i].kind);
        }
        QCOMPARE(a->ranks[0].rank, 0); // no distributedInfo: file order
        // The gzip file on disk, through the file path API.
        QTemporaryDir dir;
        const std::string gz = dir.filePath("rank0.json.gz").toStdString();
        QVERIFY(writeGzip(gz, objectTrace(events, kDist1)));
        QCOMPARE(*detectTraceFormat(gz), TraceFormat::KinetoJsonGz);
        auto d = importTracesToRun({gz});
        QVERIFY2(d.has_value(), d ? "" : d.error().message.c_str());
        QCOMPARE(d->spans.size(), size_t(8));
        QCOMPARE(d->ranks[0].rank, 1);
    }

    void relativeTimestampsWithBaseAndFractions()
    {
        // Newer Kineto: ts in µs relative to baseTimeNanoseconds, written after traceEvents,
        // with fractional µs.
        const std::vector<std::string> events = {
            xEvent("user_annotation", "ProfilerStep#0", 0.5, 100.25, "1", "1"),
            "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 1, \"tid\": 1, \"ts\": 12.3456, \"dur\": 0.0004}",
        };
        auto run = importTraceBytes(objectTrace(events, {}, "\"baseTimeNanoseconds\": 1700000000000000000"));
        QVERIFY(run);
        QCOMPARE(run->steps.size(), size_t(1));
        QCOMPARE(run->steps[0].start, TimeNs(1'700'000'000'000'000'500LL));
        QCOMPARE(run->steps[0].end, TimeNs(1'700'000'000'000'100'750LL));
        const Span* add = findSpan(*run, "aten::add");
        QVERIFY(add);
        QCOMPARE(add->start, TimeNs(1'700'000'000'000'012'346LL)); // 12.3456 µs rounds to 12346 ns
        QCOMPARE(add->duration(), TimeNs(0));
        QCOMPARE(add->step, 0);
        QCOMPARE(diagCount(*run, "relative timestamps"), int64_t(0));
        // Absolute µs with a fraction keeps sub-µs digits a double would lose.
        auto abs = importTraceBytes(
            arrayTrace({"{\"ph\": \"X\", \"name\": \"x\", \"pid\": 1, \"tid\": 1, \"ts\": 1700000000123456.789, \"dur\": 1}"}));
        QVERIFY(abs);
        QCOMPARE(abs->spans[0].start, TimeNs(1'700'000'000'123'456'789LL));
    }

    void twoRanksIntoOneRun()
    {
        QTemporaryDir dir;
        const std::string r0 = dir.filePath("r0.json").toStdString();
        const std::string r1 = dir.filePath("r1.json").toStdString();
        writeFile(r0, objectTrace(gpuRankEvents(1.7e12), "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 2}"));
        writeFile(r1, objectTrace(gpuRankEvents(1.7e12 + 30), kDist1));
        // Files in reverse order: ranks still come from distributedInfo.
        ImportStats stats;
        auto run = importTracesToRun({r1, r0}, {}, {}, &stats);
        QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
        QCOMPARE(run->ranks.size(), size_t(2));
        QCOMPARE(run->ranks[0].rank, 0);
        QCOMPARE(run->ranks[1].rank, 1);
        QCOMPARE(run->config.worldSize, 2);
        QCOMPARE(run->steps.size(), size_t(4));
        QCOMPARE(stats.ranks, 2);
        QCOMPARE(stats.lanes, int64_t(6));
        for (const Lane& l : run->lanes)
            QCOMPARE(l.id.v, static_cast<uint32_t>(&l - run->lanes.data()));
        // Stragglers/skew see both ranks' bucket 0 launches 30 µs apart.
        const auto report = stragglers(*run);
        QVERIFY(!report.skews.empty());
        QCOMPARE(report.skews[0].skew, TimeNs(30'000));
        QCOMPARE(report.skews[0].lateRank, 1);
        // The same rank twice is an error naming both files; --rank fixes it.
        auto dup = importTracesToRun({r1, r1});
        QVERIFY(!dup);
        QVERIFY(dup.error().message.find("both rank 1") != std::string::npos);
        ImportOptions options;
        options.rank = 4;
        options.worldSize = 8;
        auto forced = importTracesToRun({r1, r1}, options);
        QVERIFY(forced);
        QCOMPARE(forced->ranks[0].rank, 4);
        QCOMPARE(forced->ranks[1].rank, 5);
        QCOMPARE(forced->config.worldSize, 8);
    }

    void commByExternalId()
    {
        // A kernel with an unusual name is communication because its External id is the one of
        // a CPU op that carries collective metadata; bytes come from that op (512 Half = 1024 B).
        const std::vector<std::string> events = {
            xEvent("user_annotation", "ProfilerStep#1", 0, 1000, "1", "1"),
            xEvent("cpu_op", "c10d::allreduce_", 100, 30, "1", "1",
                   "\"External id\": 42, \"Collective name\": \"allreduce\", \"In msg nelems\": 512, \"dtype\": \"Half\""),
            xEvent("cpu_op", "aten::mm", 50, 30, "1", "1", "\"External id\": 43"),
            xEvent("kernel", "custom_ring_allreduce_kernel", 120, 300, "0", "9", "\"device\": 0, \"stream\": 9, \"External id\": 42"),
            xEvent("kernel", "sm80_gemm", 60, 100, "0", "7", "\"device\": 0, \"stream\": 7, \"External id\": 43"),
        };
        auto run = importTraceBytes(arrayTrace(events));
        QVERIFY(run);
        const Span* comm = findSpan(*run, "custom_ring_allreduce_kernel");
        QVERIFY(comm);
        QCOMPARE(comm->kind, SpanKind::CommKernel);
        QCOMPARE(comm->bytes, int64_t(1024));
        QCOMPARE(comm->bucket, 0);
        QCOMPARE(findSpan(*run, "sm80_gemm")->kind, SpanKind::Kernel);
        QCOMPARE(findSpan(*run, "c10d::allreduce_")->kind, SpanKind::Comm);
        QCOMPARE(findSpan(*run, "c10d::allreduce_")->bucket, kNoBucket); // kernels are the bucket family
    }

    void commByNameFallback()
    {
        const std::vector<std::string> events = {
            xEvent("user_annotation", "ProfilerStep#0", 0, 1000, "1", "1"),
            xEvent("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 100, 200, "0", "13"),
            xEvent("kernel", "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*)", 400, 50, "0", "13"),
            xEvent("kernel", "elementwise_kernel", 100, 100, "0", "7"),
        };
        auto run = importTraceBytes(arrayTrace(events));
        QVERIFY(run);
        QCOMPARE(countKind(*run, SpanKind::CommKernel), 2);
        QCOMPARE(countKind(*run, SpanKind::Kernel), 1);
        QCOMPARE(findSpan(*run, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)")->bucket, 0);
        QCOMPARE(findSpan(*run, "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*)")->bucket, kNoBucket);
        // GPU lanes by (pid, tid) when args carry no device/stream.
        int gpu = 0;
        for (const Lane& l : run->lanes)
            gpu += l.kind == LaneKind::GpuStream;
        QCOMPARE(gpu, 2);
        const auto b = stepBreakdown(*run);
        QCOMPARE(b.size(), size_t(1));
        QCOMPARE(b[0].communication, TimeNs(250'000));
        QCOMPARE(b[0].overlapped, TimeNs(100'000));
    }

    void glooCpuOnlyTrace()
    {
        // The legacy export of a CPU-only torch build (what Debian's torch 1.13 writes): a bare
        // array, no "cat", pid "CPU functions". c10d::allreduce_ enqueues on the main thread,
        // gloo:all_reduce runs on a worker thread; record_param_comms carries the size.
        auto ev = [](const std::string& name, double ts, double dur, int tid, const std::string& args = {}) {
            return xEvent("", name, ts, dur, "\"CPU functions\"", std::to_string(tid), args);
        };
        const std::vector<std::string> events = {
            ev("ProfilerStep#0", 0, 1000, 1),
            ev("DistributedDataParallel.forward", 10, 190, 1),
            ev("aten::mm", 300, 500, 1),
            ev("c10d::allreduce_", 400, 10, 1),
            ev("record_param_comms", 401, 5, 1, "\"In msg nelems\": 1000, \"dtype\": \"Float\", \"Collective name\": \"allreduce\""),
            ev("gloo:all_reduce", 410, 300, 2),
            ev("c10d::allreduce_", 810, 10, 1),
            ev("gloo:all_reduce", 820, 100, 3),
            ev("Optimizer.step#SGD.step", 930, 50, 1),
            ev("ProfilerStep#1", 1000, 1000, 1),
        };
        auto run = importTraceBytes(arrayTrace(events));
        QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
        QCOMPARE(run->config.device, std::string("cpu"));
        QCOMPARE(run->config.backend, std::string("gloo"));
        QCOMPARE(diagCount(*run, "relative timestamps"), int64_t(1)); // ts from the profiler start
        QCOMPARE(countKind(*run, SpanKind::Comm), 5);
        QCOMPARE(countKind(*run, SpanKind::Forward), 1);
        QCOMPARE(countKind(*run, SpanKind::Optimizer), 1);
        QCOMPARE(run->steps.size(), size_t(2));
        // Buckets: the gloo worker spans (most all-reduce time) numbered in order; the first one
        // borrows record_param_comms' 4000 bytes.
        std::vector<const Span*> gloo;
        for (const Span& s : run->spans)
            if (run->strings.text(s.name) == "gloo:all_reduce")
                gloo.push_back(&s);
        QCOMPARE(gloo.size(), size_t(2));
        std::sort(gloo.begin(), gloo.end(), [](auto a, auto b) { return a->start < b->start; });
        QCOMPARE(gloo[0]->bucket, 0);
        QCOMPARE(gloo[1]->bucket, 1);
        QCOMPARE(gloo[0]->bytes, int64_t(4000));
        QCOMPARE(findSpan(*run, "c10d::allreduce_")->bucket, kNoBucket);
        // Host rule: C = forward, mm, optimizer on thread 1 = [10,200] + [300,800] + [930,980];
        // M = [400,410]+[401,406]+[410,710]+[810,820]+[820,920] = [400,710] + [810,920].
        const auto b = stepBreakdown(*run);
        QCOMPARE(b.size(), size_t(2));
        QCOMPARE(b[0].compute, TimeNs((190 + 500 + 50) * 1000));
        QCOMPARE(b[0].communication, TimeNs((310 + 110) * 1000));
        QCOMPARE(b[0].overlapped, TimeNs(310 * 1000)); // [400,710] lies inside aten::mm
        QVERIFY(std::abs(b[0].overlapRatio - 310.0 / 420.0) < 1e-9);
        const auto buckets = bucketStats(*run);
        QCOMPARE(buckets.size(), size_t(2));
        QCOMPARE(buckets[0].bytes, int64_t(4000));
    }

    void beginEndPairs()
    {
        const std::vector<std::string> events = {
            "{\"ph\": \"B\", \"name\": \"outer\", \"pid\": 1, \"tid\": 1, \"ts\": 10}",
            "{\"ph\": \"B\", \"name\": \"inner\", \"pid\": 1, \"tid\": 1, \"ts\": 20}",
            "{\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": 30}",
            "{\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": 50}",
            "{\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": 60}",
            "{\"ph\": \"B\", \"name\": \"never ends\", \"pid\": 1, \"tid\": 2, \"ts\": 70}",
        };
        auto run = importTraceBytes(arrayTrace(events));
        QVERIFY(run);
        QCOMPARE(run->spans.size(), size_t(2));
        QCOMPARE(findSpan(*run, "outer")->duration(), TimeNs(40'000));
        QCOMPARE(findSpan(*run, "inner")->duration(), TimeNs(10'000));
        QCOMPARE(diagCount(*run, "unmatched B/E"), int64_t(2));
    }
};

QTEST_GUILESS_MAIN(TestKinetoImport)
#include "test_kineto_import.moc"
