// The native half of the Python recorder (python/lockstep): an event log that PyTorch hooks
// append to, and a writer thread that turns each step's log into run-database rows through
// core's RunWriter (one schema, one writer) and commits once per step.
//
// Why this split: the hooks of a user's DDP job run on the training thread (forward, backward,
// the communication hook) and on gloo's threads (all-reduce completion), all holding the GIL.
// Each one only stamps CLOCK_REALTIME and appends a 40-byte Event to a vector. Everything
// that costs — pairing begin/end events into spans, cutting backward into per-module segments,
// naming buckets, SQLite — happens on a C++ thread that never touches Python, so it runs
// beside the training thread instead of competing with it for the GIL.
//
// Python-free on purpose: the pybind11 module (module.cpp) is a thin layer over this class, and
// the conversion rules are tested here without an interpreter (tests/python/test_shard_recorder).
#pragma once

#include "lockstep/core/run_db.h"
#include "lockstep/core/thread_sched.h"
#include "lockstep/core/types.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::record {

using core::TimeNs;

TimeNs nowNs(); // CLOCK_REALTIME (docs/design.md "Time and clocks")

enum class Ev : uint8_t {
    StepStart,     // the step's window opens (the previous step's end, or the first forward)
    ForwardBegin,  // DDP forward called; value = samples in this micro-batch
    ForwardEnd,    // DDP forward returned
    StageBegin,    // a = stage (top-level module) whose forward starts
    StageEnd,      // a = stage whose forward returned
    BackwardBegin, // torch.autograd.backward called
    BackwardEnd,   // the autograd engine ran its final callbacks: backward's compute is done
    WaitEnd,       // DDP's end-of-backward callback (waits for every bucket) returned
    Grad,          // a = parameter index: its gradient is in DDP's bucket
    CommLaunch,    // a = slot, b = bucket, value = bytes, c = label (hook): the comm hook was called
    CommDone,      // a = slot: the bucket's future completed
    OptBegin,      // c = label (optimizer class)
    OptEnd,
    DeviceSpan,    // GPU time [ts, end] from CUDA events; a = stage or bucket, b = DeviceWhat, c = label
    StepEnd,       // value = the training thread's CPU ns in the step, end = its run-queue wait
                   // ns (-1 = not measured; markAt fills both from core::readThreadSchedStat)
};

// What a DeviceSpan measured (b of the event).
enum class DeviceWhat : int32_t { Forward = 0, Backward = 1, Optimizer = 2, Comm = 3 };

struct Event {
    TimeNs ts = 0;
    TimeNs end = 0;    // DeviceSpan only
    int64_t value = 0; // ForwardBegin: samples; CommLaunch, DeviceSpan(Comm): bytes
    int32_t a = 0;
    int32_t b = 0;
    int32_t c = 0;
    Ev kind = Ev::StepStart;
};

// DDP's buckets as one step used them: indices after DDP's rebuild, parameters in packing order.
struct BucketLayout {
    std::vector<core::Bucket> buckets;
    std::vector<int32_t> paramBucket; // bucket of each parameter, kNoBucket if in none
    std::vector<std::vector<int32_t>> paramIndices; // per bucket, its parameters (indices) in packing order
};

// What the recorder needs to know of the model to name things.
struct ModelInfo {
    std::vector<std::string> stageNames; // top-level modules; the last is the root itself
    std::vector<std::string> paramNames; // DDP's parameter order
    std::vector<int32_t> paramStage;     // stage of each parameter
    int32_t rootStage = 0;               // stage that forward time outside any child is charged to
    int32_t device = -1;                 // CUDA device index; -1 = CPU (host lanes only)
    std::vector<int64_t> paramNumel;     // element count of each parameter (empty: unknown); with the
                                         // written layout it becomes config_extra[param_numel], which
                                         // the what-if model needs to re-bucket at other caps
};

// One step's events, taken off the recorder when the step closes. On CUDA the Python side
// adds the step's resolved GPU spans before submitting it (a step is written whole or not at
// all, so a reader never sees its host half without its device half).
struct PendingStep {
    int32_t step = 0;
    double loss = 0;
    std::vector<Event> events;
    std::shared_ptr<const BucketLayout> layout;
    TimeNs start() const;
    TimeNs end() const;
};

class ShardRecorder {
public:
    // Creates the shard (overwriting an old file of that name), its lanes, and starts the writer.
    static core::Result<std::unique_ptr<ShardRecorder>> open(const std::string& path, const core::RunConfig& config,
                                                             const core::RankInfo& rank, const ModelInfo& model);
    ~ShardRecorder();
    ShardRecorder(const ShardRecorder&) = delete;
    ShardRecorder& operator=(const ShardRecorder&) = delete;

