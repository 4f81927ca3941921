// lockstep._core: the pybind11 layer between the Python recorder (python/lockstep) and core.
// Writes go through ShardRecorder -> core::RunWriter; reads through core::loadRun and core's
// analyses; the launcher's protocol lines and shard names come from the job library. Nothing here knows the schema, and nothing here links LibTorch: the module imports
// into any CPython with any PyTorch (Debian's 1.13 or a pip 2.x with CUDA) because the
// PyTorch side of the recorder is plain Python calling torch's public API.
//
// Errors from core become RuntimeError with core's message; the hot-path methods (stamping
// events from autograd and communication hooks) never raise.
#include "shard_recorder.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/clock_sync.h"
#include "lockstep/core/diagnostics.h"
#include "lockstep/core/fields.h"
#include "lockstep/core/report.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/whatif.h"
#include "lockstep/job/progress.h"
#include "lockstep/job/shard_layout.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace lockstep::record {
namespace {


[[noreturn]] void raise(const core::Error& e)
{
    throw std::runtime_error(e.message);
}

// ---- dict <-> core value types (snake_case keys, like the schema's columns) ----

template <class T>
void take(const pybind11::dict& d, const char* key, T& out)
{
    if (d.contains(key))
        out = d[key].cast<T>();
}

void checkKeys(const pybind11::dict& d, std::initializer_list<const char*> known, const char* what)
{
    for (const auto& item : d) {
        const std::string k = item.first.cast<std::string>();
        if (std::none_of(known.begin(), known.end(), [&](const char* n) { return k == n; }))
            throw pybind11::key_error(std::string("unknown ") + what + " field '" + k + "'");
    }
}

core::RunStatus statusFromName(const std::string& name)
{
    core::RunStatus s;
    if (!core::runStatusFromName(name, &s))
        throw pybind11::value_error("run status must be running, completed or failed, not '" + name + "'");
    return s;
}

// A record from a dict with keys of its field table (core/fields.h); a key it lacks keeps the
// record's default, one it does not know is an error (besides those in `also`).
template <class Record, size_t N>
Record recordFromDict(const std::array<core::Field<Record>, N>& fields, const pybind11::dict& d, const char* what,
                      std::initializer_list<std::string_view> also = {})
{
    for (const auto& item : d) {
        const std::string k = item.first.template cast<std::string>();
        if (!core::findFieldByKey(fields, k) && std::find(also.begin(), also.end(), k) == also.end())
            throw pybind11::key_error("unknown " + std::string(what) + " field '" + k + "'");
    }
    Record r;
    for (const core::Field<Record>& f : fields) {
        if (!d.contains(f.key()))
            continue;
        core::visitField(f, r, [&](auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, core::RunStatus>)
                v = statusFromName(d[f.key()].template cast<std::string>());
            else if constexpr (std::is_enum_v<T>) {
                const auto name = d[f.key()].template cast<std::string>();
                if (!core::enumFromName(name, &v))
                    throw pybind11::value_error("unknown " + std::string(f.label) + " '" + name + "'");
            } else
                v = d[f.key()].template cast<T>();
        });
    }
    return r;
}

// A run config dict has a key per row of the run's field table, plus "extra".
core::RunConfig configFromDict(const pybind11::dict& d)
{
    core::RunConfig c = recordFromDict(core::kRunConfigFields, d, "run config", {"extra"});
    take(d, "extra", c.extra);
    return c;
}

// A rank dict has a key per row of the ranks' field table.
core::RankInfo rankFromDict(const pybind11::dict& d)
{
    return recordFromDict(core::kRankFields, d, "rank");
}

// A record as a dict: a key per row of its field table (core/fields.h), enums by name.
template <class Record, size_t N>
pybind11::dict recordToDict(const std::array<core::Field<Record>, N>& fields, const Record& record)
{
    pybind11::dict d;
    for (const core::Field<Record>& f : fields)
        core::visitField(f, record, [&](const auto& v) {
            if constexpr (std::is_enum_v<std::decay_t<decltype(v)>>)
                d[f.key()] = core::enumName(v);
            else
                d[f.key()] = v;
        });
    return d;
}

