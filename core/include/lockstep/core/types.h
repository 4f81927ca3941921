// Value types of a run: the in-memory image of one run database (see schema.cpp for the
// on-disk form). Everything here is plain data; analyses are pure functions over it.
//
// Time: every timestamp is int64 nanoseconds of CLOCK_REALTIME. Spans and instants are stored
// in the recording rank's own clock; RankInfo carries that rank's offset to rank 0, and
// RunReader::load() applies it (Run::clocksCorrected tells whether it did).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep::core {

using TimeNs = int64_t;
inline constexpr int32_t kNoStep = -1;
inline constexpr int32_t kNoBucket = -1;

// Typed indices (heaptrack's habit): a StringId cannot be passed where a LaneId is meant.
struct StringId {
    uint32_t v = 0;
    friend bool operator==(StringId, StringId) = default;
};
struct LaneId {
    uint32_t v = 0;
    friend bool operator==(LaneId, LaneId) = default;
    friend auto operator<=>(LaneId, LaneId) = default;
};

// Interned strings: span names repeat millions of times, so spans hold a StringId.
// Id 0 is always the empty string.
class StringTable {
public:
    StringTable();
    StringId intern(std::string_view text);
    const std::string& text(StringId id) const;
    size_t size() const { return m_texts.size(); }
    const std::vector<std::string>& texts() const { return m_texts; }

private:
    std::vector<std::string> m_texts;
    std::unordered_map<std::string, uint32_t> m_index;
};

enum class SpanKind : uint8_t {
    DataLoad = 0,   // producing the batch
    Forward = 1,    // forward of one module (or of the whole model)
    Backward = 2,   // one backward segment, cut at gradient-ready instants
    Optimizer = 3,  // optimizer step
    Comm = 4,       // a host-side collective, launch -> completion (bucket all-reduce, broadcast)
    Wait = 5,       // the end of backward waiting for outstanding buckets
    Kernel = 6,     // a GPU compute kernel
    CommKernel = 7, // a GPU communication kernel (NCCL)
    Memcpy = 8,
    Memset = 9,
    CpuOp = 10,     // an imported host operator (torch.profiler)
    Other = 11,
};
inline constexpr int kSpanKindCount = 12;
const char* spanKindName(SpanKind kind);
bool spanKindFromName(std::string_view name, SpanKind* out);

// The one classification of span kinds (docs/design.md; Holistic Trace Analysis classifies GPU work
// the same way): every kind is exactly one of compute, communication, memory or other. The step
// breakdown's C, M and Mem, the timeline's strips and the importers all ask these functions.
//  - compute: forward, backward, optimizer and imported host operators on the host; every
//    kernel that is neither communication nor a memory operation on a GPU.
//  - communication: host collectives (launch -> completion) and communication kernels (NCCL).
//  - memory: memcpy and memset (DMA engines): neither compute nor communication.
//  - other: data loading, the wait at the end of backward, annotations, anything unknown.
enum class SpanCategory : uint8_t { Compute = 0, Communication = 1, Memory = 2, Other = 3 };
constexpr SpanCategory spanCategory(SpanKind k)
{
    switch (k) {
    case SpanKind::Forward:
    case SpanKind::Backward:
    case SpanKind::Optimizer:
    case SpanKind::Kernel:
    case SpanKind::CpuOp: return SpanCategory::Compute;
    case SpanKind::Comm:
    case SpanKind::CommKernel: return SpanCategory::Communication;
    case SpanKind::Memcpy:
    case SpanKind::Memset: return SpanCategory::Memory;
    case SpanKind::DataLoad:
    case SpanKind::Wait:
    case SpanKind::Other: break;
    }
    return SpanCategory::Other;
}
constexpr const char* spanCategoryName(SpanCategory c)
{
    switch (c) {
    case SpanCategory::Compute: return "compute";
    case SpanCategory::Communication: return "communication";
    case SpanCategory::Memory: return "memory";
    case SpanCategory::Other: break;
    }
    return "other";
}
constexpr bool isCompute(SpanKind k) { return spanCategory(k) == SpanCategory::Compute; }
constexpr bool isCommunication(SpanKind k) { return spanCategory(k) == SpanCategory::Communication; }
constexpr bool isMemory(SpanKind k) { return spanCategory(k) == SpanCategory::Memory; }
// Work that runs on a device and is launched by host code (its step is the launching step).
constexpr bool isDeviceKind(SpanKind k)
{
    return k == SpanKind::Kernel || k == SpanKind::CommKernel || k == SpanKind::Memcpy
        || k == SpanKind::Memset;
}

