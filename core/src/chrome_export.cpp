// Chrome trace-event JSON export (the format Perfetto and chrome://tracing open).
//
// pid = rank, tid = lane id; "M" metadata names processes ("rank 0 (host)") and threads (the
// lane's name) and keeps them in rank/lane order; "X" complete events carry step, bucket, bytes
// and kind in args; gradient-ready instants become thread-scoped "i" events.
//
// Timestamps: the format's unit is the microsecond. Our times are int64 ns, and a double
// printed by its shortest form would round ns away at epoch magnitudes in some readers, so
// ts and dur are written as exact decimals "<us>.<3 digits of ns>" through Writer::RawValue.
#include "lockstep/core/chrome_export.h"

#include "lockstep/core/output_file.h"

#include <rapidjson/ostreamwrapper.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <fstream>
#include <map>

namespace lockstep::core {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::OStreamWrapper>;

// ns -> exact decimal microseconds.
void writeMicros(JsonWriter& w, int64_t ns)
{
    char buf[40];
    const bool neg = ns < 0;
    const uint64_t a = neg ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    const int n = std::snprintf(buf, sizeof buf, "%s%llu.%03llu", neg ? "-" : "",
                                static_cast<unsigned long long>(a / 1000),
                                static_cast<unsigned long long>(a % 1000));
    w.RawValue(buf, static_cast<size_t>(n), rapidjson::kNumberType);
}

void key(JsonWriter& w, const char* k) { w.Key(k); }

void str(JsonWriter& w, const std::string& s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); }

} // namespace

Status writeChromeTrace(const Run& run, std::ostream& out)
{
    rapidjson::OStreamWrapper os(out);
    JsonWriter w(os);
    w.StartObject();
    key(w, "displayTimeUnit");
    w.String("ns");
    key(w, "traceEvents");
    w.StartArray();

    std::map<int32_t, std::string> processes;
    for (const RankInfo& r : run.ranks)
        processes[r.rank] = "rank " + std::to_string(r.rank) + (r.host.empty() ? "" : " (" + r.host + ")");
    for (const Lane& l : run.lanes)
        processes.emplace(l.rank, "rank " + std::to_string(l.rank));
    for (const auto& [rank, name] : processes) {
        w.StartObject();
        key(w, "ph"); w.String("M");
        key(w, "name"); w.String("process_name");
        key(w, "pid"); w.Int(rank);
        key(w, "args"); w.StartObject(); key(w, "name"); str(w, name); w.EndObject();
        w.EndObject();
        w.StartObject();
        key(w, "ph"); w.String("M");
        key(w, "name"); w.String("process_sort_index");
        key(w, "pid"); w.Int(rank);
        key(w, "args"); w.StartObject(); key(w, "sort_index"); w.Int(rank); w.EndObject();
        w.EndObject();
    }
    for (const Lane& l : run.lanes) {
        const std::string name = l.name.empty() ? std::string(laneKindName(l.kind)) : l.name;
        w.StartObject();
        key(w, "ph"); w.String("M");
        key(w, "name"); w.String("thread_name");
        key(w, "pid"); w.Int(l.rank);
        key(w, "tid"); w.Uint(l.id.v);
        key(w, "args"); w.StartObject(); key(w, "name"); str(w, name); w.EndObject();
        w.EndObject();
        w.StartObject();
        key(w, "ph"); w.String("M");
        key(w, "name"); w.String("thread_sort_index");
        key(w, "pid"); w.Int(l.rank);
        key(w, "tid"); w.Uint(l.id.v);
        key(w, "args"); w.StartObject(); key(w, "sort_index"); w.Uint(l.id.v); w.EndObject();
        w.EndObject();
    }

    const auto laneRank = [&](LaneId lane, int32_t* rank) {
        if (lane.v >= run.lanes.size())
            return false;
        *rank = run.lanes[lane.v].rank;
        return true;
    };
    for (const Span& s : run.spans) {
        int32_t rank = 0;
        if (!laneRank(s.lane, &rank))
            return fail("chrome export: a span names lane " + std::to_string(s.lane.v) + ", which the run does not have");
        const std::string& name = run.strings.text(s.name);
        w.StartObject();
        key(w, "ph"); w.String("X");
        key(w, "name");
        if (name.empty())
            w.String(spanKindName(s.kind));
        else
            str(w, name);
        key(w, "cat"); w.String(spanKindName(s.kind));
        key(w, "pid"); w.Int(rank);
        key(w, "tid"); w.Uint(s.lane.v);
        key(w, "ts"); writeMicros(w, s.start);
        key(w, "dur"); writeMicros(w, s.end - s.start);
        key(w, "args");
        w.StartObject();
        key(w, "step"); w.Int(s.step);
        key(w, "bucket"); w.Int(s.bucket);
        key(w, "bytes"); w.Int64(s.bytes);
        key(w, "kind"); w.String(spanKindName(s.kind));
        w.EndObject();
        w.EndObject();
    }
    for (const Instant& in : run.instants) {
        int32_t rank = 0;
        if (!laneRank(in.lane, &rank))
            return fail("chrome export: an instant names lane " + std::to_string(in.lane.v) + ", which the run does not have");
        w.StartObject();
        key(w, "ph"); w.String("i");
        key(w, "s"); w.String("t");
        key(w, "name"); str(w, run.strings.text(in.name));
        key(w, "cat"); w.String(in.kind == InstantKind::GradReady ? "grad_ready" : "marker");
        key(w, "pid"); w.Int(rank);
        key(w, "tid"); w.Uint(in.lane.v);
        key(w, "ts"); writeMicros(w, in.ts);
        key(w, "args");
        w.StartObject();
        key(w, "step"); w.Int(in.step);
        key(w, "bucket"); w.Int(in.bucket);
        w.EndObject();
        w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    os.Flush();
    if (!out)
        return fail("chrome export: writing failed");
    return {};
}

Status exportChromeTrace(const Run& run, const std::string& path)
{
    // Whole or absent (output_file.h): a failed export leaves no truncated JSON behind.
    auto output = OutputFile::create(path, true);
    if (!output)
        return std::unexpected(output.error());
    std::ofstream out(output->path(), std::ios::binary | std::ios::trunc);
    if (!out)
        return fail(path + ": cannot be written");
    if (auto s = writeChromeTrace(run, out); !s)
        return fail(path + ": " + s.error().message);
    out.close();
    if (!out)
        return fail(path + ": writing failed (disk full?)");
    return output->commit();
}

} // namespace lockstep::core
