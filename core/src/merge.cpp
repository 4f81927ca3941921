// Stitching rank shards into one run: the one rule (declared in run_db.h above mergeRunFiles),
// applied by mergeRunFiles into a run database and by loadShards into memory.
//
// Two passes. The first opens every shard and reads only its configuration and ranks: that
// decides the merged configuration and refuses a rank that appears in two shards before anything
// is written. The second loads one shard at a time and hands it to the Stitcher, which renumbers
// lanes, re-interns strings and keeps the first definition of a bucket and of a (rank, step);
// the Stitcher writes into a Sink: the RunWriter of the merged file (memory then holds one shard,
// not the whole run) or a Run in memory (the live view of a run still recording).
#include "lockstep/core/fields.h"
#include "lockstep/core/output_file.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/summary_store.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace lockstep::core {

namespace {

struct ShardHead {
    std::string path;
    RunConfig config;
    int32_t lowestRank = std::numeric_limits<int32_t>::max(); // shards without rank rows go last
};

// Reads every shard's configuration and ranks, refuses a rank in two shards, orders the shards.
// With skipUnreadable (a live view), a shard that cannot be opened yet is left out.
Result<std::vector<ShardHead>> readHeads(const std::vector<std::string>& paths, bool skipUnreadable, int* ranks,
                                         std::set<int32_t>* rankSet = nullptr)
{
    std::vector<ShardHead> heads;
    std::map<int32_t, std::string> owner;
    std::optional<Error> firstError;
    for (const std::string& path : paths) {
        auto reader = RunReader::open(path);
        Result<RunConfig> config = reader ? (*reader)->config() : Result<RunConfig>(std::unexpected(reader.error()));
        Result<std::vector<RankInfo>> rankRows =
            config ? (*reader)->ranks() : Result<std::vector<RankInfo>>(std::unexpected(config.error()));
        if (!rankRows) {
            if (!skipUnreadable)
                return std::unexpected(rankRows.error());
            if (!firstError)
                firstError = rankRows.error();
            continue;
        }
        ShardHead head{path, std::move(*config)};
        for (const RankInfo& r : *rankRows) {
            auto [it, inserted] = owner.emplace(r.rank, path);
            if (!inserted)
                return fail("merge: rank " + std::to_string(r.rank) + " appears in both " + it->second + " and " + path);
            head.lowestRank = std::min(head.lowestRank, r.rank);
        }
        heads.push_back(std::move(head));
    }
    if (heads.empty())
        return firstError ? fail(*firstError) : fail(ErrorCode::Usage, "merge: no shards given");
    std::stable_sort(heads.begin(), heads.end(),
                     [](const ShardHead& a, const ShardHead& b) { return a.lowestRank < b.lowestRank; });
    *ranks = static_cast<int>(owner.size());
    if (rankSet)
        for (const auto& [rank, path] : owner)
            rankSet->insert(rank);
    return heads;
}

// Shards of one run share its configuration: the first field that differs between two shards
// names them (a merge of shards from different runs would be a chimera).
Status refuseDifferentRuns(const std::vector<ShardHead>& heads)
{
    // A shard without its configuration (its rank stopped before writing it, e.g. on a full
    // disk) is named as such, not compared field by field ("differ in model (mlp vs )"): its
    // model is empty where another shard of the run names one. (A run whose writer never names a
    // model, e.g. one written through the library, has it empty in every shard and merges.)
    const bool someModel = std::any_of(heads.begin(), heads.end(), [](const ShardHead& h) { return !h.config.model.empty(); });
    for (const ShardHead& h : heads)
        if (someModel && h.config.model.empty())
            return fail("merge: " + h.path + " has no run configuration (its rank stopped before writing it, e.g. "
                        "on a full disk); leave it out");
    const ShardHead& a = heads.front();
    for (const ShardHead& b : heads) {
        // The fields kRunConfigFields marks kFieldSameInShards, in its order.
        for (const RunConfigField& f : kRunConfigFields) {
            if (!f.has(kFieldSameInShards))
                continue;
            const std::string x = fieldText(f, a.config), y = fieldText(f, b.config);
            if (x != y)
                return fail("merge: " + a.path + " and " + b.path + " come from different runs: they differ in " + f.label
                            + (*f.unit ? std::string(" (") + f.unit + ")" : std::string()) + " (" + x + " vs " + y + ")");
        }
    }
    return {};
}

// Every rank of the world: "ranks 0, 2 missing" when the shards do not hold them all.
Status refuseMissingRanks(const std::set<int32_t>& ranks, int32_t worldSize)
{
    std::string missing;
    int count = 0;
    for (int32_t r = 0; r < worldSize; ++r) {
        if (ranks.contains(r))
            continue;
        if (++count <= 16)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    if (count > 16)
        missing += ", ... (" + std::to_string(count) + " in all)";
    if (count > 0)
        return fail("merge: the shards hold " + std::to_string(ranks.size()) + " of the " + std::to_string(worldSize)
                    + " ranks of their run; missing: rank" + (count == 1 ? " " : "s ") + missing
                    + "; give every rank's shard");
    return {};
}

RunConfig mergedConfig(const std::vector<ShardHead>& heads, int ranks)
{
    RunConfig config = heads.front().config;
    config.worldSize = std::max(1, ranks);
    for (const ShardHead& s : heads)
        config.worldSize = std::max(config.worldSize, s.config.worldSize);
    config.status = RunStatus::Completed;
    config.failureCause.clear();
    bool anyRunning = false;
    for (const ShardHead& s : heads) {
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
    return config;
}

// Where stitched rows go.
class Sink {
public:
    virtual ~Sink() = default;
    virtual Status addRank(const RankInfo& rank) = 0;
    virtual Result<LaneId> addLane(const Lane& lane) = 0;
    virtual StringId intern(std::string_view text) = 0;
    virtual Status addBucket(const Bucket& bucket) = 0;
    virtual Status addStep(const Step& step) = 0;
    virtual Status appendSpans(std::span<const Span> spans) = 0;
    virtual Status appendInstants(std::span<const Instant> instants) = 0;
    virtual Status addDiagnostic(const Diagnostic& diagnostic) = 0;
    virtual Status endOfShard() = 0;
};

class WriterSink : public Sink {
public:
    explicit WriterSink(RunWriter& w) : m_w(w) {}
    Status addRank(const RankInfo& r) override { return m_w.addRank(r); }
    Result<LaneId> addLane(const Lane& l) override { return m_w.addLane(l); }
    StringId intern(std::string_view t) override { return m_w.intern(t); }
    Status addBucket(const Bucket& b) override { return m_w.addBucket(b); }
    Status addStep(const Step& s) override { return m_w.addStep(s); }
    Status appendSpans(std::span<const Span> s) override { return m_w.appendSpans(s); }
    Status appendInstants(std::span<const Instant> i) override { return m_w.appendInstants(i); }
    Status addDiagnostic(const Diagnostic& d) override { return m_w.addDiagnostic(d); }
    Status endOfShard() override { return m_w.commit(); }

private:
    RunWriter& m_w;
};

class MemorySink : public Sink {
public:
    explicit MemorySink(Run& run) : m_run(run) {}
    Status addRank(const RankInfo& r) override
    {
        m_run.ranks.push_back(r);
        return {};
    }
    Result<LaneId> addLane(const Lane& l) override
    {
        Lane lane = l;
        lane.id = LaneId{static_cast<uint32_t>(m_run.lanes.size())};
        m_run.lanes.push_back(std::move(lane));
        return m_run.lanes.back().id;
    }
    StringId intern(std::string_view t) override { return m_run.strings.intern(t); }
    Status addBucket(const Bucket& b) override
    {
        m_run.buckets.push_back(b);
        return {};
    }
    Status addStep(const Step& s) override
    {
        m_run.steps.push_back(s);
        return {};
    }
    Status appendSpans(std::span<const Span> s) override
    {
        m_run.spans.insert(m_run.spans.end(), s.begin(), s.end());
        return {};
    }
    Status appendInstants(std::span<const Instant> i) override
    {
        m_run.instants.insert(m_run.instants.end(), i.begin(), i.end());
        return {};
    }
    Status addDiagnostic(const Diagnostic& d) override
    {
        m_run.diagnostics.push_back(d);
        return {};
    }
    Status endOfShard() override { return {}; }

private:
    Run& m_run;
};

// The per-shard half of the rule.
class Stitcher {
public:
    explicit Stitcher(Sink& sink) : m_sink(sink) {}

    Status add(Run& shard)
    {
        for (const RankInfo& r : shard.ranks)
            if (auto s = m_sink.addRank(r); !s)
                return s;
        std::vector<LaneId> laneMap;
        for (const Lane& l : shard.lanes) {
            auto id = m_sink.addLane(l);
            if (!id)
                return std::unexpected(id.error());
            laneMap.push_back(*id);
        }
        std::vector<StringId> stringMap;
        for (const std::string& t : shard.strings.texts())
            stringMap.push_back(m_sink.intern(t));
        for (const Bucket& b : shard.buckets)
            if (m_buckets.insert(b.index).second)
                if (auto s = m_sink.addBucket(b); !s)
                    return s;
        for (const Step& st : shard.steps) {
            if (!m_steps.insert({st.rank, st.step}).second)
                continue;
            ++m_stats.steps;
            if (auto s = m_sink.addStep(st); !s)
                return s;
        }
        for (Span& s : shard.spans) {
            s.lane = laneMap[s.lane.v];
            s.name = stringMap[s.name.v];
        }
        if (auto s = m_sink.appendSpans(shard.spans); !s)
            return s;
        for (Instant& in : shard.instants) {
            in.lane = laneMap[in.lane.v];
            in.name = stringMap[in.name.v];
        }
        if (auto s = m_sink.appendInstants(shard.instants); !s)
            return s;
        for (const Diagnostic& g : shard.diagnostics) {
            auto [it, inserted] = m_diagnostics.emplace(g.kind, g);
            if (!inserted) {
                it->second.count += g.count;
                it->second.severity = std::max(it->second.severity, g.severity);
            }
        }
        m_stats.spans += static_cast<int64_t>(shard.spans.size());
        m_stats.instants += static_cast<int64_t>(shard.instants.size());
        return m_sink.endOfShard();
    }

    Result<MergeStats> finish(int ranks)
    {
        for (const auto& [kind, g] : m_diagnostics)
            if (auto s = m_sink.addDiagnostic(g); !s)
                return std::unexpected(s.error());
        m_stats.ranks = ranks;
        return m_stats;
    }

private:
    Sink& m_sink;
    MergeStats m_stats;
    std::set<int32_t> m_buckets;
    std::set<std::pair<int32_t, int32_t>> m_steps;
    std::map<std::string, Diagnostic> m_diagnostics;
};

} // namespace

Result<MergeStats> mergeRunFiles(const std::vector<std::string>& shards, const std::string& out, const MergeOptions& options)
{
    if (shards.empty())
        return fail("merge: no shards given");
    int ranks = 0;
    std::set<int32_t> rankSet;
    auto heads = readHeads(shards, false, &ranks, &rankSet);
    if (!heads)
        return std::unexpected(heads.error());
    if (auto s = refuseDifferentRuns(*heads); !s)
        return std::unexpected(s.error());
    RunConfig config = mergedConfig(*heads, ranks);
    if (!options.allowMissingRanks)
        if (auto s = refuseMissingRanks(rankSet, config.worldSize); !s)
            return std::unexpected(s.error());
    if (options.status) {
        config.status = *options.status;
        config.failureCause = options.failureCause;
        if (options.endedNs != 0)
            config.endedNs = options.endedNs;
    }
    auto output = OutputFile::create(out, options.overwrite, shards);
    if (!output)
        return fail(output.error(), "merge: " + output.error().message);
    const auto write = [&]() -> Result<MergeStats> {
        auto writer = RunWriter::create(output->path(), config, RunWriter::Mode::CreateNew);
        if (!writer)
            return std::unexpected(writer.error());
        WriterSink sink(**writer);
        Stitcher stitcher(sink);
        for (const ShardHead& head : *heads) {
            auto run = loadRun(head.path, LoadOptions{.correctClocks = false});
            if (!run)
                return std::unexpected(run.error());
            if (auto s = stitcher.add(*run); !s)
                return std::unexpected(s.error());
        }
        auto stats = stitcher.finish(ranks);
        if (!stats)
            return stats;
        if (auto s = (*writer)->close(); !s)
            return std::unexpected(s.error());
        writer->reset();
        if (auto s = storeSummaries(output->path()); !s)
            return std::unexpected(s.error());
        return stats;
    };
    auto stats = write();
    if (!stats)
        return std::unexpected(output->explain(stats.error()));
    std::error_code ec;
    if (options.keepExistingWithoutSteps && stats->steps == 0
        && std::filesystem::exists(std::filesystem::symlink_status(out, ec))) {
        stats->written = false; // the private folder goes with `output`
        return stats;
    }
    if (auto s = output->commit(); !s)
        return std::unexpected(s.error());
    return stats;
}

Result<Run> loadShards(const std::vector<std::string>& shards, std::stop_token stop)
{
    if (shards.empty())
        return fail("no run file given");
    int ranks = 0;
    auto heads = readHeads(shards, true, &ranks);
    if (!heads)
        return std::unexpected(heads.error());
    Run run;
    MemorySink sink(run);
    Stitcher stitcher(sink);
    std::optional<Error> firstError;
    bool any = false;
    for (const ShardHead& head : *heads) {
        // Uncorrected: whose clock a rank shares is decided over all ranks (rank 0's boot id is
        // in rank 0's shard), once they are stitched.
        auto part = loadRun(head.path, LoadOptions{.correctClocks = false, .stop = stop});
        if (!part) {
            if (stop.stop_requested())
                return fail(ErrorCode::Cancelled, kCancelled);
            if (!firstError)
                firstError = part.error();
            continue; // between its header and its rows: next round
        }
        if (!any)
            run.config = mergedConfig(*heads, ranks);
        any = true;
        if (auto s = stitcher.add(*part); !s)
            return std::unexpected(s.error());
    }
    if (!any)
        return fail(firstError ? *firstError : Error{"no shard could be read"});
    if (auto s = stitcher.finish(ranks); !s)
        return std::unexpected(s.error());
    // The live view reads shards that this build's recorders are writing: boot ids recorded.
    correctRunClocks(run, true);
    run.normalize();
    return run;
}

} // namespace lockstep::core
