// Merging rank shards (one run database per rank, or per group of ranks) into one run database
// of the same schema.
//
// Two passes. The first opens every shard and reads only its configuration and ranks: that
// decides the merged configuration (the lowest rank's shard, worldSize = distinct ranks) and
// refuses a rank that appears in two shards before anything is written. The second loads one
// shard at a time (file times, no clock correction: the offsets travel with the ranks) and
// appends it with its lanes renumbered and strings re-interned, so memory holds one shard, not
// the whole run. Like any reader, a shard contributes only its committed steps.
#include "lockstep/core/run_db.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace lockstep::core {

Result<MergeStats> mergeRunFiles(const std::vector<std::string>& shards, const std::string& out,
                                 RunWriter::Mode mode)
{
    if (shards.empty())
        return fail("merge: no shards given");
    struct ShardInfo {
        std::string path;
        RunConfig config;
        int32_t lowestRank = 0;
    };
    std::vector<ShardInfo> infos;
    std::map<int32_t, std::string> rankOwner;
    for (const std::string& path : shards) {
        if (path == out)
            return fail("merge: the output " + out + " is also a shard");
        auto reader = RunReader::open(path);
        if (!reader)
            return std::unexpected(reader.error());
        auto config = (*reader)->config();
        if (!config)
            return std::unexpected(config.error());
        auto ranks = (*reader)->ranks();
        if (!ranks)
            return std::unexpected(ranks.error());
        ShardInfo info{path, std::move(*config), std::numeric_limits<int32_t>::max()};
        for (const RankInfo& r : *ranks) {
            auto [it, inserted] = rankOwner.emplace(r.rank, path);
            if (!inserted)
                return fail("merge: rank " + std::to_string(r.rank) + " appears in both " + it->second
                            + " and " + path);
            info.lowestRank = std::min(info.lowestRank, r.rank);
        }
        infos.push_back(std::move(info));
    }
    // Shards in rank order; a shard without rank rows goes last.
    std::stable_sort(infos.begin(), infos.end(),
                     [](const ShardInfo& a, const ShardInfo& b) { return a.lowestRank < b.lowestRank; });

    RunConfig config = infos.front().config;
    config.worldSize = static_cast<int32_t>(std::max<size_t>(1, rankOwner.size()));
    config.status = RunStatus::Completed;
    config.failureCause.clear();
    bool anyRunning = false;
    for (const ShardInfo& s : infos) {
        if (s.config.status == RunStatus::Failed && config.status != RunStatus::Failed) {
            config.status = RunStatus::Failed;
            config.failureCause = s.config.failureCause;
        }
        anyRunning = anyRunning || s.config.status == RunStatus::Running;
        if (s.config.createdNs != 0 && (config.createdNs == 0 || s.config.createdNs < config.createdNs))
            config.createdNs = s.config.createdNs;
        config.endedNs = std::max(config.endedNs, s.config.endedNs);
    }
    if (anyRunning && config.status != RunStatus::Failed)
        config.status = RunStatus::Running;

    auto writer = RunWriter::create(out, config, mode);
    if (!writer)
        return std::unexpected(writer.error());
    RunWriter& w = **writer;
    MergeStats stats;
    std::map<std::string, Diagnostic> diagnostics;
    std::set<int32_t> bucketsSeen;
    std::set<std::pair<int32_t, int32_t>> stepsSeen;
    for (const ShardInfo& info : infos) {
        auto run = loadRun(info.path, LoadOptions{.correctClocks = false});
        if (!run)
            return std::unexpected(run.error());
        for (const RankInfo& r : run->ranks)
            if (auto s = w.addRank(r); !s)
                return std::unexpected(s.error());
        std::vector<LaneId> laneMap;
        for (const Lane& l : run->lanes) {
            auto id = w.addLane(l);
            if (!id)
                return std::unexpected(id.error());
            laneMap.push_back(*id);
        }
        std::vector<StringId> stringMap;
        for (const std::string& t : run->strings.texts())
            stringMap.push_back(w.intern(t));
        // Buckets are the same on every rank: the first shard's definition of an index wins.
        for (const Bucket& b : run->buckets) {
            if (bucketsSeen.insert(b.index).second)
                if (auto s = w.addBucket(b); !s)
                    return std::unexpected(s.error());
        }
        for (const Step& st : run->steps) {
            if (stepsSeen.insert({st.rank, st.step}).second)
                ++stats.steps;
            if (auto s = w.addStep(st); !s)
                return std::unexpected(s.error());
        }
        for (Span& s : run->spans) {
            s.lane = laneMap[s.lane.v];
            s.name = stringMap[s.name.v];
        }
        if (auto s = w.appendSpans(run->spans); !s)
            return std::unexpected(s.error());
        for (Instant& in : run->instants) {
            in.lane = laneMap[in.lane.v];
            in.name = stringMap[in.name.v];
        }
        if (auto s = w.appendInstants(run->instants); !s)
            return std::unexpected(s.error());
        for (const Diagnostic& g : run->diagnostics) {
            auto [it, inserted] = diagnostics.emplace(g.kind, g);
            if (!inserted) {
                it->second.count += g.count;
                it->second.severity = std::max(it->second.severity, g.severity);
            }
        }
        stats.spans += static_cast<int64_t>(run->spans.size());
        stats.instants += static_cast<int64_t>(run->instants.size());
        if (auto s = w.commit(); !s)
            return std::unexpected(s.error());
    }
    for (const auto& [kind, g] : diagnostics)
        if (auto s = w.addDiagnostic(g); !s)
            return std::unexpected(s.error());
    stats.ranks = static_cast<int>(rankOwner.size());
    if (auto s = w.close(); !s)
        return std::unexpected(s.error());
    return stats;
}

} // namespace lockstep::core
