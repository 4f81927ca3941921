// Configuration signatures, like-for-like grouping and scaling efficiency (see comparison.h).
#include "lockstep/core/comparison.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/fields.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>

namespace lockstep::core {

namespace {

std::string extraOf(const RunConfig& c, const char* key)
{
    auto it = c.extra.find(key);
    return it == c.extra.end() ? std::string() : it->second;
}

// "width=512 layers=8" and "layers=8  width=512" describe the same model.
std::string sortedTokens(const std::string& text)
{
    std::istringstream in(text);
    std::vector<std::string> tokens;
    for (std::string t; in >> t;)
        tokens.push_back(t);
    std::sort(tokens.begin(), tokens.end());
    std::string out;
    for (const std::string& t : tokens)
        out += (out.empty() ? "" : " ") + t;
    return out;
}

bool isVaried(const std::string& field, Varied varied)
{
    switch (varied) {
    case Varied::WorldSizeWeak: return field == "world_size" || field == "global_batch";
    case Varied::WorldSizeStrong: return field == "world_size" || field == "batch_per_rank";
    case Varied::BucketCaps: return field == "bucket_cap_bytes" || field == "first_bucket_cap_bytes";
    }
    return false;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

} // namespace

const std::string* ConfigSignature::value(const std::string& field) const
{
    for (const auto& [k, v] : fields)
        if (k == field)
            return &v;
    return nullptr;
}

ConfigSignature configSignature(const RunConfig& c)
{
    ConfigSignature s;
    auto add = [&](const char* k, std::string v) { s.fields.emplace_back(k, std::move(v)); };
    // The settings of the run's table (fields.h kFieldSetting), in its order ...
    for (const RunConfigField& f : kRunConfigFields)
        if (f.has(kFieldSetting))
            add(f.name, f.has(kFieldTokens) ? sortedTokens(fieldText(f, c)) : fieldText(f, c));
    // ... then what follows from them or lives in extra.
    std::string threads = extraOf(c, "threads_requested");
    if (threads.empty())
        threads = extraOf(c, "threads");
    add("global_batch", std::to_string(c.batchPerRank * std::max(1, c.worldSize)));
    add("threads", threads);
    add("straggler", extraOf(c, "straggler"));
    add("crash", extraOf(c, "crash"));
    add("imported_from", extraOf(c, "imported_from"));
    return s;
}

std::string comparisonKey(const ConfigSignature& signature, Varied varied)
{
    std::string key;
    for (const auto& [field, value] : signature.fields) {
        if (isVaried(field, varied))
            continue;
        // Unit separators cannot occur in a field name; values are length-prefixed.
        key += field + '\x1f' + std::to_string(value.size()) + ':' + value + '\x1e';
    }
    return key;
}

std::vector<std::string> differingFields(const ConfigSignature& a, const ConfigSignature& b)
{
    std::vector<std::string> out;
    for (const auto& [field, value] : a.fields) {
        const std::string* other = b.value(field);
        if (!other || *other != value)
            out.push_back(field);
    }
    for (const auto& [field, value] : b.fields)
        if (!a.value(field))
            out.push_back(field);
    return out;
}

std::vector<std::vector<size_t>> comparableGroups(const std::vector<RunSummary>& runs, Varied varied,
                                                  bool needsCommunication)
{
    std::vector<std::vector<size_t>> groups;
    std::map<std::string, size_t> byKey;
    for (size_t i = 0; i < runs.size(); ++i) {
        if (needsCommunication && !runs[i].multiRank)
            continue;
        const std::string key = comparisonKey(runs[i].signature, varied);
        auto [it, fresh] = byKey.emplace(key, groups.size());
        if (fresh)
            groups.emplace_back();
        groups[it->second].push_back(i);
    }
    return groups;
}

std::vector<ScalingPoint> scalingEfficiency(const std::vector<RunSummary>& runs, ScalingMode mode)
{
    const Varied varied = mode == ScalingMode::Weak ? Varied::WorldSizeWeak : Varied::WorldSizeStrong;
    std::vector<ScalingPoint> points;
    const auto groups = comparableGroups(runs, varied);
    for (size_t g = 0; g < groups.size(); ++g) {
        std::vector<ScalingPoint> pts;
        for (size_t i : groups[g]) {
            const RunSummary& r = runs[i];
            if (r.worldSize <= 0)
                continue;
            ScalingPoint p;
            p.name = r.config.name;
            p.worldSize = r.worldSize;
            p.throughput = r.throughput;
            p.stepTimeMs = r.stepTimeMs;
            p.group = static_cast<int32_t>(g);
            p.run = i;
            pts.push_back(p);
        }
        std::stable_sort(pts.begin(), pts.end(),
                         [](const ScalingPoint& a, const ScalingPoint& b) { return a.worldSize < b.worldSize; });
        if (pts.empty())
            continue;
        // The baseline at N0 is the mean over the group's runs at N0, so a repeated baseline run
        // does not pick one arbitrarily.
        const int32_t n0 = pts.front().worldSize;
        double thr0 = 0, t0 = 0;
        int k = 0;
        for (const ScalingPoint& p : pts) {
            if (p.worldSize != n0)
                break;
            thr0 += p.throughput;
            t0 += p.stepTimeMs;
            ++k;
        }
        thr0 /= k;
        t0 /= k;
        for (ScalingPoint& p : pts) {
            const double n = p.worldSize;
            if (mode == ScalingMode::Weak) {
                const double ideal = n * thr0 / n0;
                p.efficiency = ideal > 0 ? p.throughput / ideal : kNaN;
            } else {
                const double denom = p.stepTimeMs * n;
                p.efficiency = denom > 0 && t0 > 0 ? t0 * n0 / denom : kNaN;
            }
        }
        points.insert(points.end(), pts.begin(), pts.end());
    }
    return points;
}

} // namespace lockstep::core
