// The run's data model declared once (Perfetto's and heaptrack's habit: one table of field
// descriptors, everything else iterates it). Each RunConfig field is one row of kRunConfigFields:
// its name (the `run` table's SQL column, the JSON key of the Chrome export's "lockstepRun" header
// and of `report --json`'s "config", the Python binding's dict key: one name everywhere), its
// label and unit for people, its type, the schema version that added its column, what it takes
// part in, and the member it lives in.
//
// Who iterates it: the writer's UPDATE and the reader's SELECT of the run row (run_db.cpp; the
// SELECT leaves out columns newer than the file), the Chrome export's header and the Kineto
// importer's reading of it back, the Python binding's config dicts (both ways), merge's check
// that shards come from one run, the signature (comparison.cpp), what changed between runs
// (run_diff.cpp), the report's "config" (text and JSON), the run browser's configuration columns
// (ui). test_fields checks it against the `run` table of a file of every schema version.
// kRankFields does the same for RankInfo and the `ranks` table (the writer's INSERT, the reader's
// SELECT, the Python dicts, the Chrome export's ranks and the importer's reading of them), and
// kLaneFields, kStepFields, kBucketFields and kDiagnosticFields for the lanes, steps, buckets and
// diagnostics tables (INSERT, SELECT, Python dicts; the Chrome export's header lanes and buckets
// and step-event args, and their import). Spans and instants, the hot records, have their own
// storage (span_block.h) and are not in tables.
//
// Adding a RunConfig field (docs/design.md "The data model"): the member in types.h, one row
// here (at the end, sinceSchema = the new version), its column by a migration step in
// schema.cpp (kSchemaVersion + 1), and whoever fills it in. Nothing else names it.
//
// Light to include: types.h and the standard library only.
#pragma once

