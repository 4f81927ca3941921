// Chrome trace-event JSON export (the format Perfetto and chrome://tracing open).
//
// Layout: pid = rank, tid = lane id; "M" metadata names processes ("rank 0 (host)") and threads
// (the lane's name) and keeps them in rank/lane order. "X" complete events carry kind, step,
// bucket and bytes in args; each rank has one more thread, "steps", whose "X" events (cat
// "lockstep.step") are its steps; gradient-ready instants become thread-scoped "i" events.
// Flow events (v1: "s" / "t" / "f", bound to the enclosing slice) draw two arrows:
//  - each bucket's all-reduce across ranks, in launch order (cat "lockstep.bucket"), so the
//    last arrow ends at the late rank's launch;
//  - each bucket's last gradient-ready instant to its launch on that rank (cat
//    "lockstep.ready"). The arrow starts 1 ns before the instant, inside the backward segment
//    that ends there (a flow binds to the slice that encloses its time).
//
// Round trip: a top-level "lockstepRun" object, written BEFORE traceEvents so a streaming reader
// meets it first, holds what the events cannot (configuration, rank info, lane kinds, bucket
// table). `lockstep import` of the file gives back the same ranks, lanes, steps, buckets and
// metrics; other tools ignore the unknown key.
//
// Timestamps: the format's unit is the microsecond. Our times are int64 ns, and a double
// printed by its shortest form would round ns away at epoch magnitudes in some readers, so
// ts and dur are written as exact decimals "<us>.<3 digits of ns>" through Writer::RawValue.
#include "lockstep/core/chrome_export.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/fields.h"
#include "lockstep/core/output_file.h"

#include "field_json.h"

#include <rapidjson/ostreamwrapper.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <tuple>
#include <type_traits>

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

void metaEvent(JsonWriter& w, const char* name, int32_t pid, const int64_t* tid, const char* argKey,
               const std::string* text, int64_t number)
{
    w.StartObject();
    key(w, "ph"); w.String("M");
    key(w, "name"); w.String(name);
    key(w, "pid"); w.Int(pid);
    if (tid) {
        key(w, "tid"); w.Int64(*tid);
    }
    key(w, "args");
    w.StartObject();
    key(w, argKey);
    if (text)
        str(w, *text);
    else
        w.Int64(number);
    w.EndObject();
    w.EndObject();
}

void flowEvent(JsonWriter& w, char ph, const char* cat, const std::string& name, int64_t id, int32_t pid,
               int64_t tid, TimeNs ts)
{
    const char phase[2] = {ph, '\0'};
    w.StartObject();
    key(w, "ph"); w.String(phase);
    key(w, "cat"); w.String(cat);
    key(w, "name"); str(w, name);
    key(w, "id"); w.Int64(id);
    key(w, "pid"); w.Int(pid);
    key(w, "tid"); w.Int64(tid);
    key(w, "ts"); writeMicros(w, ts);
    if (ph != 's') {
        key(w, "bp"); w.String("e");
    }
    w.EndObject();
}

// The fields of a record that go to the export (all but kFieldLocal, kFieldInEvent and unknown
// values of kFieldNullable ones), each under its key, into the open object.
template <class Record, size_t N>
void writeFields(JsonWriter& w, const std::array<Field<Record>, N>& fields, const Record& record)
{
    for (const Field<Record>& f : fields)
        if (!f.has(kFieldLocal) && !f.has(kFieldInEvent) && !fieldIsNull(f, record)) {
            key(w, f.key());
            writeFieldJson(w, f, record);
        }
}

// An array of records, an object each.
template <class Record, size_t N>
void writeRecords(JsonWriter& w, const std::array<Field<Record>, N>& fields, const std::vector<Record>& records)
{
    w.StartArray();
    for (const Record& r : records) {
        w.StartObject();
        writeFields(w, fields, r);
        w.EndObject();
    }
    w.EndArray();
}