    // ---- hot path: callers are serialized (in Python: by the GIL) ----
    void mark(Ev kind, int32_t a = 0, int64_t value = 0, int32_t c = 0) { markAt(kind, nowNs(), a, value, c); }
    void markAt(Ev kind, TimeNs ts, int32_t a = 0, int64_t value = 0, int32_t c = 0);
    void grad(int32_t param) { gradAt(param, nowNs()); }
    int32_t commLaunch(int32_t bucket, int64_t bytes, int32_t label) { return commLaunchAt(bucket, bytes, label, nowNs()); }
    // The same with a given time (tests; the hooks use the two above).
    void gradAt(int32_t param, TimeNs ts);
    int32_t commLaunchAt(int32_t bucket, int64_t bytes, int32_t label, TimeNs ts);
    void commDone(int32_t slot);
    // A label for events (comm hook names, optimizer classes); interned by the writer later.
    int32_t label(const std::string& text);
    void setLayout(std::shared_ptr<const BucketLayout> layout, bool writeRows);
    // Moves the current log into a PendingStep.
    std::unique_ptr<PendingStep> takeStep(int32_t step);
    void submit(std::unique_ptr<PendingStep> step);

    // ---- run-level rows, written by the writer thread in order ----
    void setConfig(const core::RunConfig& config);
    void addDiagnostic(const core::Diagnostic& diagnostic);
    void updateRank(const core::RankInfo& rank);
    // Commits the rest, writes the final status and closes. Returns the first write error seen
    // (recording errors never stop training; they are reported here).
    core::Status finish(core::RunStatus status, const std::string& cause);
    // The step whose writing failed first (-1: none, or the failure was not a step's).
    int firstErrorStep() const { return m_firstErrorStep; }


private:
    ShardRecorder() = default;
    class StepRows; // one step's events -> rows (shard_recorder.cpp)
    void writerLoop();
    void writeStep(const PendingStep& step);
    core::StringId commName(int32_t label, int32_t bucket);
    core::StringId optimizerName(int32_t label);
    std::string labelText(int32_t label);
    core::Status writeConfig();
    void note(const core::Status& status);

    std::string m_path;
    std::unique_ptr<core::RunWriter> m_writer;
    ModelInfo m_model;
    int32_t m_rank = 0;
    bool m_deviceTiming = false;
    core::LaneId m_computeLane, m_commLane, m_gpuComputeLane, m_gpuCommLane;
    std::vector<core::StringId> m_stageIds, m_paramIds;
    core::StringId m_dataId, m_lossId, m_waitId, m_backwardId;

    // Hot-path state (caller-serialized).
    std::vector<Event> m_log;
    std::shared_ptr<const BucketLayout> m_layout;
    int32_t m_nextSlot = 0;
    uint64_t m_backwardGen = 1; // bumped when a backward ends; see grad()

    // Labels: appended by the caller, read by the writer.
    std::mutex m_labelMutex;
    std::vector<std::string> m_labels;
    std::map<std::pair<int32_t, int32_t>, core::StringId> m_commNames; // writer thread only
    std::map<int32_t, core::StringId> m_optimizerNames;                // writer thread only
    std::unique_ptr<core::RunConfig> m_config; // writer thread only: the last configuration written
    std::string m_paramNumel;                  // writer thread only: of the last layout written

    struct Item {
        std::unique_ptr<PendingStep> step;
        std::unique_ptr<core::RunConfig> config;
        std::unique_ptr<core::Diagnostic> diagnostic;
        std::unique_ptr<core::RankInfo> rank;
        std::shared_ptr<const BucketLayout> buckets;
    };
    void enqueue(Item item);
    std::mutex m_mutex;
    // The training thread's scheduler statistics at the last step boundary (markAt, StepStart and
    // StepEnd only: both come from the training thread). A step's window starts where the
    // previous one ended, so its CPU time runs from the previous StepEnd's snapshot.
    core::ThreadSchedStat m_lastSched;
    std::thread::id m_lastSchedThread; // the thread m_lastSched is of
    std::condition_variable m_cv;
    std::deque<Item> m_queue;
    bool m_stop = false;
    std::optional<core::Error> m_firstError;
    int m_firstErrorStep = -1; // the step whose writing failed first (-1: none, or not a step)
    std::vector<core::Span> m_spans;       // writer scratch
    std::vector<core::Instant> m_instants; // writer scratch
    std::thread m_thread;
};

} // namespace lockstep::record
