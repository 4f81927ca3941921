// The run report for people (text) and for scripts (JSON, schema in docs/report-json.md).
//
// JSON: one object, "schema": "lockstep-report", "schema_version": kReportSchemaVersion. The
// run-level part (summaryJson) is also the top of the full report (reportJson), which adds per
// rank, per (rank, step), per step straggler and per (step, bucket) arrays: every number the
// app shows. Numbers that are not defined or not applicable (no communication, a 1-rank run)
// are null, never a bogus 0.
//
// Text: names and messages from a run file are shown with control characters escaped (\x1b,
// \n, \u0085 ...), so a hostile run name cannot drive the terminal. Not-applicable values are
// shown as "—".
#pragma once

#include "lockstep/core/analysis.h"

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::core {

inline constexpr int kReportSchemaVersion = 6;

// `text` with every control character (C0, DEL, C1) written as an escape sequence; valid
// printable UTF-8 is kept as it is, a byte that is not valid UTF-8 becomes \xNN.
std::string escapeControl(std::string_view text);

// The run-level summary (no per-rank table).
std::string summaryText(const RunSummary& summary);
// The full text report: summary, per-rank table, straggler evidence, buckets, diagnostics.
std::string reportText(const Run& run, const RunAnalysis& analysis);

// The run-level JSON object (schema_version, run, steady steps, means, stragglers, buckets).
std::string summaryJson(const RunSummary& summary);
// The full JSON report: summaryJson's fields plus the step-to-step spread (step_stats.h), ranks
// (with their step-time quartiles), step_breakdown, step_means, step_stragglers, bucket_steps and
// diagnostics.
std::string reportJson(const Run& run, const RunAnalysis& analysis);
// The same, written to `out` as it is made (a 100 M-span run's report is gigabytes).
void writeReportJson(std::ostream& out, const Run& run, const RunAnalysis& analysis);

// A table of several runs (lockstep sweep): one row each.
std::string summaryTable(const std::vector<RunSummary>& summaries);

} // namespace lockstep::core
