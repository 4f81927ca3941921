// The run report as text (summaryText, reportText, summaryTable) and as JSON (summaryJson,
// reportJson; docs/report-json.md is the schema). JSON goes through RapidJSON's Writer so
// strings are escaped correctly; numbers that are not defined or not applicable (NaN) are
// written as null, never as a bogus 0. Text escapes control characters in everything that comes
// from a run file.
#include "lockstep/core/report.h"
#include "lockstep/core/clock_sync.h"
#include "lockstep/core/fields.h"
#include "lockstep/core/step_stats.h"

#include "field_json.h"

#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>
#include <type_traits>

namespace lockstep::core {
namespace {

constexpr double kToMs = 1e-6;
constexpr const char* kNotApplicable = "\xE2\x80\x94"; // "—"

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
    if (bytes <= 0)
        return "unknown"; // docs/design.md: a size that is not known reads "unknown", never 0
    const double b = static_cast<double>(bytes);
    if (bytes >= (1ll << 30))
        return format("%.2f GiB", b / (1ll << 30));
    if (bytes >= (1ll << 20))
        return format("%.2f MiB", b / (1ll << 20));
    if (bytes >= (1ll << 10))
        return format("%.1f KiB", b / (1ll << 10));
    return format("%lld B", static_cast<long long>(bytes));
}

std::string msText(double ms) { return std::isfinite(ms) ? format("%.3f ms", ms) : std::string(kNotApplicable); }
std::string numText(double v, const char* fmt) { return std::isfinite(v) ? format(fmt, v) : std::string(kNotApplicable); }
std::string percentText(double ratio) { return numText(ratio * 100.0, "%.1f%%"); }
std::string orUnknown(const std::string& s) { return s.empty() ? "?" : escapeControl(s); }

// Pads each column to its widest cell; the first column is left-aligned, numbers right-aligned.
// Widths count UTF-8 characters, not bytes ("—" is one column).
size_t columns(const std::string& s)
{
    size_t n = 0;
    for (unsigned char c : s)
        n += (c & 0xC0) != 0x80;
    return n;
}
std::string renderTable(const std::vector<std::vector<std::string>>& rows, const std::string& indent)
{
    std::vector<size_t> width;
    for (const auto& row : rows) {
        width.resize(std::max(width.size(), row.size()), 0);
        for (size_t c = 0; c < row.size(); ++c)
            width[c] = std::max(width[c], columns(row[c]));
    }
    std::string out;
    for (const auto& row : rows) {
        std::string line = indent;
        for (size_t c = 0; c < row.size(); ++c) {
            const std::string pad(width[c] - columns(row[c]), ' ');
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

// Length of the valid UTF-8 sequence at s[i] (0 if invalid).
size_t utf8Length(std::string_view s, size_t i)
{
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size())
        return 0;
    for (size_t k = 1; k < n; ++k)
        if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
            return 0;
    return n;
}

// ---- JSON ----
// rapidjson's output stream over a std::ostream, 64 KiB at a time: a 100 M-span run's full
// report is gigabytes, written as it is made rather than built in memory first.
class OStreamBuffer {
public:
    using Ch = char;
    explicit OStreamBuffer(std::ostream& out) : m_out(out) {}
    ~OStreamBuffer() { Flush(); }
    OStreamBuffer(const OStreamBuffer&) = delete;
    OStreamBuffer& operator=(const OStreamBuffer&) = delete;
    void Put(char c)
    {
        if (m_used == sizeof m_buffer)
            Flush();
        m_buffer[m_used++] = c;
    }
    void Flush()
    {
        m_out.write(m_buffer, static_cast<std::streamsize>(m_used));
        m_used = 0;
    }

private:
    std::ostream& m_out;
    char m_buffer[1 << 16];
    size_t m_used = 0;
};
using JsonWriter = rapidjson::Writer<OStreamBuffer>;

void number(JsonWriter& w, double v)
{
    if (std::isfinite(v))
        w.Double(v);
    else
        w.Null();
}
void ms(JsonWriter& w, const char* k, double nsOrNaN)
{
    w.Key(k);
    number(w, nsOrNaN * kToMs);
}
void string(JsonWriter& w, const std::string& s) { w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size())); }
void kv(JsonWriter& w, const char* k, const std::string& v)
{
    w.Key(k);
    string(w, v);
}
void kv(JsonWriter& w, const char* k, double v)
{
    w.Key(k);
    number(w, v);
}
void kvInt(JsonWriter& w, const char* k, int64_t v)
{
    w.Key(k);
    w.Int64(v);
}

// A count or size that 0 would misstate (a trace that does not give it): null, "unknown".
void kvKnown(JsonWriter& w, const char* k, int64_t v)
{
    w.Key(k);
    if (v > 0)
        w.Int64(v);
    else
        w.Null();
}
void kvBool(JsonWriter& w, const char* k, bool v)
{
    w.Key(k);
    w.Bool(v);
}
void kvNull(JsonWriter& w, const char* k)
{
    w.Key(k);
    w.Null();
}
void kvRank(JsonWriter& w, const char* k, int32_t rank)
{
    w.Key(k);
    if (rank >= 0)
        w.Int(rank);
    else
        w.Null();
}

// "config": the fields of the run's table (fields.h) that are settings, circumstances or on the
// report's config lines, under their names, as stored (numbers as numbers, "" = not recorded).
void writeConfig(JsonWriter& w, const RunConfig& c)
{
    w.Key("config");
    w.StartObject();
    for (const RunConfigField& f : kRunConfigFields) {
        if (!f.has(kFieldSetting | kFieldCircumstance | kFieldInReport))
            continue;
        w.Key(f.name);
        writeFieldJson(w, f, c);
    }
    w.EndObject();
}

// "steady": which steps the means are over, and why.
void writeSteady(JsonWriter& w, const SteadySteps& steady)
{
    w.Key("steady");
    w.StartObject();
    kvInt(w, "warmup_steps", steady.warmupSteps);
    kv(w, "rule", std::string(steady.fallback ? "all_steps_no_step_past_warmup" : "after_warmup"));
    w.Key("steps");
    w.StartArray();
    for (int32_t step : steady.steps)
        w.Int(step);
    w.EndArray();
    kv(w, "description", steady.describe());
    w.EndObject();
}

// "straggler": the evidence for and against the candidate; what needs a candidate is null without one.
void writeStragglerEvidence(JsonWriter& w, const StragglerEvidence& e)
{
    w.Key("straggler");
    w.StartObject();
    kvBool(w, "applicable", e.applicable);
    if (e.notApplicable.empty())
        kvNull(w, "not_applicable_reason");
    else
        kv(w, "not_applicable_reason", e.notApplicable);
    kvRank(w, "candidate", e.candidate);
    kvInt(w, "steady_steps", e.steadySteps);
    kvInt(w, "steps_late", e.stepsLate);
    const bool have = e.applicable && e.candidate >= 0;
    const double nan = std::nan("");
    ms(w, "mean_wait_ms", have ? e.meanWaitNs : nan);
    ms(w, "mean_step_ms", e.applicable ? e.meanStepNs : nan);
    kv(w, "wait_fraction", have ? e.waitFraction : nan);
    ms(w, "lateness_above_others_ms", have ? e.latenessAboveOthersNs : nan);
    ms(w, "noise_spread_ms", have ? e.noiseSpreadNs : nan);
    ms(w, "noise_floor_ms", have ? e.noiseFloorNs : nan);
    ms(w, "systematic_delay_ms", have ? e.systematicDelayNs : nan);
    kv(w, "delay_fraction", have ? e.delayFraction : nan);
    ms(w, "rank_spread_ms", have ? e.rankSpreadNs : nan);
    ms(w, "rank_floor_ms", have ? e.rankFloorNs : nan);
    kv(w, "chance", have ? e.chance : nan);
    kv(w, "confidence", have ? e.confidence() : nan);
    kvBool(w, "most_steps", e.mostSteps);
    kvBool(w, "wait_above_threshold", e.waitAboveThreshold);
    ms(w, "clock_uncertainty_ms", have ? e.clockUncertaintyNs : nan);
    ms(w, "clock_floor_ms", have ? e.clockFloorNs : nan);
    kvBool(w, "clears_noise", e.clearsNoise);
    kvBool(w, "within_clock", e.withinClock);
    kvBool(w, "straggler", e.straggler);
    kv(w, "cpu_ms", have ? e.cpuMs : nan);
    kv(w, "others_cpu_ms", have ? e.othersCpuMs : nan);
    kv(w, "runq_ms", have ? e.runqMs : nan);
    kv(w, "others_runq_ms", have ? e.othersRunqMs : nan);
    kv(w, "cause", std::string(stragglerCauseName(e.cause)));
    w.EndObject();
}

// "buckets": each bucket's means over the steady steps.
void writeBucketSummaries(JsonWriter& w, const std::vector<BucketSummary>& buckets)
{
    w.Key("buckets");
    w.StartArray();
    for (const BucketSummary& b : buckets) {
        w.StartObject();
        kvInt(w, "index", b.bucket);
        // A size or parameter count the run does not give is null ("unknown"), never 0.
        kvKnown(w, "bytes", b.bytes);
        kvKnown(w, "params", b.params);
        w.Key("param_names");
        w.StartArray();
        for (const std::string& p : b.paramNames)
            string(w, p);
        w.EndArray();
        kv(w, "ready_to_launch_ms", b.meanReadyToLaunchMs);
        kv(w, "duration_ms", b.meanDurationMs);
        kv(w, "exposed_ms", b.meanExposedMs);
        kv(w, "hidden_ms", b.meanHiddenMs);
        kv(w, "algbw_gbps", b.meanAlgbwGBps);
        kv(w, "busbw_gbps", b.meanBusbwGBps);
        kv(w, "skew_ms", b.meanSkewMs);
        kv(w, "wait_caused_ms", b.meanWaitCausedMs);
        kvRank(w, "late_rank", b.lateRank);
        w.EndObject();
    }
    w.EndArray();
}

// The summary's fields, written into an open object: the top of both JSON forms.
void writeSummaryFields(JsonWriter& w, const RunSummary& s)
{
    kv(w, "schema", std::string("lockstep-report"));
    kvInt(w, "schema_version", kReportSchemaVersion);
    kv(w, "name", s.config.name);
    kv(w, "model", s.config.model);
    kv(w, "source", s.config.source);
    kv(w, "backend", s.config.backend);
    kv(w, "device", s.config.device);
    kv(w, "status", std::string(runStatusName(s.config.status)));
    kv(w, "failure_cause", s.config.failureCause);
    kvInt(w, "world_size", s.worldSize);
    kvInt(w, "bucket_cap_bytes", s.config.bucketCapBytes);
    kvInt(w, "batch_per_rank", s.config.batchPerRank);
    w.Key("signature");
    w.StartObject();
    for (const auto& [field, value] : s.signature.fields)
        kv(w, field.c_str(), value);
    w.EndObject();
    writeConfig(w, s.config);
    kvInt(w, "steps", s.steps);
    kvInt(w, "steady_steps", s.steadySteps);
    writeSteady(w, s.steady);
    kvBool(w, "multi_rank", s.multiRank);
    kv(w, "window", s.window);
    kv(w, "step_time_ms", s.stepTimeMs);
    kv(w, "compute_ms", s.computeMs);
    kv(w, "comm_ms", s.commMs);
    kv(w, "memory_ms", s.memoryMs);
    kv(w, "compute_only_ms", s.computeOnlyMs);
    kv(w, "overlapped_ms", s.overlappedMs);
    kv(w, "exposed_comm_ms", s.exposedCommMs);
    kv(w, "bucket_exposed_ms", s.bucketExposedMs);
    kv(w, "memory_only_ms", s.memoryOnlyMs);
    kv(w, "idle_ms", s.idleMs);
    kv(w, "overlap_ratio", s.overlapRatio);
    kv(w, "throughput_samples_per_s", s.throughput);
    w.Key("stragglers");
    w.StartArray();
    for (int32_t r : s.stragglers)
        w.Int(r);
    w.EndArray();
    w.Key("straggler_wait_ms");
    w.StartArray();
    for (double v : s.stragglerWaitMs)
        number(w, v);
    w.EndArray();
    writeStragglerEvidence(w, s.straggler);
    writeBucketSummaries(w, s.buckets);
    kvInt(w, "spans", s.spans);
    kvInt(w, "diagnostics_total", s.diagnostics);
    kvInt(w, "device_spans_without_step", s.deviceSpansWithoutStep);
}

void writeParts(JsonWriter& w, const StepBreakdown& b, bool multiRank)
{
    const double nan = std::nan("");
    ms(w, "wall_ms", static_cast<double>(b.wall));
    ms(w, "compute_ms", static_cast<double>(b.compute));
    ms(w, "comm_ms", static_cast<double>(b.communication));
    ms(w, "memory_ms", static_cast<double>(b.memory));
    ms(w, "compute_only_ms", static_cast<double>(b.computeOnly));
    ms(w, "overlapped_ms", multiRank ? static_cast<double>(b.overlapped) : nan);
    ms(w, "exposed_comm_ms", multiRank ? static_cast<double>(b.exposed) : nan);
    ms(w, "memory_only_ms", static_cast<double>(b.memoryOnly));
    ms(w, "idle_ms", static_cast<double>(b.idle));
    kv(w, "overlap_ratio", b.overlapRatio);
}

} // namespace

