// The importer API: detects each file's format from its content, parses it into a RankTrace and
// makes it a part of its own (its lanes, strings, steps, buckets), on worker threads
// (PartPipeline); the calling thread adds the parts in file order into one Run or, through
// core's writer, into the run file as they come, and decides what needs every file last (ranks,
// world size, configuration, buckets, diagnostics).
#include "import_internal.h"
#include "lockstep/core/output_file.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/summary_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

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
        return fail(ErrorCode::BadFile, "no such file: " + path);
    if (!std::filesystem::is_regular_file(path, ec))
        return fail(ErrorCode::BadFile, path + " is not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return fail(ErrorCode::BadFile, "cannot open " + path);
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
    return fail(ErrorCode::BadFile, unknownFormatMessage(path));
}

// Which step a span belongs to (docs/design.md). Host spans: the step whose host window holds their
// start. Device spans (kernels, copies, memsets): the step whose host window holds the call
// that LAUNCHED them (RankTrace::deviceLaunch), never where their own time falls: a GPU runs
// behind its host, and step s's last kernels often run in step s+1's window or after the last
// step ended. A device span without a launch record, or launched outside every step, belongs
// to no step and is counted (per span kind) in the diagnostics, never dropped silently.
void assignSteps(std::vector<Span>& spans, std::vector<Step>& steps, size_t firstSpan, size_t firstStep,
                 const RankTrace& trace, DiagnosticCounter& diagnostics)
{
    std::sort(steps.begin() + static_cast<ptrdiff_t>(firstStep), steps.end(),
              [](const Step& a, const Step& b) { return a.start < b.start; });
    const auto b = steps.begin() + static_cast<ptrdiff_t>(firstStep);
    const auto e = steps.end();
    auto stepAt = [&](TimeNs t) {
        auto it = std::upper_bound(b, e, t, [](TimeNs v, const Step& st) { return v < st.start; });
        if (it == b)
            return kNoStep;
        const Step& st = *(it - 1);
        return t < st.end || t == st.start ? st.step : kNoStep;
    };
    std::vector<char> device;
    if (!trace.deviceLaunch.empty())
        device.assign(spans.size() - firstSpan, 0);
    for (const auto& [local, launch, launchLane] : trace.deviceLaunch) {
        if (firstSpan + local >= spans.size())
            continue;
        Span& s = spans[firstSpan + local];
        device[local] = 1;
        s.step = kNoStep;
        if (launch == kNoLaunch) {
            diagnostics.add(DiagnosticKind::DeviceSpanWithoutLaunch, 1, spanKindName(s.kind));
            continue;
        }
        s.step = stepAt(launch);
        if (s.step == kNoStep && b != e)
            diagnostics.add(DiagnosticKind::DeviceSpanOutsideSteps, 1, spanKindName(s.kind));
    }
    if (b == e)
        return;
    for (size_t i = firstSpan; i < spans.size(); ++i)
        if (device.empty() || !device[i - firstSpan])
            spans[i].step = stepAt(spans[i].start);
}

// Numbering all-reduce buckets within each step of one rank.
//
// One all-reduce shows up several times in a trace: the c10d op that launches it, the
// record_param_comms op that carries its metadata, the gloo/nccl op on the worker thread that
// runs it, the NCCL kernel on the GPU. Which of them are "the bucket's all-reduce" must be the
// same on every rank, or launch, duration, skew and the straggler evidence compare different
// things across ranks; so the choice depends only on which kinds of span the rank has (its
// names, the same on every rank of one job), never on their durations or on the order of the
// events or threads in the file:
//  - the communication kernels when the rank has any (device work, numbered by launching step);
//  - else, on the host, docs/design.md's "from launch to completion": the op the training thread
//    calls (c10d::allreduce_, ...; record_param_comms where a trace has no c10d op) is the
//    launch, and the op that runs it (gloo:all_reduce, nccl:all_reduce, ProcessGroup*::, often
//    on a worker thread) lasts until the collective completes. Each launch is paired with the
//    op that ran it (pairRunners, below: first in first out within a step and a process group);
//    both get the bucket index, and bucketStats takes the launch from the earlier span (the
//    call) and the completion from the span on the other lane (the run), even when the call
//    returned later. A launch without a runner is the bucket alone (its completion is then the
//    call's return); a rank with runners but no launch ops uses the runners alone;
//  - else (neither family: custom names carrying collective metadata) the name with the most
//    all-reduces, ties by name.
// Within each step the launches are numbered in start order. When the chosen spans carry no byte
// count, the k-th all-reduce of the step that has collective metadata lends its bytes; a paired
// runner's bytes move to its launch, so that a bucket's bytes are counted once.
namespace {

bool isLaunchOpName(std::string_view n) { return n.starts_with("c10d::"); }

bool isRunnerOpName(std::string_view n)
{
    return n.starts_with("gloo:") || n.starts_with("nccl:") || n.starts_with("ProcessGroupGloo::")
        || n.starts_with("ProcessGroupNCCL::");
}

// Pairing each launch with the op that ran it.
//
// A process group runs its work queue in order, so within one group and one step the k-th run to
// start is the k-th launch's: each runner, in start order, takes the oldest launch of its step
// still waiting when it starts (a launch before a runner that starts at the same instant). A job
// may use more than one group (DDP's, and one the script made), each with its own queue and
// worker threads, running independently: first in first out across them pairs a fast group's run
// with a slow group's older call. So a runner only takes a launch whose process group is not
// known to differ from its own. What traces say about the group: newer torch's
// record_param_comms carries "Process Group Name" (where torch writes one), and a launch takes
// the group of the record_param_comms it holds (same thread, inside the call); the gloo op that
// runs it carries only its input tensors (its RecordFunction on the worker thread), and Debian's
// torch 1.13 writes no args at all. So on real gloo traces a runner's group is unknown: where, when it
// starts, launches of more than one group wait in its step, it still takes the oldest (the
// answer for one group) and the pairing is counted as ambiguous, never made silently. A trace
// that names no group on either side (torch 1.13) cannot show two groups at all; README's known
// limits say so. (Each gloo group owns its worker threads, so a runner's thread would tell its
// group once one of its ops is tied to a group; that inference is not made.)
//
// What is left over is counted as well, never silent (Kineto drops events: one of three real
// torch 1.13 traces lost the last gloo op of a step): a runner of a step that finds no launch of
// its step waiting is no bucket's (counted here); a launch that no runner took, on a rank that
// has runners, is its bucket alone (counted by numberBuckets). Runners outside every step are no
// bucket's and not counted (nothing of a step is wrong); launches outside every step neither.
struct Pairing {
    std::map<size_t, size_t> runnerOf; // launch -> runner
    int64_t runnersWithoutLaunch = 0;
    int64_t ambiguous = 0;
};

Pairing pairRunners(const std::vector<Span>& spans, const std::vector<size_t>& launches,
                    const std::vector<size_t>& runners, const std::unordered_map<size_t, StringId>& groupOf)
{
    // `launches` and `runners` are sorted by start; groupOf holds only known groups.
    const auto group = [&](size_t i) {
        auto it = groupOf.find(i);
        return it != groupOf.end() ? it->second : StringId{};
    };
    Pairing p;
    std::vector<char> taken(launches.size(), 0);
    std::vector<StringId> groups; // known groups among one runner's candidates
    size_t head = 0, started = 0;
    for (size_t r : runners) {
        while (started < launches.size() && spans[launches[started]].start <= spans[r].start)
            ++started;
        const int32_t step = spans[r].step;
        while (head < started && (taken[head] || spans[launches[head]].step < step))
            ++head; // taken, or of an earlier step (or of none): no later runner is theirs
        if (step == kNoStep)
            continue;
        const StringId own = group(r);
        size_t pick = SIZE_MAX;
        groups.clear();
        for (size_t k = head; k < started; ++k) {
            const size_t l = launches[k];
            if (taken[k] || spans[l].step != step)
                continue;
            const StringId g = group(l);
            if (!(own == StringId{}) && !(g == StringId{}) && !(g == own))
                continue; // another group's: its own queue runs it
            if (pick == SIZE_MAX)
                pick = k;
            if (!(g == StringId{}) && std::find(groups.begin(), groups.end(), g) == groups.end())
                groups.push_back(g);
        }
        if (pick == SIZE_MAX) {
            ++p.runnersWithoutLaunch;
            continue;
        }
        if (groups.size() > 1)
            ++p.ambiguous;
        taken[pick] = 1;
        p.runnerOf.emplace(launches[pick], r);
    }
    return p;
}

// The process group of each launch and runner that the trace names: its own "Process Group
// Name", else (a launch) that of the record_param_comms inside it on its thread.
std::unordered_map<size_t, StringId> processGroups(const std::vector<Span>& spans, size_t firstSpan,
                                                   const std::unordered_map<size_t, CommMeta>& collective,
                                                   std::vector<size_t> launches, const std::vector<size_t>& paramComms)
{
    std::unordered_map<size_t, StringId> out;
    for (const auto& [localIndex, meta] : collective)
        if (!(meta.group == StringId{}) && firstSpan + localIndex < spans.size())
            out.emplace(firstSpan + localIndex, meta.group);
    const auto byLaneStart = [&](size_t a, size_t b) {
        return std::tie(spans[a].lane.v, spans[a].start, a) < std::tie(spans[b].lane.v, spans[b].start, b);
    };
    std::sort(launches.begin(), launches.end(), byLaneStart);
    for (size_t pc : paramComms) {
        auto g = out.find(pc);
        if (g == out.end())
            continue;
        // The last launch on pc's lane that starts at or before it, if pc lies inside it.
        auto it = std::upper_bound(launches.begin(), launches.end(), pc, [&](size_t v, size_t l) {
            return std::tie(spans[v].lane.v, spans[v].start) < std::tie(spans[l].lane.v, spans[l].start);
        });
        if (it == launches.begin())
            continue;
        const Span& l = spans[*(it - 1)];
        if (l.lane == spans[pc].lane && spans[pc].start <= l.end && *(it - 1) != pc)
            out.emplace(*(it - 1), g->second); // a launch's own group comes first
    }
    return out;
}

} // namespace

