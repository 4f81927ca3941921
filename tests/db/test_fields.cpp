// The run's field table (core/fields.h) against everything that iterates it: the `run` table of a
// file of every schema version (PRAGMA table_info), save and load of every field, the report's
// JSON "config" and text config lines, what changed between two runs, merge's refusal, and the
// migration of a schema-4 file (run.framework_version, schema 5). Real SQLite files.
#include "db_test_util.h"
#include "../support/config_fields.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/fields.h"
#include "lockstep/core/report.h"
#include "lockstep/core/run_diff.h"

#include "schema.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sqlite3.h>

#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>

using namespace lockstep::core;
using namespace dbtest;
namespace core = lockstep::core;

namespace {

// A table's columns and their declared types.
std::map<std::string, std::string> columnsOf(sqlite3* db, const char* table)
{
    std::map<std::string, std::string> out;
    sqlite3_stmt* st = nullptr;
    const std::string sql = std::string("SELECT name, type FROM pragma_table_info('") + table + "')";
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW)
        out[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    sqlite3_finalize(st);
    return out;
}

// The columns a field table says a file of `version` has, with their SQL types.
template <class Record, size_t N>
std::map<std::string, std::string> expectedColumns(const std::array<Field<Record>, N>& fields, int version);

const char* sqlType(FieldType t)
{
    switch (t) {
    case FieldType::Text:
    case FieldType::Enum:
    case FieldType::TextList: return "TEXT";
    case FieldType::Int32:
    case FieldType::Int64:
    case FieldType::LaneRef: return "INTEGER";
    case FieldType::Real: break;
    }
    return "REAL";
}

std::string sqlText(const std::string& path, const char* sql)
{
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    std::string v = "(no row)";
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

template <class Record, size_t N>
std::map<std::string, std::string> expectedColumns(const std::array<Field<Record>, N>& fields, int version)
{
    std::map<std::string, std::string> out;
    for (const Field<Record>& f : fields)
        if (f.sinceSchema <= version)
            out[f.name] = sqlType(f.type);
    return out;
}

void expectSameFields(const RunConfig& a, const RunConfig& b, const std::set<std::string>& except = {})
{
    for (const RunConfigField& f : kRunConfigFields) {
        if (!except.contains(f.name)) {
            EXPECT_EQ(fieldText(f, a), fieldText(f, b)) << f.name;
        }
    }
}

} // namespace

class Fields : public ::testing::Test {
protected:
    lockstep::test::TempDir m_dir;
    std::string file(const char* name) const { return m_dir.file(name); }
};

// At every schema version the run table has exactly the id and the fields added by then, each
// with its type: the table and the DDL plus migrations cannot drift apart.
TEST_F(Fields, theTableIsTheRunTableAtEveryVersion)
{
    ASSERT_EQ(kSchemaVersion, 8);
    std::set<std::string> names;
    for (const RunConfigField& f : kRunConfigFields) {
        EXPECT_TRUE(names.insert(f.name).second) << "two fields named " << f.name;
        EXPECT_GE(f.sinceSchema, 1) << f.name;
        EXPECT_LE(f.sinceSchema, kSchemaVersion) << f.name;
        EXPECT_EQ(findRunConfigField(f.name), &f);
    }
    EXPECT_EQ(findRunConfigField("no_such_field"), nullptr);
    for (int v = 1; v <= kSchemaVersion; ++v) {
        const std::string path = file(("v" + std::to_string(v) + ".db").c_str());
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        ASSERT_TRUE(schema::createOrMigrate(db, v).has_value());
        auto run = columnsOf(db, "run");
        auto lanes = columnsOf(db, "lanes");
        const auto ranks = columnsOf(db, "ranks");
        const auto steps = columnsOf(db, "steps"), buckets = columnsOf(db, "buckets");
        const auto diagnostics = columnsOf(db, "diagnostics");
        const auto instantRows = columnsOf(db, "instants"), instantBlocks = columnsOf(db, "instant_blocks");
        sqlite3_close(db);
        // Instants: rows up to version 7, blocks from version 8 (instant_block.h).
        EXPECT_EQ(instantRows.size(), v >= 8 ? 0u : 6u) << "version " << v;
        EXPECT_EQ(instantBlocks.size(), v >= 8 ? 6u : 0u) << "version " << v;
        ASSERT_TRUE(run.erase("id")) << "version " << v;
        EXPECT_EQ(run, expectedColumns(kRunConfigFields, v)) << "version " << v;
        EXPECT_EQ(ranks, expectedColumns(kRankFields, v)) << "version " << v;
        EXPECT_EQ(lanes.erase("max_dur_ns"), v >= 2 ? 1u : 0u) << "version " << v; // the writer's own
        EXPECT_EQ(lanes.erase("block_reach_ns"), v >= 6 ? 1u : 0u) << "version " << v;
        EXPECT_EQ(lanes, expectedColumns(kLaneFields, v)) << "version " << v;
        EXPECT_EQ(steps, expectedColumns(kStepFields, v)) << "version " << v;
        EXPECT_EQ(buckets, expectedColumns(kBucketFields, v)) << "version " << v;
        EXPECT_EQ(diagnostics, expectedColumns(kDiagnosticFields, v)) << "version " << v;
    }
    for (const RankField& f : kRankFields)
        EXPECT_EQ(findRankField(f.name), &f);
}

// Every rank field, none at its default, is stored and read back (the reader's clock basis is
// its own decision, not stored).
TEST_F(Fields, everyRankFieldSurvivesSaveAndLoad)
{
    core::Run in = makeRun(2, 3);
    int i = 0;
    for (RankInfo& r : in.ranks)
        for (const RankField& f : kRankFields) {
            ++i;
            if (std::string(f.name) == "rank")
                continue;
            visitField(f, r, [&](auto& v) {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, std::string>)
                    v = std::string(f.name) + " " + std::to_string(i);
                else if constexpr (std::is_same_v<T, int64_t>)
                    v = (int64_t{1} << 40) + i;
            });
        }
    const std::string path = file("ranks.db");
    ASSERT_TRUE(saveRun(in, path).has_value());
    auto out = loadRun(path, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(out.has_value()) << out.error().message;
    ASSERT_EQ(out->ranks.size(), in.ranks.size());
    for (size_t r = 0; r < in.ranks.size(); ++r)
        for (const RankField& f : kRankFields)
            EXPECT_EQ(fieldText(f, out->ranks[r]), fieldText(f, in.ranks[r])) << f.name << " of rank " << r;
}

// Every field of a lane, a step and a bucket but those that shape the run (config_fields.h) is
// stored and read back; an unknown loss and CPU time (NaN, -1) are NULL in the file and read
// back as unknown.
TEST_F(Fields, everyLaneStepAndBucketFieldSurvivesSaveAndLoad)
{
    core::Run in = makeRun(2, 3);
    lockstep::test::setEveryRecordField(in);
    in.steps[1].loss = std::numeric_limits<double>::quiet_NaN();
    in.steps[1].cpuNs = -1;
    const std::string path = file("records.db");
    ASSERT_TRUE(saveRun(in, path).has_value());
    auto out = loadRun(path, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(out.has_value()) << out.error().message;
    ASSERT_EQ(out->lanes.size(), in.lanes.size());
    ASSERT_EQ(out->steps.size(), in.steps.size());
    ASSERT_EQ(out->buckets.size(), in.buckets.size());
    using lockstep::test::fieldDifferences;
    for (size_t i = 0; i < in.lanes.size(); ++i)
        EXPECT_EQ(fieldDifferences(kLaneFields, in.lanes[i], out->lanes[i]), "") << "lane " << i;
    for (size_t i = 0; i < in.steps.size(); ++i)
        EXPECT_EQ(fieldDifferences(kStepFields, in.steps[i], out->steps[i]), "") << "step row " << i;
    for (size_t i = 0; i < in.buckets.size(); ++i)
        EXPECT_EQ(fieldDifferences(kBucketFields, in.buckets[i], out->buckets[i]), "") << "bucket " << i;
    EXPECT_EQ(out->buckets[0].params.size(), 3u);
    const std::string key = "WHERE rank = " + std::to_string(in.steps[1].rank) + " AND step = " + std::to_string(in.steps[1].step);
    EXPECT_EQ(sqlText(path, ("SELECT typeof(loss) || ' ' || typeof(cpu_ns) FROM steps " + key).c_str()), "null null");
    EXPECT_EQ(sqlText(path, "SELECT typeof(loss) FROM steps WHERE step = 0 AND rank = 0"), "real");
}

// Every field, none at its default, is stored and read back; so is extra.
TEST_F(Fields, everyFieldSurvivesSaveAndLoad)
{
    core::Run in = makeRun(2, 3);
    in.config = lockstep::test::everyFieldConfig();
    const std::string path = file("all.db");
    ASSERT_TRUE(saveRun(in, path).has_value());
    auto out = loadRun(path, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(out.has_value()) << out.error().message;
    expectSameFields(in.config, out->config);
    EXPECT_EQ(out->config.extra, in.config.extra);
    EXPECT_EQ(out->config.frameworkVersion, "framework_version value 23 \xc3\xa9");
    EXPECT_EQ(sqlText(path, "SELECT framework_version FROM run"), in.config.frameworkVersion);
}

// report --json's "config": every setting, circumstance and reported field under its name, with
// its stored value and type; the text report's config lines show the framework.
TEST_F(Fields, theReportCarriesTheConfig)
{
    core::Run run = makeRun(2, 3);
    run.config = lockstep::test::everyFieldConfig();
    const RunAnalysis a = analyze(run);
    rapidjson::Document d;
    d.Parse(reportJson(run, a).c_str());
    ASSERT_FALSE(d.HasParseError());
    ASSERT_TRUE(d.HasMember("config") && d["config"].IsObject());
    const auto& config = d["config"];
    int listed = 0;
    for (const RunConfigField& f : kRunConfigFields) {
        const bool shown = f.has(kFieldSetting | kFieldCircumstance | kFieldInReport);
        ASSERT_EQ(config.HasMember(f.name), shown) << f.name;
        if (!shown)
            continue;
        ++listed;
        const auto& v = config[f.name];
        switch (f.type) {
        case FieldType::TextList:
        case FieldType::LaneRef: FAIL() << f.name << ": the run has no such field"; break;
        case FieldType::Text:
        case FieldType::Enum: ASSERT_TRUE(v.IsString()) << f.name; EXPECT_EQ(v.GetString(), fieldText(f, run.config)); break;
        case FieldType::Int32:
        case FieldType::Int64: ASSERT_TRUE(v.IsInt64()) << f.name; EXPECT_EQ(std::to_string(v.GetInt64()), fieldText(f, run.config)); break;
        case FieldType::Real: ASSERT_TRUE(v.IsNumber()) << f.name; EXPECT_EQ(v.GetDouble(), run.config.*f.real); break;
        }
    }
    EXPECT_GE(listed, 19); // all but name, created_ns, ended_ns, failure_cause
    EXPECT_EQ(std::string(config["framework_version"].GetString()), run.config.frameworkVersion);

    run.config = makeRun(2, 3).config;
    run.config.frameworkVersion = "torch 2.11.0+cu130";
    run.config.modelArgs = "layers=8 width=512";
    const std::string text = reportText(run, analyze(run));
    EXPECT_NE(text.find("  config: model arguments layers=8 width=512,"), std::string::npos) << text;
    EXPECT_NE(text.find("framework torch 2.11.0+cu130"), std::string::npos) << text;
    run.config.frameworkVersion.clear(); // not recorded: left out, not "framework ?"
    EXPECT_EQ(reportText(run, analyze(run)).find("framework"), std::string::npos);
}

// What changed between two runs names the framework, as a circumstance; two runs that differ only
// in it stay comparable (same signature).
TEST_F(Fields, aNewFrameworkIsACircumstanceInWhatChanged)
{
    core::Run a = makeRun(2, 4), b = makeRun(2, 4);
    a.config.frameworkVersion = "torch 1.13.0";
    b.config.frameworkVersion = "torch 2.11.0+cu130";
    const RunDiff d = diffRuns(a, b);
    ASSERT_EQ(d.config.size(), size_t(1));
    EXPECT_EQ(d.config[0].field, "framework_version");
    EXPECT_EQ(d.config[0].a, "torch 1.13.0");
    EXPECT_EQ(d.config[0].b, "torch 2.11.0+cu130");
    EXPECT_FALSE(d.config[0].signature);
    EXPECT_NE(diffText(d).find("framework_version: torch 1.13.0 -> torch 2.11.0+cu130  (circumstance)"),
              std::string::npos);
    EXPECT_EQ(comparisonKey(configSignature(a.config), Varied::BucketCaps),
              comparisonKey(configSignature(b.config), Varied::BucketCaps));
    // A setting of the table is in the signature under its name, with fieldText's value.
    b.config.linkGbps = 0.5;
    EXPECT_EQ(*configSignature(b.config).value("link_gbps"), "0.5");
    EXPECT_EQ(*configSignature(b.config).value("bucket_cap_bytes"), "4096");
}

// A schema-4 file: read as is (no framework, the file untouched), migrated to 5 when opened to
// write (the column added, ''), and then it keeps a framework written to it.
TEST_F(Fields, schemaFourFileIsReadThenMigrated)
{
    const std::string path = file("v4.db");
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        ASSERT_TRUE(schema::createOrMigrate(db, 4).has_value());
        ASSERT_EQ(sqlite3_exec(db, "UPDATE run SET name = 'old', model = 'mlp', world_size = 2, link_gbps = 0.5, "
                                   "status = 'completed';"
                                   "INSERT INTO ranks (rank, host) VALUES (0, 'h'), (1, 'h');",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    const std::string before = fileBytes(path);
    {
        auto reader = RunReader::open(path);
        ASSERT_TRUE(reader.has_value()) << reader.error().message;
        ASSERT_EQ((*reader)->schemaVersion(), 4);
        auto c = (*reader)->config();
        ASSERT_TRUE(c.has_value()) << c.error().message;
        EXPECT_EQ(c->name, "old");
        EXPECT_EQ(c->worldSize, 2);
        EXPECT_EQ(c->linkGbps, 0.5);
        EXPECT_EQ(c->status, RunStatus::Completed);
        EXPECT_EQ(c->frameworkVersion, "");
    }
    EXPECT_TRUE(fileBytes(path) == before);
    {
        auto w = RunWriter::openExisting(path);
        ASSERT_TRUE(w.has_value()) << w.error().message;
        ASSERT_TRUE((*w)->close().has_value());
    }
    EXPECT_EQ(sqlText(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
    EXPECT_EQ(sqlText(path, "SELECT framework_version FROM run"), "");
    EXPECT_EQ(sqlText(path, "SELECT name FROM run"), "old");
    {
        auto w = RunWriter::openExisting(path);
        ASSERT_TRUE(w.has_value());
        auto c = (*RunReader::open(path))->config();
        ASSERT_TRUE(c.has_value());
        c->frameworkVersion = "torch 1.13.0";
        ASSERT_TRUE((*w)->setConfig(*c).has_value());
        ASSERT_TRUE((*w)->close().has_value());
    }
    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader.has_value());
    EXPECT_EQ((*reader)->config()->frameworkVersion, "torch 1.13.0");
    EXPECT_EQ((*reader)->config()->linkGbps, 0.5);
}

// Merge refuses shards that differ in a field the table marks kFieldSameInShards, by its label,
// and merges shards that differ only in another (the framework).
TEST_F(Fields, mergeChecksTheTablesShardFields)
{
    core::Run r0 = makeRun(1, 2, 0, 2), r1 = makeRun(1, 2, 1, 2);
    r0.config.frameworkVersion = "torch 1.13.0";
    r1.config.frameworkVersion = "torch 2.11.0";
    const std::string a = file("rank-0.db"), b = file("rank-1.db");
    ASSERT_TRUE(saveRun(r0, a).has_value());
    ASSERT_TRUE(saveRun(r1, b).has_value());
    ASSERT_TRUE(mergeRunFiles({a, b}, file("merged.db")).has_value());
    r1.config.bucketCapBytes = 8192;
    ASSERT_TRUE(saveRun(r1, b, RunWriter::Mode::Overwrite).has_value());
    const auto refused = mergeRunFiles({a, b}, file("merged2.db"));
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().message.find("they differ in bucket cap (bytes) (4096 vs 8192)"), std::string::npos)
        << refused.error().message;
}
