// The recorder: turns the training thread's raw per-step timestamps into spans, instants and
// step rows of a rank shard, committed by a writer thread once per step.
//
// Why this split: the hot path (autograd hooks, the training loop) only stamps clocks and
// push_backs into vectors it owns (the per-thread GradBuffers and a recycled StepRecord).
// Everything that costs — interning, building Span rows, cutting backward into per-module
// segments, SQLite — happens on the writer thread, one transaction per step, so a reader sees
// whole steps only (WAL mode) and the training thread never waits for the disk.
// Torch-free: the trainer fills plain structs.
#pragma once

#include "lockstep/core/backward_cut.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/types.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace lockstep::rt {

using core::TimeNs;

TimeNs nowNs(); // CLOCK_REALTIME, the clock of docs/design.md "Time and clocks"

struct GradEvent {
    int32_t param = 0;
    TimeNs ts = 0;
};

// One buffer per thread that runs autograd hooks. Registration (once per thread) takes a lock;
// appending is a plain push_back. The owner drains all buffers after backward returned, when
// no hook of that backward can still run (the engine's completion orders it after them).
class GradBuffers {
public:
    std::vector<GradEvent>& local();
    void drainInto(std::vector<GradEvent>& out); // appends and clears; caller sorts by ts

private:
    std::mutex m_mutex;
    std::vector<std::unique_ptr<std::vector<GradEvent>>> m_buffers;
};

// Raw timestamps of one micro-batch (a step has `accumulate` of them).
struct MicroRecord {
    TimeNs dataStart = 0, dataEnd = 0;
    std::vector<TimeNs> forwardCuts; // start of each stage, then the end of the last
    TimeNs backwardStart = 0, backwardEnd = 0;
    std::vector<GradEvent> grads;
};

struct CommRecord {
    int32_t bucket = 0;
    TimeNs launch = 0, end = 0;
    int64_t bytes = 0;
};

struct StepRecord {
    int32_t step = 0;
    TimeNs start = 0, end = 0;
    double loss = 0;
    int64_t samples = 0;
    int micros = 0; // valid entries of `micro` (the vector is recycled, never shrunk)
    std::vector<MicroRecord> micro;
    std::vector<CommRecord> comms;
    TimeNs waitStart = 0, waitEnd = 0;
    TimeNs optStart = 0, optEnd = 0;
    int64_t cpuNs = -1, runqNs = -1; // the training thread's CPU time and run-queue wait (Step)
};

// Device activity written beside the host spans: on a CUDA build the CUPTI collector (every
// kernel, copy and memset, already tagged with the step and bucket that launched it). The
// recorder flushes it on its writer thread once per step, after the step's host rows (a step
// ends only once its device work is done, so that work is complete by then), and once more at
// the end. Torch-free, CUPTI-free: the trainer adapts its collector to this.
class DeviceActivity {
public:
    using LaneResolver = std::function<core::LaneId(int32_t device, int64_t stream)>;
    using Interner = std::function<core::StringId(std::string_view)>;
    virtual ~DeviceActivity() = default;
    // Appends every activity completed so far (lanes and names through the callbacks).
    virtual core::Status flush(std::vector<core::Span>& out, const LaneResolver& lane, const Interner& intern) = 0;
    // What the run's diagnostics must say about it (records outside every step, dropped records).
    virtual std::vector<core::Diagnostic> diagnostics() const = 0;
};

// What the recorder needs to know of the model to name things.
struct ModelLayout {
    std::vector<std::string> stageNames;  // top-level children, forward order
    std::vector<std::string> paramNames;  // registration order
    std::vector<int32_t> paramStage;      // stage of each parameter
    std::vector<int32_t> paramBucket;     // bucket of each parameter
    std::vector<core::Bucket> buckets;
};

class Recorder {
public:
    // Creates the shard (overwriting an old file of the same name) and starts the writer thread.
    // `device`, when given, is flushed once per step and at the end (see DeviceActivity).
    static core::Result<std::unique_ptr<Recorder>> open(const std::string& path, const core::RunConfig& config,
                                                        const core::RankInfo& rank, const ModelLayout& layout,
                                                        std::unique_ptr<DeviceActivity> device = nullptr);
    ~Recorder();

    // A StepRecord to fill (recycled; its vectors keep their capacity).
    std::unique_ptr<StepRecord> acquire();
    void submit(std::unique_ptr<StepRecord> record);
    void addDiagnostic(const core::Diagnostic& diagnostic);
    void updateRank(const core::RankInfo& rank);
    // Blocks until everything submitted so far is committed.
    void flush();
    // Commits the rest, writes the final status and closes the file. Returns the first write
    // error seen, if any.
    core::Status finish(core::RunStatus status, const std::string& cause);

    // The first failed write, if any (thread-safe). The training loop asks once per step: a full
    // disk must stop the run within a step, not let it train on unrecorded to the end.
    struct WriteFailure {
        int step = -1;          // the step whose commit failed (-1: not a step's)
        core::Error error;      // its code says whether the disk refused it (ErrorCode::DiskFull)
    };
    std::optional<WriteFailure> failure();

private:
    Recorder() = default;
    void writerLoop();
    void writeStep(const StepRecord& r);
    // Appends the device activity completed so far to m_spans (writer thread, or finish()).
    core::Status flushDevice();
    core::LaneId deviceLane(int32_t device, int64_t stream);

    std::unique_ptr<core::RunWriter> m_writer;
    ModelLayout m_layout;
    int32_t m_rank = 0;
    core::LaneId m_computeLane, m_commLane;
    std::vector<core::StringId> m_stageIds, m_paramIds, m_commIds;
    core::StringId m_dataId, m_waitId, m_optId;
    std::unique_ptr<DeviceActivity> m_device;
    std::map<std::pair<int32_t, int64_t>, core::LaneId> m_deviceLanes; // (device, stream) -> lane
    std::vector<core::Span> m_spans;       // writer thread scratch
    std::vector<core::Instant> m_instants; // writer thread scratch
    std::vector<core::GradientReady> m_gradients; // writer thread scratch: one micro-batch's, for the backward cut

    struct Item {
        std::unique_ptr<StepRecord> step;
        std::unique_ptr<core::Diagnostic> diagnostic;
        std::unique_ptr<core::RankInfo> rank;
        bool flushMarker = false;
    };
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::condition_variable m_doneCv;
    std::deque<Item> m_queue;
    std::vector<std::unique_ptr<StepRecord>> m_free;
    uint64_t m_submitted = 0, m_processed = 0;
    bool m_stop = false;
    std::optional<core::Error> m_firstError;
    int m_firstErrorStep = -1;
    std::thread m_thread;
};

} // namespace lockstep::rt
