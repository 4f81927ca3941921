// bench_import: generates a realistic torch.profiler (Kineto) trace of about 1 GB in /tmp
// (CPU ops with args, runtime calls, kernels with launch args, memcpy, ProfilerStep#N, NCCL
// kernels and record_param_comms with collective metadata, flow events), imports it into a run
// database in a child process, and prints throughput and the child's peak RSS:
//   file_mb: N MB   import_s: S s   import_mb_per_s: R MB/s   import_peak_rss_mb: P MB
// Usage: bench_import [SIZE_MB=1024] [--gzip] [--keep]
//
// Many files in (issue 31): `--many [N=256]` generates N rank traces of `--file-mb M` (default 20)
// MB each in /tmp (or `--dir D`, where files already there of the size are reused), imports
// them into one run with `lockstep import`'s parallel path (`--jobs J`, default one per hardware
// thread) in a child process, and prints import_many_files, import_many_mb, import_many_s,
// import_many_mb_per_s, import_many_mb_per_s_per_core (per parsing thread),
// import_many_mb_per_cpu_s (per second of CPU the import used) and import_many_peak_rss_mb.
// Those are the parse and write alone: the run's stored summaries, which `lockstep import`
// computes at the end (a reload and analysis of the written file), are left out of the import
// (ImportOptions::storeSummaries = false) and timed after it on their own:
// import_many_summaries_s and import_many_summaries_cpu_s; import_many_total_mb_per_cpu_s is
// the rate of the whole `lockstep import` (parse, write and summaries). import_many_peak_rss_mb
// is the peak before the summaries, import_many_summaries_peak_rss_mb the peak with them (they
// load the whole run).
#include "../bench_child.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/summary_store.h"
#include "lockstep/import/import.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

