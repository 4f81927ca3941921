// The importer API: detects each file's format from its content, parses it into a RankTrace,
// assembles the ranks into one Run (global lanes, steps, bucket numbering, diagnostics) and
// saves it through core's writer.
#include "import_internal.h"
#include "lockstep/core/run_db.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace lockstep::core {

using namespace detail;

const char* traceFormatName(TraceFormat format)
{
    switch (format) {
    case TraceFormat::KinetoJson: return "kineto-json";
    case TraceFormat::KinetoJsonGz: return "kineto-json-gzip";
    case TraceFormat::NsysSqlite: return "nsys-sqlite";
    case TraceFormat::Unknown: break;
    }
    return "unknown";
}

TraceFormat detectTraceFormat(std::string_view b)
{
    if (b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0x1f && static_cast<unsigned char>(b[1]) == 0x8b)
        return TraceFormat::KinetoJsonGz;
    if (b.size() >= 16 && std::memcmp(b.data(), "SQLite format 3\0", 16) == 0)
        return TraceFormat::NsysSqlite;
    size_t i = 0;
    if (b.size() >= 3 && std::memcmp(b.data(), "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    while (i < b.size() && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t'))
        ++i;
    if (i < b.size() && (b[i] == '{' || b[i] == '['))
        return TraceFormat::KinetoJson;
    return TraceFormat::Unknown;
}

Result<TraceFormat> detectTraceFormat(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        return fail("no such file: " + path);
    if (!std::filesystem::is_regular_file(path, ec))
        return fail(path + " is not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return fail("cannot open " + path);
    char head[4096];
    in.read(head, sizeof head);
    return detectTraceFormat(std::string_view(head, static_cast<size_t>(in.gcount())));
}

namespace {

std::string unknownFormatMessage(const std::string& what)
{
    return what + " is not a trace Lockstep can import: expected torch.profiler (Kineto) Chrome-trace JSON "
                  "(plain or gzip) or an Nsight Systems SQLite export";
}

Status parseFile(const std::string& path, const ImportOptions& options, Interner& strings, RankTrace& out,
                 const ProgressFn& progress)
{
    auto format = detectTraceFormat(path);
    if (!format)
        return std::unexpected(format.error());
    switch (*format) {
    case TraceFormat::KinetoJson:
    case TraceFormat::KinetoJsonGz: {
        auto source = openFileSource(path, *format == TraceFormat::KinetoJsonGz);
        if (!source)
            return std::unexpected(source.error());
        return parseKineto(**source, options, strings, out, progress);
    }
    case TraceFormat::NsysSqlite: return parseNsysFile(path, options, strings, out);
    case TraceFormat::Unknown: break;
    }
    return fail(unknownFormatMessage(path));
}

// Which step a span belongs to. Host spans: the step whose window holds their start. Device
// spans run behind the host that launched them, so a kernel belongs to the last step that
// started before it, up to the next step's start (or, after the last step, one step length).
void assignSteps(std::vector<Span>& spans, std::vector<Step>& steps, size_t firstSpan, size_t firstStep)
{
    std::sort(steps.begin() + static_cast<ptrdiff_t>(firstStep), steps.end(),
              [](const Step& a, const Step& b) { return a.start < b.start; });
    const auto b = steps.begin() + static_cast<ptrdiff_t>(firstStep);
    const auto e = steps.end();
    if (b == e)
        return;
    for (size_t i = firstSpan; i < spans.size(); ++i) {
        Span& s = spans[i];
        auto it = std::upper_bound(b, e, s.start, [](TimeNs t, const Step& st) { return t < st.start; });
        if (it == b)
            continue;
        const Step& st = *(it - 1);
        if (s.start < st.end || (s.start == st.start)) {
            s.step = st.step;
        } else if (isDeviceKind(s.kind)) {
            const TimeNs limit = it != e ? it->start : st.end + (st.end - st.start);
            if (s.start < limit)
                s.step = st.step;
        }
    }
}

// Numbering all-reduce buckets within each step of one rank.
//
// One all-reduce shows up several times in a trace: the c10d op that launches it, the
// record_param_comms op that carries its metadata, the gloo/nccl op on the worker thread that
// runs it, the NCCL kernel on the GPU. Giving each of them a bucket index would count every
// bucket two or three times, so one family is chosen per rank: the communication kernels when
// the rank has any, else the host spans of the name whose all-reduces take the most time in
// total (the ones that run the collective, not the ones that only enqueue it). Within each step
// those are numbered in start order. When the chosen spans carry no byte count, the k-th
// all-reduce of the step that has collective metadata lends its bytes.
void numberBuckets(std::vector<Span>& spans, size_t firstSpan, const std::unordered_map<size_t, StringId>& collective,
                   StringId allreduce, const StringTable& strings, std::map<int32_t, int64_t>& bucketBytes)
{
    std::vector<size_t> kernels;
    std::map<uint32_t, std::vector<size_t>> hostByName; // name id -> spans
    std::map<uint32_t, TimeNs> hostTime;
    std::vector<size_t> withBytes;
    for (const auto& [localIndex, coll] : collective) {
        if (!(coll == allreduce))
            continue;
        const size_t i = firstSpan + localIndex;
        if (i >= spans.size() || spans[i].step == kNoStep)
            continue;
        if (spans[i].kind == SpanKind::CommKernel) {
            kernels.push_back(i);
        } else if (spans[i].kind == SpanKind::Comm) {
            hostByName[spans[i].name.v].push_back(i);
            hostTime[spans[i].name.v] += spans[i].duration();
            if (spans[i].bytes > 0)
                withBytes.push_back(i);
        }
    }
    std::vector<size_t> chosen = std::move(kernels);
    if (chosen.empty() && !hostByName.empty()) {
        const auto best = std::max_element(hostTime.begin(), hostTime.end(),
                                           [](const auto& a, const auto& b) { return a.second < b.second; });
        chosen = hostByName[best->first];
    }
    (void)strings;
    const auto byStepStart = [&](size_t a, size_t b) {
        return std::tie(spans[a].step, spans[a].start, a) < std::tie(spans[b].step, spans[b].start, b);
    };
    std::sort(chosen.begin(), chosen.end(), byStepStart);
    std::sort(withBytes.begin(), withBytes.end(), byStepStart);
    std::map<int32_t, std::vector<int64_t>> bytesByStep;
    for (size_t i : withBytes)
        bytesByStep[spans[i].step].push_back(spans[i].bytes);
    int32_t step = kNoStep;
    int32_t next = 0;
    for (size_t i : chosen) {
        if (spans[i].step != step) {
            step = spans[i].step;
            next = 0;
        }
        Span& s = spans[i];
        s.bucket = next++;
        if (s.bytes == 0) {
            auto it = bytesByStep.find(step);
            if (it != bytesByStep.end() && static_cast<size_t>(s.bucket) < it->second.size())
                s.bytes = it->second[static_cast<size_t>(s.bucket)];
        }
        int64_t& b = bucketBytes[s.bucket];
        b = std::max(b, s.bytes);
    }
}

Result<Run> assemble(std::vector<RankTrace>& traces, const std::vector<std::string>& names,
                     const ImportOptions& options, Run run, ImportStats* stats)
{
    // Ranks: the option (first file's rank, then consecutive), else distributedInfo, else order.
    std::vector<int> ranks(traces.size());
    std::map<int, size_t> owner;
    for (size_t i = 0; i < traces.size(); ++i) {
        ranks[i] = options.rank ? *options.rank + static_cast<int>(i)
                                : traces[i].rank.value_or(static_cast<int>(i));
        if (ranks[i] < 0)
            return fail("rank must not be negative (" + names[i] + ")");
        auto [it, fresh] = owner.emplace(ranks[i], i);
        if (!fresh)
            return fail(names[it->second] + " and " + names[i] + " are both rank " + std::to_string(ranks[i])
                        + "; give the ranks with --rank (first file's rank, the next files follow)");
    }
    int worldSize = static_cast<int>(traces.size());
    if (options.worldSize) {
        worldSize = *options.worldSize;
    } else {
        for (const auto& t : traces)
            if (t.worldSize)
                worldSize = std::max(worldSize, *t.worldSize);
        worldSize = std::max(worldSize, owner.rbegin()->first + 1);
    }
    DiagnosticCounter diagnostics;
    if (worldSize < static_cast<int>(traces.size()) || worldSize <= owner.rbegin()->first)
        diagnostics.add("rank outside world size", Severity::Warning,
                        "a rank is not below the world size given for the run");

    const StringId allreduce = run.strings.intern("allreduce");
    std::map<int32_t, int64_t> bucketBytes;
    bool anyGpu = false, anyCommKernel = false, anyGloo = false;
    std::string backend;
    std::string source;
    int64_t events = 0, bytes = 0;
    for (size_t f = 0; f < traces.size(); ++f) {
        RankTrace& t = traces[f];
        const int rank = ranks[f];
        const size_t firstSpan = run.spans.size();
        const size_t firstStep = run.steps.size();
        const auto laneBase = static_cast<uint32_t>(run.lanes.size());
        int32_t gpuDevice = -1;
        for (auto& raw : t.lanes) {
            Lane lane;
            lane.id = LaneId{static_cast<uint32_t>(run.lanes.size())};
            lane.rank = rank;
            lane.kind = raw.kind;
            lane.device = raw.device;
            lane.stream = raw.stream;
            lane.name = std::move(raw.name);
            if (lane.kind == LaneKind::GpuStream && (gpuDevice < 0 || lane.device < gpuDevice))
                gpuDevice = std::max(0, lane.device);
            run.lanes.push_back(std::move(lane));
        }
        run.spans.reserve(run.spans.size() + t.spans.size());
        for (Span s : t.spans) {
            s.lane = LaneId{laneBase + s.lane.v};
            anyCommKernel |= s.kind == SpanKind::CommKernel;
            anyGloo |= s.kind == SpanKind::Comm && run.strings.text(s.name).starts_with("gloo:");
            run.spans.push_back(s);
        }
        std::vector<Span>().swap(t.spans);
        for (Step st : t.steps) {
            st.rank = rank;
            run.steps.push_back(st);
        }
        assignSteps(run.spans, run.steps, firstSpan, firstStep);
        numberBuckets(run.spans, firstSpan, t.collective, allreduce, run.strings, bucketBytes);
        RankInfo info;
        info.rank = rank;
        info.pid = t.pid;
        info.device = gpuDevice >= 0 ? "cuda:" + std::to_string(gpuDevice) : "cpu";
        anyGpu |= gpuDevice >= 0;
        run.ranks.push_back(info);
        if (backend.empty())
            backend = t.backend;
        if (source.empty())
            source = t.source;
        else if (source != t.source)
            source = "mixed";
        diagnostics.mergeFrom(t.diagnostics);
        events += t.events;
        bytes += t.bytes;
    }
    for (const auto& [index, b] : bucketBytes) {
        Bucket bucket;
        bucket.index = index;
        bucket.bytes = b;
        run.buckets.push_back(std::move(bucket));
    }

    RunConfig& c = run.config;
    c.source = source.empty() ? "kineto" : source;
    c.model = "imported";
    c.worldSize = worldSize;
    c.backend = !backend.empty() ? backend : anyCommKernel ? "nccl" : anyGloo ? "gloo" : "";
    c.device = anyGpu ? "cuda" : "cpu";
    c.bucketCapBytes = 0; // unknown: not in the trace
    c.firstBucketCapBytes = 0;
    int32_t firstStep = INT32_MAX;
    std::map<int32_t, int32_t> stepsPerRank;
    for (const Step& st : run.steps) {
        firstStep = std::min(firstStep, st.step);
        ++stepsPerRank[st.rank];
    }
    for (const auto& [rank, n] : stepsPerRank)
        c.stepsPlanned = std::max(c.stepsPlanned, n);
    c.warmupSteps = options.warmupSteps ? *options.warmupSteps : (firstStep == INT32_MAX ? 0 : firstStep + 1);
    c.status = RunStatus::Completed;
    c.createdNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    c.endedNs = c.createdNs;
    std::string joined;
    for (const auto& n : names)
        joined += (joined.empty() ? "" : ";") + n;
    c.extra["imported_from"] = joined;
    if (stepsPerRank.empty() && !run.spans.empty())
        diagnostics.add("no steps found", Severity::Warning,
                        "no ProfilerStep#N (or NVTX step range) found: per-step analyses are empty");
    run.diagnostics = diagnostics.list();
    run.normalize();

    if (stats) {
        stats->files = static_cast<int>(traces.size());
        stats->ranks = static_cast<int>(traces.size());
        stats->worldSize = worldSize;
        stats->events = events;
        stats->bytesRead = bytes;
        stats->spans = static_cast<int64_t>(run.spans.size());
        stats->commSpans = std::count_if(run.spans.begin(), run.spans.end(),
                                         [](const Span& s) { return isCommunication(s.kind); });
        stats->lanes = static_cast<int64_t>(run.lanes.size());
        stats->steps = static_cast<int64_t>(run.steps.size());
        stats->skipped = 0;
        for (const auto& d : run.diagnostics)
            if (d.severity != Severity::Info)
                stats->skipped += d.count;
        stats->diagnostics = run.diagnostics;
    }
    return run;
}

} // namespace

Result<Run> importTracesToRun(const std::vector<std::string>& files, const ImportOptions& options,
                              std::function<void(double)> progress, ImportStats* stats)
{
    if (files.empty())
        return fail("no trace files to import");
    int64_t total = 0;
    std::vector<int64_t> sizes;
    for (const auto& f : files) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(f, ec);
        sizes.push_back(ec ? 0 : static_cast<int64_t>(size));
        total += sizes.back();
    }
    Run run;
    Interner strings(run.strings);
    std::vector<RankTrace> traces(files.size());
    int64_t done = 0;
    for (size_t i = 0; i < files.size(); ++i) {
        ProgressFn fileProgress;
        if (progress)
            fileProgress = [&, i](int64_t consumed) {
                (void)i;
                progress(total > 0 ? std::min(1.0, double(done + consumed) / double(total)) * 0.85 : 0.0);
            };
        if (auto s = parseFile(files[i], options, strings, traces[i], fileProgress); !s)
            return fail(files[i] + ": " + s.error().message);
        done += sizes[i];
        if (progress)
            progress(total > 0 ? 0.85 * double(done) / double(total) : 0.85);
    }
    return assemble(traces, files, options, std::move(run), stats);
}

Result<ImportStats> importTraces(const std::vector<std::string>& files, const std::string& outDb,
                                 const ImportOptions& options, std::function<void(double)> progress)
{
    std::error_code ec;
    if (outDb.empty())
        return fail("no output file given");
    if (std::filesystem::exists(outDb, ec) && !options.overwrite)
        return fail(outDb + " already exists (use --force to replace it)");
    for (const auto& f : files)
        if (std::filesystem::exists(f, ec) && std::filesystem::equivalent(f, outDb, ec))
            return fail("the output file " + outDb + " is also one of the inputs");
    ImportStats stats;
    auto run = importTracesToRun(files, options, progress, &stats);
    if (!run)
        return std::unexpected(run.error());
    run->config.name = !options.runName.empty() ? options.runName : std::filesystem::path(outDb).stem().string();
    if (auto s = saveRun(*run, outDb, options.overwrite ? RunWriter::Mode::Overwrite : RunWriter::Mode::CreateNew); !s)
        return fail("cannot write " + outDb + ": " + s.error().message);
    if (progress)
        progress(1.0);
    return stats;
}

Result<Run> importTraceBytes(std::string_view bytes, const ImportOptions& options, ImportStats* stats)
{
    Run run;
    Interner strings(run.strings);
    std::vector<RankTrace> traces(1);
    const TraceFormat format = detectTraceFormat(bytes.substr(0, 4096));
    Status s;
    switch (format) {
    case TraceFormat::KinetoJson:
    case TraceFormat::KinetoJsonGz: {
        auto source = memorySource(bytes, format == TraceFormat::KinetoJsonGz);
        s = parseKineto(*source, options, strings, traces[0], {});
        break;
    }
    case TraceFormat::NsysSqlite: s = parseNsysImage(bytes, options, strings, traces[0]); break;
    case TraceFormat::Unknown: return fail(unknownFormatMessage("the input"));
    }
    if (!s)
        return std::unexpected(s.error());
    return assemble(traces, {"<memory>"}, options, std::move(run), stats);
}

} // namespace lockstep::core