void numberBuckets(std::vector<Span>& spans, size_t firstSpan, const std::unordered_map<size_t, CommMeta>& collective,
                   StringId allreduce, const StringTable& strings, int rank, std::map<int32_t, int64_t>& bucketBytes,
                   DiagnosticCounter& diagnostics)
{
    std::vector<size_t> kernels, launches, paramComms, runners;
    std::map<std::string_view, std::vector<size_t>> others; // by name: ordered, so ties go by name
    for (const auto& [localIndex, meta] : collective) {
        if (!(meta.collective == allreduce))
            continue;
        const size_t i = firstSpan + localIndex;
        if (i >= spans.size())
            continue;
        if (spans[i].kind == SpanKind::CommKernel) {
            if (spans[i].step != kNoStep)
                kernels.push_back(i);
        } else if (spans[i].kind == SpanKind::Comm) {
            // Spans outside every step are kept here: a runner must not pair with a launch of
            // another step because its own launch fell outside the steps.
            const std::string_view name = strings.text(spans[i].name);
            if (isLaunchOpName(name))
                launches.push_back(i);
            else if (isRunnerOpName(name))
                runners.push_back(i);
            else if (name == "record_param_comms")
                paramComms.push_back(i);
            else
                others[name].push_back(i);
        }
    }
    const auto byStart = [&](size_t a, size_t b) { return std::tie(spans[a].start, a) < std::tie(spans[b].start, b); };
    const auto byStepStart = [&](size_t a, size_t b) {
        return std::tie(spans[a].step, spans[a].start, a) < std::tie(spans[b].step, spans[b].start, b);
    };
    std::vector<size_t> chosen;       // one span per all-reduce: the launch (or the only span)
    std::vector<size_t> runnerOf;     // parallel to chosen: its paired runner, or SIZE_MAX
    std::vector<size_t> lenders;      // spans that may lend their bytes
    if (!kernels.empty()) {
        chosen = std::move(kernels);
    } else {
        lenders = paramComms; // one per all-reduce, with its size
        if (launches.empty())
            launches = paramComms; // the call's metadata op stands for the call
        if (!launches.empty()) {
            std::sort(launches.begin(), launches.end(), byStart);
            std::sort(runners.begin(), runners.end(), byStart);
            const Pairing p = pairRunners(spans, launches, runners,
                                          processGroups(spans, firstSpan, collective, launches, paramComms));
            for (size_t i : launches)
                if (spans[i].step != kNoStep)
                    chosen.push_back(i);
            std::sort(chosen.begin(), chosen.end(), byStepStart);
            int64_t alone = 0;
            for (size_t i : chosen) {
                auto it = p.runnerOf.find(i);
                runnerOf.push_back(it != p.runnerOf.end() ? it->second : SIZE_MAX);
                alone += it == p.runnerOf.end();
            }
            const std::string where = "rank " + std::to_string(rank);
            if (alone > 0 && !runners.empty())
                diagnostics.add(DiagnosticKind::AllReduceLaunchWithoutRunner, alone, where);
            if (p.runnersWithoutLaunch > 0)
                diagnostics.add(DiagnosticKind::AllReduceRunnerWithoutLaunch, p.runnersWithoutLaunch, where);
            if (p.ambiguous > 0)
                diagnostics.add(DiagnosticKind::AllReducePairingAmbiguous, p.ambiguous, where);
        } else if (!runners.empty()) {
            chosen = std::move(runners);
        } else if (!others.empty()) {
            auto best = others.begin();
            for (auto it = others.begin(); it != others.end(); ++it)
                if (it->second.size() > best->second.size())
                    best = it;
            chosen = best->second;
        }
        if (lenders.empty()) // no record_param_comms: any host all-reduce with a size
            for (const auto& [localIndex, meta] : collective) {
                const size_t i = firstSpan + localIndex;
                if (meta.collective == allreduce && i < spans.size() && spans[i].kind == SpanKind::Comm)
                    lenders.push_back(i);
            }
        std::erase_if(chosen, [&](size_t i) { return spans[i].step == kNoStep; });
    }
    if (runnerOf.size() != chosen.size()) {
        std::sort(chosen.begin(), chosen.end(), byStepStart);
        runnerOf.assign(chosen.size(), SIZE_MAX);
    }
    std::erase_if(lenders, [&](size_t i) { return spans[i].step == kNoStep || spans[i].bytes <= 0; });
    std::sort(lenders.begin(), lenders.end(), byStepStart);
    std::map<int32_t, std::vector<int64_t>> bytesByStep;
    for (size_t i : lenders)
        bytesByStep[spans[i].step].push_back(spans[i].bytes);
    int32_t step = kNoStep;
    int32_t next = 0;
    for (size_t k = 0; k < chosen.size(); ++k) {
        Span& s = spans[chosen[k]];
        if (s.step != step) {
            step = s.step;
            next = 0;
        }
        s.bucket = next++;
        if (runnerOf[k] != SIZE_MAX) {
            Span& r = spans[runnerOf[k]];
            r.bucket = s.bucket;
            if (s.bytes == 0)
                s.bytes = r.bytes;
            r.bytes = 0;
        }
        if (s.bytes == 0) {
            auto it = bytesByStep.find(step);
            if (it != bytesByStep.end() && static_cast<size_t>(s.bucket) < it->second.size())
                s.bytes = it->second[static_cast<size_t>(s.bucket)];
        }
        int64_t& b = bucketBytes[s.bucket];
        b = std::max(b, s.bytes);
    }
}

