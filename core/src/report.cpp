// The run summary for people (summaryText, summaryTable) and for scripts (summaryJson).
// JSON goes through RapidJSON's Writer so strings are escaped correctly; numbers that are not
// defined (NaN: no communication, no ready instants) are written as null, never as a bogus 0.
#include "lockstep/core/report.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace lockstep::core {
namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
    if (n > 0)
        std::vsnprintf(out.data(), out.size() + 1, fmt, args);
    va_end(args);
    return out;
}

std::string bytesText(int64_t bytes)
{
    const double b = static_cast<double>(bytes);
    if (bytes >= (1ll << 30))
        return format("%.2f GiB", b / (1ll << 30));
    if (bytes >= (1ll << 20))
        return format("%.2f MiB", b / (1ll << 20));
    if (bytes >= (1ll << 10))
        return format("%.1f KiB", b / (1ll << 10));
    return format("%lld B", static_cast<long long>(bytes));
}

std::string msText(double ms) { return std::isfinite(ms) ? format("%.3f ms", ms) : std::string("n/a"); }

std::string percentText(double ratio)
{
    return std::isfinite(ratio) ? format("%.1f%%", ratio * 100.0) : std::string("n/a (no communication)");
}

// Pads each column to its widest cell; the first column is left-aligned, numbers right-aligned.
std::string renderTable(const std::vector<std::vector<std::string>>& rows, const std::string& indent)
{
    std::vector<size_t> width;
    for (const auto& row : rows) {
        width.resize(std::max(width.size(), row.size()), 0);
        for (size_t c = 0; c < row.size(); ++c)
            width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows) {
        std::string line = indent;
        for (size_t c = 0; c < row.size(); ++c) {
            const std::string pad(width[c] - row[c].size(), ' ');
            line += c == 0 ? row[c] + pad : pad + row[c];
            if (c + 1 < row.size())
                line += "  ";
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        out += line + "\n";
    }
    return out;
}

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void number(JsonWriter& w, double v)
{
    if (std::isfinite(v))
        w.Double(v);
    else
        w.Null();
}

void key(JsonWriter& w, const char* k) { w.Key(k); }
void string(JsonWriter& w, const std::string& s) { w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size())); }

} // namespace

std::string summaryText(const RunSummary& s)
{
    std::string out;
    out += format("Run %s\n", s.name.empty() ? "(unnamed)" : s.name.c_str());
    out += format("  model %s, source %s, status %s\n", s.model.empty() ? "?" : s.model.c_str(),
                  s.source.empty() ? "?" : s.source.c_str(), runStatusName(s.status));
    if (!s.failureCause.empty())
        out += format("  failure cause: %s\n", s.failureCause.c_str());
    out += format("  world size %d, backend %s, device %s, bucket cap %s, batch per rank %lld\n", s.worldSize,
                  s.backend.empty() ? "?" : s.backend.c_str(), s.device.empty() ? "?" : s.device.c_str(),
                  bytesText(s.bucketCapBytes).c_str(), static_cast<long long>(s.batchPerRank));
    out += format("  %d steps, %d steady (means below are over steady steps and ranks)\n", s.steps, s.steadySteps);
    out += format("  %lld spans, %lld diagnostics\n", static_cast<long long>(s.spans),
                  static_cast<long long>(s.diagnostics));
    out += "\nPer rank and step\n";
    std::vector<std::vector<std::string>> rows = {
        {"step time", msText(s.stepTimeMs)},
        {"compute", msText(s.computeMs)},
        {"communication", msText(s.commMs)},
        {"overlapped", msText(s.overlappedMs)},
        {"exposed communication", msText(s.exposedCommMs)},
        {"idle", msText(s.idleMs)},
        {"overlap ratio", percentText(s.overlapRatio)},
        {"throughput", format("%.1f samples/s", s.throughput)},
    };
    out += renderTable(rows, "  ");

    out += "\nStragglers\n";
    if (s.stragglers.empty()) {
        out += "  none\n";
    } else {
        for (size_t i = 0; i < s.stragglers.size(); ++i) {
            const double wait = i < s.stragglerWaitMs.size() ? s.stragglerWaitMs[i] : std::nan("");
            const double share = s.stepTimeMs > 0 && std::isfinite(wait) ? wait / s.stepTimeMs : std::nan("");
            out += format("  rank %d: mean wait caused %s per step (%s of step time)\n", s.stragglers[i],
                          msText(wait).c_str(), std::isfinite(share) ? format("%.1f%%", share * 100).c_str() : "n/a");
        }
    }

    out += "\nBuckets (means over steady steps and ranks)\n";
    if (s.buckets.empty()) {
        out += "  none\n";
    } else {
        std::vector<std::vector<std::string>> table = {
            {"bucket", "bytes", "params", "ready->launch ms", "duration ms", "algbw GB/s", "busbw GB/s", "skew ms"}};
        for (const BucketSummary& b : s.buckets) {
            auto num = [](double v, const char* f) { return std::isfinite(v) ? format(f, v) : std::string("n/a"); };
            table.push_back({std::to_string(b.bucket), bytesText(b.bytes), std::to_string(b.params),
                             num(b.meanReadyToLaunchMs, "%.3f"), num(b.meanDurationMs, "%.3f"),
                             num(b.meanAlgbwGBps, "%.3f"), num(b.meanBusbwGBps, "%.3f"), num(b.meanSkewMs, "%.3f")});
        }
        out += renderTable(table, "  ");
    }
    return out;
}