template <class Record, size_t N>
pybind11::list recordsToList(const std::array<core::Field<Record>, N>& fields, const std::vector<Record>& records)
{
    pybind11::list out;
    for (const Record& r : records)
        out.append(recordToDict(fields, r));
    return out;
}

pybind11::dict configToDict(const core::RunConfig& c)
{
    pybind11::dict d = recordToDict(core::kRunConfigFields, c);
    d["extra"] = c.extra;
    return d;
}

// ---- the recorder as Python sees it ----

// Owns the ShardRecorder and the one piece of Python state the hot path needs: the callback
// that queues the recorder's end-of-backward callback on the autograd engine, called by the
// first hook of each backward. After finish() every method is a no-op, so hooks the user's
// script still holds can fire harmlessly.
class Recorder {
public:
    Recorder(std::unique_ptr<ShardRecorder> rec, pybind11::object onBackward)
        : m_rec(std::move(rec)), m_onBackward(std::move(onBackward))
    {
    }

    bool open() const { return m_rec != nullptr; }
    int errorStep = -1; // set by finish (ShardRecorder::firstErrorStep)
    ShardRecorder* get() const { return m_rec.get(); }

    void mark(Ev kind, int32_t a, int64_t value, int32_t c)
    {
        if (!m_rec)
            return;
        if (kind == Ev::BackwardEnd)
            m_inBackward = false;
        m_rec->mark(kind, a, value, c);
    }
    void markAt(Ev kind, core::TimeNs ts, int32_t a, int64_t value, int32_t c)
    {
        if (!m_rec)
            return;
        if (kind == Ev::BackwardEnd)
            m_inBackward = false;
        m_rec->markAt(kind, ts, a, value, c);
    }
    void grad(int32_t param)
    {
        if (!m_rec)
            return;
        beginBackward();
        m_rec->grad(param);
    }
    int32_t commLaunch(int32_t bucket, int64_t bytes, int32_t label)
    {
        if (!m_rec)
            return -1;
        beginBackward();
        return m_rec->commLaunch(bucket, bytes, label);
    }
    void commDone(int32_t slot)
    {
        if (m_rec && slot >= 0)
            m_rec->commDone(slot);
    }
    // Errors of the recorder's own Python callbacks, reported at finish (never raised into
    // the user's backward).
    std::string takeCallbackError() { return std::exchange(m_callbackError, {}); }
    // Also drops the callback: it refers back to the Python recorder that owns this object.
    std::unique_ptr<ShardRecorder> release()
    {
        m_onBackward = pybind11::none();
        return std::move(m_rec);
    }

private:
    void beginBackward()
    {
        if (m_inBackward)
            return;
        m_inBackward = true;
        if (m_onBackward.is_none())
            return;
        try {
            m_onBackward();
        } catch (pybind11::error_already_set& e) {
            if (m_callbackError.empty())
                m_callbackError = e.what();
        }
    }

    std::unique_ptr<ShardRecorder> m_rec;
    pybind11::object m_onBackward;
    bool m_inBackward = false;
    std::string m_callbackError;
};

// The post-hook on one parameter's gradient accumulator: a native callable, so the per-gradient
// cost is one call into C++ and a clock read.
struct GradHook {
    std::shared_ptr<Recorder> rec;
    int32_t param = 0;
};