// Host collectives on a GPU rank (gloo over CUDA tensors; docs/design.md, "Categories"). A rank
// whose all-reduces launch no communication kernel but run on host threads: the call
// (c10d::allreduce_ on the training thread) copies the bucket to the host before the run, and
// the op that runs it (gloo:all_reduce on a worker thread) copies the result back. Each device
// copy launched from inside a bucket's call or run, on the same thread, is that collective's
// staging: it gets the collective's bucket (so the step breakdown counts it as communication,
// not memory), and where the trace gives the collective no size (no record_param_comms) the
// staging copy's bytes are its size. Worker threads that run collectives become communication
// lanes: their own ops are the collective's work, not training compute. Everything done here
// is counted in the diagnostics.
void hostCollectiveStaging(Run& run, size_t firstSpan, uint32_t laneBase, const RankTrace& trace, int rank,
                           std::map<int32_t, int64_t>& bucketBytes, DiagnosticCounter& diagnostics)
{
    std::vector<Span>& spans = run.spans;
    bool device = false;
    std::map<uint32_t, std::vector<size_t>> collectivesOnLane; // lane -> host Comm spans with a bucket
    for (size_t i = firstSpan; i < spans.size(); ++i) {
        const Span& s = spans[i];
        if (s.kind == SpanKind::CommKernel)
            return; // its collectives run on the device
        device |= isDeviceKind(s.kind);
        if (s.kind == SpanKind::Comm && s.bucket >= 0 && s.step != kNoStep)
            collectivesOnLane[s.lane.v].push_back(i);
    }
    if (!device || collectivesOnLane.empty())
        return;
    const std::string where = "rank " + std::to_string(rank);
    int64_t collectives = 0;
    for (auto& [lane, v] : collectivesOnLane) {
        std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return spans[a].start < spans[b].start; });
        for (size_t i : v)
            collectives += isLaunchOpName(run.strings.text(spans[i].name)) ? 1 : 0;
        // A lane whose collectives are all runs (none a call from training code) is a worker.
        const bool worker = std::all_of(v.begin(), v.end(), [&](size_t i) {
            return isRunnerOpName(run.strings.text(spans[i].name));
        });
        if (worker && lane < run.lanes.size())
            run.lanes[lane].kind = LaneKind::Comm;
    }
    diagnostics.add(DiagnosticKind::HostCollectivesOnDevice, std::max<int64_t>(collectives, 1), where);
    // (step, bucket) -> the staging copy's bytes (the largest: the whole bucket)
    std::map<std::pair<int32_t, int32_t>, int64_t> staged;
    int64_t copies = 0;
    for (const RankTrace::DeviceLaunch& d : trace.deviceLaunch) {
        if (d.launch == kNoLaunch || d.lane == UINT32_MAX || firstSpan + d.span >= spans.size())
            continue;
        Span& copy = spans[firstSpan + d.span];
        if (copy.kind != SpanKind::Memcpy)
            continue;
        auto it = collectivesOnLane.find(laneBase + d.lane);
        if (it == collectivesOnLane.end())
            continue;
        // The last collective on the launching thread that starts at or before the launch.
        const std::vector<size_t>& v = it->second;
        auto c = std::upper_bound(v.begin(), v.end(), d.launch,
                                  [&](TimeNs t, size_t i) { return t < spans[i].start; });
        if (c == v.begin())
            continue;
        const Span& coll = spans[*(c - 1)];
        if (d.launch > coll.end)
            continue;
        copy.bucket = coll.bucket;
        ++copies;
        int64_t& b = staged[{coll.step, coll.bucket}];
        b = std::max(b, copy.bytes);
    }
    if (copies > 0)
        diagnostics.add(DiagnosticKind::CollectiveStagingCopy, copies, where);
    // Sizes: the chosen span of each bucket (the one numberBuckets gave the bytes to).
    int64_t fromStaging = 0, unknown = 0;
    std::set<std::pair<int32_t, int32_t>> sized;
    for (auto& [lane, v] : collectivesOnLane)
        for (size_t i : v)
            if (spans[i].bytes > 0)
                sized.insert({spans[i].step, spans[i].bucket});
    for (auto& [lane, v] : collectivesOnLane) {
        for (size_t i : v) {
            Span& s = spans[i];
            if (!isLaunchOpName(run.strings.text(s.name)) || sized.count({s.step, s.bucket}))
                continue;
            auto st = staged.find({s.step, s.bucket});
            if (st == staged.end() || st->second <= 0) {
                ++unknown;
                continue;
            }
            s.bytes = st->second;
            ++fromStaging;
            int64_t& b = bucketBytes[s.bucket];
            b = std::max(b, s.bytes);
        }
    }
    if (fromStaging > 0)
        diagnostics.add(DiagnosticKind::BucketBytesFromStaging, fromStaging, where);
    if (unknown > 0)
        diagnostics.add(DiagnosticKind::BucketBytesUnknown, unknown, where);
}

