// What-if results for people (predictionsText, adviceText) and for scripts (predictionsJson,
// adviceJson, schema "lockstep.whatif/1"). Numbers that are not defined (NaN: the overlap of a
// 1-rank configuration) are written as null in JSON and "n/a" in text, never as 0.
#include "lockstep/core/whatif.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <cstdio>
#include <set>

namespace lockstep::core {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;
constexpr const char* kSchema = "lockstep.whatif/1";

std::string fmt(const char* f, double v)
{
    if (!std::isfinite(v))
        return "n/a";
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string percentOf(double ratio) { return std::isfinite(ratio) ? fmt("%.1f%%", ratio * 100) : "n/a"; }

std::string signedPct(double pct) { return fmt("%+.1f%%", pct); }

double relPct(double value, double reference)
{
    return reference > 0 ? (value - reference) / reference * 100 : std::nan("");
}

// Pads each column to its widest cell; the first column left-aligned, the rest right-aligned.
std::string table(const std::vector<std::vector<std::string>>& rows)
{
    std::vector<size_t> width;
    for (const auto& row : rows) {
        width.resize(std::max(width.size(), row.size()), 0);
        for (size_t c = 0; c < row.size(); ++c)
            width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows) {
        out += "  ";
        for (size_t c = 0; c < row.size(); ++c) {
            const std::string pad(width[c] - row[c].size(), ' ');
            out += c == 0 ? row[c] + pad : pad + row[c];
            out += c + 1 < row.size() ? "  " : "\n";
        }
    }
    return out;
}

std::vector<std::string> numberCells(const WhatIfNumbers& n)
{
    return {std::to_string(n.buckets), fmt("%.3f", n.stepTimeMs), percentOf(n.overlapRatio),
            std::isfinite(n.exposedCommMs) ? fmt("%.3f", n.exposedCommMs) : "n/a", fmt("%.1f", n.throughput)};
}

std::string modelText(const WhatIfModel& model)
{
    const WhatIfNumbers m = model.measured(), r = model.replayed();
    const LinkFit& l = model.link();
    std::string out = "Recorded: " + describe(model.recorded()) + "\n";
    out += "  measured step time " + fmt("%.3f ms", m.stepTimeMs) + " (step-to-step noise "
        + fmt("%.1f%%", model.stepNoisePct()) + "); consistency check: the model replays it at "
        + fmt("%.3f ms", r.stepTimeMs) + " (" + signedPct(model.selfErrorPct())
        + ", close by construction: not the error of other configurations)\n";
    const auto gbps = [](double nsPerByte) { return nsPerByte > 0 ? 1.0 / nsPerByte : INFINITY; };
    if (l.fitted)
        out += "  link fitted on " + std::to_string(l.samples) + " all-reduces (" + std::to_string(l.busySamples)
            + " during backward): " + fmt("%.1f us", l.latencyNs / 1e3) + " per round" + (l.latencyFromProbe ? " (startup probe)" : "") + ", "
            + fmt("%.3f GB/s", gbps(l.nsPerByteIdle)) + " per rank after backward, "
            + fmt("%.3f GB/s", gbps(l.nsPerByteBusy)) + " during it; per step x" + fmt("%.2f", l.stretchLow) + " to x"
            + fmt("%.2f", l.stretchHigh) + " of that; launch " + fmt("%.1f us", l.launchNs / 1e3) + " + "
            + fmt("%.3f ms/MiB", l.launchNsPerByte * (1 << 20) / 1e6) + "\n"
            + "  backward loses " + fmt("%.0f%%", l.computeSlowdown * 100)
            + " of its speed while a transfer runs beside it (the share of the time the link works there, at most what "
               "the link loses)\n";
    for (const std::string& n : model.notes())
        out += "  note: " + n + "\n";
    return out;
}

void key(JsonWriter& w, const char* k) { w.Key(k); }
void number(JsonWriter& w, double v)
{
    if (std::isfinite(v))
        w.Double(v);
    else
        w.Null();
}
void string(JsonWriter& w, const std::string& s) { w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size())); }
void strings(JsonWriter& w, const std::vector<std::string>& v)
{
    w.StartArray();
    for (const auto& s : v)
        string(w, s);
    w.EndArray();
}

