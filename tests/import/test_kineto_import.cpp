// Kineto (torch.profiler) JSON import on small traces this test writes: both JSON forms, gzip,
// relative timestamps, two ranks, communication by metadata / External id / name fallback,
// CPU-only gloo traces, device work by its launching step (golden, in the manner of Perfetto's
// diff tests: a trace, a query, the numbers derived by hand), and the analyses on the imported
// run.
#include "trace_writer.h"
#include "test_support.h"

#include "lockstep/core/analysis.h"
#include "lockstep/import/import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

using namespace lockstep::core;
using namespace lockstep::testing;
namespace core = lockstep::core; // gtest's Test::Run hides core::Run inside TEST bodies

namespace {

using lockstep::test::TempDir;

int countKind(const core::Run& run, SpanKind kind)
{
    return static_cast<int>(std::count_if(run.spans.begin(), run.spans.end(), [&](const Span& s) { return s.kind == kind; }));
}

const Span* findSpan(const core::Run& run, const std::string& name)
{
    for (const Span& s : run.spans)
        if (run.strings.text(s.name) == name)
            return &s;
    return nullptr;
}

const Diagnostic* findDiag(const core::Run& run, const std::string& kind)
{
    for (const auto& d : run.diagnostics)
        if (d.kind == kind)
            return &d;
    return nullptr;
}
int64_t diagCount(const core::Run& run, const std::string& kind)
{
    const Diagnostic* d = findDiag(run, kind);
    return d ? d->count : 0;
}

// One GPU rank: step 5 = [1000, 2000] µs, step 6 = [2000, 3000] µs. Compute kernel on stream 7
// [1100, 1500], launched at 1100 (the ac2g flow with id = its correlation 1); NCCL all-reduce
// kernel (collective metadata) on stream 20 [1300, 1700], launched by record_param_comms
// (External id 12, at 1100). A copy on stream 7 [2100, 2150] launched by cudaMemcpyAsync at 2050
// (correlation 3, step 6); a memset [2200, 2210] with no launch record (counted, in no step).
std::vector<std::string> gpuRankEvents(double t0 = 0)
{
    return {
        xEvent("user_annotation", "ProfilerStep#5", t0 + 1000, 1000, "100", "100"),
        xEvent("user_annotation", "ProfilerStep#6", t0 + 2000, 1000, "100", "100"),
        xEvent("cpu_op", "aten::mm", t0 + 1010, 50, "100", "100", "\"External id\": 11"),
        xEvent("cpu_op", "record_param_comms", t0 + 1100, 20, "100", "100",
               "\"External id\": 12, \"Collective name\": \"allreduce\", \"In msg nelems\": 1024, "
               "\"Out msg nelems\": 1024, \"dtype\": \"Float\", \"Group size\": 2, \"Process Group Name\": \"0\""),
        xEvent("cuda_runtime", "cudaMemcpyAsync", t0 + 2050, 5, "100", "100", "\"correlation\": 3, \"External id\": 13"),
        xEvent("python_function", "train.py(10): step", t0 + 1000, 900, "100", "100"),
        xEvent("kernel", "void gemm_kernel<float>(float*)", t0 + 1100, 400, "0", "7",
               "\"device\": 0, \"stream\": 7, \"External id\": 11, \"correlation\": 1"),
        xEvent("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", t0 + 1300, 400, "0", "20",
               "\"device\": 0, \"stream\": 20, \"External id\": 12, \"Collective name\": \"allreduce\", "
               "\"In msg nelems\": 1024, \"Out msg nelems\": 1024, \"dtype\": \"Float\", \"Group size\": 2"),
        xEvent("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t0 + 2100, 50, "0", "7",
               "\"device\": 0, \"stream\": 7, \"bytes\": 65536, \"correlation\": 3"),
        xEvent("gpu_memset", "Memset (Device)", t0 + 2200, 10, "0", "7", "\"device\": 0, \"stream\": 7, \"bytes\": 128"),
        "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 100, \"tid\": 100, \"args\": {\"name\": \"python main\"}}",
        "{\"ph\": \"i\", \"cat\": \"Trace\", \"name\": \"Iteration Start: PyTorch Profiler\", \"pid\": 100, \"tid\": 100, \"ts\": 1000, \"s\": \"g\"}",
        "{\"ph\": \"s\", \"cat\": \"ac2g\", \"id\": 1, \"name\": \"ac2g\", \"pid\": 100, \"tid\": 100, \"ts\": "
            + std::to_string(static_cast<int64_t>(t0 + 1100)) + "}",
        "{\"ph\": \"f\", \"cat\": \"ac2g\", \"id\": 1, \"name\": \"ac2g\", \"pid\": 0, \"tid\": 7, \"ts\": "
            + std::to_string(static_cast<int64_t>(t0 + 1100)) + ", \"bp\": \"e\"}",
    };
}

const char* kDist1 = "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 1, \"world_size\": 2}";

} // namespace

