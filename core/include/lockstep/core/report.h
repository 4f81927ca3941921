// The run summary as text for a terminal and as JSON for scripts (lockstep report).
#pragma once

#include "lockstep/core/analysis.h"

#include <string>
#include <vector>

namespace lockstep::core {

std::string summaryText(const RunSummary& summary);
// JSON object with at least: name, world_size, bucket_cap_bytes, steps, step_time_ms, compute_ms,
// comm_ms, overlap_ratio, exposed_comm_ms, idle_ms, throughput, stragglers, buckets, status.
std::string summaryJson(const RunSummary& summary);
// A table of several runs (lockstep sweep): one row each.
std::string summaryTable(const std::vector<RunSummary>& summaries);

} // namespace lockstep::core