void configJson(JsonWriter& w, const WhatIfConfig& c)
{
    w.StartObject();
    key(w, "bucket_cap_bytes"), w.Int64(c.bucketCapBytes);
    key(w, "first_bucket_cap_bytes"), w.Int64(c.firstBucketCapBytes);
    key(w, "world_size"), w.Int(c.worldSize);
    key(w, "link_gbps"), w.Double(c.linkGbps);
    key(w, "compress"), string(w, c.compress);
    key(w, "compute_scale"), w.Double(c.computeScale);
    key(w, "description"), string(w, describe(c));
    w.EndObject();
}

void numbersJson(JsonWriter& w, const WhatIfNumbers& n)
{
    w.StartObject();
    key(w, "step_time_ms"), number(w, n.stepTimeMs);
    key(w, "overlap_ratio"), number(w, n.overlapRatio);
    key(w, "exposed_comm_ms"), number(w, n.exposedCommMs);
    key(w, "comm_ms"), number(w, n.commMs);
    key(w, "throughput"), number(w, n.throughput);
    key(w, "buckets"), w.Int(n.buckets);
    w.EndObject();
}

void kindsJson(JsonWriter& w, const std::vector<ChangeKind>& kinds)
{
    w.StartArray();
    for (ChangeKind k : kinds)
        w.String(heldOutError(k).key);
    w.EndArray();
}

void intervalJson(JsonWriter& w, const PredictionInterval& iv)
{
    w.StartObject();
    key(w, "low_ms"), number(w, iv.lowMs);
    key(w, "high_ms"), number(w, iv.highMs);
    key(w, "half_width_pct"), number(w, iv.halfWidthPct);
    key(w, "held_out_pct"), number(w, iv.heldOutPct);
    key(w, "noise_pct"), number(w, iv.noisePct);
    key(w, "kinds"), kindsJson(w, iv.kinds);
    key(w, "measured"), w.Bool(iv.measured);
    key(w, "coverage_goal_pct"), w.Int(90);
    w.EndObject();
}

// "121.4 ms (90%: 97.3 to 160.2 ms)"
std::string intervalText(const PredictionInterval& iv)
{
    return fmt("%.1f", iv.lowMs) + " to " + (std::isfinite(iv.highMs) ? fmt("%.1f ms", iv.highMs) : std::string("? ms"));
}

void modelJson(JsonWriter& w, const WhatIfModel& model)
{
    key(w, "recorded"), configJson(w, model.recorded());
    key(w, "measured"), numbersJson(w, model.measured());
    key(w, "replayed"), numbersJson(w, model.replayed());
    // A consistency check (the replay of the recorded configuration), never a confidence.
    key(w, "self_error_pct"), number(w, model.selfErrorPct());
    key(w, "step_noise_pct"), number(w, model.stepNoisePct());
    const LinkFit& l = model.link();
    key(w, "link");
    w.StartObject();
    key(w, "fitted"), w.Bool(l.fitted);
    key(w, "latency_separable"), w.Bool(l.latencySeparable);
    key(w, "latency_ns_per_round"), number(w, l.latencyNs);
    key(w, "latency_source"), w.String(!l.latencySeparable ? "none" : l.latencyFromProbe ? "probe" : "run");
    key(w, "probe_latency_ns_per_round"), number(w, l.probeLatencyNs);
    key(w, "ns_per_byte_idle"), number(w, l.nsPerByteIdle);
    key(w, "ns_per_byte_busy"), number(w, l.nsPerByteBusy);
    key(w, "samples"), w.Int(l.samples);
    key(w, "busy_samples"), w.Int(l.busySamples);
    key(w, "step_stretch_p10"), number(w, l.stretchLow);
    key(w, "step_stretch_p90"), number(w, l.stretchHigh);
    key(w, "launch_ns"), number(w, l.launchNs);
    key(w, "launch_ns_per_byte"), number(w, l.launchNsPerByte);
    key(w, "compute_slowdown"), number(w, l.computeSlowdown);
    w.EndObject();
    key(w, "notes"), strings(w, model.notes());
}

} // namespace