enum class LaneKind : uint8_t {
    Compute = 0,    // the rank's training thread: data, forward, backward, wait, optimizer
    Comm = 1,       // the rank's communication: one span per collective
    GpuStream = 2,  // one CUDA stream of one device
    HostThread = 3, // an imported host thread
};
const char* laneKindName(LaneKind kind);
bool laneKindFromName(std::string_view name, LaneKind* out);

struct Lane {
    LaneId id;
    int32_t rank = 0;
    LaneKind kind = LaneKind::Compute;
    int32_t device = -1;  // GPU index for GpuStream lanes
    int64_t stream = -1;  // CUDA stream or host thread id
    std::string name;     // shown in the timeline ("compute", "comm", "stream 7")
};

// The hot struct: 40 bytes. Rare fields live in side tables (buckets, config).
struct Span {
    TimeNs start = 0;
    TimeNs end = 0;
    int64_t bytes = 0;       // payload of a collective or memcpy; 0 otherwise
    LaneId lane;
    StringId name;
    int32_t step = kNoStep;
    int32_t bucket = kNoBucket;
    SpanKind kind = SpanKind::Other;
    TimeNs duration() const { return end - start; }
};

enum class InstantKind : uint8_t {
    GradReady = 0, // a parameter's gradient became ready (name = parameter name)
    Marker = 1,
};

struct Instant {
    TimeNs ts = 0;
    LaneId lane;
    StringId name;
    int32_t step = kNoStep;
    int32_t bucket = kNoBucket;
    InstantKind kind = InstantKind::GradReady;
};

struct Step {
    int32_t rank = 0;
    int32_t step = 0;
    TimeNs start = 0;
    TimeNs end = 0;
    double loss = std::numeric_limits<double>::quiet_NaN();
    int64_t samples = 0; // samples this rank processed in this step
    // The rank's training thread during the step, from the kernel's scheduler statistics
    // (Linux /proc/thread-self/schedstat): time it ran on a CPU, and time it was runnable but
    // waited for a CPU (run queue). -1 = not measured (imported traces, files before schema 3).
    // What tells a rank the machine slowed (a long run-queue wait) from one with more work.
    int64_t cpuNs = -1;
    int64_t runqNs = -1;
};

struct Bucket {
    int32_t index = 0;
    int64_t bytes = 0;
    std::vector<std::string> params; // parameter names, in the order they were packed
};

// How a rank's times were put on rank 0's clock (clock_sync.h alignClocks; docs/design.md
// "Time and clocks"). Not stored: the reader decides it from boot ids and hosts.
enum class ClockBasis : uint8_t {
    Measured = 0,   // another host: the measured offset, uncertain by clockUncertaintyNs
    Reference,      // rank 0 itself
    SameBoot,       // the same kernel boot id as rank 0: one clock, offset 0, uncertainty 0
    SameHostName,   // a file without boot ids whose ranks all name one host: taken as one clock
    NotMeasured,    // no offset was measured: its own clock, uncertainty unknown
};
const char* clockBasisName(ClockBasis basis); // "measured", "rank 0", "same boot", ...