void writeHeader(JsonWriter& w, const Run& run)
{
    const RunConfig& c = run.config;
    key(w, "lockstepRun");
    w.StartObject();
    key(w, "format"); w.Int(1);
    key(w, "config");
    w.StartObject();
    // Every field of the run's table (fields.h) under its name, but the run's times (an import
    // is a run of its own); the importer reads them back.
    writeFields(w, kRunConfigFields, c);
    key(w, "extra");
    w.StartObject();
    for (const auto& [k, v] : c.extra) {
        w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
        str(w, v);
    }
    w.EndObject();
    w.EndObject();
    // Times in the events are clock-corrected already: no offsets to carry.
    key(w, "ranks");
    writeRecords(w, kRankFields, run.ranks);
    key(w, "lanes");
    writeRecords(w, kLaneFields, run.lanes);
    key(w, "buckets");
    writeRecords(w, kBucketFields, run.buckets);
    w.EndObject();
}

// "M" events: a process per rank and a thread per lane, in rank/lane order, plus each rank's
// "steps" thread. Returns each rank's "steps" thread id.
std::map<int32_t, int64_t> writeMetadata(JsonWriter& w, const Run& run)
{
    std::map<int32_t, std::string> processes;
    for (const RankInfo& r : run.ranks)
        processes[r.rank] = "rank " + std::to_string(r.rank) + (r.host.empty() ? "" : " (" + r.host + ")");
    for (const Lane& l : run.lanes)
        processes.emplace(l.rank, "rank " + std::to_string(l.rank));
    for (const Step& st : run.steps)
        processes.emplace(st.rank, "rank " + std::to_string(st.rank));
    // Each rank's "steps" thread gets an id after every lane id.
    const int64_t stepsTidBase = static_cast<int64_t>(run.lanes.size());
    std::map<int32_t, int64_t> stepsTid;
    for (const auto& [rank, name] : processes) {
        metaEvent(w, "process_name", rank, nullptr, "name", &name, 0);
        metaEvent(w, "process_sort_index", rank, nullptr, "sort_index", nullptr, rank);
        const int64_t tid = stepsTidBase + static_cast<int64_t>(stepsTid.size());
        stepsTid[rank] = tid;
        const std::string steps = "steps";
        metaEvent(w, "thread_name", rank, &tid, "name", &steps, 0);
        metaEvent(w, "thread_sort_index", rank, &tid, "sort_index", nullptr, -1); // above the lanes
    }
    for (const Lane& l : run.lanes) {
        const std::string name = l.name.empty() ? std::string(laneKindName(l.kind)) : l.name;
        const int64_t tid = l.id.v;
        metaEvent(w, "thread_name", l.rank, &tid, "name", &name, 0);
        metaEvent(w, "thread_sort_index", l.rank, &tid, "sort_index", nullptr, tid);
    }
    return stepsTid;
}