#include "lockstep/core/types.h"

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace lockstep::core {

enum class FieldType : uint8_t {
    Text,     // std::string; SQL TEXT
    Int32,    // int32_t; SQL INTEGER
    Int64,    // int64_t; SQL INTEGER
    Real,     // double; SQL REAL
    Enum,     // RunStatus, LaneKind or Severity; SQL TEXT by its name (enumName), JSON a string
    LaneRef,  // LaneId, visited as its uint32_t; SQL INTEGER
    TextList, // std::vector<std::string>; SQL TEXT joined by '\n', JSON an array of strings
};

// What a field takes part in besides storage, export and the Python dicts (which take every one).
enum FieldFlag : uint32_t {
    kFieldSetting = 1u << 0,      // in the configuration signature: runs are comparable only when
                                  // equal in it (comparison.h), "what changed" lists it first
    kFieldCircumstance = 1u << 1, // "what changed" lists it after the settings (run_diff.h)
    kFieldSameInShards = 1u << 2, // merge refuses shards that differ in it (merge.h)
    kFieldInReport = 1u << 3,     // on the report's "config" lines (the headline shows the rest)
    kFieldTokens = 1u << 4,       // space-separated tokens whose order means nothing: compared sorted
    kFieldLocal = 1u << 5,        // not in the Chrome export: what its import sets anew (the run's
                                  // times) or no longer needs (a rank's clock alignment)
    kFieldNullable = 1u << 6,     // its "unknown" (NaN for a real, -1 for an integer) is NULL in
                                  // SQL and absent from JSON; everywhere else the value itself
    kFieldInEvent = 1u << 7,      // a step's rank, start and end: in the Chrome export they are the
                                  // "X" event's pid, ts and dur, not its args
};

// One field of a record (RunConfig, RankInfo, Lane, Step, Bucket): a row of its table.
template <class Record>
struct Field {
    const char* name;   // SQL column, and the JSON and Python key unless `key` says otherwise
    const char* label;  // for people: the report, merge's messages
    const char* unit;   // "bytes", "ns", "Gbit/s", or "" (text, counts)
    FieldType type;
    int sinceSchema;    // the run-file schema version that added its column (1: the base DDL)
    uint32_t flags;
    // The member, in the slot of its type (the others null).
    std::string Record::*text = nullptr;
    int32_t Record::*i32 = nullptr;
    int64_t Record::*i64 = nullptr;
    double Record::*real = nullptr;
    RunStatus Record::*status = nullptr; // FieldType::Enum: one of these three
    LaneKind Record::*laneKind = nullptr;
    Severity Record::*severity = nullptr;
    LaneId Record::*laneId = nullptr;
    std::vector<std::string> Record::*list = nullptr;
    // The JSON key (Chrome export header and args) and Python dict key where it is not the SQL
    // column's name: a step's "start"/"end" (columns start_ns/end_ns), a bucket's "index" (column
    // idx: INDEX is an SQL keyword). Kept as first published, so readers of either keep working.
    const char* jsonKey = nullptr;

    constexpr bool has(uint32_t flag) const { return (flags & flag) != 0; }
    constexpr const char* key() const { return jsonKey ? jsonKey : name; }
};
using RunConfigField = Field<RunConfig>;
using RankField = Field<RankInfo>;
using LaneField = Field<Lane>;
using StepField = Field<Step>;
using BucketField = Field<Bucket>;
using DiagnosticField = Field<Diagnostic>;

namespace field_detail {
template <class R, class M>
constexpr Field<R> field(const char* n, const char* l, const char* u, int since, uint32_t f, M R::*m)
{
    Field<R> x{n, l, u, FieldType::Text, since, f};
    if constexpr (std::is_same_v<M, std::string>)
        x.text = m;
    else if constexpr (std::is_same_v<M, int32_t>)
        x.type = FieldType::Int32, x.i32 = m;
    else if constexpr (std::is_same_v<M, int64_t>)
        x.type = FieldType::Int64, x.i64 = m;
    else if constexpr (std::is_same_v<M, double>)
        x.type = FieldType::Real, x.real = m;
    else if constexpr (std::is_same_v<M, RunStatus>)
        x.type = FieldType::Enum, x.status = m;
    else if constexpr (std::is_same_v<M, LaneKind>)
        x.type = FieldType::Enum, x.laneKind = m;
    else if constexpr (std::is_same_v<M, Severity>)
        x.type = FieldType::Enum, x.severity = m;
    else if constexpr (std::is_same_v<M, LaneId>)
        x.type = FieldType::LaneRef, x.laneId = m;
    else {
        static_assert(std::is_same_v<M, std::vector<std::string>>, "a field's member has a type fields.h knows");
        x.type = FieldType::TextList, x.list = m;
    }
    return x;
}
// The same row under another JSON/Python key.
template <class R>
constexpr Field<R> keyed(Field<R> x, const char* jsonKey)
{
    x.jsonKey = jsonKey;
    return x;
}
} // namespace field_detail

// In the order of the `run` table's columns (schema.cpp); RunConfig::extra is not a column (the
// config_extra table) and is handled beside the table by every user.
inline constexpr auto kRunConfigFields = [] {
    using field_detail::field;
    constexpr uint32_t S = kFieldSetting, C = kFieldCircumstance, M = kFieldSameInShards, R = kFieldInReport;
    return std::array{
        field("name", "name", "", 1, 0, &RunConfig::name),
        field("source", "source", "", 1, S | M, &RunConfig::source),
        field("model", "model", "", 1, S | M, &RunConfig::model),
        field("model_args", "model arguments", "", 1, S | M | R | kFieldTokens, &RunConfig::modelArgs),
        field("world_size", "world size", "", 1, S | M, &RunConfig::worldSize),
        field("backend", "backend", "", 1, S | M, &RunConfig::backend),
        field("device", "device", "", 1, S | M, &RunConfig::device),
        field("bucket_cap_bytes", "bucket cap", "bytes", 1, S | M, &RunConfig::bucketCapBytes),
        field("first_bucket_cap_bytes", "first bucket cap", "bytes", 1, S | R, &RunConfig::firstBucketCapBytes),
        field("batch_per_rank", "batch per rank", "", 1, S, &RunConfig::batchPerRank),
        field("steps_planned", "steps planned", "", 1, C | M, &RunConfig::stepsPlanned),
        field("warmup_steps", "warm-up steps", "", 1, C, &RunConfig::warmupSteps),
        field("optimizer", "optimizer", "", 1, S | R, &RunConfig::optimizer),
        field("compress", "compression", "", 1, S | R, &RunConfig::compress),
        field("accumulate", "accumulation steps", "", 1, S | R, &RunConfig::accumulate),
        field("link_gbps", "emulated link", "Gbit/s", 1, S | R, &RunConfig::linkGbps),
        field("command_line", "command line", "", 1, C, &RunConfig::commandLine),
        field("host", "host", "", 1, C | R, &RunConfig::host),
        field("created_ns", "created", "ns", 1, kFieldLocal, &RunConfig::createdNs),
        field("ended_ns", "ended", "ns", 1, kFieldLocal, &RunConfig::endedNs),
        field("status", "status", "", 1, C, &RunConfig::status),
        field("failure_cause", "failure cause", "", 1, 0, &RunConfig::failureCause),
        field("framework_version", "framework", "", 5, C | R, &RunConfig::frameworkVersion),
    };
}();

// The `ranks` table's columns (schema.cpp), in its order: RankInfo but clockBasis (the reader's
// decision, not stored). kFieldLocal: not in the Chrome export, whose times are corrected already.
inline constexpr auto kRankFields = [] {
    using field_detail::field;
    constexpr uint32_t L = kFieldLocal;
    return std::array{
        field("rank", "rank", "", 1, 0, &RankInfo::rank),
        field("host", "host", "", 1, 0, &RankInfo::host),
        field("pid", "process id", "", 1, 0, &RankInfo::pid),
        field("device", "device", "", 1, 0, &RankInfo::device),
        field("clock_offset_ns", "clock offset", "ns", 1, L, &RankInfo::clockOffsetNs),
        field("clock_rtt_ns", "clock round trip", "ns", 1, L, &RankInfo::clockRttNs),
        field("clock_sync_start_ns", "clock sync start", "ns", 1, L, &RankInfo::clockSyncStartNs),
        field("clock_offset_end_ns", "clock offset at the end", "ns", 1, L, &RankInfo::clockOffsetEndNs),
        field("clock_sync_end_ns", "clock sync end", "ns", 1, L, &RankInfo::clockSyncEndNs),
        field("boot_id", "boot id", "", 4, L, &RankInfo::bootId),
        field("clock_uncertainty_ns", "clock uncertainty", "ns", 4, L, &RankInfo::clockUncertaintyNs),
    };
}();

// The `lanes` table's columns (schema.cpp) but max_dur_ns (the writer's, not a Lane field).
inline constexpr auto kLaneFields = [] {
    using field_detail::field;
    return std::array{
        field("id", "lane", "", 1, 0, &Lane::id),
        field("rank", "rank", "", 1, 0, &Lane::rank),
        field("kind", "kind", "", 1, 0, &Lane::kind),
        field("device", "device", "", 1, 0, &Lane::device),
        field("stream", "stream", "", 1, 0, &Lane::stream),
        field("name", "name", "", 1, 0, &Lane::name),
    };
}();

// The `steps` table's columns. In the Chrome export a step is an "X" event on its rank's steps
// track: rank, start and end are the event's pid, ts and dur (kFieldInEvent), the rest its args.
inline constexpr auto kStepFields = [] {
    using field_detail::field;
    using field_detail::keyed;
    constexpr uint32_t E = kFieldInEvent, N = kFieldNullable;
    return std::array{
        field("rank", "rank", "", 1, E, &Step::rank),
        field("step", "step", "", 1, 0, &Step::step),
        keyed(field("start_ns", "start", "ns", 1, E, &Step::start), "start"),
        keyed(field("end_ns", "end", "ns", 1, E, &Step::end), "end"),
        field("loss", "loss", "", 1, N, &Step::loss),
        field("samples", "samples", "", 1, 0, &Step::samples),
        field("cpu_ns", "CPU time", "ns", 3, N, &Step::cpuNs),
        field("runq_ns", "run-queue wait", "ns", 3, N, &Step::runqNs),
    };
}();

// The `buckets` table's columns.
inline constexpr auto kBucketFields = [] {
    using field_detail::field;
    using field_detail::keyed;
    return std::array{
        keyed(field("idx", "bucket", "", 1, 0, &Bucket::index), "index"),
        field("bytes", "size", "bytes", 1, 0, &Bucket::bytes),
        field("params", "parameters", "", 1, 0, &Bucket::params),
    };
}();

// The `diagnostics` table's columns.
inline constexpr auto kDiagnosticFields = [] {
    using field_detail::field;
    return std::array{
        field("kind", "kind", "", 1, 0, &Diagnostic::kind),
        field("severity", "severity", "", 1, 0, &Diagnostic::severity),
        field("count", "count", "", 1, 0, &Diagnostic::count),
        field("message", "message", "", 1, 0, &Diagnostic::message),
    };
}();

// The row of `fields` whose JSON/Python key is `key`, or nullptr.
template <class Record, size_t N>
const Field<Record>* findFieldByKey(const std::array<Field<Record>, N>& fields, std::string_view key)
{
    for (const Field<Record>& f : fields)
        if (key == f.key())
            return &f;
    return nullptr;
}

// The row named `name` (SQL column / JSON key), or nullptr.
const RunConfigField* findRunConfigField(std::string_view name);
const RankField* findRankField(std::string_view name);

// Calls fn with the field's member (std::string&, int32_t&, int64_t&, double&, an enum&
// (RunStatus, LaneKind, Severity), uint32_t& (a LaneId's value) or std::vector<std::string>&;
// const when `record` is).
template <class Record, class R, class Fn>
decltype(auto) visitField(const Field<Record>& f, R& record, Fn&& fn)
{
    switch (f.type) {
    case FieldType::Text: return fn(record.*f.text);
    case FieldType::Int32: return fn(record.*f.i32);
    case FieldType::Int64: return fn(record.*f.i64);
    case FieldType::Real: return fn(record.*f.real);
    case FieldType::LaneRef: return fn((record.*f.laneId).v);
    case FieldType::TextList: return fn(record.*f.list);
    case FieldType::Enum: break;
    }
    if (f.laneKind)
        return fn(record.*f.laneKind);
    if (f.severity)
        return fn(record.*f.severity);
    return fn(record.*f.status);
}

// The enums of FieldType::Enum by name, one overload each (types.h's name functions). From a
// name: false for one it does not know, which reads as the enum's "unknown": a run still running,
// an imported host thread, a warning.
inline const char* enumName(RunStatus v) { return runStatusName(v); }
inline const char* enumName(LaneKind v) { return laneKindName(v); }
inline const char* enumName(Severity v) { return severityName(v); }
inline bool enumFromName(std::string_view n, RunStatus* v)
{
    return runStatusFromName(n, v) || (*v = RunStatus::Running, false);
}
inline bool enumFromName(std::string_view n, LaneKind* v)
{
    return laneKindFromName(n, v) || (*v = LaneKind::HostThread, false);
}
inline bool enumFromName(std::string_view n, Severity* v)
{
    return severityFromName(n, v) || (*v = Severity::Warning, false);
}

// Whether the value is its field's "unknown" (kFieldNullable: NaN, or a negative integer).
template <class Record>
bool fieldIsNull(const Field<Record>& f, const Record& record)
{
    if (!f.has(kFieldNullable))
        return false;
    return visitField(f, record, [](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>)
            return v != v;
        else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>)
            return v < 0;
        else
            return false;
    });
}

// Sets a nullable field to its "unknown".
template <class Record>
void setFieldNull(const Field<Record>& f, Record& record)
{
    visitField(f, record, [](auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>)
            v = std::numeric_limits<double>::quiet_NaN();
        else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>)
            v = -1;
    });
}

// A text list as one text (the SQL column): the items joined by '\n'; and back.
std::string joinTextList(const std::vector<std::string>& items);
std::vector<std::string> splitTextList(std::string_view text);

// The shortest text that reads back as the same double ("0.5", "1").
std::string shortestNumberText(double v);

// The value as text, the same for every user: strings as they are, integers in decimal, reals in
// the shortest form that reads back as the same double, an enum by its name, a list joined by '\n'.
template <class Record>
std::string fieldText(const Field<Record>& f, const Record& record)
{
    return visitField(f, record, [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>)
            return v;
        else if constexpr (std::is_same_v<T, std::vector<std::string>>)
            return joinTextList(v);
        else if constexpr (std::is_enum_v<T>)
            return enumName(v);
        else if constexpr (std::is_same_v<T, double>)
            return shortestNumberText(v);
        else
            return std::to_string(v);
    });
}

} // namespace lockstep::core