std::string escapeControl(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        const size_t n = utf8Length(text, i);
        if (n == 0) {
            out += format("\\x%02x", c);
            ++i;
            continue;
        }
        if (n == 1 && (c < 0x20 || c == 0x7f)) {
            switch (c) {
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default: out += format("\\x%02x", c);
            }
        } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
            out += format("\\u%04x", static_cast<unsigned char>(text[i + 1])); // C1 control U+0080-U+009F
        } else if (c == '\\') {
            out += "\\\\";
        } else {
            out.append(text.substr(i, n));
        }
        i += n;
    }
    return out;
}

// "  config: model arguments layers=8 width=512, optimizer sgd, ...": the table's fields marked
// kFieldInReport (fields.h) that say something, wrapped: "" and 0 (not recorded) and RunConfig's
// defaults (one accumulation step, a 1 MiB first bucket: also what an importer leaves) are left out.
static std::string configLines(const RunConfig& c)
{
    static const RunConfig defaults;
    std::vector<std::string> items;
    for (const RunConfigField& f : kRunConfigFields) {
        if (!f.has(kFieldInReport))
            continue;
        const std::string v = fieldText(f, c);
        if (v.empty() || v == "0" || v == fieldText(f, defaults))
            continue;
        const std::string unit = f.unit;
        if (unit == "bytes")
            items.push_back(std::string(f.label) + " " + bytesText(std::stoll(v)));
        else
            items.push_back(std::string(f.label) + " " + escapeControl(v) + (unit.empty() ? "" : " " + unit));
    }
    if (items.empty())
        return {};
    std::string out, line = "  config:";
    for (size_t i = 0; i < items.size(); ++i) {
        const std::string item = " " + items[i] + (i + 1 < items.size() ? "," : "");
        if (line.size() > 10 && line.size() + item.size() > 100) {
            out += line + "\n";
            line = "         ";
        }
        line += item;
    }
    return out + line + "\n";
}