// The run's warm-up threshold from "the first N steps of the trace": RunConfig::warmupSteps is
// a step number (steps numbered below it are warm-up), so it becomes the number of the
// (N+1)-th distinct step, or one past the last step when there are not more than N steps (the
// report then says that no step is past the warm-up). `numbers`: the distinct step numbers.
int32_t warmupThreshold(const std::set<int32_t>& numbers, int firstN)
{
    if (numbers.empty())
        return 0;
    const size_t n = static_cast<size_t>(std::max(0, firstN));
    return n < numbers.size() ? *std::next(numbers.begin(), static_cast<ptrdiff_t>(n)) : *numbers.rbegin() + 1;
}

// The ranks one file holds: a Lockstep export names its own (one file may hold every rank);
// other files are one rank each: the option (first file's rank, then consecutive), else
// distributedInfo, else the file's position. Whether they collide with another file's is
// decided in file order (Totals::account).
Result<std::vector<int>> ranksOfFile(const RankTrace& trace, size_t index, const std::string& name,
                                     const ImportOptions& options)
{
    if (!trace.lockstep)
        // With --rank no Lockstep export may be among the files (refused below), so every file
        // before this one took one rank.
        return std::vector<int>{options.rank ? *options.rank + static_cast<int>(index)
                                             : trace.rank.value_or(static_cast<int>(index))};
    if (options.rank)
        return fail(ErrorCode::Usage, "--rank: " + name + " was written by lockstep export and names its own ranks; "
                    "leave --rank out");
    std::set<int> own;
    for (const RankInfo& r : trace.lockstep->ranks)
        own.insert(r.rank);
    for (const RawLane& l : trace.lanes)
        own.insert(l.rank.value_or(0));
    for (const Step& st : trace.steps)
        own.insert(st.rank);
    return std::vector<int>(own.begin(), own.end());
}

int highestRank(const std::map<int, size_t>& owner) { return owner.empty() ? 0 : owner.rbegin()->first; }

// The world size: --world-size when given (it must hold every rank the traces hold), else the
// largest the traces name (`named`), and at least one past the highest rank.
Result<int> resolveWorldSize(int named, const ImportOptions& options, const std::map<int, size_t>& owner)
{
    const int maxRank = highestRank(owner);
    int worldSize = static_cast<int>(owner.size());
    if (options.worldSize) {
        worldSize = *options.worldSize;
        if (worldSize < static_cast<int>(owner.size()) || worldSize <= maxRank)
            return fail(ErrorCode::Usage, "--world-size: " + std::to_string(worldSize) + " is too small: the traces hold "
                        + std::to_string(owner.size()) + " rank(s), up to rank " + std::to_string(maxRank)
                        + " (a world of at least " + std::to_string(std::max<int>(maxRank + 1, owner.size())) + ")");
    } else {
        worldSize = std::max({worldSize, named, maxRank + 1});
    }
    return worldSize;
}

// What the files add up to beside their spans: the buckets, what the configuration is guessed
// from, and the sizes read. One per file (FilePart), added up in file order (Totals).
struct Merged {
    std::map<int32_t, int64_t> bucketBytes;
    std::map<int32_t, Bucket> exportedBuckets;
    bool anyGpu = false, anyCommKernel = false, anyGloo = false;
    std::string backend;
    std::string source;
    int64_t events = 0, bytes = 0;
    std::optional<LockstepMeta> meta;

    // `later`'s, as if its file had been added after this one's.
    void add(Merged&& later)
    {
        for (const auto& [index, b] : later.bucketBytes) {
            int64_t& mine = bucketBytes[index];
            mine = std::max(mine, b);
        }
        for (auto& [index, bucket] : later.exportedBuckets)
            exportedBuckets[index] = std::move(bucket);
        anyGpu |= later.anyGpu;
        anyCommKernel |= later.anyCommKernel;
        anyGloo |= later.anyGloo;
        if (backend.empty())
            backend = later.backend;
        if (source.empty())
            source = later.source;
        else if (source != later.source)
            source = "mixed";
        events += later.events;
        bytes += later.bytes;
        if (later.meta)
            meta = std::move(later.meta);
    }
};

// The file's lanes, appended to the run's with global ids. Returns rank -> lowest GPU index.
std::map<int32_t, int32_t> addLanes(Run& run, const RankTrace& t, int fileRank, DiagnosticCounter& diagnostics)
{
    std::map<int32_t, int32_t> gpuDevice; // rank -> lowest GPU index
    for (auto& raw : t.lanes) {
        Lane lane;
        lane.id = LaneId{static_cast<uint32_t>(run.lanes.size())};
        lane.rank = raw.rank.value_or(fileRank);
        lane.kind = raw.kind;
        lane.device = raw.device;
        lane.stream = raw.stream;
        if (raw.name.size() > kMaxNameBytes)
            diagnostics.add(DiagnosticKind::NameTruncated);
        lane.name = std::string(capName(raw.name));
        if (lane.kind == LaneKind::GpuStream) {
            auto [it, fresh] = gpuDevice.emplace(lane.rank, std::max(0, lane.device));
            if (!fresh)
                it->second = std::min(it->second, std::max(0, lane.device));
        }
        run.lanes.push_back(std::move(lane));
    }
    return gpuDevice;
}

// The file's spans (moved out of it), steps and instants, onto the run's lanes from laneBase.
void addSpansStepsInstants(Run& run, RankTrace& t, int fileRank, uint32_t laneBase, Merged& m)
{
    const size_t firstSpan = run.spans.size();
    if (run.spans.empty()) {
        run.spans = std::move(t.spans); // a file's own part: its spans as they are, not a copy
    } else {
        run.spans.insert(run.spans.end(), t.spans.begin(), t.spans.end());
        std::vector<Span>().swap(t.spans);
    }
    for (size_t i = firstSpan; i < run.spans.size(); ++i) {
        Span& s = run.spans[i];
        s.lane = LaneId{laneBase + s.lane.v};
        m.anyCommKernel |= s.kind == SpanKind::CommKernel;
        m.anyGloo |= s.kind == SpanKind::Comm && run.strings.text(s.name).starts_with("gloo:");
    }
    t.spans.clear();
    for (Step st : t.steps) {
        if (!t.lockstep)
            st.rank = fileRank;
        run.steps.push_back(st);
    }
    for (Instant in : t.instants) {
        in.lane = LaneId{laneBase + in.lane.v};
        run.instants.push_back(in);
    }
}

