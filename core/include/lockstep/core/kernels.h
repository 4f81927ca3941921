// Which kernels take the step (Holistic Trace Analysis's kernel breakdown, Nsight Systems' top
// kernels): a run's device work grouped by kernel name, over its steady steps.
//
// Rows are the device spans (kernels, communication kernels, copies, memsets: isDeviceKind) of
// the chosen rank (or every rank), grouped by (name, kind), counted over the steady steps by the
// step that launched them (Span::step, as the step breakdown attributes them). For each: how many
// ran per steady step and rank, their total time per steady step and rank, the mean duration, and
// that total as a share of the mean step time of the same ranks. Kernels on different streams run
// at once, so the shares may add up to more than 100 %.
#pragma once

#include "lockstep/core/types.h"

#include <string>
#include <vector>

namespace lockstep::core {

struct RunAnalysis;

struct KernelRow {
    std::string name;
    SpanKind kind = SpanKind::Kernel;
    SpanCategory category = SpanCategory::Compute;
    double countPerStep = 0;  // launches per steady step and rank
    double totalMsPerStep = 0; // summed duration per steady step and rank
    double meanMs = 0;        // mean duration of one
    double shareOfStep = 0;   // totalMsPerStep / the mean step time (0..1, may exceed 1 summed)
};

struct KernelTableOptions {
    int32_t rank = -1; // -1: every rank (per-rank means)
};

// Largest total first. Empty when the run has no device spans.
std::vector<KernelRow> kernelTable(const Run& run, const RunAnalysis& analysis, const KernelTableOptions& options = {});

// Text (the `top` largest; 0 = all) and the JSON array of every row.
std::string kernelTableText(const std::vector<KernelRow>& rows, size_t top = 20);
std::string kernelTableJson(const std::vector<KernelRow>& rows);

} // namespace lockstep::core
