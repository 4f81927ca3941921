// Records with every field of their table (core/fields.h) set to a value of its own, none its
// default: what the round-trip tests store, export and read back. A field added to a table is in
// them with no edit here.
#pragma once

#include "lockstep/core/fields.h"

#include <set>
#include <string>
#include <type_traits>

namespace lockstep::test {

// Every field of `fields` in `r` but those named in `keep` set to a value of its own; `seed`
// makes records differ.
template <class Record, size_t N>
void setEveryField(const std::array<core::Field<Record>, N>& fields, Record& r, int seed,
                   const std::set<std::string>& keep = {})
{
    int i = seed * 100;
    for (const core::Field<Record>& f : fields) {
        ++i;
        if (keep.contains(f.name))
            continue;
        core::visitField(f, r, [&](auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
                v = std::string(f.name) + " value " + std::to_string(i) + " \xc3\xa9";
            else if constexpr (std::is_same_v<T, std::vector<std::string>>)
                v = {std::string(f.name) + " " + std::to_string(i), "second \xc3\xa9", "third"};
            else if constexpr (std::is_same_v<T, core::RunStatus>)
                v = core::RunStatus::Failed;
            else if constexpr (std::is_same_v<T, core::LaneKind>)
                v = core::LaneKind::GpuStream;
            else if constexpr (std::is_same_v<T, core::Severity>)
                v = core::Severity::Error;
            else if constexpr (std::is_same_v<T, double>)
                v = 0.25 + i;
            else if constexpr (std::is_same_v<T, int64_t>)
                v = (int64_t{1} << 40) + i; // beyond 32 bits
            else
                v = static_cast<T>(1000 + i);
        });
    }
}

template <class Record, size_t N>
Record everyField(const std::array<core::Field<Record>, N>& fields, int seed = 0)
{
    Record r;
    setEveryField(fields, r, seed);
    return r;
}

// A run's lanes, steps and buckets with every field set (setEveryField) but those that give the
// run its shape: a lane's id, rank and kind; a step's rank, number and times.
inline void setEveryRecordField(core::Run& run)
{
    int seed = 1;
    for (core::Lane& l : run.lanes)
        setEveryField(core::kLaneFields, l, seed++, {"id", "rank", "kind"});
    for (core::Step& s : run.steps)
        setEveryField(core::kStepFields, s, seed++, {"rank", "step", "start_ns", "end_ns"});
    for (core::Bucket& b : run.buckets)
        setEveryField(core::kBucketFields, b, seed++, {"idx"});
}

// The fields of two records that differ, as "name: a vs b" lines ("" = none).
template <class Record, size_t N>
std::string fieldDifferences(const std::array<core::Field<Record>, N>& fields, const Record& a, const Record& b)
{
    std::string out;
    for (const core::Field<Record>& f : fields)
        if (core::fieldText(f, a) != core::fieldText(f, b))
            out += std::string(f.name) + ": " + core::fieldText(f, a) + " vs " + core::fieldText(f, b) + "\n";
    return out;
}

inline core::RunConfig everyFieldConfig()
{
    core::RunConfig c = everyField(core::kRunConfigFields);
    c.extra["seed"] = "7";
    return c;
}

} // namespace lockstep::test