namespace {

struct Out {
    FILE* f = nullptr;
    gzFile gz = nullptr;
    int64_t bytes = 0;
    void write(const char* s, size_t n)
    {
        if (gz)
            gzwrite(gz, s, static_cast<unsigned>(n));
        else
            std::fwrite(s, 1, n, f);
        bytes += static_cast<int64_t>(n);
    }
};

// Writes events until the file reaches `targetBytes`. Rough mix per step, like a DDP step of a
// mid-size model on one GPU: ~40 % cpu_op, ~25 % cuda_runtime, ~25 % kernel, flows, a few
// NCCL all-reduces with their record_param_comms, a memcpy.
int64_t generate(Out& out, int64_t targetBytes, int rank = 0, int worldSize = 8)
{
    char buf[4096];
    const int headBytes = std::snprintf(buf, sizeof buf,
                                        "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\"id\": 0, \"name\": \"NVIDIA H100\", "
                                        "\"totalGlobalMem\": 85000000000}\n  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %d, "
                                        "\"world_size\": %d},\n  \"traceEvents\": [\n",
                                        rank, worldSize);
    out.write(buf, static_cast<size_t>(headBytes));
    const int64_t base = 1'700'000'000'000'000; // µs since the epoch
    int64_t t = 0;                               // ns since base
    int64_t ext = 1, corr = 1;
    int64_t events = 0;
    bool first = true;
    auto emit = [&](int n) {
        if (!first)
            out.write(",\n", 2);
        first = false;
        out.write(buf, static_cast<size_t>(n));
        ++events;
    };
    auto us = [&](int64_t ns, char* dst) { // "1700000000123456.789"
        return std::snprintf(dst, 40, "%lld.%03lld", static_cast<long long>(base + ns / 1000), static_cast<long long>(ns % 1000));
    };
    static const char* kOps[] = {"aten::linear", "aten::addmm", "aten::relu", "aten::add_", "aten::mul", "aten::copy_",
                                 "aten::empty", "aten::t", "aten::view", "aten::layer_norm", "aten::softmax", "aten::matmul"};
    static const char* kKernels[] = {
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
        "ampere_sgemm_128x64_tn"};
    char ts[48], ts2[48];
    int step = 0;
    while (out.bytes < targetBytes) {
        const int64_t stepStart = t;
        const int64_t stepLen = 40'000'000; // 40 ms
        us(t, ts);
        char dur[48];
        std::snprintf(dur, sizeof dur, "%lld.%03lld", static_cast<long long>(stepLen / 1000), static_cast<long long>(stepLen % 1000));
        emit(std::snprintf(buf, sizeof buf,
                           "  {\n    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%d\", \"pid\": 4242, \"tid\": 4242,\n"
                           "    \"ts\": %s, \"dur\": %s,\n    \"args\": {\n      \"External id\": %lld\n    }\n  }",
                           step, ts, dur, static_cast<long long>(ext++)));
        t += 5000;
        for (int i = 0; i < 600 && t < stepStart + stepLen - 2'000'000; ++i) {
            // CPU op → runtime launch → kernel (+ flow pair).
            const char* op = kOps[i % 12];
            us(t, ts);
            emit(std::snprintf(buf, sizeof buf,
                               "  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 4242, \"tid\": 4242,\n"
                               "    \"ts\": %s, \"dur\": 21.318,\n    \"args\": {\n      \"External id\": %lld,\"Record function id\": 0, "
                               "\"Sequence number\": %lld, \"Fwd thread id\": 0, \"Ev Idx\": %lld, \"Input Dims\": [[512, 1024], [1024, 1024], []], "
                               "\"Input type\": [\"float\", \"float\", \"\"]\n    }\n  }",
                               op, ts, static_cast<long long>(ext), static_cast<long long>(ext * 3), static_cast<long long>(events)));
            us(t + 3000, ts);
            emit(std::snprintf(buf, sizeof buf,
                               "  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 4242, \"tid\": 4242,\n"
                               "    \"ts\": %s, \"dur\": 6.084,\n    \"args\": {\n      \"External id\": %lld, \"cbid\": 211, \"correlation\": %lld\n    }\n  }",
                               ts, static_cast<long long>(ext), static_cast<long long>(corr)));
            us(t + 3500, ts);
            emit(std::snprintf(buf, sizeof buf,
                               "  {\n    \"ph\": \"s\", \"id\": %lld, \"pid\": 4242, \"tid\": 4242, \"ts\": %s, \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }",
                               static_cast<long long>(corr), ts));
            us(t + 8000, ts);
            emit(std::snprintf(buf, sizeof buf,
                               "  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7,\n"
                               "    \"ts\": %s, \"dur\": 48.129,\n    \"args\": {\n      \"External id\": %lld,\n      \"queued\": 0, \"device\": 0, "
                               "\"context\": 1,\n      \"stream\": 7, \"correlation\": %lld,\n      \"registers per thread\": 232,\n      "
                               "\"shared memory\": 49152,\n      \"blocks per SM\": 1.641975,\n      \"warps per SM\": 13.135803,\n      "
                               "\"grid\": [133, 1, 1],\n      \"block\": [256, 1, 1],\n      \"est. achieved occupancy %%\": 20\n    }\n  }",
                               kKernels[i % 4], ts, static_cast<long long>(ext), static_cast<long long>(corr)));
            emit(std::snprintf(buf, sizeof buf,
                               "  {\n    \"ph\": \"f\", \"id\": %lld, \"pid\": 0, \"tid\": 7, \"ts\": %s, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }",
                               static_cast<long long>(corr), ts));
            ++ext;
            ++corr;
            t += 60'000;
            if (i % 100 == 99) {
                // A bucket all-reduce: c10d op with record_param_comms metadata, NCCL kernel.
                us(t, ts);
                us(t + 2000, ts2);
                emit(std::snprintf(buf, sizeof buf,
                                   "  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 4242, \"tid\": 4242,\n"
                                   "    \"ts\": %s, \"dur\": 35.5,\n    \"args\": {\n      \"External id\": %lld, \"Collective name\": \"allreduce\", "
                                   "\"dtype\": \"Float\", \"In msg nelems\": 6553600, \"Out msg nelems\": 6553600, \"In split size\": \"[]\", "
                                   "\"Out split size\": \"[]\", \"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\", "
                                   "\"Process Group Ranks\": \"[0, 1, 2, 3, 4, 5, 6, 7]\", \"Group size\": 8, \"Rank\": 0\n    }\n  }",
                                   ts, static_cast<long long>(ext)));
                emit(std::snprintf(buf, sizeof buf,
                                   "  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)\", \"pid\": 0, \"tid\": 20,\n"
                                   "    \"ts\": %s, \"dur\": 1500.25,\n    \"args\": {\n      \"External id\": %lld, \"queued\": 0, \"device\": 0, \"context\": 1, "
                                   "\"stream\": 20, \"correlation\": %lld, \"In msg nelems\": 6553600, \"Out msg nelems\": 6553600, \"Group size\": 8, "
                                   "\"dtype\": \"Float\", \"Collective name\": \"allreduce\"\n    }\n  }",
                                   ts2, static_cast<long long>(ext), static_cast<long long>(corr)));
                ++ext;
                ++corr;
            }
        }
        us(t, ts);
        emit(std::snprintf(buf, sizeof buf,
                           "  {\n    \"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy DtoH (Device -> Pinned)\", \"pid\": 0, \"tid\": 7,\n"
                           "    \"ts\": %s, \"dur\": 3.2,\n    \"args\": {\n      \"External id\": %lld, \"device\": 0, \"context\": 1, \"stream\": 7, "
                           "\"correlation\": %lld, \"bytes\": 4, \"memory bandwidth (GB/s)\": 0.0013\n    }\n  }",
                           ts, static_cast<long long>(ext++), static_cast<long long>(corr++)));
        t = stepStart + stepLen;
        ++step;
    }
    const char* tail = "\n  ],\n  \"traceName\": \"/tmp/bench_trace.json\",\n  \"displayTimeUnit\": \"ms\"\n}\n";
    out.write(tail, std::strlen(tail));
    return events;
}

// The import of `paths` (run in a child process by runInChild, so that its peak RSS is the
// import's alone): "ok seconds rssKb spans cpuSeconds summarySeconds summaryCpuSeconds" or
// "error message", and the exit code. The summaries are stored after the import, timed apart;
// rssKb is the peak before them, and the line ends with the peak after them.
std::pair<std::string, int> importInChild(const std::vector<std::string>& paths, const std::string& db, int jobs)
{
    std::filesystem::remove(db);
    lockstep::core::ImportOptions options;
    options.jobs = jobs;
    options.storeSummaries = false; // timed below, on their own
    auto cpuNow = [] {
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
             + double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    };
    const double cpu0 = cpuNow();
    const auto t0 = std::chrono::steady_clock::now();
    auto stats = lockstep::core::importTraces(paths, db, options);
    const auto t1 = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    const double cpu = cpuNow() - cpu0;
    if (!stats)
        return {"error " + stats.error().message + "\n", 2};
    const long long importRssKb = lockstep::bench::peakRssKb(); // before the summaries' reload
    auto stored = lockstep::core::storeSummaries(db);
    const double summaryS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const double summaryCpu = cpuNow() - cpu0 - cpu;
    if (!stored)
        return {"error storing summaries: " + stored.error().message + "\n", 2};
    char msg[512];
    std::snprintf(msg, sizeof msg, "ok %.4f %lld %lld %.4f %.4f %.4f %lld\n", s, importRssKb, static_cast<long long>(stats->spans), cpu,
                  summaryS, summaryCpu, static_cast<long long>(lockstep::bench::peakRssKb()));
    return {msg, 0};
}

// Many files in: `files` rank traces of about `fileMb` MB each (rank i of a world of `files`),
// imported into one run with `jobs` parsing threads (0: one per hardware thread).
int manyFiles(int files, int64_t fileMb, int jobs, bool keep, const std::string& dirArg)
{
    const std::string dir = !dirArg.empty() ? dirArg : "/tmp/lockstep_bench_many_" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    std::vector<std::string> paths;
    int64_t bytes = 0;
    const auto g0 = std::chrono::steady_clock::now();
    for (int r = 0; r < files; ++r) {
        paths.push_back(dir + "/rank-" + std::to_string(r) + ".json");
        std::error_code ec;
        if (std::filesystem::file_size(paths.back(), ec) >= static_cast<uintmax_t>(fileMb << 20) && !ec) {
            bytes += static_cast<int64_t>(std::filesystem::file_size(paths.back()));
            continue; // kept from an earlier run (--dir): the generator is deterministic
        }
        Out out;
        out.f = std::fopen(paths.back().c_str(), "wb");
        if (!out.f) {
            std::fprintf(stderr, "cannot write %s\n", paths.back().c_str());
            return 1;
        }
        generate(out, fileMb << 20, r, files);
        std::fclose(out.f);
        bytes += out.bytes;
    }
    const double genS = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
    const double mb = static_cast<double>(bytes) / (1 << 20);
    const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
    const int threads = std::min(files, jobs > 0 ? jobs : static_cast<int>(hardware));
    std::printf("import_many_files: %d\n", files);
    std::printf("import_many_mb: %.1f MB\n", mb);
    std::printf("import_many_generate_s: %.2f s\n", genS);
    std::printf("import_many_jobs: %d\n", threads);
    std::fflush(stdout);
    const std::string db = dir + "/imported.db";
    const auto [msg, status] = lockstep::bench::runInChild([&] { return importInChild(paths, db, jobs); });
    const double dbMb = static_cast<double>(std::filesystem::exists(db) ? std::filesystem::file_size(db) : 0) / (1 << 20);
    if (!keep)
        std::filesystem::remove_all(dir);
    double seconds = 0, cpu = 0, summaryS = 0, summaryCpu = 0;
    long long rssKb = 0, spans = 0, summaryRssKb = 0;
    if (std::sscanf(msg.c_str(), "ok %lf %lld %lld %lf %lf %lf %lld", &seconds, &rssKb, &spans, &cpu, &summaryS, &summaryCpu,
                    &summaryRssKb) != 7) {
        std::fprintf(stderr, "import failed: %s (status %d)\n", msg.c_str(), status);
        return 1;
    }
    std::printf("import_many_spans: %lld\n", spans);
    std::printf("import_many_db_mb: %.1f MB\n", dbMb);
    std::printf("import_many_s: %.2f s\n", seconds);
    std::printf("import_many_cpu_s: %.2f s\n", cpu);
    std::printf("import_many_mb_per_s: %.1f MB/s\n", mb / seconds);
    std::printf("import_many_mb_per_s_per_core: %.1f MB/s\n", mb / seconds / threads);
    std::printf("import_many_mb_per_cpu_s: %.1f MB/s\n", mb / cpu);
    std::printf("import_many_summaries_s: %.2f s\n", summaryS);
    std::printf("import_many_summaries_cpu_s: %.2f s\n", summaryCpu);
    std::printf("import_many_total_mb_per_cpu_s: %.1f MB/s\n", mb / (cpu + summaryCpu));
    std::printf("import_many_peak_rss_mb: %.1f MB\n", rssKb / 1024.0);
    std::printf("import_many_summaries_peak_rss_mb: %.1f MB\n", summaryRssKb / 1024.0);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    int64_t sizeMb = 1024;
    bool gzip = false, keep = false;
    int many = 0, jobs = 0;
    int64_t manyFileMb = 20;
    std::string dir;
    for (int i = 1; i < argc; ++i) {
        const bool hasValue = i + 1 < argc;
        if (std::strcmp(argv[i], "--gzip") == 0)
            gzip = true;
        else if (std::strcmp(argv[i], "--keep") == 0)
            keep = true;
        else if (std::strcmp(argv[i], "--many") == 0)
            many = hasValue && argv[i + 1][0] != '-' ? std::atoi(argv[++i]) : 256;
        else if (std::strcmp(argv[i], "--file-mb") == 0 && hasValue)
            manyFileMb = std::atoll(argv[++i]);
        else if (std::strcmp(argv[i], "--jobs") == 0 && hasValue)
            jobs = std::atoi(argv[++i]);
        else if (std::strcmp(argv[i], "--dir") == 0 && hasValue)
            dir = argv[++i];
        else
            sizeMb = std::atoll(argv[i]);
    }
    if (many > 0)
        return manyFiles(many, manyFileMb, jobs, keep, dir);
    const std::string trace = std::string("/tmp/lockstep_bench_trace_") + std::to_string(getpid()) + (gzip ? ".json.gz" : ".json");
    const std::string db = std::string("/tmp/lockstep_bench_import_") + std::to_string(getpid()) + ".db";
    Out out;
    if (gzip)
        out.gz = gzopen(trace.c_str(), "wb1");
    else
        out.f = std::fopen(trace.c_str(), "wb");
    if (!out.f && !out.gz) {
        std::fprintf(stderr, "cannot write %s\n", trace.c_str());
        return 1;
    }
    const auto g0 = std::chrono::steady_clock::now();
    const int64_t events = generate(out, sizeMb << 20);
    if (out.gz)
        gzclose(out.gz);
    else
        std::fclose(out.f);
    const double genS = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
    const double fileMb = static_cast<double>(std::filesystem::file_size(trace)) / (1 << 20);
    const double jsonMb = static_cast<double>(out.bytes) / (1 << 20);
    std::printf("file_mb: %.1f MB\n", fileMb);
    if (gzip)
        std::printf("json_mb: %.1f MB\n", jsonMb);
    std::printf("events: %lld\n", static_cast<long long>(events));
    std::printf("generate_s: %.2f s\n", genS);
    std::fflush(stdout);

    // The import runs in a child so that its peak RSS (VmHWM) is the import's alone.
    const auto [msg, status] = lockstep::bench::runInChild([&]() -> std::pair<std::string, int> {
        std::filesystem::remove(db);
        const auto t0 = std::chrono::steady_clock::now();
        // importTraces() is importTracesToRun() + saveRun(); called apart to time both phases.
        lockstep::core::ImportStats stats;
        auto run = lockstep::core::importTracesToRun({trace}, {}, {}, &stats);
        const double parseS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        lockstep::core::Status saved;
        if (run)
            saved = lockstep::core::saveRun(*run, db);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!run || !saved)
            return {"error " + (!run ? run.error() : saved.error()).message + "\n", 2};
        char line[512];
        std::snprintf(line, sizeof line, "ok %.4f %lld %lld %lld %.4f\n", s, static_cast<long long>(lockstep::bench::peakRssKb()),
                      static_cast<long long>(stats.spans), static_cast<long long>(stats.commSpans), parseS);
        return {line, 0};
    });
    if (!keep) {
        std::filesystem::remove(trace);
        std::filesystem::remove(db);
        std::filesystem::remove(db + "-wal");
        std::filesystem::remove(db + "-shm");
    }
    double seconds = 0, parseS = 0;
    long long rssKb = 0, spans = 0, comm = 0;
    if (std::sscanf(msg.c_str(), "ok %lf %lld %lld %lld %lf", &seconds, &rssKb, &spans, &comm, &parseS) != 5) {
        std::fprintf(stderr, "import failed: %s (status %d)\n", msg.c_str(), status);
        return 1;
    }
    std::printf("spans: %lld\n", spans);
    std::printf("comm_spans: %lld\n", comm);
    std::printf("import_parse_s: %.2f s\n", parseS);
    std::printf("import_save_s: %.2f s\n", seconds - parseS);
    std::printf("import_s: %.2f s\n", seconds);
    std::printf("import_mb_per_s: %.1f MB/s\n", (gzip ? jsonMb : fileMb) / seconds);
    std::printf("import_peak_rss_mb: %.1f MB\n", rssKb / 1024.0);
    std::printf("import_peak_rss_per_file: %.2f x\n", rssKb / 1024.0 / fileMb);
    return 0;
}
