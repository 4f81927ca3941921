// The closed list of diagnostic kinds (Perfetto's stats table): every anomaly an importer, the
// recorder or the reader counts into a run's diagnostics table is one of these, declared here
// once with its severity and a description. The strings are what the diagnostics table stores,
// so they never change; a new anomaly gets a new entry here.
//
// The writer (RunWriter::addDiagnostic) refuses a kind that is not in this list, with a message
// naming it: a call site that invents a kind fails its tests at once instead of growing the
// table by accident. Kinds an earlier version wrote stay in the list (marked below), so runs
// written then can still be copied and merged.
#pragma once

#include "lockstep/core/types.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lockstep::core {

enum class DiagnosticKind : uint16_t {
    // Importers, per event or row.
    MissingPhase,
    MissingTimestamp,
    MissingDuration,
    MissingName,
    WrongType,
    TimestampOutOfRange,
    NegativeDuration,
    UnmatchedBeginEnd,
    UnknownPhase,
    IgnoredPhase,
    PythonFunctionsSkipped,
    MalformedEvent,
    EventNotObject,
    MalformedJson,
    TruncatedInput,
    MalformedMetadata,
    DuplicateStep,
    MalformedStepName,
    UnknownStringId,
    MalformedTable,
    NameTruncated,
    // Importers, per file or run.
    RelativeTimestamps,
    RankOutsideWorldSize,
    NoStepsFound,
    // Pairing a host all-reduce's call with the op that runs it (numberBuckets, import.cpp).
    AllReduceLaunchWithoutRunner,
    AllReduceRunnerWithoutLaunch,
    AllReducePairingAmbiguous,
    // Step attribution of device work (importers and the CUPTI collector).
    DeviceSpanWithoutLaunch,
    DeviceSpanOutsideSteps,
    DeviceRecordsDropped,
    DeviceActivityNotRecorded,
    // The recorder.
    ReplicaCheck,
    ReplicaDrift,
    // The reader.
    EventOnUnknownLane,
    ClockAssumedShared,
    // The Python recorder (python/lockstep).
    ClockOffsetNotMeasured,
    BucketLayoutRebuilt,
    RecorderError,
    RecorderCallbackError,
    IncompleteStep,
    NoOptimizerStep,
    SecondDdpNotRecorded,
    LinkNotProbed,
    // Collectives that run on the host of a GPU rank (gloo over CUDA tensors; import.cpp).
    HostCollectivesOnDevice,
    CollectiveStagingCopy,
    BucketBytesFromStaging,
    BucketBytesUnknown,
    // Written by earlier versions only (kept so their runs can be copied and merged).
    LegacyTraceEventsNotArray,
    LegacyEmptyTrace,
};

struct DiagnosticKindInfo {
    DiagnosticKind kind;
    const char* name;        // stored in diagnostics.kind
    Severity severity;
    const char* description; // stored in diagnostics.message
};

// Every kind, in declaration order.
std::span<const DiagnosticKindInfo> diagnosticKinds();
const DiagnosticKindInfo& diagnosticInfo(DiagnosticKind kind);
std::optional<DiagnosticKind> diagnosticKindFromName(std::string_view name);
// A diagnostic row of this kind: severity and message from the list; `detail`, when given, is
// appended to the message in parentheses ("kernel × 700, memcpy × 175").
Diagnostic makeDiagnostic(DiagnosticKind kind, int64_t count, std::string_view detail = {});

} // namespace lockstep::core