// Long (about 130 lines) but one straight pass: the report's sections in the order they print,
// each a few lines; split it where a section grows a rule of its own.
std::string summaryText(const RunSummary& s)
{
    std::string out;
    out += "Run " + (s.config.name.empty() ? std::string("(unnamed)") : escapeControl(s.config.name)) + "\n";
    out += "  model " + orUnknown(s.config.model) + ", source " + orUnknown(s.config.source) + ", status "
        + runStatusName(s.config.status) + "\n";
    if (!s.config.failureCause.empty())
        out += "  failure cause: " + escapeControl(s.config.failureCause) + "\n";
    // 0 is what an importer leaves where the trace does not say: "unknown", never "0 B".
    out += format("  world size %d, backend %s, device %s, bucket cap %s, batch per rank %s\n", s.worldSize,
                  orUnknown(s.config.backend).c_str(), orUnknown(s.config.device).c_str(),
                  s.config.bucketCapBytes > 0 ? bytesText(s.config.bucketCapBytes).c_str() : "unknown",
                  s.config.batchPerRank > 0 ? std::to_string(s.config.batchPerRank).c_str() : "unknown");
    out += configLines(s.config);
    out += format("  %d steps; means below use %s\n", s.steps, s.steady.describe().c_str());
    if (s.steady.fallback)
        out += "  note: these steps include warm-up: treat the numbers as indicative\n";
    out += s.window == "host" ? "  window: each step's host window\n"
                              : "  window: tiling device windows (first device work of the step to the next step's)\n";
    out += format("  %lld spans, %lld diagnostics", static_cast<long long>(s.spans), static_cast<long long>(s.diagnostics));
    if (s.deviceSpansWithoutStep > 0)
        out += format(", %lld device spans in no step", static_cast<long long>(s.deviceSpansWithoutStep));
    out += "\n";

    out += "\nPer rank and step (means over steady steps and ranks)\n";
    std::vector<std::vector<std::string>> rows = {
        {"step time", msText(s.stepTimeMs)},
        {"compute", msText(s.computeMs)},
        {"communication", msText(s.commMs)},
        {"memory (copies, memsets)", msText(s.memoryMs)},
        {"  compute only", msText(s.computeOnlyMs)},
        {"  overlapped", msText(s.overlappedMs)},
        {"  exposed communication", msText(s.exposedCommMs)},
        {"  memory only", msText(s.memoryOnlyMs)},
        {"  idle", msText(s.idleMs)},
        {"overlap ratio", s.multiRank ? (std::isfinite(s.overlapRatio) ? percentText(s.overlapRatio)
                                                                        : std::string("— (no communication)"))
                                      : std::string("— (1 rank: nothing to hide)")},
        {"throughput", std::isfinite(s.throughput) ? format("%.1f samples/s", s.throughput)
                                                    : std::string("— (samples per step unknown)")},
    };
    out += renderTable(rows, "  ");
    out += "  (the five indented parts add up to the step time)\n";

    out += "\nStragglers\n";
    const StragglerEvidence& e = s.straggler;
    if (!s.multiRank) {
        out += "  — (1 rank: not applicable)\n";
    } else if (!e.applicable) {
        out += "  — (" + (e.notApplicable.empty() ? std::string("not applicable") : e.notApplicable) + ")\n";
    } else if (e.candidate < 0) {
        out += "  none: no rank caused any wait\n";
    } else {
        const double stepMs = e.meanStepNs * kToMs;
        if (e.straggler)
            out += format("  rank %d is the straggler\n", e.candidate);
        else if (e.withinClock)
            out += format("  none (clock \u00b1%.3f ms): rank %d was late most often, but by less than the ranks'\n"
                          "    clocks can disagree\n",
                          e.clockUncertaintyNs * kToMs, e.candidate);
        else
            out += format("  none (rank %d was late most often, but the evidence does not clear the noise)\n",
                          e.candidate);
        const double chancePct = e.chance * 100.0;
        out += format("    %s late in %d of %d %s (chance of that by noise alone: %s, at most 5%%; "
                      "confidence %s)\n",
                      e.mostSteps ? "[x]" : "[ ]", e.stepsLate, e.steadySteps,
                      s.steady.fallback ? "steps (warm-up included: no step is past it)" : "steady steps",
                      (chancePct >= 1.0 ? format("%.0f%%", chancePct) : format("%.2g%%", chancePct)).c_str(),
                      (chancePct >= 1.0 ? format("%.0f%%", 100.0 - chancePct)
                                        : format("%.4g%%", 100.0 - chancePct)).c_str());
        out += format("    %s mean wait caused %.3f ms per step = %.1f%% of the %.3f ms step, systematic delay\n"
                      "        %.3f ms = %.1f%% (threshold 5%% for both)\n",
                      e.waitAboveThreshold ? "[x]" : "[ ]", e.meanWaitNs * kToMs, e.waitFraction * 100.0, stepMs,
                      e.systematicDelayNs * kToMs, e.delayFraction * 100.0);
        // Waits between ranks on different clocks are only as exact as the clocks' agreement: say
        // so where it is a sizeable part of the step (a slow clock exchange across hosts).
        if (stepMs > 0 && e.clockUncertaintyNs >= 0.05 * stepMs / kToMs)
            out += format("    ! the ranks' clocks can disagree by \u00b1%.3f ms (%.0f%% of the step): waits and lateness\n"
                          "      between ranks on different hosts are that uncertain\n",
                          e.clockUncertaintyNs * kToMs, e.clockUncertaintyNs * kToMs / stepMs * 100.0);
        out += format("    %s its typical lateness stands %.3f ms above the other ranks'; noise floor %.3f ms\n"
                      "        (2 standard errors over %d steps of the others' step-to-step spread, %.3f ms)",
                      e.clearsNoise ? "[x]" : "[ ]", e.latenessAboveOthersNs * kToMs, e.noiseFloorNs * kToMs,
                      e.steadySteps, e.noiseSpreadNs * kToMs);
        out += std::isnan(e.rankSpreadNs)
                   ? std::string("\n        (no rank floor: too few other ranks to show how far healthy ranks sit apart)")
                   : format(",\n        rank floor %.3f ms (the other ranks' typical latenesses spread %.3f ms)",
                            e.rankFloorNs * kToMs, e.rankSpreadNs * kToMs);
        out += e.clockUncertaintyNs > 0
                   ? format(",\n        each raised by %.3f ms for the clocks (\u00b1%.3f ms between the ranks, x N/(N-1))\n",
                            e.clockFloorNs * kToMs, e.clockUncertaintyNs * kToMs)
                   : std::string("\n");
        if (!std::isnan(e.cpuMs)) {
            out += format("    its training thread per step: %.3f ms on a CPU (others %.3f), %.3f ms waiting for one "
                          "(others %.3f)\n",
                          e.cpuMs, e.othersCpuMs, e.runqMs, e.othersRunqMs);
            if (e.causeWorthStating())
                out += format("        %s\n", stragglerCauseText(e.cause));
        }
        out += "    (wait caused = mean over the other ranks of how long they waited for it; their summed\n"
               "     rank-time lost is in the JSON report)\n";
    }

    out += "\nBuckets (means over steady steps and ranks)\n";
    if (s.buckets.empty()) {
        out += "  none\n";
    } else {
        std::vector<std::vector<std::string>> table = {{"bucket", "bytes", "params", "ready->launch ms", "duration ms",
                                                        "exposed ms", "hidden ms", "algbw GB/s", "busbw GB/s", "skew ms", "wait ms",
                                                        "late rank"}};
        for (const BucketSummary& b : s.buckets) {
            table.push_back({std::to_string(b.bucket), bytesText(b.bytes),
                             b.params > 0 ? std::to_string(b.params) : std::string("unknown"),
                             numText(b.meanReadyToLaunchMs, "%.3f"), numText(b.meanDurationMs, "%.3f"),
                             numText(b.meanExposedMs, "%.3f"), numText(b.meanHiddenMs, "%.3f"),
                             numText(b.meanAlgbwGBps, "%.3f"), numText(b.meanBusbwGBps, "%.3f"),
                             numText(b.meanSkewMs, "%.3f"), numText(b.meanWaitCausedMs, "%.3f"),
                             b.lateRank >= 0 ? std::to_string(b.lateRank) : std::string(kNotApplicable)});
        }
        out += renderTable(table, "  ");
        if (s.multiRank && std::isfinite(s.bucketExposedMs) && std::isfinite(s.exposedCommMs))
            out += format("  buckets: %.3f of the step's %.3f ms exposed communication; other: %.3f ms\n",
                          s.bucketExposedMs, s.exposedCommMs, s.exposedCommMs - s.bucketExposedMs);
        out += "  (duration: from each rank's own launch to its completion, so it includes waiting for the\n"
               "   late rank (skew); exposed + hidden: the bucket's own time, from its launch or the end of\n"
               "   the rank's earlier all-reduces to its completion, split by whether compute of the rank\n"
               "   (any step's) runs beside it, so the buckets' exposed times add up; other: collectives\n"
               "   outside the buckets; algbw = bytes / the mean duration; " + std::string(kNotApplicable)
            + " where not defined)\n";
    }
    return out;
}

