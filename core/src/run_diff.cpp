// What changed between two runs (run_diff.h).
#include "lockstep/core/run_diff.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/comparison.h"
#include "lockstep/core/fields.h"
#include "lockstep/core/report.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace lockstep::core {

namespace {

// The configuration as (field, value, in the signature) rows: the signature first, then the
// table's circumstances and every extra key.
std::vector<std::tuple<std::string, std::string, bool>> configRows(const RunConfig& c)
{
    std::vector<std::tuple<std::string, std::string, bool>> rows;
    std::set<std::string> seen;
    for (const auto& [field, value] : configSignature(c).fields) {
        rows.emplace_back(field, value, true);
        seen.insert(field);
    }
    const auto add = [&](const std::string& field, const std::string& value) {
        if (seen.insert(field).second)
            rows.emplace_back(field, value, false);
    };
    // The circumstances of the run's table (fields.h kFieldCircumstance): the host, the
    // framework, steps planned, ...
    for (const RunConfigField& f : kRunConfigFields)
        if (f.has(kFieldCircumstance))
            add(f.name, fieldText(f, c));
    // Keys whose values are measurements of the run, not settings (probes, per-parameter sizes,
    // seeds of the clock exchange): they differ between any two runs and say nothing to compare.
    static const std::set<std::string> measured{"link_probe", "compute_probe", "param_numel", "clock_sync",
                                                "straggler_cause"};
    for (const auto& [key, value] : c.extra)
        if (!measured.contains(key) && !key.starts_with("compute_probe") && !key.starts_with("link_probe"))
            add(key, value);
    return rows;
}

struct PartSeries {
    std::vector<double> perStep[6]; // step time, then the five parts: mean over ranks per steady step
};

constexpr const char* kPartNames[6] = {"step time", "compute only", "overlapped", "exposed communication",
                                       "memory only", "idle"};

PartSeries partSeries(const std::vector<StepBreakdown>& steps)
{
    std::map<int32_t, std::pair<std::array<double, 6>, int>> byStep;
    for (const StepBreakdown& b : steps) {
        if (!b.steady)
            continue;
        auto& [sum, n] = byStep[b.step];
        const TimeNs v[6] = {b.wall, b.computeOnly, b.overlapped, b.exposed, b.memoryOnly, b.idle};
        for (int i = 0; i < 6; ++i)
            sum[i] += v[i] / 1e6;
        ++n;
    }
    PartSeries s;
    for (const auto& [step, sn] : byStep)
        for (int i = 0; i < 6; ++i)
            s.perStep[i].push_back(sn.first[i] / sn.second);
    return s;
}

double mean(const std::vector<double>& v)
{
    double s = 0;
    for (double x : v)
        s += x;
    return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Squared standard error of the mean (0 with fewer than two values: no spread to judge by).
double se2(const std::vector<double>& v)
{
    if (v.size() < 2)
        return 0;
    const double m = mean(v);
    double ss = 0;
    for (double x : v)
        ss += (x - m) * (x - m);
    return ss / static_cast<double>(v.size() - 1) / static_cast<double>(v.size());
}

using SpanKey = std::tuple<std::string, int32_t, int32_t, SpanKind>;

// Total time per steady step of each (name, rank, bucket, kind).
std::map<SpanKey, double> spanTimes(const Run& run, const SteadySteps& steady)
{
    std::map<SpanKey, double> total;
    const double steps = std::max<size_t>(1, steady.steps.size());
    for (const Span& s : run.spans) {
        if (s.step == kNoStep || !steady.contains(s.step))
            continue;
        const int32_t rank = run.lanes[s.lane.v].rank;
        total[{run.strings.text(s.name), rank, s.bucket, s.kind}] += static_cast<double>(s.duration()) / 1e6;
    }
    for (auto& [key, v] : total)
        v /= steps;
    return total;
}

bool isWork(SpanKind k)
{
    const SpanCategory c = spanCategory(k);
    return c == SpanCategory::Compute || c == SpanCategory::Memory || k == SpanKind::DataLoad;
}

std::string verdict(const RunAnalysis& a, int32_t worldSize)
{
    if (worldSize <= 1)
        return "n/a (1 rank)";
    if (a.summary.stragglers.empty())
        return "none";
    std::string out;
    for (size_t i = 0; i < a.summary.stragglers.size(); ++i)
        out += (i ? ", rank " : "rank ") + std::to_string(a.summary.stragglers[i]);
    return out;
}

std::string spanLabel(const SpanChange& s)
{
    std::string out = "rank " + std::to_string(s.rank) + "  " + escapeControl(s.name);
    if (s.bucket != kNoBucket)
        out += " (bucket " + std::to_string(s.bucket) + ")";
    return out;
}

} // namespace

RunDiff diffRuns(const Run& a, const Run& b, const DiffOptions& options)
{
    return diffRuns(a, analyze(a), b, analyze(b), options);
}

RunDiff diffRuns(const Run& a, const RunAnalysis& aa, const Run& b, const RunAnalysis& ab, const DiffOptions& options)
{
    RunDiff d;
    d.aName = a.config.name;
    d.bName = b.config.name;

    // 1. The configuration.
    const auto ra = configRows(a.config);
    const auto rb = configRows(b.config);
    std::map<std::string, std::pair<std::string, bool>> bValues;
    for (const auto& [f, v, sig] : rb)
        bValues[f] = {v, sig};
    std::set<std::string> done;
    for (const auto& [f, v, sig] : ra) {
        done.insert(f);
        const auto it = bValues.find(f);
        const std::string other = it == bValues.end() ? std::string() : it->second.first;
        if (v != other)
            d.config.push_back({f, v, other, sig});
    }
    for (const auto& [f, v, sig] : rb)
        if (!done.contains(f) && !v.empty())
            d.config.push_back({f, "", v, sig});
    std::stable_partition(d.config.begin(), d.config.end(), [](const ConfigChange& c) { return c.signature; });

    // 2. The parts of the step.
    d.aSteadySteps = static_cast<int32_t>(aa.steady.steps.size());
    d.bSteadySteps = static_cast<int32_t>(ab.steady.steps.size());
    const PartSeries pa = partSeries(aa.steps);
    const PartSeries pb = partSeries(ab.steps);
    const double aStep = mean(pa.perStep[0]);
    for (int i = 0; i < 6; ++i) {
        PartChange p;
        p.part = kPartNames[i];
        p.aMs = mean(pa.perStep[i]);
        p.bMs = mean(pb.perStep[i]);
        p.deltaMs = p.bMs - p.aMs;
        p.noiseMs = 2 * std::sqrt(se2(pa.perStep[i]) + se2(pb.perStep[i]));
        p.moved = std::abs(p.deltaMs) > p.noiseMs && std::abs(p.deltaMs) >= 0.01 * aStep;
        d.parts.push_back(p);
    }
    d.aStraggler = verdict(aa, a.config.worldSize);
    d.bStraggler = verdict(ab, b.config.worldSize);

    // 3. The spans.
    const auto ta = spanTimes(a, aa.steady);
    const auto tb = spanTimes(b, ab.steady);
    std::map<SpanKey, std::pair<double, double>> both;
    for (const auto& [k, v] : ta)
        both[k].first = v;
    for (const auto& [k, v] : tb)
        both[k].second = v;
    for (const auto& [k, v] : both) {
        SpanChange c;
        std::tie(c.name, c.rank, c.bucket, c.kind) = k;
        c.aMs = v.first;
        c.bMs = v.second;
        c.deltaMs = v.second - v.first;
        (isWork(c.kind) ? d.work : d.waits).push_back(c);
    }
    for (auto* list : {&d.work, &d.waits}) {
        std::stable_sort(list->begin(), list->end(),
                         [](const SpanChange& x, const SpanChange& y) { return std::abs(x.deltaMs) > std::abs(y.deltaMs); });
        if (list->size() > options.topSpans)
            list->resize(options.topSpans);
    }
    return d;
}

std::string diffText(const RunDiff& d)
{
    std::string out = "A: " + escapeControl(d.aName) + " (" + std::to_string(d.aSteadySteps) + " steady steps)\n";
    out += "B: " + escapeControl(d.bName) + " (" + std::to_string(d.bSteadySteps) + " steady steps)\n\n";
    out += "What changed in the configuration\n";
    if (d.config.empty())
        out += "  nothing: the two runs were recorded with the same configuration\n";
    for (const ConfigChange& c : d.config) {
        const auto show = [](const std::string& v) { return v.empty() ? std::string("(none)") : escapeControl(v); };
        out += "  " + escapeControl(c.field) + ": " + show(c.a) + " -> " + show(c.b) + (c.signature ? "" : "  (circumstance)") + "\n";
    }
    out += "\nThe step (means over steady steps and ranks; B - A; 'moved': beyond twice the standard error\n"
           "of the difference and at least 1% of A's step)\n";
    out += "  part                        A ms       B ms    B - A ms   noise ms\n";
    for (const PartChange& p : d.parts) {
        char line[160];
        std::snprintf(line, sizeof line, "  %-22s %10.3f %10.3f %+11.3f %10.3f  %s\n", p.part.c_str(), p.aMs, p.bMs,
                      p.deltaMs, p.noiseMs, p.moved ? "moved" : "within noise");
        out += line;
    }
    out += "  straggler: " + d.aStraggler + " -> " + d.bStraggler + "\n";
    const auto spans = [&](const char* title, const std::vector<SpanChange>& list) {
        out += std::string("\n") + title + "\n";
        if (list.empty()) {
            out += "  none\n";
            return;
        }
        for (const SpanChange& s : list) {
            char nums[96];
            std::snprintf(nums, sizeof nums, "%+10.3f ms  (%.3f -> %.3f)", s.deltaMs, s.aMs, s.bMs);
            out += std::string("  ") + nums + "  " + spanLabel(s) + "  [" + spanKindName(s.kind) + "]\n";
        }
    };
    spans("Work whose time changed most (per steady step, all of its spans summed)", d.work);
    spans("Communication and waits whose time changed most (they grow on ranks that wait for a late one)", d.waits);
    return out;
}

std::string diffJson(const RunDiff& d)
{
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    const auto str = [&](const std::string& s) { w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size())); };
    const auto key = [&](const char* k) { w.Key(k); };
    const auto finite = [&](double v) {
        if (std::isfinite(v))
            w.Double(std::round(v * 1e6) / 1e6);
        else
            w.Null();
    };
    w.StartObject();
    key("schema");
    str("lockstep.diff/1");
    key("a");
    w.StartObject();
    key("name");
    str(d.aName);
    key("steady_steps");
    w.Int(d.aSteadySteps);
    key("straggler");
    str(d.aStraggler);
    w.EndObject();
    key("b");
    w.StartObject();
    key("name");
    str(d.bName);
    key("steady_steps");
    w.Int(d.bSteadySteps);
    key("straggler");
    str(d.bStraggler);
    w.EndObject();
    key("config");
    w.StartArray();
    for (const ConfigChange& c : d.config) {
        w.StartObject();
        key("field");
        str(c.field);
        key("a");
        str(c.a);
        key("b");
        str(c.b);
        key("setting");
        w.Bool(c.signature);
        w.EndObject();
    }
    w.EndArray();
    key("parts");
    w.StartArray();
    for (const PartChange& p : d.parts) {
        w.StartObject();
        key("part");
        str(p.part);
        key("a_ms");
        finite(p.aMs);
        key("b_ms");
        finite(p.bMs);
        key("delta_ms");
        finite(p.deltaMs);
        key("noise_ms");
        finite(p.noiseMs);
        key("moved");
        w.Bool(p.moved);
        w.EndObject();
    }
    w.EndArray();
    for (const auto& [name, list] : {std::pair{"work", &d.work}, std::pair{"waits", &d.waits}}) {
        key(name);
        w.StartArray();
        for (const SpanChange& s : *list) {
            w.StartObject();
            key("name");
            str(s.name);
            key("rank");
            w.Int(s.rank);
            key("bucket");
            if (s.bucket == kNoBucket)
                w.Null();
            else
                w.Int(s.bucket);
            key("kind");
            str(spanKindName(s.kind));
            key("a_ms");
            finite(s.aMs);
            key("b_ms");
            finite(s.bMs);
            key("delta_ms");
            finite(s.deltaMs);
            w.EndObject();
        }
        w.EndArray();
    }
    w.EndObject();
    return std::string(buffer.GetString(), buffer.GetSize());
}

} // namespace lockstep::core
