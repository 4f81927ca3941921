// CUPTI activity collector: every kernel, memcpy and memset the process runs on a GPU, as
// core::Spans on GpuStream lanes, on the host's clock, linked to the step and bucket that
// launched it. Torch-free: the trainer pushes a correlation id around each bucket's collective
// and calls flush() once per step.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <cstdint>
#include <functional>
#include <memory>
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
        int64_t correlated = 0;  // records linked to a step/bucket through an external id
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

    // Appends the spans of every activity completed so far to `out` (names through `intern`,
    // lanes through `lane`). Kernels whose name starts with "nccl" become CommKernel.
    core::Status flush(std::vector<core::Span>& out, const LaneResolver& lane, const Interner& intern);
    Stats stats() const;

    struct Impl;

private:
    explicit CuptiCollector(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace lockstep::rt