std::string reportText(const Run& run, const RunAnalysis& a)
{
    std::string out = summaryText(a.summary);
    out += "\nRanks (means over steady steps)\n";
    // Ranks on several hosts (a cluster, `lockstep run --hosts`): each row says which host.
    std::map<int, std::string> hostOf;
    for (const RankInfo& r : run.ranks)
        hostOf[r.rank] = r.host;
    const bool severalHosts = std::any_of(run.ranks.begin(), run.ranks.end(),
                                          [&](const RankInfo& r) { return r.host != run.ranks.front().host; });
    std::vector<std::vector<std::string>> table = {{"rank", "step ms", "compute only", "overlapped", "exposed",
                                                    "memory only", "idle", "overlap", "late steps", "wait caused ms",
                                                    "cpu ms", "cpu wait ms"}};
    if (severalHosts)
        table.front().insert(table.front().begin() + 1, "host");
    for (const RankSummary& r : a.ranks) {
        table.push_back({std::to_string(r.rank), numText(r.stepTimeMs, "%.3f"), numText(r.computeOnlyMs, "%.3f"),
                         numText(r.overlappedMs, "%.3f"), numText(r.exposedCommMs, "%.3f"),
                         numText(r.memoryOnlyMs, "%.3f"), numText(r.idleMs, "%.3f"), percentText(r.overlapRatio),
                         a.summary.multiRank ? std::to_string(r.stepsAsStraggler) : std::string(kNotApplicable),
                         numText(r.meanWaitCausedMs, "%.3f"),
                         numText(r.cpuMs, "%.3f"), numText(r.runqMs, "%.3f")});
        if (severalHosts)
            table.back().insert(table.back().begin() + 1, escapeControl(hostOf[r.rank]));
    }
    out += renderTable(table, "  ");
    out += "  (cpu ms, cpu wait ms: the training thread's time on a CPU and waiting for one, per step;\n"
           "   " + std::string(kNotApplicable) + " where not measured)\n";
    if (run.ranks.size() > 1) {
        out += "\nClocks (each rank's times on rank 0's clock)\n";
        std::vector<std::vector<std::string>> clocks = {{"rank", "host", "clock", "offset ms", "uncertainty ms"}};
        for (const RankInfo& r : run.ranks)
            clocks.push_back({std::to_string(r.rank), escapeControl(r.host), clockBasisName(r.clockBasis),
                              format("%.3f", static_cast<double>(r.clockOffsetNs) * kToMs),
                              r.clockBasis == ClockBasis::NotMeasured
                                  ? std::string("unknown")
                                  : format("\u00b1%.3f", static_cast<double>(r.clockUncertaintyNs) * kToMs)});
        out += renderTable(clocks, "  ");
    }
    out += "\nDiagnostics\n";
    if (run.diagnostics.empty())
        out += "  none\n";
    for (const Diagnostic& d : run.diagnostics)
        out += format("  %s: %s x%lld: %s\n", severityName(d.severity), escapeControl(d.kind).c_str(),
                      static_cast<long long>(d.count), escapeControl(d.message).c_str());
    return out;
}