std::string predictionsText(const WhatIfModel& model, const std::vector<Prediction>& predictions)
{
    std::string out = modelText(model);
    const double measured = model.measured().stepTimeMs;
    std::vector<std::vector<std::string>> rows{
        {"configuration", "buckets", "step ms", "90% interval", "+-", "vs measured", "overlap", "exposed ms", "samples/s"}};
    std::vector<std::string> notes;
    std::set<std::string> seen;
    std::set<std::vector<ChangeKind>> kindsSeen;
    for (const Prediction& p : predictions) {
        auto cells = numberCells(p.numbers);
        std::vector<std::string> row{describe(p.config), cells[0], cells[1], intervalText(p.interval),
                                     fmt("%.0f%%", p.interval.halfWidthPct),
                                     signedPct(relPct(p.numbers.stepTimeMs, measured)), cells[2], cells[3], cells[4]};
        kindsSeen.insert(p.interval.kinds);
        rows.push_back(std::move(row));
        for (const std::string& n : p.notes)
            if (seen.insert(n).second)
                notes.push_back(n);
    }
    out += "\nPredicted (means over steady steps and ranks)\n" + table(rows);
    out += "  interval: where a real run is expected to measure (90%): the model's error on held-out runs of\n"
           "  the same kind of change, widened by this recording's noise (docs/whatif.md, \"How sure\"):\n";
    for (const auto& kinds : kindsSeen) {
        std::string rows;
        bool unmeasured = false;
        for (ChangeKind k : kinds.empty() ? std::vector<ChangeKind>{ChangeKind::None} : kinds) {
            const HeldOutError& e = heldOutError(k);
            unmeasured = unmeasured || e.p90AbsPct < 0;
            rows += (rows.empty() ? "" : "; ") + std::string(e.label) + " "
                + (e.p90AbsPct < 0 ? std::string("never measured (the widest row stands in)") : fmt("%.0f%%", e.p90AbsPct))
                + (e.pairs > 0 ? " (" + std::to_string(e.pairs) + " held-out pairs)" : "");
        }
        out += "    " + rows + "; recording noise " + fmt("%.1f%%", model.stepNoisePct()) + "\n";
    }
    for (const std::string& n : notes)
        out += "  note: " + n + "\n";
    return out;
}