// One RankInfo per rank the file holds: a Lockstep export's own, else the file's pid and device.
void addRankInfos(Run& run, const RankTrace& t, const std::vector<int>& fileRanks,
                  const std::map<int32_t, int32_t>& gpuDevice, Merged& m)
{
    for (int rank : fileRanks) {
        RankInfo info;
        info.rank = rank;
        info.pid = t.pid;
        if (t.lockstep)
            for (const RankInfo& r : t.lockstep->ranks)
                if (r.rank == rank)
                    info = r;
        auto gpu = gpuDevice.find(rank);
        if (info.device.empty())
            info.device = gpu != gpuDevice.end() ? "cuda:" + std::to_string(gpu->second) : "cpu";
        m.anyGpu |= gpu != gpuDevice.end();
        run.ranks.push_back(info);
    }
}

// One file into a run: its lanes, events, steps and buckets, and its ranks.
void addTrace(Run& run, RankTrace& t, const std::vector<int>& fileRanks, StringId allreduce, Merged& m,
              DiagnosticCounter& diagnostics)
{
    const int fileRank = fileRanks.front();
    const size_t firstSpan = run.spans.size();
    const size_t firstStep = run.steps.size();
    const auto laneBase = static_cast<uint32_t>(run.lanes.size());
    const std::map<int32_t, int32_t> gpuDevice = addLanes(run, t, fileRank, diagnostics);
    addSpansStepsInstants(run, t, fileRank, laneBase, m);
    if (t.lockstep) {
        // Spans and instants carry their own step and bucket: the run as it was exported.
        for (const Bucket& bucket : t.lockstep->buckets)
            m.exportedBuckets[bucket.index] = bucket;
    } else {
        assignSteps(run.spans, run.steps, firstSpan, firstStep, t, diagnostics);
        numberBuckets(run.spans, firstSpan, t.collective, allreduce, run.strings, fileRank, m.bucketBytes, diagnostics);
        hostCollectiveStaging(run, firstSpan, laneBase, t, fileRank, m.bucketBytes, diagnostics);
    }
    addRankInfos(run, t, fileRanks, gpuDevice, m);
    if (m.backend.empty())
        m.backend = t.backend;
    if (m.source.empty())
        m.source = t.source;
    else if (m.source != t.source)
        m.source = "mixed";
    diagnostics.mergeFrom(t.diagnostics);
    m.events += t.events;
    m.bytes += t.bytes;
    if (t.lockstep)
        m.meta = std::move(t.lockstep);
}

// One file made whole on its own, by the thread that parsed it: a run of its lanes (numbered
// from 0), strings, spans, steps, instants and ranks, sorted as Run::normalize sorts them.
// Lanes of different files never mix, so the files' parts in file order are exactly the whole
// run normalized; strings are the file's in the order the parse met them, so interning them in
// file order gives the ids one interner over every file gives.
struct FilePart {
    Status parsed;                  // the parse's error: the import's answer (first in file order)
    std::optional<Error> rankError; // --rank given with a Lockstep export
    Run run;
    size_t parsedStrings = 0;       // run.strings the parse made; later ones are only lookups
    std::vector<int> ranks;
    int namedWorldSize = 0;         // distributedInfo's, an export's
    Merged merged;
    DiagnosticCounter diagnostics;
    int64_t truncatedNames = 0;
};

// The parsed trace into its part (after the parse filled part.run.strings).
void finishPart(RankTrace& t, size_t index, const std::string& name, const ImportOptions& options, FilePart& p)
{
    p.parsedStrings = p.run.strings.size();
    p.namedWorldSize = std::max(t.worldSize.value_or(0), t.lockstep ? t.lockstep->config.worldSize : 0);
    auto ranks = ranksOfFile(t, index, name, options);
    if (!ranks) {
        p.rankError = ranks.error();
        return;
    }
    p.ranks = std::move(*ranks);
    const StringId allreduce = p.run.strings.intern("allreduce");
    addTrace(p.run, t, p.ranks, allreduce, p.merged, p.diagnostics);
    p.run.normalize();
}

// A file into its part (a worker's whole job).
void parsePart(const std::string& path, size_t index, const ImportOptions& options, const ProgressFn& progress,
               FilePart& p)
{
    RankTrace trace;
    Interner strings(p.run.strings);
    if (auto s = parseFile(path, options, strings, trace, progress); !s) {
        // A trace the parser gives up on is a bad input, whatever the parser's words.
        const Error& e = s.error();
        p.parsed = fail(e.code == ErrorCode::Failed ? ErrorCode::BadFile : e.code,
                        e.message.starts_with(path) ? e.message : path + ": " + e.message);
        return;
    }
    p.truncatedNames = strings.truncated();
    finishPart(trace, index, path, options, p);
}

// The run's configuration: an export's own, else what the traces show.
void configureRun(RunConfig& c, const Merged& m, size_t fileCount, int worldSize, const ImportOptions& options,
                  const std::vector<std::string>& names, const std::map<int32_t, int32_t>& stepsPerRank,
                  const std::set<int32_t>& stepNumbers)
{
    if (m.meta && fileCount == 1) {
        // A Lockstep export: its own configuration (warm-up, batch, caps: every metric needs it).
        c = m.meta->config;
        c.worldSize = worldSize;
        c.extra["exported_source"] = c.source;
        c.source = "lockstep-export";
        if (options.warmupSteps)
            c.warmupSteps = warmupThreshold(stepNumbers, *options.warmupSteps);
    } else {
        c.source = m.source.empty() ? "kineto" : m.source;
        c.model = "imported";
        c.worldSize = worldSize;
        c.backend = !m.backend.empty() ? m.backend : m.anyCommKernel ? "nccl" : m.anyGloo ? "gloo" : "";
        c.device = m.anyGpu ? "cuda" : "cpu";
        c.bucketCapBytes = 0; // unknown: not in the trace
        c.firstBucketCapBytes = 0;
        for (const auto& [rank, n] : stepsPerRank)
            c.stepsPlanned = std::max(c.stepsPlanned, n);
        c.warmupSteps = warmupThreshold(stepNumbers, options.warmupSteps.value_or(kDefaultImportWarmup));
    }
    c.status = RunStatus::Completed;
    c.createdNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    c.endedNs = c.createdNs;
    std::string joined;
    for (const auto& n : names)
        joined += (joined.empty() ? "" : ";") + n;
    c.extra["imported_from"] = joined;
}