std::shared_ptr<lockstep::record::BucketLayout> layoutFrom(const std::vector<std::tuple<int32_t, int64_t, std::vector<int32_t>>>& buckets,
                                                       const std::vector<std::string>& paramNames)
{
    auto layout = std::make_shared<lockstep::record::BucketLayout>();
    layout->paramBucket.assign(paramNames.size(), core::kNoBucket);
    for (const auto& [index, bytes, params] : buckets) {
        core::Bucket b;
        b.index = index;
        b.bytes = bytes;
        layout->paramIndices.push_back(params);
        for (int32_t p : params) {
            if (p < 0 || static_cast<size_t>(p) >= paramNames.size())
                throw pybind11::index_error("bucket " + std::to_string(index) + ": parameter index " + std::to_string(p)
                                            + " out of range");
            b.params.push_back(paramNames[p]);
            layout->paramBucket[p] = index;
        }
        layout->buckets.push_back(std::move(b));
    }
    return layout;
}

pybind11::dict runToDict(const core::Run& run)
{
    pybind11::dict d;
    d["config"] = configToDict(run.config);
    pybind11::list spans, instants;
    for (const auto& s : run.spans)
        spans.append(pybind11::dict(pybind11::arg("lane") = s.lane.v, pybind11::arg("kind") = core::spanKindName(s.kind),
                                    pybind11::arg("name") = run.strings.text(s.name), pybind11::arg("start") = s.start,
                                    pybind11::arg("end") = s.end, pybind11::arg("step") = s.step,
                                    pybind11::arg("bucket") = s.bucket, pybind11::arg("bytes") = s.bytes));
    for (const auto& i : run.instants)
        instants.append(pybind11::dict(pybind11::arg("lane") = i.lane.v, pybind11::arg("name") = run.strings.text(i.name),
                                       pybind11::arg("ts") = i.ts, pybind11::arg("step") = i.step,
                                       pybind11::arg("bucket") = i.bucket));
    // The records of fields.h under their tables' keys; spans and instants (the hot records,
    // whose storage is their own) as they were first published.
    d["ranks"] = recordsToList(core::kRankFields, run.ranks);
    d["lanes"] = recordsToList(core::kLaneFields, run.lanes);
    d["steps"] = recordsToList(core::kStepFields, run.steps);
    d["buckets"] = recordsToList(core::kBucketFields, run.buckets);
    d["spans"] = spans;
    d["instants"] = instants;
    d["diagnostics"] = recordsToList(core::kDiagnosticFields, run.diagnostics);
    d["clocks_corrected"] = run.clocksCorrected;
    return d;
}

core::Run loadOrRaise(const std::string& path, bool correctClocks)
{
    core::Result<core::Run> run;
    {
        pybind11::gil_scoped_release release;
        run = core::loadRun(path, core::LoadOptions{.correctClocks = correctClocks});
    }
    if (!run)
        raise(run.error());
    return std::move(*run);
}

namespace pb = pybind11;

// Clocks: now, the boot id, the best of a clock exchange.
void bindClock(pb::module_& m)
{
    m.def("now_ns", &lockstep::record::nowNs, "CLOCK_REALTIME in nanoseconds (the clock of every Lockstep timestamp)");
    m.def("boot_id", &core::readBootId, "this machine's kernel boot id ('' when unreadable; clock_sync.h)");
    m.def(
        "best_clock_exchange",
        [](const std::vector<std::tuple<int64_t, int64_t, int64_t>>& exchanges) -> pybind11::object {
            std::vector<core::ClockExchange> ex;
            for (const auto& [sent, remote, received] : exchanges)
                ex.push_back({sent, remote, received});
            const auto best = core::bestClockExchange(ex);
            if (!best)
                return pybind11::none();
            pybind11::dict d;
            d["offset_ns"] = best->offsetNs;
            d["rtt_ns"] = best->rttNs;
            d["uncertainty_ns"] = best->uncertaintyNs;
            d["at_ns"] = best->atNs;
            return d;
        },
        pb::arg("exchanges"),
        "Of [(sent, remote, received)] ping-pongs, the one with the smallest round trip as "
        "{offset_ns, rtt_ns, uncertainty_ns, at_ns}; None when none is valid (core's bestClockExchange)");
}

