// The closed list of diagnostic kinds (see diagnostics.h).
#include "lockstep/core/diagnostics.h"

#include <array>

namespace lockstep::core {

namespace {
using K = DiagnosticKind;
constexpr Severity kInfo = Severity::Info;
constexpr Severity kWarn = Severity::Warning;
constexpr Severity kError = Severity::Error;

constexpr std::array kKinds = {
    DiagnosticKindInfo{K::MissingPhase, "missing ph", kWarn, "events without a phase (ph) were skipped"},
    DiagnosticKindInfo{K::MissingTimestamp, "missing ts", kWarn,
                       "events or rows without a timestamp (ts, start/end) were skipped"},
    DiagnosticKindInfo{K::MissingDuration, "missing dur", kWarn,
                       "complete (X) events without a duration (dur) were skipped"},
    DiagnosticKindInfo{K::MissingName, "missing name", kInfo, "events without a name were imported as \"?\""},
    DiagnosticKindInfo{K::WrongType, "wrong type", kWarn,
                       "events whose name, ts or dur has the wrong JSON type (skipped, or named \"?\")"},
    DiagnosticKindInfo{K::TimestampOutOfRange, "timestamp out of range", kWarn,
                       "events whose time does not fit in int64 nanoseconds were skipped"},
    DiagnosticKindInfo{K::NegativeDuration, "negative duration", kWarn, "events that end before they start were skipped"},
    DiagnosticKindInfo{K::UnmatchedBeginEnd, "unmatched B/E", kWarn,
                       "begin (B) or end (E) events, or ranges, without their other half were skipped"},
    DiagnosticKindInfo{K::UnknownPhase, "unknown phase", kWarn, "events with an unknown phase (ph) were skipped"},
    DiagnosticKindInfo{K::IgnoredPhase, "ignored event phase", kInfo,
                       "instant, counter, flow, async and object events are not imported (flows are read for "
                       "launch correlation)"},
    DiagnosticKindInfo{K::PythonFunctionsSkipped, "python_function events skipped", kInfo,
                       "python_function events are skipped (lockstep import --python-functions keeps them)"},
    DiagnosticKindInfo{K::MalformedEvent, "malformed event", kWarn, "events that are not valid JSON objects were skipped"},
    DiagnosticKindInfo{K::EventNotObject, "event is not an object", kWarn,
                       "elements of traceEvents that are not JSON objects were skipped"},
    DiagnosticKindInfo{K::MalformedJson, "malformed JSON (import stopped)", kError,
                       "the JSON structure broke; events before the break were imported"},
    DiagnosticKindInfo{K::TruncatedInput, "truncated input", kError,
                       "the file ends inside the JSON document; events up to there were imported"},
    DiagnosticKindInfo{K::MalformedMetadata, "malformed metadata", kWarn,
                       "a top-level member (distributedInfo, baseTimeNanoseconds, lockstepRun) could not be read"},
    DiagnosticKindInfo{K::DuplicateStep, "duplicate step", kWarn,
                       "a step marker (ProfilerStep#N, NVTX step range) appears more than once; the first is the step"},
    DiagnosticKindInfo{K::MalformedStepName, "malformed step name", kWarn, "ProfilerStep# events without a step number"},
    DiagnosticKindInfo{K::UnknownStringId, "unknown string id", kWarn,
                       "names that refer to a StringIds row that does not exist are shown as \"?\""},
    DiagnosticKindInfo{K::MalformedTable, "malformed table", kError, "tables without the columns they need were skipped"},
    DiagnosticKindInfo{K::NameTruncated, "name truncated", kInfo,
                       "names longer than 1024 bytes were cut to 1024 bytes (at a character boundary)"},
    DiagnosticKindInfo{K::RelativeTimestamps, "relative timestamps", kWarn,
                       "ts are relative to the profiler start (no baseTimeNanoseconds): ranks are compared as if "
                       "their profilers had started at the same instant"},
    DiagnosticKindInfo{K::RankOutsideWorldSize, "rank outside world size", kWarn,
                       "a rank is not below the world size given for the run"},
    DiagnosticKindInfo{K::NoStepsFound, "no steps found", kWarn,
                       "no ProfilerStep#N (or NVTX step range) found: per-step analyses are empty"},
    DiagnosticKindInfo{K::AllReduceLaunchWithoutRunner, "all-reduce launch without runner", kWarn,
                       "all-reduce calls (c10d::allreduce_) that found no op running them (gloo:all_reduce) on a "
                       "rank whose trace has such ops: the profiler dropped it. The call alone is that bucket's "
                       "all-reduce: its launch is right, but its completion is the call's return, before the "
                       "collective ended, so its duration is too short and its bandwidth too high; where the "
                       "dropped op was not its step's last, an earlier call of the step took the next op, so "
                       "that bucket's completion is too late"},
    DiagnosticKindInfo{K::AllReduceRunnerWithoutLaunch, "all-reduce runner without launch", kWarn,
                       "ops that ran an all-reduce (gloo:all_reduce) found no call of their step waiting for "
                       "them (the profiler dropped the call): they are no bucket's all-reduce; their time "
                       "still counts as communication"},
    DiagnosticKindInfo{K::AllReducePairingAmbiguous, "all-reduce pairing ambiguous", kWarn,
                       "ops that ran an all-reduce started while calls of more than one process group were "
                       "waiting, and the trace does not say which group each op ran for (gloo:all_reduce "
                       "never does): each was paired with the oldest waiting call, which may be another "
                       "group's, so those buckets' completions and durations may belong to another "
                       "all-reduce"},
    DiagnosticKindInfo{K::DeviceSpanWithoutLaunch, "device span without launch record", kWarn,
                       "GPU kernels, copies or memsets whose launching host call is not in the trace (no "
                       "correlation id that matches a runtime call): they belong to no step"},
    DiagnosticKindInfo{K::DeviceSpanOutsideSteps, "device span launched outside every step", kWarn,
                       "GPU kernels, copies or memsets launched by host code outside every step window: they "
                       "belong to no step"},
    DiagnosticKindInfo{K::DeviceRecordsDropped, "device records dropped", kError,
                       "the GPU activity collector dropped records (its buffers were full)"},
    DiagnosticKindInfo{K::DeviceActivityNotRecorded, "device activity not recorded", kWarn,
                       "a run on a GPU without its kernels, copies and memsets: the activity collector "
                       "(CUPTI) could not start; only host spans were recorded"},
    DiagnosticKindInfo{K::ReplicaCheck, "replica check", kInfo, "replicas were compared for equal parameters"},
    DiagnosticKindInfo{K::ReplicaDrift, "replica drift", kError,
                       "replicas' parameters differ: the ranks no longer train the same model"},
    DiagnosticKindInfo{K::EventOnUnknownLane, "event on unknown lane", kWarn,
                       "spans or instants that name a lane the file does not have were skipped"},
    DiagnosticKindInfo{K::ClockAssumedShared, "clock assumed shared", kInfo,
                       "the ranks' clocks were taken as one clock from their host names (the file has no boot ids)"},
    DiagnosticKindInfo{K::ClockOffsetNotMeasured, "clock offset", kWarn,
                       "a rank's clock offset to rank 0 could not be measured; its times are its own clock's"},
    DiagnosticKindInfo{K::BucketLayoutRebuilt, "bucket layout rebuilt", kInfo,
                       "DDP rebuilt its buckets after the first step; the buckets table holds the rebuilt layout"},
    DiagnosticKindInfo{K::RecorderError, "recorder error", kError,
                       "the recorder failed inside a hook; training went on, the recording may be incomplete"},
    DiagnosticKindInfo{K::RecorderCallbackError, "recorder callback error", kWarn,
                       "a recorder callback raised; the recording may be incomplete"},
    DiagnosticKindInfo{K::IncompleteStep, "incomplete step", kInfo,
                       "the last step had no synchronized backward when recording ended; it is not in the run"},
    DiagnosticKindInfo{K::NoOptimizerStep, "no optimizer step", kInfo,
                       "no optimizer step of this model was seen; steps end at the next forward"},
    DiagnosticKindInfo{K::SecondDdpNotRecorded, "second DDP not recorded", kWarn,
                       "the script created more than one DistributedDataParallel; only the first is recorded"},
    DiagnosticKindInfo{K::LinkNotProbed, "link probe", kInfo,
                       "the link was not probed at attach: predictions take its latency from the run alone"},
    DiagnosticKindInfo{K::HostCollectivesOnDevice, "host collectives on a GPU rank", kInfo,
                       "all-reduces that launched no communication kernel (gloo over CUDA tensors) ran on host "
                       "threads: their spans are the rank's communication, and its training threads' work is "
                       "compute beside the kernels (docs/design.md, Categories)"},
    DiagnosticKindInfo{K::CollectiveStagingCopy, "collective staging copy", kInfo,
                       "device<->host copies launched inside a host collective are counted as that collective's "
                       "communication, not as memory"},
    DiagnosticKindInfo{K::BucketBytesFromStaging, "bucket size from staging copy", kInfo,
                       "the trace gives no size for these all-reduces (no record_param_comms): their bytes are "
                       "the bytes of the device-to-host copy that staged them"},
    DiagnosticKindInfo{K::BucketBytesUnknown, "bucket size unknown", kWarn,
                       "the trace gives no size for these all-reduces: their bytes and bandwidth read unknown"},
    DiagnosticKindInfo{K::LegacyTraceEventsNotArray, "traceEvents is not an array", kError,
                       "the traceEvents member is not an array; no events in it (written by earlier versions)"},
    DiagnosticKindInfo{K::LegacyEmptyTrace, "empty trace", kWarn, "the trace holds no events (written by earlier versions)"},
};

constexpr bool inDeclarationOrder()
{
    for (size_t i = 0; i < kKinds.size(); ++i)
        if (static_cast<size_t>(kKinds[i].kind) != i)
            return false;
    return true;
}
static_assert(inDeclarationOrder(), "kKinds must list every DiagnosticKind once, in declaration order");
static_assert(kKinds.size() == static_cast<size_t>(DiagnosticKind::LegacyEmptyTrace) + 1);
} // namespace

std::span<const DiagnosticKindInfo> diagnosticKinds() { return kKinds; }

const DiagnosticKindInfo& diagnosticInfo(DiagnosticKind kind) { return kKinds[static_cast<size_t>(kind)]; }

std::optional<DiagnosticKind> diagnosticKindFromName(std::string_view name)
{
    for (const DiagnosticKindInfo& k : kKinds)
        if (name == k.name)
            return k.kind;
    return std::nullopt;
}

Diagnostic makeDiagnostic(DiagnosticKind kind, int64_t count, std::string_view detail)
{
    const DiagnosticKindInfo& info = diagnosticInfo(kind);
    Diagnostic d;
    d.kind = info.name;
    d.severity = info.severity;
    d.count = count;
    d.message = info.description;
    if (!detail.empty())
        d.message += " (" + std::string(detail) + ")";
    return d;
}

} // namespace lockstep::core
