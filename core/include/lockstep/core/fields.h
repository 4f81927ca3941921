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
// that shards come from one run, the configuration signature (comparison.cpp), what changed
// between runs (run_diff.cpp), the report's "config" (text and JSON). test_fields checks the
// table against the `run` table of a file of every schema version (PRAGMA table_info).
// kRankFields does the same for RankInfo and the `ranks` table (the writer's INSERT, the reader's
// SELECT, the Python dicts, the Chrome export's ranks and the importer's reading of them).
//
// Adding a RunConfig field (docs/design.md "The data model"): the member in types.h, one row
// here (at the end, sinceSchema = the new version), its column by a migration step in
// schema.cpp (kSchemaVersion + 1), and whoever fills it in. Nothing else names it.
//
// Light to include: types.h and <array> only.
#pragma once

#include "lockstep/core/types.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::core {

enum class FieldType : uint8_t {
    Text,   // std::string; SQL TEXT
    Int32,  // int32_t; SQL INTEGER
    Int64,  // int64_t; SQL INTEGER
    Real,   // double; SQL REAL
    Status, // RunStatus; SQL TEXT, runStatusName
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
};

// One field of a record (RunConfig, RankInfo): a row of its table.
template <class Record>
struct Field {
    const char* name;   // SQL column = JSON key = Python dict key
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
    RunStatus Record::*status = nullptr;

    constexpr bool has(uint32_t flag) const { return (flags & flag) != 0; }
};
using RunConfigField = Field<RunConfig>;
using RankField = Field<RankInfo>;

namespace field_detail {
template <class R>
constexpr Field<R> field(const char* n, const char* l, const char* u, int since, uint32_t f, std::string R::*m)
{
    return {n, l, u, FieldType::Text, since, f, m, nullptr, nullptr, nullptr, nullptr};
}
template <class R>
constexpr Field<R> field(const char* n, const char* l, const char* u, int since, uint32_t f, int32_t R::*m)
{
    return {n, l, u, FieldType::Int32, since, f, nullptr, m, nullptr, nullptr, nullptr};
}
template <class R>
constexpr Field<R> field(const char* n, const char* l, const char* u, int since, uint32_t f, int64_t R::*m)
{
    return {n, l, u, FieldType::Int64, since, f, nullptr, nullptr, m, nullptr, nullptr};
}
template <class R>
constexpr Field<R> field(const char* n, const char* l, const char* u, int since, uint32_t f, double R::*m)
{
    return {n, l, u, FieldType::Real, since, f, nullptr, nullptr, nullptr, m, nullptr};
}
template <class R>
constexpr Field<R> field(const char* n, const char* l, const char* u, int since, uint32_t f, RunStatus R::*m)
{
    return {n, l, u, FieldType::Status, since, f, nullptr, nullptr, nullptr, nullptr, m};
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

// The row named `name` (SQL column / JSON key), or nullptr.
const RunConfigField* findRunConfigField(std::string_view name);
const RankField* findRankField(std::string_view name);

// Calls fn with the field's member (std::string&, int32_t&, int64_t&, double& or RunStatus&;
// const when `record` is).
template <class Record, class R, class Fn>
decltype(auto) visitField(const Field<Record>& f, R& record, Fn&& fn)
{
    switch (f.type) {
    case FieldType::Text: return fn(record.*f.text);
    case FieldType::Int32: return fn(record.*f.i32);
    case FieldType::Int64: return fn(record.*f.i64);
    case FieldType::Real: return fn(record.*f.real);
    case FieldType::Status: break;
    }
    return fn(record.*f.status);
}

// The shortest text that reads back as the same double ("0.5", "1").
std::string shortestNumberText(double v);

// The value as text, the same for every user: strings as they are, integers in decimal, reals in
// the shortest form that reads back as the same double, a status by its name.
template <class Record>
std::string fieldText(const Field<Record>& f, const Record& record)
{
    switch (f.type) {
    case FieldType::Text: return record.*f.text;
    case FieldType::Int32: return std::to_string(record.*f.i32);
    case FieldType::Int64: return std::to_string(record.*f.i64);
    case FieldType::Real: return shortestNumberText(record.*f.real);
    case FieldType::Status: break;
    }
    return runStatusName(record.*f.status);
}

} // namespace lockstep::core