std::string summaryJson(const RunSummary& s)
{
    std::ostringstream out;
    {
        OStreamBuffer buffer(out);
        JsonWriter w(buffer);
        w.StartObject();
        writeSummaryFields(w, s);
        w.EndObject();
    }
    return std::move(out).str();
}

namespace {

// Quartiles as an object of ms (null: no value).
void writeQuartiles(JsonWriter& w, const char* k, const Quartiles& q)
{
    w.Key(k);
    if (q.count == 0) {
        w.Null();
        return;
    }
    w.StartObject();
    kv(w, "min", q.min);
    kv(w, "q1", q.q1);
    kv(w, "median", q.median);
    kv(w, "q3", q.q3);
    kv(w, "max", q.max);
    w.EndObject();
}

// The step-to-step spread of the run's numbers over the steady steps (core::stepSpread).
void writeSpread(JsonWriter& w, const StepSpread& spread)
{
    kv(w, "step_time_sd_ms", spread.stepTimeMs.sd);
    kv(w, "overlap_ratio_sd", spread.overlapRatio.sd);
    kv(w, "throughput_sd_samples_per_s", spread.throughput.sd);
}

void writeRanks(JsonWriter& w, const Run& run, const RunAnalysis& a)
{
    const RunSummary& s = a.summary;
    std::map<int32_t, const RankInfo*> info;
    for (const RankInfo& r : run.ranks)
        info[r.rank] = &r;
    std::map<int32_t, double> medianLateness;
    for (const RankStraggle& r : a.stragglers.perRank)
        medianLateness[r.rank] = r.medianLatenessNs;
    std::map<int32_t, Quartiles> stepTimes;
    for (const RankStepTimes& r : rankStepTimes(a))
        stepTimes[r.rank] = r.stepTimeMs;
    w.Key("ranks");
    w.StartArray();
    for (const RankSummary& r : a.ranks) {
        w.StartObject();
        kvInt(w, "rank", r.rank);
        const RankInfo* ri = info.count(r.rank) ? info[r.rank] : nullptr;
        kv(w, "host", ri ? ri->host : std::string());
        kv(w, "device", ri ? ri->device : std::string());
        kvInt(w, "clock_offset_ns", ri ? ri->clockOffsetNs : 0);
        kv(w, "boot_id", ri ? ri->bootId : std::string());
        kv(w, "clock_basis", std::string(clockBasisName(ri ? ri->clockBasis : ClockBasis::NotMeasured)));
        kvInt(w, "clock_rtt_ns", ri ? ri->clockRttNs : 0);
        if (ri && ri->clockBasis != ClockBasis::NotMeasured)
            kvInt(w, "clock_uncertainty_ns", ri->clockUncertaintyNs);
        else
            kvNull(w, "clock_uncertainty_ns");
        kvInt(w, "steps", r.steps);
        kv(w, "step_time_ms", r.stepTimeMs);
        writeQuartiles(w, "step_time_quartiles_ms", stepTimes[r.rank]);
        kv(w, "compute_ms", r.computeMs);
        kv(w, "comm_ms", r.commMs);
        kv(w, "memory_ms", r.memoryMs);
        kv(w, "compute_only_ms", r.computeOnlyMs);
        kv(w, "overlapped_ms", r.overlappedMs);
        kv(w, "exposed_comm_ms", r.exposedCommMs);
        kv(w, "memory_only_ms", r.memoryOnlyMs);
        kv(w, "idle_ms", r.idleMs);
        kv(w, "overlap_ratio", r.overlapRatio);
        if (s.multiRank)
            kvInt(w, "steps_as_straggler", r.stepsAsStraggler);
        else
            kvNull(w, "steps_as_straggler");
        kv(w, "mean_wait_caused_ms", r.meanWaitCausedMs);
        kv(w, "cpu_ms", r.cpuMs);
        kv(w, "runq_ms", r.runqMs);
        ms(w, "median_lateness_ms", s.multiRank && medianLateness.count(r.rank) ? medianLateness[r.rank] : std::nan(""));
        w.EndObject();
    }
    w.EndArray();
}

// Per (rank, step): the breakdown and what the rank caused.
void writeStepBreakdown(JsonWriter& w, const RunAnalysis& a)
{
    const RunSummary& s = a.summary;
    std::map<std::pair<int32_t, int32_t>, const RankStepWait*> waits;
    for (const RankStepWait& rw : a.stragglers.perRankStep)
        waits[{rw.rank, rw.step}] = &rw;
    std::map<int32_t, int32_t> lateRank;
    for (const StepStraggler& ss : a.stragglers.perStep)
        lateRank[ss.step] = ss.rank;
    const auto schedMs = [](int64_t ns) { return ns >= 0 ? static_cast<double>(ns) * 1e-6 : std::nan(""); };
    w.Key("step_breakdown");
    w.StartArray();
    for (const StepBreakdown& b : a.steps) {
        w.StartObject();
        kvInt(w, "rank", b.rank);
        kvInt(w, "step", b.step);
        kvBool(w, "steady", b.steady);
        kvBool(w, "warmup", b.warmup);
        kv(w, "window", std::string(stepWindowName(b.window)));
        kvInt(w, "start_ns", b.start);
        kvInt(w, "end_ns", b.end);
        writeParts(w, b, s.multiRank);
        auto it = waits.find({b.rank, b.step});
        const bool known = s.multiRank && it != waits.end();
        ms(w, "wait_caused_ms", known ? static_cast<double>(it->second->waitCaused) : std::nan(""));
        ms(w, "lateness_ms", known ? it->second->latenessNs : std::nan(""));
        if (s.multiRank)
            kvBool(w, "late_rank", lateRank.count(b.step) && lateRank[b.step] == b.rank);
        else
            kvNull(w, "late_rank");
        kv(w, "cpu_ms", schedMs(b.cpuNs));
        kv(w, "runq_ms", schedMs(b.runqNs));
        w.EndObject();
    }
    w.EndArray();
}

// Per step over all ranks (core::stepMeans): the charts' "mean of ranks" and the spread's input.
void writeStepMeans(JsonWriter& w, const std::vector<StepMean>& steps, bool multiRank)
{
    const double nan = std::nan("");
    w.Key("step_means");
    w.StartArray();
    for (const StepMean& m : steps) {
        w.StartObject();
        kvInt(w, "step", m.step);
        kvBool(w, "steady", m.steady);
        kvBool(w, "warmup", m.warmup);
        kvInt(w, "ranks", m.ranks);
        kv(w, "step_time_ms", m.wallMs);
        kv(w, "compute_only_ms", m.computeOnlyMs);
        kv(w, "overlapped_ms", multiRank ? m.overlappedMs : nan);
        kv(w, "exposed_comm_ms", multiRank ? m.exposedMs : nan);
        kv(w, "memory_only_ms", m.memoryOnlyMs);
        kv(w, "idle_ms", m.idleMs);
        kv(w, "overlap_ratio", m.overlapRatio);
        kv(w, "throughput_samples_per_s", m.throughput);
        w.EndObject();
    }
    w.EndArray();
}

void writeStepStragglers(JsonWriter& w, const RunAnalysis& a)
{
    const RunSummary& s = a.summary;
    w.Key("step_stragglers");
    w.StartArray();
    for (const StepStraggler& ss : a.stragglers.perStep) {
        w.StartObject();
        kvInt(w, "step", ss.step);
        kvBool(w, "steady", a.steady.contains(ss.step));
        kvRank(w, "late_rank", s.multiRank ? ss.rank : -1);
        ms(w, "wait_caused_ms", s.multiRank ? static_cast<double>(ss.waitCaused) : std::nan(""));
        ms(w, "rank_time_lost_ms", s.multiRank ? static_cast<double>(ss.rankTimeLost) : std::nan(""));
        ms(w, "step_time_ms", static_cast<double>(ss.stepTime));
        w.EndObject();
    }
    w.EndArray();
}

void writeBucketStat(JsonWriter& w, const BucketStat& st)
{
    w.StartObject();
    kvInt(w, "rank", st.rank);
    w.Key("ready_ns");
    if (st.ready >= 0)
        w.Int64(st.ready);
    else
        w.Null();
    kvInt(w, "launch_ns", st.launch);
    kvInt(w, "completion_ns", st.completion);
    ms(w, "ready_to_launch_ms", st.readyToLaunch >= 0 ? static_cast<double>(st.readyToLaunch) : std::nan(""));
    ms(w, "duration_ms", static_cast<double>(st.duration));
    ms(w, "exposed_ms", st.exposed >= 0 ? static_cast<double>(st.exposed) : std::nan(""));
    ms(w, "hidden_ms", st.hidden >= 0 ? static_cast<double>(st.hidden) : std::nan(""));
    kvKnown(w, "bytes", st.bytes);
    kv(w, "algbw_gbps", st.algbwGBps);
    kv(w, "busbw_gbps", st.busbwGBps);
    w.EndObject();
}

// Per (step, bucket): the skew and each rank's collective.
void writeBucketSteps(JsonWriter& w, const RunAnalysis& a)
{
    const RunSummary& s = a.summary;
    std::map<std::pair<int32_t, int32_t>, std::vector<const BucketStat*>> perBucket;
    for (const BucketStat& st : a.buckets)
        perBucket[{st.step, st.bucket}].push_back(&st);
    w.Key("bucket_steps");
    w.StartArray();
    for (const BucketSkew& sk : a.stragglers.skews) {
        w.StartObject();
        kvInt(w, "step", sk.step);
        kvInt(w, "bucket", sk.bucket);
        kvBool(w, "steady", a.steady.contains(sk.step));
        ms(w, "skew_ms", s.multiRank ? static_cast<double>(sk.skew) : std::nan(""));
        kvRank(w, "late_rank", s.multiRank ? sk.lateRank : -1);
        ms(w, "wait_caused_ms", s.multiRank ? static_cast<double>(sk.waitCaused) : std::nan(""));
        ms(w, "rank_time_lost_ms", s.multiRank ? static_cast<double>(sk.rankTimeLost) : std::nan(""));
        w.Key("ranks");
        w.StartArray();
        for (const BucketStat* st : perBucket[{sk.step, sk.bucket}])
            writeBucketStat(w, *st);
        w.EndArray();
        w.EndObject();
    }
    w.EndArray();
}

void writeDiagnostics(JsonWriter& w, const Run& run)
{
    w.Key("diagnostics");
    w.StartArray();
    for (const Diagnostic& d : run.diagnostics) {
        w.StartObject();
        kv(w, "kind", d.kind);
        kv(w, "severity", std::string(severityName(d.severity)));
        kvInt(w, "count", d.count);
        kv(w, "message", d.message);
        w.EndObject();
    }
    w.EndArray();
}

} // namespace