// The schema version, the run config's fields and the link probe's constants.
void bindConstants(pb::module_& m)
{
    m.attr("SCHEMA_VERSION") = core::kSchemaVersion;
    // The run config dict's keys and value types ("str", "int", "float", "status"), from core's
    // field table (core/fields.h), in its order; "extra" (a dict of str) is beside them.
    {
        pb::list fields;
        for (const core::RunConfigField& f : core::kRunConfigFields) {
            const char* type = f.type == core::FieldType::Text ? "str"
                : f.type == core::FieldType::Real             ? "float"
                : f.status != nullptr                         ? "status"
                                                              : "int";
            fields.append(pb::make_tuple(f.name, type));
        }
        m.attr("RUN_CONFIG_FIELDS") = pb::tuple(fields);
    }
    // The startup link probe's sizes and turns (whatif.h, kLinkProbeKey), for Recorder._probe_link.
    m.attr("LINK_PROBE_KEY") = core::kLinkProbeKey;
    m.attr("LINK_PROBE_BYTES") = pb::tuple(pb::cast(std::vector<int64_t>(core::kLinkProbeBytes.begin(), core::kLinkProbeBytes.end())));
    m.attr("LINK_PROBE_REPEATS") = core::kLinkProbeRepeats;
    m.def(
        "format_link_probe",
        [](const std::vector<std::pair<int64_t, int64_t>>& points) {
            std::vector<core::LinkProbePoint> out;
            for (const auto& [bytes, ns] : points)
                out.push_back({bytes, ns});
            return core::formatLinkProbe(out);
        },
        "config_extra[LINK_PROBE_KEY] text of [(bytes on the wire, ns)] (whatif.h, formatLinkProbe)");
}

// Event kinds, a step's pending events and the gradient hook.
void bindEvents(pb::module_& m)
{
    pb::enum_<Ev>(m, "Ev", "Kinds of recorder events (see python/src/shard_recorder.h)")
        .value("StepStart", Ev::StepStart)
        .value("ForwardBegin", Ev::ForwardBegin)
        .value("ForwardEnd", Ev::ForwardEnd)
        .value("StageBegin", Ev::StageBegin)
        .value("StageEnd", Ev::StageEnd)
        .value("BackwardBegin", Ev::BackwardBegin)
        .value("BackwardEnd", Ev::BackwardEnd)
        .value("WaitEnd", Ev::WaitEnd)
        .value("OptBegin", Ev::OptBegin)
        .value("OptEnd", Ev::OptEnd)
        .value("StepEnd", Ev::StepEnd);
    pb::enum_<DeviceWhat>(m, "DeviceWhat")
        .value("Forward", DeviceWhat::Forward)
        .value("Backward", DeviceWhat::Backward)
        .value("Optimizer", DeviceWhat::Optimizer)
        .value("Comm", DeviceWhat::Comm);

    pb::class_<PendingStep, std::shared_ptr<PendingStep>>(m, "PendingStep",
                                                           "One step's events, between its end and its submission")
        .def_readonly("step", &PendingStep::step)
        .def_readwrite("loss", &PendingStep::loss)
        .def_property_readonly("start_ns", &PendingStep::start)
        .def_property_readonly("end_ns", &PendingStep::end)
        .def(
            "add_device_span",
            [](PendingStep& p, DeviceWhat what, int32_t index, int64_t start, int64_t end, int64_t bytes, int32_t label) {
                lockstep::record::Event e;
                e.ts = start;
                e.end = end;
                e.a = index;
                e.b = static_cast<int32_t>(what);
                e.c = label;
                e.value = bytes;
                e.kind = Ev::DeviceSpan;
                p.events.push_back(e);
            },
            pb::arg("what"), pb::arg("index"), pb::arg("start_ns"), pb::arg("end_ns"), pb::arg("nbytes") = 0,
            pb::arg("label") = -1);

    pb::class_<GradHook>(m, "GradHook", "Post-hook of one parameter's gradient accumulator")
        .def("__call__", [](const GradHook& h, pb::args) { h.rec->grad(h.param); });
}

