// The progress protocol (see progress.h).
#include "lockstep/job/progress.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <map>

namespace lockstep::job {

namespace {

constexpr std::string_view kPrefix = "LOCKSTEP ";
// Fields whose value is the rest of the line.
constexpr std::array<std::string_view, 3> kRestOfLine{"cause", "shards", "out"};

std::string oneLine(std::string_view text)
{
    std::string s(text);
    for (char& c : s)
        if (c == '\n' || c == '\r')
            c = ' ';
    return s;
}

bool toInt(std::string_view s, int& out)
{
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

bool toDouble(std::string_view s, double& out)
{
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

std::string fixed(double v, int digits)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

} // namespace

namespace {
constexpr std::array<std::pair<Phase, std::string_view>, 4> kPhases{{
    {Phase::Starting, "starting"}, {Phase::Rendezvous, "rendezvous"}, {Phase::WarmUp, "warm-up"}, {Phase::Training, "training"}}};
} // namespace

std::string_view phaseName(Phase phase)
{
    for (const auto& [p, name] : kPhases)
        if (p == phase)
            return name;
    return "starting";
}

std::string_view phaseLabel(Phase phase)
{
    switch (phase) {
    case Phase::Starting: return "starting workers";
    case Phase::Rendezvous: return "rendezvous";
    case Phase::WarmUp: return "warm-up";
    case Phase::Training: return "first step";
    }
    return "starting workers";
}

ProgressLine parseProgressLine(std::string_view line)
{
    ProgressLine out;
    if (!line.empty() && line.back() == '\r')
        line.remove_suffix(1);
    if (!line.starts_with(kPrefix))
        return out;
    line.remove_prefix(kPrefix.size());
    std::string_view verb;
    std::map<std::string_view, std::string_view> fields;
    size_t pos = 0;
    while (pos < line.size()) {
        while (pos < line.size() && line[pos] == ' ')
            ++pos;
        if (pos >= line.size())
            break;
        const size_t end = line.find(' ', pos);
        const std::string_view token = line.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
        const size_t eq = token.find('=');
        if (eq == std::string_view::npos) {
            if (!verb.empty() || !fields.empty()) {
                // Free words after the fields ("(injected)") are allowed on informational lines.
                if (verb == "crash" || verb == "layout" || verb == "drift")
                    break;
                return {};
            }
            verb = token;
        } else {
            const std::string_view key = token.substr(0, eq);
            if (std::find(kRestOfLine.begin(), kRestOfLine.end(), key) != kRestOfLine.end()) {
                fields[key] = line.substr(pos + eq + 1);
                break;
            }
            fields[key] = token.substr(eq + 1);
        }
        if (end == std::string_view::npos)
            break;
        pos = end + 1;
    }
    const auto field = [&](std::string_view key) -> const std::string_view* {
        auto it = fields.find(key);
        return it == fields.end() ? nullptr : &it->second;
    };
    const auto intField = [&](std::string_view key, int& to) {
        const std::string_view* v = field(key);
        return v && toInt(*v, to);
    };
    using K = ProgressLine::Kind;
    if (verb.empty()) {
        if (!intField("step", out.step) || !intField("rank", out.rank))
            return {};
        if (const auto* v = field("loss"); v && !toDouble(*v, out.loss))
            out.loss = std::numeric_limits<double>::quiet_NaN();
        if (const auto* v = field("step_ms"); v && !toDouble(*v, out.stepMs))
            out.stepMs = 0;
        out.kind = K::Step;
    } else if (verb == "done" || verb == "failed" || verb == "layout" || verb == "crash" || verb == "drift"
               || verb == "waiting") {
        if (!intField("rank", out.rank))
            return {};
        if (verb == "done") {
            out.kind = K::Done;
        } else if (verb == "failed") {
            out.kind = K::Failed;
            intField("step", out.step);
            if (const auto* v = field("cause"))
                out.text = std::string(*v);
        } else {
            out.kind = K::Info;
            out.text = std::string(verb);
            intField("step", out.step);
        }
    } else if (verb == "job") {
        const auto* shards = field("shards");
        if (!intField("nproc", out.nproc) || !intField("steps", out.steps) || !shards)
            return {};
        out.text = std::string(*shards);
        out.kind = K::Job;
    } else if (verb == "progress") {
        if (!intField("step", out.step) || !intField("steps", out.steps))
            return {};
        if (const auto* v = field("loss"); v && !toDouble(*v, out.loss))
            out.loss = std::numeric_limits<double>::quiet_NaN();
        if (const auto* v = field("step_ms"); v && !toDouble(*v, out.stepMs))
            out.stepMs = 0;
        out.kind = K::Progress;
    } else if (verb == "phase") {
        const auto* name = field("name");
        if (!name)
            return {};
        auto it = std::find_if(kPhases.begin(), kPhases.end(), [&](const auto& p) { return p.second == *name; });
        if (it == kPhases.end())
            return {};
        out.phase = it->first;
        if (field("rank")) {
            if (!intField("rank", out.rank) || out.rank < 0)
                return {};
        } else if (!intField("ranks", out.ranksPast) || !intField("nproc", out.nproc)) {
            return {};
        }
        out.kind = K::Phase;
    } else if (verb == "point") {
        const auto* file = field("out");
        if (!intField("index", out.index) || !intField("points", out.points) || !file)
            return {};
        out.text = std::string(*file);
        out.kind = K::Point;
    } else {
        return {};
    }
    return out;
}

std::string stepLine(int rank, int step, double loss, double stepMs)
{
    return std::string(kPrefix) + "step=" + std::to_string(step) + " rank=" + std::to_string(rank) + " loss="
        + fixed(loss, 6) + " step_ms=" + fixed(stepMs, 3);
}

std::string doneLine(int rank) { return std::string(kPrefix) + "done rank=" + std::to_string(rank); }

std::string failedLine(int rank, std::string_view cause, int step)
{
    return std::string(kPrefix) + "failed rank=" + std::to_string(rank)
        + (step >= 0 ? " step=" + std::to_string(step) : std::string()) + " cause=" + oneLine(cause);
}

std::string layoutLine(int rank, size_t buckets, std::string_view bucketBytes, int threads, bool pairwise)
{
    return std::string(kPrefix) + "layout rank=" + std::to_string(rank) + " buckets=" + std::to_string(buckets)
        + " bucket_bytes=" + std::string(bucketBytes) + " threads=" + std::to_string(threads)
        + " pairwise=" + (pairwise ? "1" : "0");
}

std::string crashLine(int rank, int step)
{
    return std::string(kPrefix) + "crash rank=" + std::to_string(rank) + " step=" + std::to_string(step) + " (injected)";
}

std::string driftLine(int rank, int step)
{
    return std::string(kPrefix) + "drift rank=" + std::to_string(rank) + " step=" + std::to_string(step);
}

std::string waitingLine(int rank, int step)
{
    return std::string(kPrefix) + "waiting rank=" + std::to_string(rank) + " step=" + std::to_string(step);
}

std::string jobLine(int nproc, int steps, std::string_view shardFolder)
{
    return std::string(kPrefix) + "job nproc=" + std::to_string(nproc) + " steps=" + std::to_string(steps)
        + " shards=" + oneLine(shardFolder);
}

std::string progressLine(int step, int steps, double loss, double stepMs)
{
    return std::string(kPrefix) + "progress step=" + std::to_string(step) + " steps=" + std::to_string(steps)
        + " loss=" + fixed(loss, 6) + " step_ms=" + fixed(stepMs, 3);
}

std::string pointLine(int index, int points, std::string_view runFile)
{
    return std::string(kPrefix) + "point index=" + std::to_string(index) + " points=" + std::to_string(points)
        + " out=" + oneLine(runFile);
}

std::string phaseLine(int rank, Phase phase)
{
    return std::string(kPrefix) + "phase rank=" + std::to_string(rank) + " name=" + std::string(phaseName(phase));
}

std::string jobPhaseLine(Phase phase, int ranksPast, int nproc)
{
    return std::string(kPrefix) + "phase name=" + std::string(phaseName(phase)) + " ranks=" + std::to_string(ranksPast)
        + " nproc=" + std::to_string(nproc);
}

} // namespace lockstep::job