// What the files add up to, taken in file order: which file owns each rank, the world size the
// traces name, the buckets and configuration (Merged), diagnostics, step numbers and counts.
struct Totals {
    std::map<int, size_t> owner; // rank -> file
    std::optional<Error> rankError;
    int namedWorldSize = 0;
    Merged merged;
    DiagnosticCounter diagnostics;
    int64_t truncatedNames = 0;
    std::map<int32_t, int32_t> stepsPerRank;
    std::set<int32_t> stepNumbers;
    int64_t spans = 0, commSpans = 0, lanes = 0, steps = 0;

    // Takes the file's totals; false (the part is not to be added) after a rank error, which is
    // the import's answer unless a later file fails to parse.
    bool account(FilePart& p, size_t index, const std::vector<std::string>& names)
    {
        if (!rankError && p.rankError)
            rankError = std::move(p.rankError);
        for (size_t k = 0; k < p.ranks.size() && !rankError; ++k) {
            const int r = p.ranks[k];
            if (r < 0) {
                rankError = Error{"rank must not be negative (" + names[index] + ")"};
                break;
            }
            auto [it, fresh] = owner.emplace(r, index);
            if (!fresh)
                rankError = Error{names[it->second] + " and " + names[index] + " are both rank " + std::to_string(r)
                                  + "; give the ranks with --rank (first file's rank, the next files follow)"};
        }
        if (rankError)
            return false;
        namedWorldSize = std::max(namedWorldSize, p.namedWorldSize);
        merged.add(std::move(p.merged));
        diagnostics.mergeFrom(p.diagnostics);
        truncatedNames += p.truncatedNames;
        for (const Step& st : p.run.steps) {
            ++stepsPerRank[st.rank];
            stepNumbers.insert(st.step);
        }
        spans += static_cast<int64_t>(p.run.spans.size());
        commSpans += std::count_if(p.run.spans.begin(), p.run.spans.end(),
                                   [](const Span& s) { return isCommunication(s.kind); });
        lanes += static_cast<int64_t>(p.run.lanes.size());
        steps += static_cast<int64_t>(p.run.steps.size());
        return true;
    }
};

// What is decided once every file is in: the world size, the configuration, the buckets and
// the diagnostics; and the import's statistics.
struct RunHeader {
    RunConfig config;
    std::vector<Bucket> buckets;
    std::vector<Diagnostic> diagnostics;
};

Result<RunHeader> finishRun(Totals& t, const ImportOptions& options, const std::vector<std::string>& names,
                            ImportStats* stats)
{
    if (t.rankError)
        return std::unexpected(*t.rankError);
    Result<int> world = resolveWorldSize(t.namedWorldSize, options, t.owner);
    if (!world)
        return std::unexpected(world.error());
    const int worldSize = *world;
    DiagnosticCounter& diagnostics = t.diagnostics;
    if (worldSize < static_cast<int>(t.owner.size()) || worldSize <= highestRank(t.owner))
        diagnostics.add(DiagnosticKind::RankOutsideWorldSize);
    if (t.truncatedNames > 0)
        diagnostics.add(DiagnosticKind::NameTruncated, t.truncatedNames);
    if (t.steps == 0 && t.spans > 0) // no step on any rank
        diagnostics.add(DiagnosticKind::NoStepsFound);
    RunHeader h;
    Merged& m = t.merged;
    for (const auto& [index, b] : m.bucketBytes) {
        Bucket bucket;
        bucket.index = index;
        bucket.bytes = b;
        m.exportedBuckets.emplace(index, bucket);
    }
    for (auto& [index, bucket] : m.exportedBuckets)
        h.buckets.push_back(std::move(bucket));
    configureRun(h.config, m, names.size(), worldSize, options, names, t.stepsPerRank, t.stepNumbers);
    h.diagnostics = diagnostics.list();
    if (stats) {
        stats->files = static_cast<int>(names.size());
        stats->ranks = static_cast<int>(t.owner.size());
        stats->worldSize = worldSize;
        stats->events = m.events;
        stats->bytesRead = m.bytes;
        stats->spans = t.spans;
        stats->commSpans = t.commSpans;
        stats->lanes = t.lanes;
        stats->steps = t.steps;
        stats->skipped = 0;
        for (const auto& d : h.diagnostics)
            if (d.severity != Severity::Info)
                stats->skipped += d.count;
        stats->diagnostics = h.diagnostics;
    }
    return h;
}

// A part's string ids in the run's table: its parsed strings interned in their order.
template <class InternFn>
std::vector<StringId> mapStrings(const FilePart& p, InternFn&& intern)
{
    std::vector<StringId> ids(p.run.strings.size());
    for (size_t i = 0; i < p.parsedStrings; ++i)
        ids[i] = intern(p.run.strings.texts()[i]);
    return ids;
}

// A part into an in-memory run (lanes after the run's, strings through its table).
void appendPart(Run& run, FilePart& p)
{
    const auto laneBase = static_cast<uint32_t>(run.lanes.size());
    for (Lane& lane : p.run.lanes) {
        lane.id = LaneId{static_cast<uint32_t>(run.lanes.size())};
        run.lanes.push_back(std::move(lane));
    }
    const std::vector<StringId> ids = mapStrings(p, [&](std::string_view s) { return run.strings.intern(s); });
    run.spans.reserve(run.spans.size() + p.run.spans.size());
    for (Span s : p.run.spans) {
        s.lane = LaneId{laneBase + s.lane.v};
        s.name = ids[s.name.v];
        run.spans.push_back(s);
    }
    for (Instant in : p.run.instants) {
        in.lane = LaneId{laneBase + in.lane.v};
        in.name = ids[in.name.v];
        run.instants.push_back(in);
    }
    run.steps.insert(run.steps.end(), p.run.steps.begin(), p.run.steps.end());
    run.ranks.insert(run.ranks.end(), p.run.ranks.begin(), p.run.ranks.end());
}