// ShardRecorder: one rank's shard.
void bindRecorder(pb::module_& m)
{
    pb::class_<Recorder, std::shared_ptr<Recorder>>(m, "ShardRecorder",
                                                    "One rank's shard: an event log and its writer thread")
        .def(pb::init([](const std::string& path, const pb::dict& config, const pb::dict& rank, const pb::dict& model,
                         pb::object onBackward) {
                 checkKeys(model, {"stage_names", "param_names", "param_stage", "root_stage", "device", "param_numel"},
                           "model");
                 lockstep::record::ModelInfo info;
                 take(model, "stage_names", info.stageNames);
                 take(model, "param_names", info.paramNames);
                 take(model, "param_stage", info.paramStage);
                 take(model, "root_stage", info.rootStage);
                 take(model, "device", info.device);
                 if (model.contains("param_numel"))
                     take(model, "param_numel", info.paramNumel);
                 const core::RunConfig c = configFromDict(config);
                 const core::RankInfo r = rankFromDict(rank);
                 core::Result<std::unique_ptr<ShardRecorder>> rec;
                 {
                     pb::gil_scoped_release release;
                     rec = ShardRecorder::open(path, c, r, info);
                 }
                 if (!rec)
                     raise(rec.error());
                 return std::make_shared<Recorder>(std::move(*rec), std::move(onBackward));
             }),
             pb::arg("path"), pb::arg("config"), pb::arg("rank"), pb::arg("model"), pb::arg("on_backward") = pb::none())
        .def("mark", &Recorder::mark, pb::arg("kind"), pb::arg("a") = 0, pb::arg("value") = 0, pb::arg("label") = 0)
        .def("mark_at", &Recorder::markAt, pb::arg("kind"), pb::arg("ts"), pb::arg("a") = 0, pb::arg("value") = 0,
             pb::arg("label") = 0)
        .def("grad_hook", [](std::shared_ptr<Recorder> self, int32_t param) { return GradHook{std::move(self), param}; })
        .def("comm_launch", &Recorder::commLaunch, pb::arg("bucket"), pb::arg("nbytes"), pb::arg("label") = -1)
        .def("comm_done", &Recorder::commDone)
        .def("label", [](Recorder& r, const std::string& text) { return r.open() ? r.get()->label(text) : -1; })
        .def(
            "set_layout",
            [](Recorder& r, const std::vector<std::tuple<int32_t, int64_t, std::vector<int32_t>>>& buckets,
               const std::vector<std::string>& paramNames, bool write) {
                if (r.open())
                    r.get()->setLayout(layoutFrom(buckets, paramNames), write);
            },
            pb::arg("buckets"), pb::arg("param_names"), pb::arg("write"))
        .def("take_step",
             [](Recorder& r, int32_t step) -> std::shared_ptr<PendingStep> {
                 return r.open() ? std::shared_ptr<PendingStep>(r.get()->takeStep(step)) : nullptr;
             })
        // The events move to the writer; the Python object is left empty.
        .def("submit",
             [](Recorder& r, PendingStep& step) {
                 if (r.open())
                     r.get()->submit(std::make_unique<PendingStep>(std::move(step)));
             })
        .def("set_config",
             [](Recorder& r, const pb::dict& config) {
                 if (r.open())
                     r.get()->setConfig(configFromDict(config));
             })
        .def("update_rank",
             [](Recorder& r, const pb::dict& rank) {
                 if (r.open())
                     r.get()->updateRank(rankFromDict(rank));
             })
        .def(
            "add_diagnostic",
            [](Recorder& r, const std::string& kind, int64_t count, const std::string& detail) {
                // The kind comes from core's closed list (lockstep/core/diagnostics.h): its
                // severity and description are the list's, the recorder adds the detail.
                const std::optional<core::DiagnosticKind> k = core::diagnosticKindFromName(kind);
                if (!k)
                    throw pb::value_error("unknown diagnostic kind \"" + kind + "\" (see lockstep/core/diagnostics.h)");
                if (r.open())
                    r.get()->addDiagnostic(core::makeDiagnostic(*k, count, detail));
            },
            pb::arg("kind"), pb::arg("count"), pb::arg("detail"))
        .def(
            "finish",
            [](Recorder& r, const std::string& status, const std::string& cause) {
                const core::RunStatus s = statusFromName(status);
                std::unique_ptr<ShardRecorder> rec = r.release();
                if (!rec)
                    return;
                if (std::string err = r.takeCallbackError(); !err.empty())
                    rec->addDiagnostic(core::makeDiagnostic(core::DiagnosticKind::RecorderCallbackError, 1, err));
                core::Status st;
                {
                    pb::gil_scoped_release release;
                    st = rec->finish(s, cause);
                }
                r.errorStep = rec->firstErrorStep();
                if (!st)
                    raise(st.error());
            },
            pb::arg("status"), pb::arg("cause") = "")
        .def_property_readonly("error_step", [](const Recorder& r) { return r.errorStep; },
                               "after finish: the step whose writing failed first (-1: none)");
}

