// CUPTI activity collector: every kernel, memcpy and memset the process runs on a GPU, as
// core::Spans on GpuStream lanes, on the host's clock, linked to the step (and bucket) whose
// host code LAUNCHED it (docs/design.md: device work belongs to its launching step, not to the host
// window its time falls in). Torch-free. The trainer's contract:
//   beginStep(s) ... endStep()            around each training step (everything launched in
//                                         between, on the calling thread, is step s)
//   pushCorrelation(encodeCorrelation(s, b)) ... popCorrelation()
//                                         around bucket b's collective inside the step (its
//                                         kernels are step s, bucket b)
//   flush(...)                            once per step (after endStep) and at the end
//   diagnostics()                         at the end: device work launched outside every step
//                                         and records CUPTI dropped, as run diagnostics
// Launches on other threads (autograd's device threads) must push the step too: CUPTI's
// external ids are per thread.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::rt {

class CuptiCollector {
public:
    // Maps a (device, CUDA stream) pair to the lane its spans go on; the caller owns the lanes
    // (LaneKind::GpuStream) and the string table.
    using LaneResolver = std::function<core::LaneId(int32_t device, int64_t stream)>;
    using Interner = std::function<core::StringId(std::string_view)>;

    struct Stats {
        int64_t records = 0;     // activity records converted so far
        int64_t dropped = 0;     // records CUPTI dropped (buffers full)
        int64_t correlated = 0;  // records linked to a step through an external id
        // Records launched while no step was pushed, per span kind (kernel, comm_kernel, memcpy,
        // memset): they belong to no step (Span::step = kNoStep).
        std::map<std::string, int64_t> outsideSteps;
    };

    // Subscribes to CUPTI activity (concurrent kernels, memcpy, memset, external correlation)
    // with CLOCK_REALTIME timestamps. Fails with a message, never crashes, when there is no
    // usable GPU or driver. One collector per process (CUPTI's activity API is process-wide).
    static core::Result<std::unique_ptr<CuptiCollector>> start();
    ~CuptiCollector(); // flushes and unsubscribes
    CuptiCollector(const CuptiCollector&) = delete;
    CuptiCollector& operator=(const CuptiCollector&) = delete;

    // External correlation ids: everything the calling thread launches between push and pop is
    // tagged with `id`. encodeCorrelation packs a step and bucket into one id.
    static uint64_t encodeCorrelation(int32_t step, int32_t bucket);
    static void decodeCorrelation(uint64_t id, int32_t* step, int32_t* bucket);
    void pushCorrelation(uint64_t id);
    void popCorrelation();
    // The step's own id (bucket kNoBucket), pushed for the whole step on the calling thread.
    void beginStep(int32_t step) { pushCorrelation(encodeCorrelation(step, core::kNoBucket)); }
    void endStep() { popCorrelation(); }

    // Appends the spans of every activity completed so far to `out` (names through `intern`,
    // lanes through `lane`). Kernels whose name starts with "nccl" become CommKernel. Each span's
    // step (and bucket) comes from the correlation id pushed when it was launched; a span
    // launched outside every step keeps kNoStep and is counted in stats().outsideSteps.
    core::Status flush(std::vector<core::Span>& out, const LaneResolver& lane, const Interner& intern);
    // Has CUPTI hand over every buffer whose records are all complete (not a forced flush, which
    // would cut records still running), without converting them. The trainer calls it at the end
    // of each step, once the step's device work is done and before the next step launches any:
    // the step's buffers are then all complete, and the writer's flush() finds the whole step
    // (a flush later, from the writer thread, would find buffers shared with the next step's
    // running kernels and get nothing back).
    void deliverCompleted();
    // Stops (false) or resumes (true) recording kernels, copies and memsets; tags still flow.
    // For the overhead benchmark only (scripts/gpu_device.sh: CUPTI on and off in one process,
    // alternated by blocks of steps): a run recorded so is missing device work by design.
    core::Status setEnabled(bool enabled);
    Stats stats() const;
    // The run diagnostics of what stats() counted (kinds from core/diagnostics.h): "device span
    // launched outside every step" (per span kind) and "device records dropped". Empty when
    // nothing needs saying.
    std::vector<core::Diagnostic> diagnostics() const;

    struct Impl;

private:
    explicit CuptiCollector(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace lockstep::rt