TEST(KinetoImport, ObjectFormGpuRank)
{
    ImportStats stats;
    auto run = importTraceBytes(objectTrace(gpuRankEvents(1.7e12), kDist1), {}, &stats);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    EXPECT_EQ(run->config.source, "kineto");
    EXPECT_EQ(run->config.worldSize, 2);
    EXPECT_EQ(run->config.backend, "nccl");
    EXPECT_EQ(run->config.device, "cuda");
    ASSERT_EQ(run->ranks.size(), 1u);
    EXPECT_EQ(run->ranks[0].rank, 1);
    EXPECT_EQ(run->ranks[0].device, "cuda:0");
    // Lanes: one host thread (named from thread_name metadata), GPU streams 7 and 20.
    int host = 0, gpu = 0;
    for (const Lane& l : run->lanes) {
        EXPECT_EQ(l.rank, 1);
        if (l.kind == LaneKind::HostThread) {
            ++host;
            EXPECT_EQ(l.name, "python main");
            EXPECT_EQ(l.stream, 100);
        } else if (l.kind == LaneKind::GpuStream) {
            ++gpu;
            EXPECT_EQ(l.device, 0);
            EXPECT_TRUE(l.stream == 7 || l.stream == 20);
        }
    }
    EXPECT_EQ(host, 1);
    EXPECT_EQ(gpu, 2);
    // Steps from ProfilerStep#N, absolute µs → ns.
    ASSERT_EQ(run->steps.size(), 2u);
    EXPECT_EQ(run->steps[0].step, 5);
    EXPECT_EQ(run->steps[0].rank, 1);
    EXPECT_EQ(run->steps[0].start, 1'700'000'001'000'000LL);
    EXPECT_EQ(run->steps[0].end, 1'700'000'002'000'000LL);
    EXPECT_EQ(run->config.warmupSteps, 6); // the first step of the trace is warm-up: step 6 is steady
    // Kinds and bytes.
    EXPECT_EQ(countKind(*run, SpanKind::Kernel), 1);
    EXPECT_EQ(countKind(*run, SpanKind::CommKernel), 1);
    EXPECT_EQ(countKind(*run, SpanKind::Memcpy), 1);
    EXPECT_EQ(countKind(*run, SpanKind::Memset), 1);
    EXPECT_EQ(countKind(*run, SpanKind::Comm), 1); // record_param_comms
    EXPECT_EQ(findSpan(*run, "record_param_comms")->bytes, 4096);
    const Span* nccl = findSpan(*run, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)");
    ASSERT_TRUE(nccl);
    EXPECT_EQ(nccl->bytes, 4096);
    EXPECT_EQ(nccl->step, 5);  // launched by record_param_comms (External id 12) in step 5
    EXPECT_EQ(nccl->bucket, 0);
    EXPECT_EQ(findSpan(*run, "void gemm_kernel<float>(float*)")->step, 5); // the ac2g flow
    EXPECT_EQ(findSpan(*run, "Memcpy HtoD (Pageable -> Device)")->bytes, 65536);
    EXPECT_EQ(findSpan(*run, "Memcpy HtoD (Pageable -> Device)")->step, 6); // cudaMemcpyAsync at 2050
    EXPECT_EQ(findSpan(*run, "Memset (Device)")->step, kNoStep);
    const Diagnostic* orphan = findDiag(*run, "device span without launch record");
    ASSERT_TRUE(orphan);
    EXPECT_EQ(orphan->count, 1);
    EXPECT_NE(orphan->message.find("memset"), std::string::npos) << orphan->message;
    EXPECT_FALSE(findSpan(*run, "train.py(10): step")); // python_function skipped by default
    EXPECT_EQ(diagCount(*run, "python_function events skipped"), 1);
    ASSERT_EQ(run->buckets.size(), 1u);
    EXPECT_EQ(run->buckets[0].bytes, 4096);
    // Analyses: device rule, tiling windows. Step 5: W = [1100, 2100) µs (to step 6's first
    // device work, the copy); C = [1100, 1500] 400, M = [1300, 1700] 400, overlapped 200 (ratio
    // 0.5), compute-only 200, exposed 200, idle the rest.
    // Step 6 (the last): W = [2100, 3000) (its host step's end, later than its copy's): the copy
    // [2100, 2150) and, by time, the memset of no step [2200, 2210): memory-only 60 µs.
    const auto breakdown = stepBreakdown(*run);
    ASSERT_EQ(breakdown.size(), 2u);
    EXPECT_EQ(breakdown[0].step, 5);
    EXPECT_EQ(breakdown[0].window, StepWindow::Device);
    EXPECT_EQ(breakdown[0].wall, 1'000'000);
    EXPECT_EQ(breakdown[0].compute, 400'000);
    EXPECT_EQ(breakdown[0].communication, 400'000);
    EXPECT_EQ(breakdown[0].overlapped, 200'000);
    EXPECT_DOUBLE_EQ(breakdown[0].overlapRatio, 0.5);
    EXPECT_EQ(breakdown[1].wall, 900'000);
    EXPECT_EQ(breakdown[1].memoryOnly, 60'000);
    EXPECT_EQ(breakdown[1].compute, 0);
    EXPECT_EQ(stats.commSpans, 2);
    EXPECT_EQ(stats.steps, 2);
}

// Golden: CUDA synchronization records (Kineto's "cuda_sync" category: "Stream Sync", "Event
// Sync", "Context Sync", written on the device's pid and the stream's tid) are a stream waiting,
// not work, as newer HTA classifies them (neither compute nor communication). The trace above
// plus a "Stream Sync" on stream 7 over [1500, 1790] µs, launched by cudaStreamSynchronize
// (correlation 9) at 1500 in step 5. Counted as compute it would turn the exposed [1500, 1700]
// of the all-reduce into overlap (ratio 0.5 → 1.0).
// Expected: the same numbers as without it (step 5: W = 1000 µs, C = 400, M = 400, overlapped
// 200, ratio 0.5); the record drawn on its stream's lane (kind other), no host lane for it.
TEST(KinetoImport, GoldenCudaSyncIsAStreamWaitingNotWork)
{
    std::vector<std::string> events = gpuRankEvents(1.7e12);
    events.push_back(xEvent("cuda_runtime", "cudaStreamSynchronize", 1.7e12 + 1500, 290, "100", "100",
                            "\"correlation\": 9"));
    events.push_back(xEvent("cuda_sync", "Stream Sync", 1.7e12 + 1500, 290, "0", "7",
                            "\"device\": 0, \"stream\": 7, \"correlation\": 9"));
    auto run = importTraceBytes(objectTrace(events, kDist1), {});
    ASSERT_TRUE(run.has_value()) << run.error().message;
    int host = 0, gpu = 0;
    for (const Lane& l : run->lanes)
        (l.kind == LaneKind::HostThread ? host : gpu) += 1;
    EXPECT_EQ(host, 1); // not a "thread 7" on the GPU's pid
    EXPECT_EQ(gpu, 2);
    const Span* sync = findSpan(*run, "Stream Sync");
    ASSERT_TRUE(sync);
    EXPECT_EQ(sync->kind, SpanKind::Other);
    const Lane& lane = run->lanes[sync->lane.v];
    EXPECT_EQ(lane.kind, LaneKind::GpuStream);
    EXPECT_EQ(lane.stream, 7);
    const auto breakdown = stepBreakdown(*run);
    ASSERT_EQ(breakdown.size(), 2u);
    EXPECT_EQ(breakdown[0].wall, 1'000'000);
    EXPECT_EQ(breakdown[0].compute, 400'000);
    EXPECT_EQ(breakdown[0].communication, 400'000);
    EXPECT_EQ(breakdown[0].overlapped, 200'000);
    EXPECT_EQ(breakdown[0].exposed, 200'000);
    EXPECT_DOUBLE_EQ(breakdown[0].overlapRatio, 0.5);
}

// Golden: a GPU rank of a 2-rank job, the shape real traces have. Host thread (pid 100): steps
// 1 = [1000, 2000), 2 = [2000, 3000) µs. Runtime calls (cat cuda_runtime, "correlation") launch
// the device work; one kernel is linked by its ac2g flow only; one has no launch record; one is
// launched after the last step. GPU: stream 7 compute, stream 9 copies, stream 20 NCCL.
//
//   launched at   correlation  device work                         stream  step (by launch)
//   1100          11           gemm_a      [1150, 1600)            7       1
//   1200          12           memcpy HtoD [1250, 1300) 64 KiB     9       1
//   1800          13           gemm_b      [1900, 2300)            7       1 (outlives the step)
//   1860          14           nccl AR     [2000, 2400)            20      1
//   2100 (flow)   21           gemm_c      [2400, 2700)            7       2
//   2500          22           nccl AR     [2600, 2900)            20      2
//   2550          23           memset      [2650, 2660)            9       2
//   none          99           orphan      [3100, 3200)            7       - (no launch record)
//   3500          31           late        [3600, 3700)            7       - (outside every step)
//
// Windows tile (docs/design.md): step 1 runs from its first device work to step 2's first.
// Step 1: W = [1150, 2400) = 1250. C = [1150,1600) + [1900,2300) = 850; M = [2000,2400) = 400;
//   Mem = [1250,1300) = 50, under gemm_a. overlapped [2000,2300) = 300, exposed [2300,2400) =
//   100, compute-only 850 - 300 = 550, memory-only 0, idle [1600,1900) = 300:
//   550 + 300 + 100 + 0 + 300 = 1250. Overlap ratio 300 / 400 = 0.75.
//   (By host time the window [1000,2000) would hold gemm_a, the copy and 100 of gemm_b, and no
//   communication at all: ratio undefined.)
// Step 2 (the last): W = [2400, 3000) = 600, to its host step's end (later than its last device
//   work, 2900). C = 300, M = 300, overlapped [2600,2700) = 100, exposed 200, compute-only 200,
//   memset under both: memory-only 0, idle [2900,3000) = 100 (the GPU waiting for its host).
//   Ratio 100 / 300 = 1/3. The orphan and the late kernel lie after every window.
// Run (warm-up 0: both steps steady): overlap (300 + 100) / (400 + 300) = 4/7.
std::string goldenGpuTrace(int rank, double shift = 0)
{
    const double t0 = 1.7e12 + shift;
    auto rt = [&](double ts, int corr) {
        return xEvent("cuda_runtime", corr == 0 ? "cudaLaunchKernel" : "cudaLaunchKernel", t0 + ts, 5, "100", "100",
                      "\"correlation\": " + std::to_string(corr) + ", \"cbid\": 211");
    };
    auto k = [&](const std::string& cat, const std::string& name, double ts, double dur, int stream, int corr,
                 const std::string& extra = {}) {
        return xEvent(cat, name, t0 + ts, dur, "0", std::to_string(stream),
                      "\"device\": 0, \"stream\": " + std::to_string(stream) + ", \"correlation\": " + std::to_string(corr)
                          + extra);
    };
    const std::string nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)";
    std::vector<std::string> ev = {
        xEvent("user_annotation", "ProfilerStep#1", t0 + 1000, 1000, "100", "100"),
        xEvent("user_annotation", "ProfilerStep#2", t0 + 2000, 1000, "100", "100"),
        rt(1100, 11), rt(1200, 12), rt(1800, 13), rt(1860, 14), rt(2500, 22), rt(2550, 23), rt(3500, 31),
        "{\"ph\": \"s\", \"cat\": \"ac2g\", \"id\": 21, \"name\": \"ac2g\", \"pid\": 100, \"tid\": 100, \"ts\": "
            + std::to_string(static_cast<int64_t>(t0 + 2100)) + "}",
        k("kernel", "gemm_a", 1150, 450, 7, 11),
        k("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 1250, 50, 9, 12, ", \"bytes\": 65536"),
        k("kernel", "gemm_b", 1900, 400, 7, 13),
        k("kernel", nccl, 2000, 400, 20, 14),
        k("kernel", "gemm_c", 2400, 300, 7, 21),
        k("kernel", nccl, 2600, 300, 20, 22),
        k("gpu_memset", "Memset (Device)", 2650, 10, 9, 23, ", \"bytes\": 4096"),
        k("kernel", "orphan", 3100, 100, 7, 99),
        k("kernel", "late", 3600, 100, 7, 31),
    };
    return objectTrace(ev, "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(rank)
                               + ", \"world_size\": 2}");
}

TEST(KinetoImport, GoldenDeviceWorkByLaunchingStep)
{
    ImportOptions options;
    options.warmupSteps = 0;
    auto run = importTraceBytes(goldenGpuTrace(0), options);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    const auto a = analyze(*run);
    ASSERT_EQ(a.steps.size(), 2u);
    const StepBreakdown& s1 = a.steps[0];
    EXPECT_EQ(s1.window, StepWindow::Device);
    EXPECT_EQ(s1.start, 1'700'000'001'150'000LL);
    EXPECT_EQ(s1.wall, 1'250'000);
    EXPECT_EQ(s1.compute, 850'000);
    EXPECT_EQ(s1.communication, 400'000);
    EXPECT_EQ(s1.memory, 50'000);
    EXPECT_EQ(s1.overlapped, 300'000);
    EXPECT_EQ(s1.exposed, 100'000);
    EXPECT_EQ(s1.computeOnly, 550'000);
    EXPECT_EQ(s1.memoryOnly, 0);
    EXPECT_EQ(s1.idle, 300'000);
    EXPECT_DOUBLE_EQ(s1.overlapRatio, 0.75);
    const StepBreakdown& s2 = a.steps[1];
    EXPECT_EQ(s2.wall, 600'000);
    EXPECT_EQ(s2.overlapped, 100'000);
    EXPECT_EQ(s2.exposed, 200'000);
    EXPECT_EQ(s2.computeOnly, 200'000);
    EXPECT_EQ(s2.memoryOnly, 0);
    EXPECT_EQ(s2.idle, 100'000);
    EXPECT_DOUBLE_EQ(s2.overlapRatio, 1.0 / 3.0);
    EXPECT_DOUBLE_EQ(a.summary.overlapRatio, 4.0 / 7.0);
    // Nothing is dropped silently: one kernel without a launch record, one launched after the
    // last step; both are counted and belong to no step.
    EXPECT_EQ(diagCount(*run, "device span without launch record"), 1);
    EXPECT_EQ(diagCount(*run, "device span launched outside every step"), 1);
    EXPECT_EQ(findSpan(*run, "orphan")->step, kNoStep);
    EXPECT_EQ(findSpan(*run, "late")->step, kNoStep);
    EXPECT_EQ(a.summary.deviceSpansWithoutStep, 2);
    // Both all-reduce kernels are bucket 0 of their launching step.
    for (const Span& s : run->spans) {
        if (s.kind == SpanKind::CommKernel) {
            EXPECT_EQ(s.bucket, 0);
        }
    }
}

TEST(KinetoImport, GoldenTwoGpuRanksSkew)
{
    // The golden rank twice, rank 1 shifted 40 µs later: every launch of rank 1 is 40 µs late,
    // the kernels too. Both all-reduces: skew 40 µs, late rank 1, wait 40 µs (the one other
    // rank); the steps' windows are 1250 and 600 µs: mean step 925 µs, wait 40 / 925 = 4.3% <
    // 5%: rank 1 is the late rank in both steps, and no straggler.
    TempDir dir;
    writeFile(dir.file("r0.json"), goldenGpuTrace(0));
    writeFile(dir.file("r1.json"), goldenGpuTrace(1, 40));
    ImportOptions options;
    options.warmupSteps = 0;
    auto run = importTracesToRun({dir.file("r0.json"), dir.file("r1.json")}, options);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    const auto rep = stragglers(*run);
    ASSERT_EQ(rep.skews.size(), 2u);
    for (const BucketSkew& sk : rep.skews) {
        EXPECT_EQ(sk.skew, 40'000);
        EXPECT_EQ(sk.lateRank, 1);
        EXPECT_EQ(sk.waitCaused, 40'000);
    }
    EXPECT_EQ(rep.evidence.stepsLate, 2);
    EXPECT_NEAR(rep.evidence.waitFraction, 40.0 / 925.0, 1e-12);
    EXPECT_TRUE(rep.stragglers.empty());
}

// Golden: gloo over CUDA tensors (docs/design.md, "Categories"), the shape of the H100 traces in
// tests/data/gpu/ made small. Host pid 100: main thread 100, autograd thread 101, gloo worker
// 102; step 1 = [1000, 2000) µs; world 2. No record_param_comms.
//   1050 (100) cudaLaunchKernel -> gemm [1100, 1300)
//   c10d::allreduce_ on 101 [1300, 1320); inside it, 1305 (101) cudaMemcpyAsync -> DtoH
//     [1310, 1330) 4096 bytes: the bucket's staging copy
//   gloo:all_reduce on 102 [1320, 1600); inside it, 1590 (102) cudaMemcpyAsync -> HtoD
//     [1600, 1620) 4096 bytes: staging too
//   1700 (100) cudaMemcpyAsync -> HtoD [1700, 1710) 999 bytes: launched by no collective: memory
// Bucket 0's bytes: the staging copy's, 4096. Thread 102 only runs collectives: a comm lane.
// Step 1: W = [1100, 2000) (the last window ends at its host step's end) = 900.
//   C = gemm [1100,1300) + the training threads' runtime calls [1305,1310) and [1700,1705)
//   (the worker's call is the collective's: not compute); M = c10d ∪ DtoH ∪ gloo ∪ HtoD =
//   [1300,1620) = 320; Mem = [1700,1710).
//   overlapped [1305,1310) = 5, exposed 315, compute-only 200 + 5 = 205, memory-only
//   [1705,1710) = 5, idle 900 - 205 - 5 - 315 - 5 = 370.
TEST(KinetoImport, GoldenHostCollectiveOnAGpuRank)
{
    const double t0 = 1.7e12;
    auto rt = [&](double ts, const std::string& tid, int corr) {
        return xEvent("cuda_runtime", "cudaMemcpyAsync", t0 + ts, 5, "100", tid,
                      "\"correlation\": " + std::to_string(corr));
    };
    auto dev = [&](const std::string& cat, const std::string& name, double ts, double dur, int corr, int bytes) {
        return xEvent(cat, name, t0 + ts, dur, "0", "9",
                      "\"device\": 0, \"stream\": 9, \"correlation\": " + std::to_string(corr)
                          + (bytes > 0 ? ", \"bytes\": " + std::to_string(bytes) : std::string()));
    };
    const std::vector<std::string> ev = {
        xEvent("user_annotation", "ProfilerStep#1", t0 + 1000, 1000, "100", "100"),
        xEvent("cuda_runtime", "cudaLaunchKernel", t0 + 1050, 5, "100", "100", "\"correlation\": 1"),
        dev("kernel", "gemm", 1100, 200, 1, 0),
        xEvent("cpu_op", "c10d::allreduce_", t0 + 1300, 20, "100", "101"),
        rt(1305, "101", 2),
        dev("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 1310, 20, 2, 4096),
        xEvent("user_annotation", "gloo:all_reduce", t0 + 1320, 280, "100", "102"),
        rt(1590, "102", 3),
        dev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 1600, 20, 3, 4096),
        rt(1700, "100", 4),
        dev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 1700, 10, 4, 999),
    };
    ImportOptions options;
    options.warmupSteps = 0;
    auto run = importTraceBytes(
        objectTrace(ev, "\"distributedInfo\": {\"backend\": \"gloo\", \"rank\": 0, \"world_size\": 2}"), options);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    EXPECT_EQ(findSpan(*run, "Memcpy DtoH (Device -> Pinned)")->bucket, 0);
    EXPECT_EQ(findSpan(*run, "Memcpy HtoD (Pinned -> Device)")->bucket, 0);
    EXPECT_EQ(findSpan(*run, "Memcpy HtoD (Pageable -> Device)")->bucket, kNoBucket);
    EXPECT_EQ(findSpan(*run, "c10d::allreduce_")->bytes, 4096);
    ASSERT_EQ(run->buckets.size(), 1u);
    EXPECT_EQ(run->buckets[0].bytes, 4096);
    EXPECT_EQ(run->lanes[findSpan(*run, "gloo:all_reduce")->lane.v].kind, LaneKind::Comm);
    EXPECT_EQ(run->lanes[findSpan(*run, "c10d::allreduce_")->lane.v].kind, LaneKind::HostThread);
    EXPECT_EQ(diagCount(*run, "host collectives on a GPU rank"), 1);
    EXPECT_EQ(diagCount(*run, "collective staging copy"), 2);
    EXPECT_EQ(diagCount(*run, "bucket size from staging copy"), 1);
    const auto b = stepBreakdown(*run);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].window, StepWindow::Device);
    EXPECT_EQ(b[0].wall, 900'000);
    EXPECT_EQ(b[0].communication, 320'000);
    EXPECT_EQ(b[0].overlapped, 5'000);
    EXPECT_EQ(b[0].exposed, 315'000);
    EXPECT_EQ(b[0].computeOnly, 205'000);
    EXPECT_EQ(b[0].memoryOnly, 5'000);
    EXPECT_EQ(b[0].idle, 370'000);
    // The run index (details panel) counts the same spans.
    const RunIndex index(*run);
    const auto one = index.stepBreakdown(0, 1);
    ASSERT_TRUE(one.has_value());
    EXPECT_EQ(one->exposed, 315'000);
    EXPECT_EQ(one->idle, 370'000);
}

TEST(KinetoImport, BareArrayFormAndGzipGiveTheSameRun)
{
    const auto events = gpuRankEvents(1.7e12);
    auto a = importTraceBytes(arrayTrace(events));
    auto b = importTraceBytes(objectTrace(events));
    auto c = importTraceBytes(gzipBytes(objectTrace(events)));
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(a->spans.size(), b->spans.size());
    EXPECT_EQ(c->spans.size(), b->spans.size());
    EXPECT_EQ(a->spans.size(), 9u); // python_function skipped
    for (size_t i = 0; i < a->spans.size(); ++i) {
        EXPECT_EQ(a->spans[i].start, c->spans[i].start);
        EXPECT_EQ(a->spans[i].kind, c->spans[i].kind);
        EXPECT_EQ(a->spans[i].step, c->spans[i].step);
    }
    EXPECT_EQ(a->ranks[0].rank, 0); // no distributedInfo: file order
    // The gzip file on disk, through the file path API.
    TempDir dir;
    const std::string gz = dir.file("rank0.json.gz");
    ASSERT_TRUE(writeGzip(gz, objectTrace(events, kDist1)));
    EXPECT_EQ(*detectTraceFormat(gz), TraceFormat::KinetoJsonGz);
    auto d = importTracesToRun({gz});
    ASSERT_TRUE(d.has_value()) << d.error().message;
    EXPECT_EQ(d->spans.size(), 9u);
    EXPECT_EQ(d->ranks[0].rank, 1);
}

TEST(KinetoImport, RelativeTimestampsWithBaseAndFractions)
{
    // Newer Kineto: ts in µs relative to baseTimeNanoseconds, written after traceEvents,
    // with fractional µs. The runtime call and kernel are shifted alike: the kernel stays in step 0.
    const std::vector<std::string> events = {
        xEvent("user_annotation", "ProfilerStep#0", 0.5, 100.25, "1", "1"),
        "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 1, \"tid\": 1, \"ts\": 12.3456, \"dur\": 0.0004}",
        xEvent("cuda_runtime", "cudaLaunchKernel", 20, 1, "1", "1", "\"correlation\": 7"),
        xEvent("kernel", "add_kernel", 150, 10, "0", "7", "\"device\": 0, \"stream\": 7, \"correlation\": 7"),
    };
    auto run = importTraceBytes(objectTrace(events, {}, "\"baseTimeNanoseconds\": 1700000000000000000"));
    ASSERT_TRUE(run);
    ASSERT_EQ(run->steps.size(), 1u);
    EXPECT_EQ(run->steps[0].start, 1'700'000'000'000'000'500LL);
    EXPECT_EQ(run->steps[0].end, 1'700'000'000'000'100'750LL);
    const Span* add = findSpan(*run, "aten::add");
    ASSERT_TRUE(add);
    EXPECT_EQ(add->start, 1'700'000'000'000'012'346LL); // 12.3456 µs rounds to 12346 ns
    EXPECT_EQ(add->duration(), 0);
    EXPECT_EQ(add->step, 0);
    EXPECT_EQ(findSpan(*run, "add_kernel")->step, 0); // launched at 20 µs, runs after the step
    EXPECT_EQ(diagCount(*run, "relative timestamps"), 0);
    // Absolute µs with a fraction keeps sub-µs digits a double would lose.
    auto abs = importTraceBytes(
        arrayTrace({"{\"ph\": \"X\", \"name\": \"x\", \"pid\": 1, \"tid\": 1, \"ts\": 1700000000123456.789, \"dur\": 1}"}));
    ASSERT_TRUE(abs);
    EXPECT_EQ(abs->spans[0].start, 1'700'000'000'123'456'789LL);
}

TEST(KinetoImport, TwoRanksIntoOneRun)
{
    TempDir dir;
    const std::string r0 = dir.file("r0.json");
    const std::string r1 = dir.file("r1.json");
    writeFile(r0, objectTrace(gpuRankEvents(1.7e12), "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 2}"));
    writeFile(r1, objectTrace(gpuRankEvents(1.7e12 + 30), kDist1));
    // Files in reverse order: ranks still come from distributedInfo.
    ImportStats stats;
    auto run = importTracesToRun({r1, r0}, {}, {}, &stats);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    ASSERT_EQ(run->ranks.size(), 2u);
    EXPECT_EQ(run->ranks[0].rank, 0);
    EXPECT_EQ(run->ranks[1].rank, 1);
    EXPECT_EQ(run->config.worldSize, 2);
    EXPECT_EQ(run->steps.size(), 4u);
    EXPECT_EQ(stats.ranks, 2);
    EXPECT_EQ(stats.lanes, 6);
    for (const Lane& l : run->lanes)
        EXPECT_EQ(l.id.v, static_cast<uint32_t>(&l - run->lanes.data()));
    // Stragglers/skew see both ranks' bucket 0 launches 30 µs apart.
    const auto report = stragglers(*run);
    ASSERT_FALSE(report.skews.empty());
    EXPECT_EQ(report.skews[0].skew, 30'000);
    EXPECT_EQ(report.skews[0].lateRank, 1);
    // The same rank twice is an error naming both files; --rank fixes it.
    auto dup = importTracesToRun({r1, r1});
    ASSERT_FALSE(dup);
    EXPECT_NE(dup.error().message.find("both rank 1"), std::string::npos);
    ImportOptions options;
    options.rank = 4;
    options.worldSize = 8;
    auto forced = importTracesToRun({r1, r1}, options);
    ASSERT_TRUE(forced);
    EXPECT_EQ(forced->ranks[0].rank, 4);
    EXPECT_EQ(forced->ranks[1].rank, 5);
    EXPECT_EQ(forced->config.worldSize, 8);
}

TEST(KinetoImport, CommByExternalId)
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
    ASSERT_TRUE(run);
    const Span* comm = findSpan(*run, "custom_ring_allreduce_kernel");
    ASSERT_TRUE(comm);
    EXPECT_EQ(comm->kind, SpanKind::CommKernel);
    EXPECT_EQ(comm->bytes, 1024);
    EXPECT_EQ(comm->bucket, 0);
    EXPECT_EQ(comm->step, 1); // launched by c10d::allreduce_ (External id 42) in step 1
    EXPECT_EQ(findSpan(*run, "sm80_gemm")->kind, SpanKind::Kernel);
    EXPECT_EQ(findSpan(*run, "c10d::allreduce_")->kind, SpanKind::Comm);
    EXPECT_EQ(findSpan(*run, "c10d::allreduce_")->bucket, kNoBucket); // kernels are the bucket family
}

TEST(KinetoImport, CommByNameFallbackAndKernelsWithoutLaunchRecords)
{
    // No correlation, no External id: the NCCL kernels are found by name, but nothing says which
    // step launched the kernels: they belong to no step and are counted (3 kernels).
    const std::vector<std::string> events = {
        xEvent("user_annotation", "ProfilerStep#0", 0, 1000, "1", "1"),
        xEvent("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 100, 200, "0", "13"),
        xEvent("kernel", "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*)", 400, 50, "0", "13"),
        xEvent("kernel", "elementwise_kernel", 100, 100, "0", "7"),
    };
    auto run = importTraceBytes(arrayTrace(events));
    ASSERT_TRUE(run);
    EXPECT_EQ(countKind(*run, SpanKind::CommKernel), 2);
    EXPECT_EQ(countKind(*run, SpanKind::Kernel), 1);
    const Diagnostic* d = findDiag(*run, "device span without launch record");
    ASSERT_TRUE(d);
    EXPECT_EQ(d->count, 3);
    EXPECT_NE(d->message.find("comm_kernel × 2"), std::string::npos) << d->message;
    EXPECT_NE(d->message.find("kernel × 1"), std::string::npos) << d->message;
    // GPU lanes by (pid, tid) when args carry no device/stream.
    int gpu = 0;
    for (const Lane& l : run->lanes)
        gpu += l.kind == LaneKind::GpuStream;
    EXPECT_EQ(gpu, 2);
    const auto b = stepBreakdown(*run);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].window, StepWindow::NoDeviceWork);
}

TEST(KinetoImport, GlooCpuOnlyTrace)
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
    ImportOptions options;
    options.worldSize = 2; // one rank of a 2-rank job (a 1-rank run has no overlap ratio)
    auto run = importTraceBytes(arrayTrace(events), options);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    EXPECT_EQ(run->config.device, "cpu");
    EXPECT_EQ(run->config.backend, "gloo");
    EXPECT_EQ(diagCount(*run, "relative timestamps"), 1); // ts from the profiler start
    EXPECT_EQ(countKind(*run, SpanKind::Comm), 5);
    EXPECT_EQ(countKind(*run, SpanKind::Forward), 1);
    EXPECT_EQ(countKind(*run, SpanKind::Optimizer), 1);
    EXPECT_EQ(run->steps.size(), 2u);
    // Buckets: each c10d::allreduce_ (the launch) with the gloo:all_reduce that runs it (until
    // it completes), numbered in order; bucket 0's launch borrows record_param_comms' 4000
    // bytes; record_param_comms itself is no bucket's.
    auto named = [&](const std::string& name) {
        std::vector<const Span*> out;
        for (const Span& s : run->spans)
            if (run->strings.text(s.name) == name)
                out.push_back(&s);
        std::sort(out.begin(), out.end(), [](auto a, auto b) { return a->start < b->start; });
        return out;
    };
    const auto gloo = named("gloo:all_reduce"), c10d = named("c10d::allreduce_");
    ASSERT_EQ(gloo.size(), 2u);
    ASSERT_EQ(c10d.size(), 2u);
    EXPECT_EQ(c10d[0]->bucket, 0);
    EXPECT_EQ(gloo[0]->bucket, 0);
    EXPECT_EQ(c10d[1]->bucket, 1);
    EXPECT_EQ(gloo[1]->bucket, 1);
    EXPECT_EQ(c10d[0]->bytes, 4000);
    EXPECT_EQ(gloo[0]->bytes, 0);
    EXPECT_EQ(findSpan(*run, "record_param_comms")->bucket, kNoBucket);
    // Host rule: C = forward, mm, optimizer on thread 1 = [10,200] + [300,800] + [930,980];
    // M = [400,410]+[401,406]+[410,710]+[810,820]+[820,920] = [400,710] + [810,920].
    const auto b = stepBreakdown(*run);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[0].compute, (190 + 500 + 50) * 1000);
    EXPECT_EQ(b[0].communication, (310 + 110) * 1000);
    EXPECT_EQ(b[0].overlapped, 310 * 1000); // [400,710] lies inside aten::mm
    EXPECT_NEAR(b[0].overlapRatio, 310.0 / 420.0, 1e-9);
    // Bucket 0: launch 400, completion 710 (the gloo op's end): 310 µs; bucket 1: 810 -> 920.
    const auto buckets = bucketStats(*run);
    ASSERT_EQ(buckets.size(), 2u);
    EXPECT_EQ(buckets[0].bytes, 4000);
    EXPECT_EQ(buckets[0].launch, 400'000);
    EXPECT_EQ(buckets[0].duration, 310'000);
    EXPECT_EQ(buckets[1].launch, 810'000);
    EXPECT_EQ(buckets[1].duration, 110'000);
}

// Golden: the same rule on every rank for which spans are a bucket's all-reduce on a CPU (gloo)
// trace. Each all-reduce shows up twice: c10d::allreduce_ on the training thread (tid 1) is the
// call that launches it, gloo:all_reduce on a gloo worker thread runs it until it completes.
// The bucket's all-reduce is both of them: launch = the c10d op's start, completion = the gloo
// op's end, even where the call returned later (bucketStats: a bucket on two lanes is a call and
// the op that runs it). Two ranks of one job,
// legacy export (ts from each profiler's start, compared as if the profilers started together),
// steps 0 = [0, 1000), 1 = [1000, 2000) µs, two buckets per step; step 1 = step 0 + 1000.
//
//   rank 0 (events in time order, workers tid 2 then 3; its training thread stays in the call
//   after the collective is done, as the real rank 0 did):
//     b0: c10d [100, 500)  gloo [300, 450)   -> launch 100, completion 450, duration 350
//     b1: c10d [600, 900)  gloo [700, 850)   -> launch 600, completion 850, duration 250
//   rank 1 (workers' events written first, workers tid 3 then 2; its gloo ops wait for rank 0):
//     b0: c10d [200, 230)  gloo [210, 450)   -> launch 200, completion 450, duration 250
//     b1: c10d [640, 660)  gloo [650, 850)   -> launch 640, completion 850, duration 210
//   skew b0 = 200 - 100 = 100 µs, b1 = 640 - 600 = 40 µs, late rank 1, wait caused = skew (one
//   other rank); per step the late rank's wait is its largest, 100 µs of a 1000 µs step.
//
// The old rule chose one span name per rank by its total time: rank 0's c10d ops total 1400 µs
// against 600 for gloo (c10d chosen), rank 1's 100 against 880 (gloo chosen), so rank 1's
// buckets were its worker spans: launches 210 and 650, durations 240 and 200, skews 110 and
// 50 µs, comparing a training-thread call on rank 0 (durations 400 and 300: the call, not the
// collective) with a worker's run on rank 1.
std::vector<std::string> glooBucketRank(int rank)
{
    auto ev = [](const std::string& name, double ts, double dur, int tid) {
        return xEvent("", name, ts, dur, "\"CPU functions\"", std::to_string(tid));
    };
    std::vector<std::string> steps, main, workers;
    for (int s = 0; s < 2; ++s) {
        const double t = 1000.0 * s;
        steps.push_back(ev("ProfilerStep#" + std::to_string(s), t, 1000, 1));
        main.push_back(ev("aten::mm", t + 10, 80, 1));
        if (rank == 0) {
            main.push_back(ev("c10d::allreduce_", t + 100, 400, 1));
            main.push_back(ev("c10d::allreduce_", t + 600, 300, 1));
            workers.push_back(ev("gloo:all_reduce", t + 300, 150, 2));
            workers.push_back(ev("gloo:all_reduce", t + 700, 150, 3));
        } else {
            main.push_back(ev("c10d::allreduce_", t + 200, 30, 1));
            main.push_back(ev("c10d::allreduce_", t + 640, 20, 1));
            workers.push_back(ev("gloo:all_reduce", t + 210, 240, 3));
            workers.push_back(ev("gloo:all_reduce", t + 650, 200, 2));
        }
    }
    std::vector<std::string> out;
    if (rank == 0) {
        for (auto* part : {&steps, &main, &workers})
            out.insert(out.end(), part->begin(), part->end());
    } else {
        // Another order: worker events first, newest first; then the training thread's.
        out.assign(workers.rbegin(), workers.rend());
        out.insert(out.end(), main.rbegin(), main.rend());
        out.insert(out.end(), steps.begin(), steps.end());
    }
    return out;
}

TEST(KinetoImport, GoldenGlooBucketIsTheSameSpansOnEveryRank)
{
    TempDir dir;
    for (int r = 0; r < 2; ++r)
        writeFile(dir.file("r" + std::to_string(r) + ".json"),
                  objectTrace(glooBucketRank(r), "\"distributedInfo\": {\"backend\": \"gloo\", \"rank\": "
                                                     + std::to_string(r) + ", \"world_size\": 2}"));
    ImportOptions options;
    options.warmupSteps = 0;
    for (const bool reversed : {false, true}) {
        // File order must not matter either (names are interned in the order files are read;
        // the ranks come from distributedInfo).
        auto run = reversed ? importTracesToRun({dir.file("r1.json"), dir.file("r0.json")}, options)
                            : importTracesToRun({dir.file("r0.json"), dir.file("r1.json")}, options);
        ASSERT_TRUE(run.has_value()) << run.error().message;
        // Which spans carry a bucket: one c10d op and one gloo op per (rank, step, bucket).
        std::map<std::tuple<int, int, int>, std::vector<std::string>> names;
        for (const Span& s : run->spans)
            if (s.bucket >= 0)
                names[{run->lanes[s.lane.v].rank, s.step, s.bucket}].push_back(std::string(run->strings.text(s.name)));
        ASSERT_EQ(names.size(), 8u); // 2 ranks x 2 steps x 2 buckets
        for (auto& [key, n] : names) {
            std::sort(n.begin(), n.end());
            EXPECT_EQ(n, (std::vector<std::string>{"c10d::allreduce_", "gloo:all_reduce"}))
                << "rank " << std::get<0>(key) << " step " << std::get<1>(key) << " bucket " << std::get<2>(key);
        }
        const auto stats = bucketStats(*run);
        ASSERT_EQ(stats.size(), 8u);
        struct Want {
            TimeNs launch, duration;
        };
        const Want want[2][2] = {{{100, 350}, {600, 250}}, {{200, 250}, {640, 210}}}; // [rank][bucket], µs
        for (const BucketStat& b : stats) {
            const Want& w = want[b.rank][b.bucket];
            const TimeNs t0 = 1000'000LL * b.step;
            EXPECT_EQ(b.launch - t0, w.launch * 1000) << "rank " << b.rank << " step " << b.step << " bucket " << b.bucket;
            EXPECT_EQ(b.duration, w.duration * 1000) << "rank " << b.rank << " step " << b.step << " bucket " << b.bucket;
        }
        const auto rep = stragglers(*run);
        ASSERT_EQ(rep.skews.size(), 4u);
        for (const BucketSkew& sk : rep.skews) {
            EXPECT_EQ(sk.skew, sk.bucket == 0 ? 100'000 : 40'000) << "step " << sk.step << " bucket " << sk.bucket;
            EXPECT_EQ(sk.lateRank, 1);
            EXPECT_EQ(sk.waitCaused, sk.skew);
        }
        // The skews are what the trace says; but its timestamps count from each profiler's start,
        // so no straggler verdict rests on them (stragglers.cpp), and the evidence says why.
        EXPECT_FALSE(rep.evidence.applicable);
        EXPECT_NE(rep.evidence.notApplicable.find("clocks are not comparable"), std::string::npos);
        EXPECT_TRUE(rep.stragglers.empty());
    }
}

// Golden: Kineto dropped a gloo worker event (seen in a real torch 1.13 trace: the last step's
// gloo:all_reduce of rank 0 was missing). One rank of a 2-rank job, legacy export, steps
// 0 = [0, 1000), 1 = [1000, 2000) µs, c10d calls on tid 1, gloo ops on workers tid 2 and 3:
//   step 0: gloo [20, 60) on tid 2 before any call of the step: a run without its launch (its
//             call was dropped); no bucket's, counted once;
//           b0: c10d [100, 110)  gloo [120, 420)    -> launch 100, completion 420, duration 320
//           b1: c10d [500, 510)  gloo [520, 720)    -> launch 500, completion 720, duration 220
//   step 1: b0: c10d [1100, 1110) gloo [1120, 1420) -> launch 1100, duration 320
//           b1: c10d [1500, 1530), its gloo op dropped: the call alone is the bucket (as
//               documented above numberBuckets): launch 1500, completion = the call's return
//               1530, duration 30 (too short: the collective went on after the call returned),
//               counted once.
// The old code numbered the same buckets but said nothing: the 30 µs bucket looked real.
TEST(KinetoImport, GoldenGlooDroppedRunnerIsCounted)
{
    auto ev = [](const std::string& name, double ts, double dur, int tid) {
        return xEvent("", name, ts, dur, "\"CPU functions\"", std::to_string(tid));
    };
    const std::vector<std::string> events = {
        ev("ProfilerStep#0", 0, 1000, 1),
        ev("gloo:all_reduce", 20, 40, 2),
        ev("c10d::allreduce_", 100, 10, 1),
        ev("gloo:all_reduce", 120, 300, 2),
        ev("c10d::allreduce_", 500, 10, 1),
        ev("gloo:all_reduce", 520, 200, 3),
        ev("ProfilerStep#1", 1000, 1000, 1),
        ev("c10d::allreduce_", 1100, 10, 1),
        ev("gloo:all_reduce", 1120, 300, 2),
        ev("c10d::allreduce_", 1500, 30, 1),
    };
    ImportOptions options;
    options.worldSize = 2;
    options.warmupSteps = 0;
    auto run = importTraceBytes(arrayTrace(events), options);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    const Diagnostic* noRunner = findDiag(*run, "all-reduce launch without runner");
    ASSERT_NE(noRunner, nullptr);
    EXPECT_EQ(noRunner->count, 1);
    EXPECT_EQ(noRunner->severity, Severity::Warning);
    EXPECT_NE(noRunner->message.find("rank 0"), std::string::npos) << noRunner->message;
    EXPECT_NE(noRunner->message.find("too short"), std::string::npos) << noRunner->message;
    const Diagnostic* noLaunch = findDiag(*run, "all-reduce runner without launch");
    ASSERT_NE(noLaunch, nullptr);
    EXPECT_EQ(noLaunch->count, 1);
    EXPECT_EQ(diagCount(*run, "all-reduce pairing ambiguous"), 0);
    for (const Span& s : run->spans) {
        if (run->strings.text(s.name) == "gloo:all_reduce" && s.start == 20'000) {
            EXPECT_EQ(s.bucket, kNoBucket);
        }
    }
    const auto stats = bucketStats(*run);
    ASSERT_EQ(stats.size(), 4u);
    const TimeNs want[2][2][2] = {{{100, 320}, {500, 220}}, {{1100, 320}, {1500, 30}}}; // [step][bucket]: launch, duration µs
    for (const BucketStat& b : stats) {
        EXPECT_EQ(b.launch, want[b.step][b.bucket][0] * 1000) << "step " << b.step << " bucket " << b.bucket;
        EXPECT_EQ(b.duration, want[b.step][b.bucket][1] * 1000) << "step " << b.step << " bucket " << b.bucket;
    }
}

// Golden: two process groups on one rank (a newer torch trace: cpu_op events, each c10d call
// holds a record_param_comms that names its group). DDP all-reduces on group "0"; the script
// all-reduces a small tensor on group "1". Each gloo process group runs its own work queue on its
// own worker threads (tid 2: group 0's, tid 4: group 1's), so the runs start out of call order.
// Step 0 = [0, 1000) µs:
//   L0: c10d [100, 110) holding record_param_comms [102, 108) group "0", 1000 floats
//   L1: c10d [150, 160) holding record_param_comms [152, 158) group "1", 10 floats
//   R1: gloo [165, 185) on tid 4 (group 1's run)       R0: gloo [170, 470) on tid 2 (group 0's)
// Truth: b0 = L0 + R0: launch 100, completion 470, duration 370; b1 = L1 + R1: launch 150,
// completion 185, duration 35. First in first out across the groups (the old code) pairs R1
// with L0 and R0 with L1: durations 85 and 320, silently.
//  (a) runs that name their group ("Process Group Name" on the gloo op) pair within their group:
//      the truth, no diagnostic;
//  (b) runs that do not (what real gloo:all_reduce events are: they carry only their input
//      tensors): R1 starts while calls of both groups wait, so its pairing is ambiguous; it
//      takes the oldest waiting call (FIFO: durations 85 and 320) and the ambiguity is counted
//      once (R0 then finds only L1 waiting: no ambiguity).
TEST(KinetoImport, GoldenTwoProcessGroupsPairWithinTheirGroup)
{
    for (const bool runnersNameGroup : {true, false}) {
        auto op = [](const std::string& name, double ts, double dur, int tid, const std::string& args = {}) {
            return xEvent("cpu_op", name, ts, dur, "100", std::to_string(tid), args);
        };
        auto params = [](const char* group, int nelems) {
            return "\"Collective name\": \"allreduce\", \"In msg nelems\": " + std::to_string(nelems)
                + ", \"Out msg nelems\": " + std::to_string(nelems) + ", \"dtype\": \"Float\", \"Group size\": 2, "
                  "\"Process Group Name\": \"" + group + "\"";
        };
        auto runArgs = [&](const char* group) {
            return runnersNameGroup ? "\"Process Group Name\": \"" + std::string(group) + "\"" : std::string();
        };
        const std::vector<std::string> events = {
            xEvent("user_annotation", "ProfilerStep#0", 0, 1000, "100", "1"),
            op("c10d::allreduce_", 100, 10, 1),
            op("record_param_comms", 102, 6, 1, params("0", 1000)),
            op("c10d::allreduce_", 150, 10, 1),
            op("record_param_comms", 152, 6, 1, params("1", 10)),
            op("gloo:all_reduce", 165, 20, 4, runArgs("1")),
            op("gloo:all_reduce", 170, 300, 2, runArgs("0")),
        };
        ImportOptions options;
        options.worldSize = 2;
        options.warmupSteps = 0;
        auto run = importTraceBytes(
            objectTrace(events, "\"distributedInfo\": {\"backend\": \"gloo\", \"rank\": 1, \"world_size\": 2}"), options);
        ASSERT_TRUE(run.has_value()) << run.error().message;
        EXPECT_EQ(diagCount(*run, "all-reduce launch without runner"), 0);
        EXPECT_EQ(diagCount(*run, "all-reduce runner without launch"), 0);
        const auto stats = bucketStats(*run);
        ASSERT_EQ(stats.size(), 2u);
        EXPECT_EQ(stats[0].launch, 100'000);
        EXPECT_EQ(stats[1].launch, 150'000);
        EXPECT_EQ(stats[0].bytes, 4000);
        EXPECT_EQ(stats[1].bytes, 40);
        if (runnersNameGroup) {
            EXPECT_EQ(diagCount(*run, "all-reduce pairing ambiguous"), 0);
            EXPECT_EQ(stats[0].duration, 370'000);
            EXPECT_EQ(stats[1].duration, 35'000);
        } else {
            const Diagnostic* d = findDiag(*run, "all-reduce pairing ambiguous");
            ASSERT_NE(d, nullptr);
            EXPECT_EQ(d->count, 1);
            EXPECT_NE(d->message.find("rank 1"), std::string::npos) << d->message;
            EXPECT_EQ(stats[0].duration, 85'000);
            EXPECT_EQ(stats[1].duration, 320'000);
        }
    }
}

TEST(KinetoImport, BeginEndPairs)
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
    ASSERT_TRUE(run);
    EXPECT_EQ(run->spans.size(), 2u);
    EXPECT_EQ(findSpan(*run, "outer")->duration(), 40'000);
    EXPECT_EQ(findSpan(*run, "inner")->duration(), 10'000);
    EXPECT_EQ(diagCount(*run, "unmatched B/E"), 2);
}

TEST(KinetoImport, WarmupIsTheFirstNStepsOfTheTrace)
{
    // Steps numbered 7, 9, 10, 12 (a profiler schedule that skipped some): --warmup 2 leaves out
    // 7 and 9, so the first steady step is 10; --warmup 4 leaves no steady step (the report says
    // so and uses all four); the default leaves out the first.
    std::vector<std::string> events;
    int k = 0;
    for (int step : {7, 9, 10, 12})
        events.push_back(xEvent("user_annotation", "ProfilerStep#" + std::to_string(step), 1000.0 * k++, 1000, "1", "1"));
    ImportOptions two;
    two.warmupSteps = 2;
    auto run = importTraceBytes(arrayTrace(events), two);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->config.warmupSteps, 10);
    EXPECT_EQ(steadySteps(*run).steps, (std::vector<int32_t>{10, 12}));
    ImportOptions four;
    four.warmupSteps = 4;
    run = importTraceBytes(arrayTrace(events), four);
    ASSERT_TRUE(run);
    const SteadySteps s = steadySteps(*run);
    EXPECT_TRUE(s.fallback);
    EXPECT_EQ(s.steps.size(), 4u);
    run = importTraceBytes(arrayTrace(events));
    EXPECT_EQ(steadySteps(*run).steps, (std::vector<int32_t>{9, 10, 12}));
}