// Reading a run back: as dicts, and core's summary.
void bindRuns(pb::module_& m)
{
    m.def(
        "load_run", [](const std::string& path, bool correctClocks) { return runToDict(loadOrRaise(path, correctClocks)); },
        pb::arg("path"), pb::arg("correct_clocks") = true,
        "The whole run through core's reader, as plain dicts and lists (times in ns)");
    m.def(
        "summary_json",
        [](const std::string& path) {
            const core::Run run = loadOrRaise(path, true);
            pb::gil_scoped_release release;
            return core::summaryJson(core::summarize(run));
        },
        pb::arg("path"), "core's run summary (the analyses behind `lockstep report --json`) as JSON text");
}

void bindJob(pb::module_& m)
{
    // The job contract (lockstep::job), so that Python speaks it exactly as the runtime does.
    // Paths are bytes (any byte but NUL): given as bytes (os.fsencode), returned as bytes (os.fsdecode).
    m.def(
        "shard_file", [](const std::string& folder, int rank) { return pb::bytes(job::shardFile(folder, rank)); },
        pb::arg("folder"), pb::arg("rank"), "folder/rank-<r>.db, as bytes");
    m.def("step_line", &job::stepLine, pb::arg("rank"), pb::arg("step"), pb::arg("loss"), pb::arg("step_ms"),
          "the protocol line of a completed step (no newline)");
    m.def("done_line", &job::doneLine, pb::arg("rank"));
    m.def("waiting_line", &job::waitingLine, pb::arg("rank"), pb::arg("step"));
    m.def(
        "phase_line",
        [](int rank, const std::string& name) {
            for (job::Phase p : {job::Phase::Starting, job::Phase::Rendezvous, job::Phase::WarmUp, job::Phase::Training})
                if (job::phaseName(p) == name)
                    return job::phaseLine(rank, p);
            throw pb::value_error("unknown phase '" + name + "' (starting, rendezvous, warm-up, training)");
        },
        pb::arg("rank"), pb::arg("name"), "the protocol line of a rank entering a phase before its first step");
    m.def("failed_line", &job::failedLine, pb::arg("rank"), pb::arg("cause"), pb::arg("step") = -1);
}

} // namespace
} // namespace lockstep::record

PYBIND11_MODULE(_core, m)
{
    m.doc() = "Lockstep's native core for the PyTorch DDP recorder: run database writes and reads";
    lockstep::record::bindClock(m);
    lockstep::record::bindConstants(m);
    lockstep::record::bindEvents(m);
    lockstep::record::bindRecorder(m);
    lockstep::record::bindRuns(m);
    lockstep::record::bindJob(m);
}
