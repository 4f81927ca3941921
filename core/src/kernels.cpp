// The kernel table (kernels.h).
#include "lockstep/core/kernels.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/report.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace lockstep::core {

std::vector<KernelRow> kernelTable(const Run& run, const RunAnalysis& analysis, const KernelTableOptions& options)
{
    const SteadySteps& steady = analysis.steady;
    std::set<int32_t> ranks;
    double stepNs = 0;
    int stepRows = 0;
    for (const StepBreakdown& b : analysis.steps) {
        if (!b.steady || (options.rank >= 0 && b.rank != options.rank))
            continue;
        ranks.insert(b.rank);
        stepNs += static_cast<double>(b.wall);
        ++stepRows;
    }
    struct Acc {
        int64_t count = 0;
        double ns = 0;
    };
    std::map<std::pair<std::string, SpanKind>, Acc> groups;
    for (const Span& s : run.spans) {
        if (!isDeviceKind(s.kind) || s.step == kNoStep || !steady.contains(s.step))
            continue;
        const int32_t rank = run.lanes[s.lane.v].rank;
        if (options.rank >= 0 && rank != options.rank)
            continue;
        Acc& a = groups[{run.strings.text(s.name), s.kind}];
        ++a.count;
        a.ns += static_cast<double>(s.duration());
    }
    std::vector<KernelRow> rows;
    const double per = std::max(1, stepRows); // steady (rank, step) pairs
    const double meanStepNs = stepRows ? stepNs / stepRows : 0;
    for (const auto& [key, a] : groups) {
        KernelRow r;
        r.name = key.first;
        r.kind = key.second;
        r.category = spanCategory(r.kind);
        r.countPerStep = static_cast<double>(a.count) / per;
        r.totalMsPerStep = a.ns / per / 1e6;
        r.meanMs = a.count ? a.ns / static_cast<double>(a.count) / 1e6 : 0;
        r.shareOfStep = meanStepNs > 0 ? (a.ns / per) / meanStepNs : 0;
        rows.push_back(std::move(r));
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const KernelRow& x, const KernelRow& y) { return x.totalMsPerStep > y.totalMsPerStep; });
    return rows;
}

std::string kernelTableText(const std::vector<KernelRow>& rows, size_t top)
{
    std::string out = "Kernels (device work by name; per steady step and rank; the share is of the mean step time,\n"
                      "and kernels on different streams run at once, so shares may add up to more than 100%)\n";
    if (rows.empty())
        return out + "  none: this run has no device work\n";
    out += "  total ms   share   count    mean ms  category       name\n";
    const size_t n = top == 0 ? rows.size() : std::min(top, rows.size());
    for (size_t i = 0; i < n; ++i) {
        const KernelRow& r = rows[i];
        std::string name = escapeControl(r.name);
        if (name.size() > 100)
            name = name.substr(0, 99) + "…";
        char line[160];
        std::snprintf(line, sizeof line, "  %8.3f  %5.1f%%  %6.1f  %9.4f  %-13s  ", r.totalMsPerStep, r.shareOfStep * 100,
                      r.countPerStep, r.meanMs, spanCategoryName(r.category));
        out += line + name + "\n";
    }
    if (n < rows.size())
        out += "  … " + std::to_string(rows.size() - n) + " more (report --kernels --json lists every one)\n";
    return out;
}

std::string kernelTableJson(const std::vector<KernelRow>& rows)
{
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    const auto num = [&](double v) { w.Double(std::isfinite(v) ? std::round(v * 1e6) / 1e6 : 0); };
    w.StartArray();
    for (const KernelRow& r : rows) {
        w.StartObject();
        w.Key("name");
        w.String(r.name.c_str(), static_cast<rapidjson::SizeType>(r.name.size()));
        w.Key("kind");
        w.String(spanKindName(r.kind));
        w.Key("category");
        w.String(spanCategoryName(r.category));
        w.Key("count_per_step");
        num(r.countPerStep);
        w.Key("total_ms_per_step");
        num(r.totalMsPerStep);
        w.Key("mean_ms");
        num(r.meanMs);
        w.Key("share_of_step");
        num(r.shareOfStep);
        w.EndObject();
    }
    w.EndArray();
    return std::string(buffer.GetString(), buffer.GetSize());
}

} // namespace lockstep::core