void writeSpanEvents(JsonWriter& w, const Run& run)
{
    for (const Span& s : run.spans) {
        const int32_t rank = run.lanes[s.lane.v].rank;
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
}

void writeInstantEvents(JsonWriter& w, const Run& run)
{
    for (const Instant& in : run.instants) {
        const int32_t rank = run.lanes[in.lane.v].rank;
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
}

void writeStepEvents(JsonWriter& w, const Run& run, std::map<int32_t, int64_t>& stepsTid)
{
    for (const Step& st : run.steps) {
        w.StartObject();
        key(w, "ph"); w.String("X");
        key(w, "cat"); w.String("lockstep.step");
        key(w, "name"); str(w, "step " + std::to_string(st.step));
        key(w, "pid"); w.Int(st.rank);
        key(w, "tid"); w.Int64(stepsTid[st.rank]);
        key(w, "ts"); writeMicros(w, st.start);
        key(w, "dur"); writeMicros(w, st.end - st.start);
        key(w, "args");
        w.StartObject();
        writeFields(w, kStepFields, st); // step, loss, samples, CPU times: all but pid, ts, dur
        w.EndObject();
        w.EndObject();
    }
}

struct Collective {
    int32_t step, bucket, rank;
    TimeNs launch;
    uint32_t lane;
    bool host;
};

// Each (rank, step, bucket)'s collective: the first communication span carrying it (host
// collectives before communication kernels, as bucketStats takes them), in (step, bucket, rank)
// order.
std::vector<Collective> collectivesOf(const Run& run)
{
    std::vector<Collective> collectives;
    for (const Span& s : run.spans)
        if (isCommunication(s.kind) && s.bucket >= 0 && s.step >= 0)
            collectives.push_back({s.step, s.bucket, run.lanes[s.lane.v].rank, s.start, s.lane.v, s.kind == SpanKind::Comm});
    std::sort(collectives.begin(), collectives.end(), [](const Collective& a, const Collective& b) {
        return std::tuple(a.step, a.bucket, a.rank, !a.host, a.launch) < std::tuple(b.step, b.bucket, b.rank, !b.host, b.launch);
    });
    collectives.erase(std::unique(collectives.begin(), collectives.end(),
                                  [](const Collective& a, const Collective& b) {
                                      return a.step == b.step && a.bucket == b.bucket && a.rank == b.rank;
                                  }),
                      collectives.end());
    return collectives;
}

// Each (step, bucket)'s all-reduce across ranks, in launch order; flow ids from `flowId` on.
void writeBucketFlows(JsonWriter& w, const std::vector<Collective>& collectives, int64_t& flowId)
{
    for (size_t i = 0; i < collectives.size();) {
        size_t j = i;
        while (j < collectives.size() && collectives[j].step == collectives[i].step
               && collectives[j].bucket == collectives[i].bucket)
            ++j;
        if (j - i > 1) {
            std::vector<Collective> byLaunch(collectives.begin() + static_cast<ptrdiff_t>(i),
                                             collectives.begin() + static_cast<ptrdiff_t>(j));
            std::stable_sort(byLaunch.begin(), byLaunch.end(),
                             [](const Collective& a, const Collective& b) { return a.launch < b.launch; });
            const std::string name = "bucket " + std::to_string(collectives[i].bucket) + " all-reduce, step "
                + std::to_string(collectives[i].step);
            for (size_t k = 0; k < byLaunch.size(); ++k) {
                const char ph = k == 0 ? 's' : k + 1 == byLaunch.size() ? 'f' : 't';
                flowEvent(w, ph, "lockstep.bucket", name, flowId, byLaunch[k].rank, byLaunch[k].lane, byLaunch[k].launch);
            }
            ++flowId;
        }
        i = j;
    }
}

// Gradient-ready -> launch: the last ready instant of each (rank, step, bucket).
void writeReadyFlows(JsonWriter& w, const Run& run, const std::vector<Collective>& collectives, int64_t& flowId)
{
    std::map<std::tuple<int32_t, int32_t, int32_t>, const Instant*> lastReady;
    for (const Instant& in : run.instants) {
        if (in.kind != InstantKind::GradReady || in.step < 0 || in.bucket < 0)
            continue;
        const Instant*& slot = lastReady[{run.lanes[in.lane.v].rank, in.step, in.bucket}];
        if (!slot || in.ts > slot->ts)
            slot = &in;
    }
    for (const Collective& c : collectives) {
        auto it = lastReady.find({c.rank, c.step, c.bucket});
        if (it == lastReady.end())
            continue;
        const Instant& in = *it->second;
        const std::string name = "bucket " + std::to_string(c.bucket) + " ready -> launch";
        flowEvent(w, 's', "lockstep.ready", name, flowId, c.rank, in.lane.v, in.ts - 1);
        flowEvent(w, 'f', "lockstep.ready", name, flowId, c.rank, c.lane, c.launch);
        ++flowId;
    }
}

} // namespace

Status writeChromeTrace(const Run& run, std::ostream& out)
{
    for (const Span& s : run.spans)
        if (s.lane.v >= run.lanes.size())
            return fail("chrome export: a span names lane " + std::to_string(s.lane.v) + ", which the run does not have");
    for (const Instant& in : run.instants)
        if (in.lane.v >= run.lanes.size())
            return fail("chrome export: an instant names lane " + std::to_string(in.lane.v) + ", which the run does not have");

    rapidjson::OStreamWrapper os(out);
    JsonWriter w(os);
    w.StartObject();
    writeHeader(w, run);
    key(w, "displayTimeUnit");
    w.String("ns");
    key(w, "traceEvents");
    w.StartArray();
    std::map<int32_t, int64_t> stepsTid = writeMetadata(w, run);
    writeSpanEvents(w, run);
    writeInstantEvents(w, run);
    writeStepEvents(w, run, stepsTid);
    const std::vector<Collective> collectives = collectivesOf(run);
    int64_t flowId = 1;
    writeBucketFlows(w, collectives, flowId);
    writeReadyFlows(w, run, collectives, flowId);
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
        return fail(s.error(), path + ": " + s.error().message);
    out.close();
    if (!out)
        return fail(path + ": writing failed (disk full?)");
    return output->commit();
}

} // namespace lockstep::core