std::string summaryJson(const RunSummary& s)
{
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartObject();
    key(w, "name"), string(w, s.name);
    key(w, "model"), string(w, s.model);
    key(w, "source"), string(w, s.source);
    key(w, "backend"), string(w, s.backend);
    key(w, "device"), string(w, s.device);
    key(w, "status"), w.String(runStatusName(s.status));
    key(w, "failure_cause"), string(w, s.failureCause);
    key(w, "world_size"), w.Int(s.worldSize);
    key(w, "bucket_cap_bytes"), w.Int64(s.bucketCapBytes);
    key(w, "batch_per_rank"), w.Int64(s.batchPerRank);
    key(w, "steps"), w.Int(s.steps);
    key(w, "steady_steps"), w.Int(s.steadySteps);
    key(w, "step_time_ms"), number(w, s.stepTimeMs);
    key(w, "compute_ms"), number(w, s.computeMs);
    key(w, "comm_ms"), number(w, s.commMs);
    key(w, "overlapped_ms"), number(w, s.overlappedMs);
    key(w, "exposed_comm_ms"), number(w, s.exposedCommMs);
    key(w, "idle_ms"), number(w, s.idleMs);
    key(w, "overlap_ratio"), number(w, s.overlapRatio);
    key(w, "throughput_samples_per_s"), number(w, s.throughput);
    // report.h names the key "throughput"; both are written so either reader finds it.
    key(w, "throughput"), number(w, s.throughput);
    key(w, "stragglers");
    w.StartArray();
    for (int32_t r : s.stragglers)
        w.Int(r);
    w.EndArray();
    key(w, "straggler_wait_ms");
    w.StartArray();
    for (double v : s.stragglerWaitMs)
        number(w, v);
    w.EndArray();
    key(w, "buckets");
    w.StartArray();
    for (const BucketSummary& b : s.buckets) {
        w.StartObject();
        key(w, "index"), w.Int(b.bucket);
        key(w, "bytes"), w.Int64(b.bytes);
        key(w, "params"), w.Int(b.params);
        key(w, "ready_to_launch_ms"), number(w, b.meanReadyToLaunchMs);
        key(w, "duration_ms"), number(w, b.meanDurationMs);
        key(w, "algbw_gbps"), number(w, b.meanAlgbwGBps);
        key(w, "busbw_gbps"), number(w, b.meanBusbwGBps);
        key(w, "skew_ms"), number(w, b.meanSkewMs);
        w.EndObject();
    }
    w.EndArray();
    key(w, "spans"), w.Int64(s.spans);
    key(w, "diagnostics"), w.Int64(s.diagnostics);
    w.EndObject();
    return std::string(buffer.GetString(), buffer.GetSize());
}

std::string summaryTable(const std::vector<RunSummary>& summaries)
{
    std::vector<std::vector<std::string>> rows = {{"run", "N", "bucket cap", "steps", "step ms", "compute ms",
                                                   "comm ms", "exposed ms", "idle ms", "overlap", "samples/s",
                                                   "stragglers", "status"}};
    for (const RunSummary& s : summaries) {
        std::string strag;
        for (int32_t r : s.stragglers)
            strag += (strag.empty() ? "" : ",") + std::to_string(r);
        rows.push_back({s.name.empty() ? "(unnamed)" : s.name, std::to_string(s.worldSize), bytesText(s.bucketCapBytes),
                        std::to_string(s.steps), format("%.3f", s.stepTimeMs), format("%.3f", s.computeMs),
                        format("%.3f", s.commMs), format("%.3f", s.exposedCommMs), format("%.3f", s.idleMs),
                        std::isfinite(s.overlapRatio) ? format("%.1f%%", s.overlapRatio * 100) : "n/a",
                        format("%.1f", s.throughput), strag.empty() ? "-" : strag, runStatusName(s.status)});
    }
    return renderTable(rows, "");
}

} // namespace lockstep::core