void writeReportJson(std::ostream& out, const Run& run, const RunAnalysis& a)
{
    OStreamBuffer buffer(out);
    JsonWriter w(buffer);
    w.StartObject();
    writeSummaryFields(w, a.summary);
    const std::vector<StepMean> steps = stepMeans(run, a);
    writeSpread(w, stepSpread(steps));
    writeRanks(w, run, a);
    writeStepBreakdown(w, a);
    writeStepMeans(w, steps, a.summary.multiRank);
    writeStepStragglers(w, a);
    writeBucketSteps(w, a);
    writeDiagnostics(w, run);
    w.EndObject();
}

std::string reportJson(const Run& run, const RunAnalysis& a)
{
    std::ostringstream out;
    writeReportJson(out, run, a);
    return std::move(out).str();
}

std::string summaryTable(const std::vector<RunSummary>& summaries)
{
    std::vector<std::vector<std::string>> rows = {{"run", "N", "bucket cap", "steps", "step ms", "compute ms",
                                                   "comm ms", "exposed ms", "memory ms", "idle ms", "overlap",
                                                   "samples/s", "straggler", "status"}};
    for (const RunSummary& s : summaries) {
        std::string strag;
        for (int32_t r : s.stragglers)
            strag += (strag.empty() ? "" : ",") + std::to_string(r);
        if (strag.empty())
            strag = !s.multiRank            ? std::string(kNotApplicable)
                    : s.straggler.withinClock ? format("none (clock \u00b1%.3f ms)", s.straggler.clockUncertaintyNs * 1e-6)
                                              : std::string("none");
        rows.push_back({s.config.name.empty() ? "(unnamed)" : escapeControl(s.config.name), std::to_string(s.worldSize),
                        bytesText(s.config.bucketCapBytes), std::to_string(s.steps), numText(s.stepTimeMs, "%.3f"),
                        numText(s.computeMs, "%.3f"), numText(s.commMs, "%.3f"), numText(s.exposedCommMs, "%.3f"),
                        numText(s.memoryMs, "%.3f"), numText(s.idleMs, "%.3f"), percentText(s.overlapRatio),
                        format("%.1f", s.throughput), strag, runStatusName(s.config.status)});
    }
    return renderTable(rows, "");
}

} // namespace lockstep::core