std::string predictionsJson(const WhatIfModel& model, const std::vector<Prediction>& predictions)
{
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartObject();
    key(w, "schema"), w.String(kSchema);
    modelJson(w, model);
    key(w, "predictions");
    w.StartArray();
    for (const Prediction& p : predictions) {
        w.StartObject();
        key(w, "config"), configJson(w, p.config);
        key(w, "predicted"), numbersJson(w, p.numbers);
        key(w, "vs_measured_pct"), number(w, relPct(p.numbers.stepTimeMs, model.measured().stepTimeMs));
        // Per-rank compute for fewer ranks on the recorded ranks' host (the startup compute
        // probe), on top of config.compute_scale; 1 when not applied.
        key(w, "host_compute_factor"), number(w, p.hostComputeFactor);
        // Where a real run is expected to measure (90 %): held-out error of the kinds changed,
        // widened by the recording's noise, bounded by the prediction without contention.
        key(w, "interval"), intervalJson(w, p.interval);
        key(w, "no_contention_step_ms"), number(w, p.noContentionStepMs);
        key(w, "notes"), strings(w, p.notes);
        w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    return buffer.GetString();
}

std::string adviceText(const Advice& a)
{
    std::string out = "Recorded: " + describe(a.current) + "\n";
    out += "  measured step time " + fmt("%.3f ms", a.measuredStepMs) + "; consistency check: the model replays it at "
        + fmt("%.3f ms", a.replayedMs) + " (" + signedPct(a.selfErrorPct)
        + ", close by construction: it says nothing about other caps)\n";
    out += "\nAdvice: ";
    switch (a.verdict) {
    case Advice::Verdict::Change:
        out += "change to " + describe(a.candidate) + "\n";
        out += "  predicted step time " + fmt("%.3f ms", a.candidateMs) + ", " + fmt("%.1f%%", a.candidateGainPct)
            + " faster than the recorded caps (" + fmt("%.3f ms", a.predictedCurrentMs) + " predicted)\n";
        out += "  how sure: a run of it is expected at " + intervalText(a.interval) + " (90%), all of it below the "
            + "recorded caps' prediction: the gain clears the model's held-out error for " + describeKinds(a.interval.kinds)
            + " (+-" + fmt("%.0f%%", a.interval.halfWidthPct) + ")\n";
        break;
    case Advice::Verdict::Keep:
        out += "keep the recorded caps (" + describe(a.current) + ")\n";
        if (!a.confidenceNote.empty())
            out += "  " + a.confidenceNote + "\n";
        else
            out += "  the fastest other layout, " + describe(a.candidate) + ", is predicted "
                + fmt("%.1f%%", -a.candidateGainPct) + " slower, beyond its interval (" + intervalText(a.interval) + ")\n";
        break;
    case Advice::Verdict::CannotTell:
        out += "this recording cannot tell whether " + describe(a.candidate) + " is faster\n";
        out += "  why: " + a.confidenceNote + "\n";
        out += "  to tell: " + a.measureHint + "; `lockstep advise RUN.db --measure DIR` runs both (short runs, "
               "back to back) and compares them\n";
        break;
    }
    std::vector<std::vector<std::string>> rows{
        {"candidate", "buckets", "step ms", "vs recorded caps", "overlap", "exposed ms", "samples/s"}};
    const size_t shown = std::min<size_t>(a.candidates.size(), 10); // the fastest; --json has all
    for (size_t i = 0; i < shown; ++i) {
        const AdviceCandidate& c = a.candidates[i];
        auto cells = numberCells(c.numbers);
        rows.push_back({describe(c.config), cells[0], cells[1], signedPct(relPct(c.numbers.stepTimeMs, a.predictedCurrentMs)),
                        cells[2], cells[3], cells[4]});
    }
    out += "\nFastest of " + std::to_string(a.candidates.size()) + " distinct bucket layouts (predicted)\n" + table(rows);
    for (const std::string& n : a.notes)
        out += "  note: " + n + "\n";
    return out;
}

std::string adviceJson(const Advice& a)
{
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartObject();
    key(w, "schema"), w.String(kSchema);
    key(w, "current"), configJson(w, a.current);
    key(w, "best"), configJson(w, a.best);
    key(w, "measured_step_ms"), number(w, a.measuredStepMs);
    key(w, "replayed_ms"), number(w, a.replayedMs);
    key(w, "self_error_pct"), number(w, a.selfErrorPct);
    key(w, "predicted_current_ms"), number(w, a.predictedCurrentMs);
    key(w, "predicted_best_ms"), number(w, a.predictedBestMs);
    key(w, "gain_ms"), number(w, a.gainMs);
    key(w, "gain_pct"), number(w, a.gainPct);
    key(w, "gain_within_error"), w.Bool(a.gainWithinError);
    key(w, "verdict"), w.String(a.verdict == Advice::Verdict::Change ? "change"
                                : a.verdict == Advice::Verdict::Keep ? "keep" : "cannot_tell");
    key(w, "recommend"), w.Bool(a.verdict == Advice::Verdict::Change);
    key(w, "candidate"), configJson(w, a.candidate);
    key(w, "candidate_ms"), number(w, a.candidateMs);
    key(w, "candidate_gain_pct"), number(w, a.candidateGainPct);
    key(w, "interval"), intervalJson(w, a.interval);
    key(w, "confident"), w.Bool(a.confident);
    key(w, "confidence_note"), string(w, a.confidenceNote);
    key(w, "measure_hint"), string(w, a.measureHint);
    key(w, "candidates");
    w.StartArray();
    for (const AdviceCandidate& c : a.candidates) {
        w.StartObject();
        key(w, "config"), configJson(w, c.config);
        key(w, "predicted"), numbersJson(w, c.numbers);
        w.EndObject();
    }
    w.EndArray();
    key(w, "notes"), strings(w, a.notes);
    w.EndObject();
    return buffer.GetString();
}

} // namespace lockstep::core
