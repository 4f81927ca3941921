// Merging rank shards into one run database, and the Chrome trace export parsed back.
#include "db_test_util.h"

#include "lockstep/core/chrome_export.h"

#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

using namespace lockstep::core;
using namespace dbtest;
namespace core = lockstep::core;

class MergeExport : public ::testing::Test {
protected:
    lockstep::test::TempDir m_dir;
    std::string file(const std::string& name) const { return m_dir.file(name); }
};

class MergeShards : public MergeExport, public ::testing::WithParamInterface<int> {};
INSTANTIATE_TEST_SUITE_P(MergeExport, MergeShards, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "_shards"; });

// One shard per rank, given out of order; each shard its own strings and lane numbering
// (differently ordered strings to make re-interning matter) and its own diagnostics.
TEST_P(MergeShards, mergeShards)
{
    const int shards = GetParam();
    std::vector<std::string> paths;
    for (int i = shards - 1; i >= 0; --i) {
        core::Run shard = makeRun(1, 3, i, shards);
        if (i % 2) {
            // Shift string ids: intern extra strings first in a fresh table.
            core::Run shifted = shard;
            shifted.strings = StringTable();
            for (int k = 0; k < i + 2; ++k)
                shifted.strings.intern("pad " + std::to_string(i) + "." + std::to_string(k));
            for (Span& s : shifted.spans)
                s.name = shifted.strings.intern(shard.strings.text(s.name));
            for (Instant& in : shifted.instants)
                in.name = shifted.strings.intern(shard.strings.text(in.name));
            shard = std::move(shifted);
        }
        shard.config.name = "shard " + std::to_string(i);
        if (i == 1 && shards > 2) {
            shard.config.status = RunStatus::Failed;
            shard.config.failureCause = "rank 1: collective timed out";
        }
        paths.push_back(file("s" + std::to_string(shards) + "_" + std::to_string(i) + ".db"));
        ASSERT_TRUE(saveRun(shard, paths.back()).has_value());
    }
    const std::string out = file("merged" + std::to_string(shards) + ".db");
    auto stats = mergeRunFiles(paths, out);
    ASSERT_TRUE(stats.has_value()) << (stats ? "" : stats.error().message.c_str());
    ASSERT_EQ(stats->ranks, shards);
    ASSERT_EQ(stats->steps, 3 * shards);
    ASSERT_EQ(stats->spans, int64_t(19 * shards));
    ASSERT_EQ(stats->instants, int64_t(6 * shards));

    auto merged = loadRun(out, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(merged.has_value());
    ASSERT_EQ(merged->config.worldSize, shards);
    ASSERT_EQ(merged->config.name, std::string("shard 0")); // lowest rank's shard
    ASSERT_EQ(merged->config.status, shards > 2 ? RunStatus::Failed : RunStatus::Completed);
    if (shards > 2) {
        ASSERT_EQ(merged->config.failureCause, std::string("rank 1: collective timed out"));
    }
    ASSERT_EQ(merged->ranks.size(), size_t(shards));
    ASSERT_EQ(merged->lanes.size(), size_t(2 * shards));
    ASSERT_EQ(merged->buckets.size(), size_t(2));
    ASSERT_EQ(merged->diagnostics.size(), size_t(1));
    ASSERT_EQ(merged->diagnostics[0].count, int64_t(2 * shards));
    for (int r = 0; r < shards; ++r) {
        ASSERT_EQ(merged->ranks[static_cast<size_t>(r)].clockOffsetNs, TimeNs(1000 * r));
        // Each rank's compute lane holds its setup span and 4 per step, names intact.
        const core::Run expected = makeRun(1, 3, r, shards);
        int lanesOfRank = 0;
        for (const Lane& l : merged->lanes) {
            if (l.rank != r)
                continue;
            ++lanesOfRank;
            const auto [lo, hi] = merged->laneSpanRange(l.id);
            const LaneId src{l.kind == LaneKind::Compute ? 0u : 1u};
            const auto [elo, ehi] = expected.laneSpanRange(src);
            ASSERT_EQ(hi - lo, ehi - elo);
            for (size_t k = 0; k < hi - lo; ++k) {
                ASSERT_EQ(merged->spans[lo + k].start, expected.spans[elo + k].start);
                ASSERT_EQ(merged->strings.text(merged->spans[lo + k].name), expected.strings.text(expected.spans[elo + k].name));
            }
        }
        ASSERT_EQ(lanesOfRank, 2);
    }
    // The merged file is a run database like any other: merging it again is refused for
    // the duplicate ranks, and CreateNew refuses the existing output.
    ASSERT_TRUE(!mergeRunFiles({out, paths.front()}, file("again" + std::to_string(shards) + ".db")).has_value());
    ASSERT_TRUE(!mergeRunFiles(paths, out).has_value());
    ASSERT_TRUE(mergeRunFiles(paths, out, RunWriter::Mode::Overwrite).has_value());
}

TEST_F(MergeExport, mergeRefusesBadInput)
{
    auto none = mergeRunFiles({}, file("none.db"));
    ASSERT_TRUE(!none.has_value());
    const std::string a = file("dup_a.db");
    const std::string b = file("dup_b.db");
    ASSERT_TRUE(saveRun(makeRun(1, 1, 0), a).has_value());
    ASSERT_TRUE(saveRun(makeRun(1, 1, 0), b).has_value());
    auto dup = mergeRunFiles({a, b}, file("dup.db"));
    ASSERT_TRUE(!dup.has_value());
    ASSERT_TRUE(dup.error().message.find("rank 0") != std::string::npos) << (dup.error().message.c_str());
    auto missing = mergeRunFiles({a, file("missing.db")}, file("m.db"));
    ASSERT_TRUE(!missing.has_value());
    ASSERT_TRUE(missing.error().message.find("no such file") != std::string::npos);
}

// Audit #6, #7, #2 at the API: shards of different runs and a set missing ranks are refused
// (a launcher merging what a failed job left may allow the missing ranks); with
// keepExistingWithoutSteps a merged run without a step does not replace an existing file.
TEST_F(MergeExport, mergeTakesOneWholeRun)
{
    const std::string a = file("r0.db");
    const std::string b = file("r1.db");
    ASSERT_TRUE(saveRun(makeRun(1, 3, 0, 2), a).has_value());
    core::Run other = makeRun(1, 3, 1, 2);
    other.config.stepsPlanned = 800;
    ASSERT_TRUE(saveRun(other, b).has_value());
    auto mixed = mergeRunFiles({a, b}, file("mixed.db"));
    ASSERT_FALSE(mixed.has_value());
    EXPECT_NE(mixed.error().message.find("different runs: they differ in steps planned (3 vs 800)"), std::string::npos)
        << mixed.error().message;
    auto partial = mergeRunFiles({a}, file("partial.db"));
    ASSERT_FALSE(partial.has_value());
    EXPECT_NE(partial.error().message.find("missing: rank 1"), std::string::npos) << partial.error().message;
    EXPECT_FALSE(std::filesystem::exists(file("partial.db")));
    MergeOptions allow;
    allow.allowMissingRanks = true;
    auto launcher = mergeRunFiles({a}, file("partial.db"), allow);
    ASSERT_TRUE(launcher.has_value()) << launcher.error().message;
    EXPECT_EQ(launcher->ranks, 1);

    core::Run empty = makeRun(1, 0, 0, 1);
    ASSERT_TRUE(saveRun(empty, file("empty.db")).has_value());
    const std::string before = fileBytes(file("partial.db"));
    MergeOptions keep;
    keep.overwrite = true;
    keep.keepExistingWithoutSteps = true;
    auto kept = mergeRunFiles({file("empty.db")}, file("partial.db"), keep);
    ASSERT_TRUE(kept.has_value()) << kept.error().message;
    EXPECT_FALSE(kept->written);
    EXPECT_TRUE(fileBytes(file("partial.db")) == before);
    auto fresh = mergeRunFiles({file("empty.db")}, file("fresh.db"), keep); // nothing to keep: written
    ASSERT_TRUE(fresh.has_value());
    EXPECT_TRUE(fresh->written);
    EXPECT_TRUE(std::filesystem::exists(file("fresh.db")));
}

TEST_F(MergeExport, chromeTraceParsesBack)
{
    const core::Run run = makeRun(2, 2);
    std::ostringstream os;
    ASSERT_TRUE(writeChromeTrace(run, os).has_value());
    rapidjson::Document doc;
    doc.Parse(os.str().c_str());
    ASSERT_TRUE(!doc.HasParseError()) << ("the export is valid JSON");
    ASSERT_TRUE(doc.IsObject() && doc.HasMember("traceEvents") && doc["traceEvents"].IsArray());
    // The same text with numbers kept as their literal strings.
    rapidjson::Document raw;
    raw.Parse<rapidjson::kParseNumbersAsStringsFlag>(os.str().c_str());
    ASSERT_TRUE(!raw.HasParseError());
    size_t firstX = 0;
    while (std::string(raw["traceEvents"][static_cast<rapidjson::SizeType>(firstX)]["ph"].GetString()) != "X")
        ++firstX;
    std::map<std::string, int> phases;
    std::map<int, std::string> processNames;
    std::map<std::pair<int, int>, std::string> threadNames;
    std::vector<const rapidjson::Value*> complete;
    for (const auto& e : doc["traceEvents"].GetArray()) {
        const std::string ph = e["ph"].GetString();
        ++phases[ph];
        if (ph == "M" && std::string(e["name"].GetString()) == "process_name")
            processNames[e["pid"].GetInt()] = e["args"]["name"].GetString();
        if (ph == "M" && std::string(e["name"].GetString()) == "thread_name")
            threadNames[{e["pid"].GetInt(), e["tid"].GetInt()}] = e["args"]["name"].GetString();
        if (ph == "X")
            complete.push_back(&e);
        if (ph == "i") {
            ASSERT_EQ(std::string(e["s"].GetString()), std::string("t"));
            ASSERT_TRUE(e["args"].HasMember("bucket"));
        }
    }
    ASSERT_EQ(phases["X"], int(run.spans.size() + run.steps.size())); // spans, then each rank's steps
    ASSERT_EQ(phases["i"], int(run.instants.size()));
    ASSERT_EQ(processNames.size(), size_t(2));
    ASSERT_EQ(processNames[1], std::string("rank 1 (node1)"));
    ASSERT_EQ(threadNames.size(), size_t(4 + 2)); // the lanes and a "steps" thread per rank
    ASSERT_EQ(threadNames[std::make_pair(1, 3)], std::string("comm"));
    ASSERT_EQ(threadNames[std::make_pair(0, 0)], std::string("compute"));

    // Spans come out in the run's order; check every field against the source, including
    // ns precision kept as fractional microseconds (400'123 ns -> 400.123 us).
    for (size_t i = 0; i < run.spans.size(); ++i) {
        const Span& s = run.spans[i];
        const rapidjson::Value& e = *complete[i];
        ASSERT_EQ(e["pid"].GetInt(), run.lanes[s.lane.v].rank);
        ASSERT_EQ(e["tid"].GetUint(), s.lane.v);
        ASSERT_EQ(std::string(e["name"].GetString()), run.strings.text(s.name));
        ASSERT_EQ(std::llround(e["dur"].GetDouble() * 1000.0), static_cast<long long>(s.end - s.start));
        // ts at epoch magnitude exceeds a double's ns resolution: compare the exact text.
        const std::string ts = std::to_string(s.start / 1000) + "." + std::to_string(1000 + s.start % 1000).substr(1);
        ASSERT_EQ(std::string(raw["traceEvents"][static_cast<rapidjson::SizeType>(firstX + i)]["ts"].GetString()), ts);
        ASSERT_EQ(e["args"]["step"].GetInt(), s.step);
        ASSERT_EQ(e["args"]["bucket"].GetInt(), s.bucket);
        ASSERT_EQ(e["args"]["bytes"].GetInt64(), s.bytes);
        ASSERT_EQ(std::string(e["args"]["kind"].GetString()), std::string(spanKindName(s.kind)));
    }
    ASSERT_TRUE(os.str().find("\"dur\":200.333") != std::string::npos); // 200'333 ns all-reduce
    ASSERT_TRUE(os.str().find("setup \\\"quoted\\\"") != std::string::npos);
}

TEST_F(MergeExport, chromeExportToFile)
{
    const std::string p = file("trace.json");
    ASSERT_TRUE(exportChromeTrace(makeRun(1, 1), p).has_value());
    ASSERT_TRUE(std::filesystem::file_size(p) > 100);
    auto bad = exportChromeTrace(makeRun(1, 1), file("no/such/dir/trace.json"));
    ASSERT_TRUE(!bad.has_value());
}