// A part into the run database: lanes, strings, steps, spans, instants, ranks, one commit.
// Clocks: an import's times are in one clock already (writeRun stores zero offsets the same way).
Status writePart(RunWriter& w, FilePart& p, uint32_t& laneBase)
{
    for (const Lane& lane : p.run.lanes) {
        auto id = w.addLane(lane);
        if (!id)
            return std::unexpected(id.error());
    }
    const std::vector<StringId> ids = mapStrings(p, [&](std::string_view s) { return w.intern(s); });
    for (const Step& st : p.run.steps)
        if (auto s = w.addStep(st); !s)
            return s;
    constexpr size_t kChunk = 1 << 16;
    std::vector<Span> chunk;
    const std::vector<Span>& spans = p.run.spans;
    for (size_t i = 0; i < spans.size(); i += kChunk) {
        chunk.assign(spans.begin() + static_cast<ptrdiff_t>(i), spans.begin() + static_cast<ptrdiff_t>(std::min(spans.size(), i + kChunk)));
        for (Span& s : chunk) {
            s.lane = LaneId{laneBase + s.lane.v};
            s.name = ids[s.name.v];
        }
        if (auto s = w.appendSpans(chunk); !s)
            return s;
    }
    std::vector<Instant> instants = p.run.instants;
    for (Instant& in : instants) {
        in.lane = LaneId{laneBase + in.lane.v};
        in.name = ids[in.name.v];
    }
    if (auto s = w.appendInstants(instants); !s)
        return s;
    for (RankInfo r : p.run.ranks) {
        r.clockOffsetNs = r.clockOffsetEndNs = 0;
        r.clockSyncStartNs = r.clockSyncEndNs = 0;
        if (auto s = w.addRank(r); !s)
            return s;
    }
    laneBase += static_cast<uint32_t>(p.run.lanes.size());
    return w.commit();
}

// Parsing files on worker threads and taking their parts in file order on the calling thread,
// with a bound on what is in flight: a file is started only while fewer than jobs + 2 files are
// parsed and not yet taken and their input bytes stay within kImportInFlightBytes (a file alone
// may exceed it: it is then parsed alone). Parts are freed as soon as they are taken.
class PartPipeline {
public:
    PartPipeline(const std::vector<std::string>& files, const ImportOptions& options, const ImportProgressFn& progress)
        : m_files(files), m_options(options), m_progress(progress), m_ready(files.size())
    {
        for (const auto& f : files) {
            std::error_code ec;
            const auto size = std::filesystem::file_size(f, ec);
            int64_t weight = ec ? 0 : static_cast<int64_t>(size);
            m_sizes.push_back(weight);
            m_total += weight;
            auto format = detectTraceFormat(f);
            if (format && *format == TraceFormat::KinetoJsonGz)
                weight *= kGzipInflation;
            m_weights.push_back(weight);
        }
        const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
        const size_t jobs = options.jobs > 0 ? static_cast<size_t>(options.jobs) : hardware;
        m_jobs = std::max<size_t>(1, std::min(jobs, files.size()));
        m_window = m_jobs + 2;
    }

    // Calls take(part, index) for every file in order; the first parse error in file order, or
    // take's first error, ends it (the workers stop after the file each is on).
    template <class Take>
    Status run(Take&& take)
    {
        m_start = std::chrono::steady_clock::now();
        std::vector<std::thread> workers;
        for (size_t k = 0; k < m_jobs; ++k)
            workers.emplace_back([this] { work(); });
        Status result;
        for (size_t i = 0; i < m_files.size() && result; ++i) {
            std::unique_ptr<FilePart> part = next(i);
            if (!part->parsed)
                result = std::move(part->parsed);
            else
                result = take(*part, i);
            part.reset();
            std::lock_guard lock(m_mutex);
            m_inFlight -= m_weights[i];
            ++m_taken;
            m_wake.notify_all();
        }
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
            m_wake.notify_all();
        }
        for (auto& w : workers)
            w.join();
        return result;
    }

    int64_t totalBytes() const { return m_total; }

private:
    // File i's part, waiting for it; reports progress while it waits and once it has it.
    std::unique_ptr<FilePart> next(size_t i)
    {
        std::unique_lock lock(m_mutex);
        while (!m_ready[i]) {
            if (m_wake.wait_for(lock, std::chrono::milliseconds(250), [&] { return m_ready[i] != nullptr; }))
                break;
            lock.unlock();
            report(i);
            lock.lock();
        }
        std::unique_ptr<FilePart> part = std::move(m_ready[i]);
        lock.unlock();
        report(i + 1);
        return part;
    }

    void report(size_t filesDone)
    {
        if (!m_progress)
            return;
        ImportProgress p;
        p.filesDone = static_cast<int>(filesDone);
        p.files = static_cast<int>(m_files.size());
        p.bytesDone = std::min(m_total, m_parsedBytes.load());
        p.bytesTotal = m_total;
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
        m_progress(p);
    }

    void work()
    {
        for (;;) {
            size_t i = 0;
            {
                std::unique_lock lock(m_mutex);
                m_wake.wait(lock, [&] {
                    if (m_stop || m_next >= m_files.size())
                        return true;
                    const bool alone = m_next == m_taken; // nothing else parsed or in parsing
                    return alone || (m_next - m_taken < m_window && m_inFlight + m_weights[m_next] <= kImportInFlightBytes);
                });
                if (m_stop || m_next >= m_files.size())
                    return;
                i = m_next++;
                m_inFlight += m_weights[i];
            }
            auto part = std::make_unique<FilePart>();
            int64_t counted = 0;
            const ProgressFn progress = [&](int64_t consumed) {
                m_parsedBytes += consumed - counted;
                counted = consumed;
            };
            parsePart(m_files[i], i, m_options, progress, *part);
            m_parsedBytes += m_sizes[i] - counted;
            std::lock_guard lock(m_mutex);
            m_ready[i] = std::move(part);
            m_wake.notify_all();
        }
    }

    const std::vector<std::string>& m_files;
    const ImportOptions& m_options;
    const ImportProgressFn& m_progress;
    std::vector<int64_t> m_sizes, m_weights;
    int64_t m_total = 0;
    size_t m_jobs = 1, m_window = 3;
    std::chrono::steady_clock::time_point m_start;
    std::atomic<int64_t> m_parsedBytes{0};
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::vector<std::unique_ptr<FilePart>> m_ready;
    size_t m_next = 0, m_taken = 0;
    int64_t m_inFlight = 0;
    bool m_stop = false;
};

// A trace whose JSON broke or ended early was not imported whole: no run file is written
// (outputs whole or absent). The in-memory import (importTraceBytes) keeps the part before.
Status refuseDamaged(const std::vector<Diagnostic>& diagnostics)
{
    for (const Diagnostic& d : diagnostics)
        if (const auto kind = diagnosticKindFromName(d.kind);
            kind == DiagnosticKind::MalformedJson || kind == DiagnosticKind::TruncatedInput) {
            // The message is the kind's description, then the detail in parentheses: the detail
            // says where (the description's "events before the break were imported" is not so here).
            std::string detail = d.message;
            const std::string description = diagnosticInfo(*kind).description;
            if (detail.starts_with(description + " (") && detail.ends_with(")"))
                detail = detail.substr(description.size() + 2, detail.size() - description.size() - 3);
            else
                detail.clear();
            return fail(ErrorCode::BadFile, "the trace is damaged: " + std::string(kind == DiagnosticKind::MalformedJson ? "malformed JSON" : "truncated input")
                        + (detail.empty() ? "" : ": " + detail) + "; nothing was written");
        }
    return {};
}