// Clock alignment: offset = rank 0's clock - this rank's clock, measured by ping-pong over the
// rendezvous store at start and again at the end. Between the two samples the correction is
// interpolated linearly (drift); outside, the nearer sample holds. Ranks that share rank 0's
// clock (same boot id) take no offset at all: the reader zeroes it (clock_sync.h).
struct RankInfo {
    int32_t rank = 0;
    std::string host;
    int64_t pid = 0;
    std::string device;            // "cpu", "cuda:0"
    TimeNs clockOffsetNs = 0;      // at clockSyncStartNs
    TimeNs clockRttNs = 0;         // round trip of the kept sample
    TimeNs clockSyncStartNs = 0;   // local time of the start measurement (0 = unknown)
    TimeNs clockOffsetEndNs = 0;   // at clockSyncEndNs
    TimeNs clockSyncEndNs = 0;     // local time of the end measurement (0 = none)
    std::string bootId;            // /proc/sys/kernel/random/boot_id ("" = not recorded)
    TimeNs clockUncertaintyNs = 0; // the offset is right within +- this (half the kept round trip)
    ClockBasis clockBasis = ClockBasis::Measured; // set by the reader (not stored)
    TimeNs correct(TimeNs local) const;
};

enum class RunStatus : uint8_t { Running = 0, Completed = 1, Failed = 2 };
const char* runStatusName(RunStatus status);
bool runStatusFromName(std::string_view name, RunStatus* out);

// Every field but `extra` is a row of kRunConfigFields (fields.h): the one list that storage,
// export, import, the Python binding, merge, comparison and reports iterate.
struct RunConfig {
    std::string name;            // shown in the browser; defaults to the file's stem
    std::string source = "lockstep"; // lockstep | kineto | nsys
    std::string model;           // mlp | transformer | convnet | imported
    std::string modelArgs;       // e.g. "layers=8 width=1024"
    int32_t worldSize = 1;
    std::string backend;         // gloo | nccl
    std::string device;          // cpu | cuda
    int64_t bucketCapBytes = 25ll << 20;
    int64_t firstBucketCapBytes = 1ll << 20;
    int64_t batchPerRank = 0;
    int32_t stepsPlanned = 0;
    int32_t warmupSteps = 3;     // steady-state metrics exclude the first warmupSteps steps
    std::string optimizer;       // sgd | adamw
    std::string compress;        // none | fp16 | bf16
    int32_t accumulate = 1;
    double linkGbps = 0.0;       // emulated link speed; 0 = not emulated
    std::string commandLine;
    std::string host;
    TimeNs createdNs = 0;
    TimeNs endedNs = 0;
    RunStatus status = RunStatus::Running;
    std::string failureCause;
    std::string frameworkVersion; // what recorded it: "torch 2.11.0+cu130"; "" = not recorded
    std::map<std::string, std::string> extra; // anything else: fault injection, seeds, ...
};

enum class Severity : uint8_t { Info = 0, Warning = 1, Error = 2 };
const char* severityName(Severity s);
bool severityFromName(std::string_view name, Severity* out);

// Perfetto's habit: anomalies are counted per kind, never abort an import or a recording.
struct Diagnostic {
    std::string kind;      // "misplaced end event", "replica drift", ...
    Severity severity = Severity::Warning;
    int64_t count = 0;
    std::string message;
};

// One whole run in memory. Invariants after RunReader::load():
//  - lanes[i].id.v == i; spans sorted by (lane, start, end); instants sorted by (lane, ts)
//  - steps sorted by (rank, step); buckets sorted by index; ranks sorted by rank
struct Run {
    RunConfig config;
    std::vector<RankInfo> ranks;
    std::vector<Lane> lanes;
    std::vector<Step> steps;
    std::vector<Bucket> buckets;
    std::vector<Span> spans;
    std::vector<Instant> instants;
    std::vector<Diagnostic> diagnostics;
    StringTable strings;
    bool clocksCorrected = false;

    // [first, last) range of `spans` that belong to a lane (binary search on the sort order).
    std::pair<size_t, size_t> laneSpanRange(LaneId lane) const;
    // Sorts spans, instants, steps and buckets into the invariant order above.
    void normalize();
};

} // namespace lockstep::core