// The run assembled in memory from parts taken in file order.
Result<Run> assembleRun(PartPipeline& pipeline, const std::vector<std::string>& names, const ImportOptions& options,
                        ImportStats* stats)
{
    Run run;
    Totals totals;
    Status s = pipeline.run([&](FilePart& p, size_t i) -> Status {
        if (totals.account(p, i, names))
            appendPart(run, p);
        return {};
    });
    if (!s)
        return std::unexpected(s.error());
    run.strings.intern("allreduce"); // where one interner over every file has it
    auto header = finishRun(totals, options, names, stats);
    if (!header)
        return std::unexpected(header.error());
    run.config = std::move(header->config);
    run.buckets = std::move(header->buckets);
    run.diagnostics = std::move(header->diagnostics);
    run.clocksCorrected = true; // a trace's ranks share one clock, or say so (relative timestamps)
    run.normalize();
    return run;
}

// The run written file by file as the parts come (the run database's one writer), its header
// last, into `output`'s private file; the caller commits it into place. The writer's errors say
// which file could not be written; the traces' are returned as they are.
Status writeImport(PartPipeline& pipeline, const std::vector<std::string>& names, const ImportOptions& options,
                   const OutputFile& output, const std::string& runName, ImportStats& stats)
{
    const auto written = [&](Status st) -> Status {
        if (st)
            return st;
        const Error e = output.explain(st.error());
        return fail(e, "cannot write " + output.destination() + ": " + e.message);
    };
    RunConfig provisional;
    provisional.name = runName;
    auto writer = RunWriter::create(output.path(), provisional, RunWriter::Mode::CreateNew);
    if (!writer)
        return written(std::unexpected(writer.error()));
    RunWriter& w = **writer;
    Totals totals;
    uint32_t laneBase = 0;
    Status s = pipeline.run([&](FilePart& p, size_t i) -> Status {
        if (!totals.account(p, i, names))
            return {}; // a rank error: the answer once every file is parsed
        return written(writePart(w, p, laneBase));
    });
    if (!s)
        return s;
    auto header = finishRun(totals, options, names, &stats);
    if (!header)
        return std::unexpected(header.error());
    if (auto d = refuseDamaged(header->diagnostics); !d)
        return d;
    w.intern("allreduce"); // where one interner over every file has it
    header->config.name = runName;
    if (auto c = w.setConfig(header->config); !c)
        return written(c);
    for (const Bucket& b : header->buckets)
        if (auto c = w.addBucket(b); !c)
            return written(c);
    for (const Diagnostic& g : header->diagnostics)
        if (auto c = w.addDiagnostic(g); !c)
            return written(c);
    return written(w.close());
}

std::function<void(const ImportProgress&)> asFraction(std::function<void(double)> progress)
{
    if (!progress)
        return {};
    return [progress = std::move(progress)](const ImportProgress& p) {
        progress(p.bytesTotal > 0 ? 0.95 * double(p.bytesDone) / double(p.bytesTotal) : 0.0);
    };
}

} // namespace

Result<Run> importTracesToRun(const std::vector<std::string>& files, const ImportOptions& options,
                              std::function<void(double)> progress, ImportStats* stats)
{
    if (files.empty())
        return fail("no trace files to import");
    const ImportProgressFn fraction = asFraction(std::move(progress));
    PartPipeline pipeline(files, options, fraction);
    return assembleRun(pipeline, files, options, stats);
}

Result<ImportStats> importTraces(const std::vector<std::string>& files, const std::string& outDb,
                                 const ImportOptions& options, const ImportProgressFn& progress)
{
    // The output is checked before the (possibly long) import: not an input, not a folder or a
    // device, its folder there, not existing without overwrite.
    if (auto s = refuseOutputIsInput(outDb, files); !s)
        return std::unexpected(s.error());
    if (auto s = checkOutputPath(outDb, options.overwrite); !s)
        return std::unexpected(s.error());
    if (files.empty())
        return fail("no trace files to import");
    // Written in a private folder beside the destination and moved into place once whole.
    auto output = OutputFile::create(outDb, options.overwrite);
    if (!output)
        return std::unexpected(output.error());
    const std::string runName = !options.runName.empty() ? options.runName : std::filesystem::path(outDb).stem().string();
    ImportStats stats;
    PartPipeline pipeline(files, options, progress);
    if (auto s = writeImport(pipeline, files, options, *output, runName, stats); !s)
        return std::unexpected(s.error());
    if (options.storeSummaries)
        if (auto s = storeSummaries(output->path()); !s)
            return std::unexpected(output->explain(s.error()));
    if (auto s = output->commit(); !s)
        return fail(s.error(), "cannot write " + outDb + ": " + s.error().message);
    return stats;
}

Result<ImportStats> importTraces(const std::vector<std::string>& files, const std::string& outDb,
                                 const ImportOptions& options, std::function<void(double)> progress)
{
    auto stats = importTraces(files, outDb, options, asFraction(progress));
    if (stats && progress)
        progress(1.0);
    return stats;
}

Result<Run> importTraceBytes(std::string_view bytes, const ImportOptions& options, ImportStats* stats)
{
    FilePart part;
    RankTrace trace;
    Interner strings(part.run.strings);
    const TraceFormat format = detectTraceFormat(bytes.substr(0, 4096));
    Status s;
    switch (format) {
    case TraceFormat::KinetoJson:
    case TraceFormat::KinetoJsonGz: {
        auto source = memorySource(bytes, format == TraceFormat::KinetoJsonGz);
        s = parseKineto(*source, options, strings, trace, {});
        break;
    }
    case TraceFormat::NsysSqlite: s = parseNsysImage(bytes, options, strings, trace); break;
    case TraceFormat::Unknown: return fail(ErrorCode::BadFile, unknownFormatMessage("the input"));
    }
    if (!s)
        return std::unexpected(s.error());
    part.truncatedNames = strings.truncated();
    const std::vector<std::string> names{"<memory>"};
    finishPart(trace, 0, names[0], options, part);
    Run run;
    Totals totals;
    if (totals.account(part, 0, names))
        appendPart(run, part);
    run.strings.intern("allreduce");
    auto header = finishRun(totals, options, names, stats);
    if (!header)
        return std::unexpected(header.error());
    run.config = std::move(header->config);
    run.buckets = std::move(header->buckets);
    run.diagnostics = std::move(header->diagnostics);
    run.clocksCorrected = true;
    run.normalize();
    return run;
}

} // namespace lockstep::core
