// Golden numbers on the real GPU fixtures (tests/data/gpu/, recorded on an H100; see derive.py
// there): `lockstep report --json` of each recorded run, and of the Kineto traces after `lockstep
// import`, against tests/data/gpu/expected.json, which derive.py computes from the raw spans
// with sqlite3/json/gzip alone (docs/design.md's rules applied by hand, no project code).
// Tolerances are in expected.json ("tolerances") and stated at each check.
#include "lockstep/core/analysis.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/report.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <vector>
#include <string>

namespace fs = std::filesystem;
namespace test = lockstep::test;

namespace {

const fs::path kData = fs::path(LOCKSTEP_SOURCE_DIR) / "tests" / "data" / "gpu";

rapidjson::Document parse(const std::string& text)
{
    rapidjson::Document d;
    d.Parse(text.c_str());
    return d;
}

const rapidjson::Document& expected()
{
    static const rapidjson::Document d = parse(test::readFile((kData / "expected.json").string()));
    return d;
}

double tol(const char* name) { return expected()["tolerances"][name].GetDouble(); }

// `lockstep report --json` of a run database.
rapidjson::Document report(const fs::path& db)
{
    const test::Outcome o = test::lockstep({"report", "--json", db.string()}, 120'000);
    EXPECT_EQ(o.exitCode, 0) << o.describe();
    rapidjson::Document d = parse(o.out);
    EXPECT_FALSE(d.HasParseError()) << o.out.substr(0, 400);
    return d;
}

// Relative tolerance with an absolute floor (parts near 0).
void expectNear(double got, double want, double rel, double absMs, const std::string& what)
{
    EXPECT_NEAR(got, want, std::max(std::abs(want) * rel, absMs)) << what;
}

void expectRunNumbers(const rapidjson::Value& r, const rapidjson::Value& e, const std::string& name)
{
    // Step time within 1 % of the derived tiling windows' mean, and within 2 % of the host's own
    // step time (docs/design.md, "Windows": a device rank's step is the real step).
    expectNear(r["step_time_ms"].GetDouble(), e["step_time_ms"].GetDouble(), tol("step_time_rel"), 0, name + " step");
    expectNear(r["step_time_ms"].GetDouble(), e["host_step_ms"].GetDouble(), tol("host_step_rel"), 0,
               name + " step vs host step");
    // The parts: 3 % or 0.05 ms.
    for (const char* k : {"compute_ms", "comm_ms", "compute_only_ms", "memory_only_ms", "idle_ms"})
        expectNear(r[k].GetDouble(), e[k].GetDouble(), tol("parts_rel"), tol("parts_abs_ms"), name + " " + k);
    if (e.HasMember("overlapped_ms")) {
        for (const char* k : {"overlapped_ms", "exposed_comm_ms"})
            expectNear(r[k].GetDouble(), e[k].GetDouble(), tol("parts_rel"), tol("parts_abs_ms"), name + " " + k);
        expectNear(r["overlap_ratio"].GetDouble(), e["overlap_ratio"].GetDouble(), tol("parts_rel"), 0,
                   name + " overlap ratio");
    } else {
        // One rank: nothing to communicate; overlap and exposed are not applicable (null).
        EXPECT_TRUE(r["overlap_ratio"].IsNull()) << name;
        EXPECT_TRUE(r["exposed_comm_ms"].IsNull()) << name;
    }
    if (e.HasMember("throughput_samples_per_s"))
        expectNear(r["throughput_samples_per_s"].GetDouble(), e["throughput_samples_per_s"].GetDouble(),
                   tol("step_time_rel"), 0, name + " throughput");
    // Per rank.
    for (const auto& rank : r["ranks"].GetArray()) {
        const std::string key = std::to_string(rank["rank"].GetInt());
        ASSERT_TRUE(e["per_rank"].HasMember(key.c_str())) << name;
        const auto& er = e["per_rank"][key.c_str()];
        expectNear(rank["step_time_ms"].GetDouble(), er["step_time_ms"].GetDouble(), tol("step_time_rel"), 0,
                   name + " rank " + key + " step");
        expectNear(rank["comm_ms"].GetDouble(), er["comm_ms"].GetDouble(), tol("parts_rel"), tol("parts_abs_ms"),
                   name + " rank " + key + " comm");
    }
}

// Each device window's five parts add up to it, and consecutive windows of a rank tile time.
void expectTiling(const rapidjson::Value& r, const std::string& name)
{
    std::map<int, std::vector<std::pair<int64_t, int64_t>>> windows;
    for (const auto& b : r["step_breakdown"].GetArray()) {
        ASSERT_STREQ(b["window"].GetString(), "device") << name;
        windows[b["rank"].GetInt()].push_back({b["start_ns"].GetInt64(), b["end_ns"].GetInt64()});
        double sum = 0;
        for (const char* k : {"compute_only_ms", "overlapped_ms", "exposed_comm_ms", "memory_only_ms", "idle_ms"})
            sum += b[k].IsNull() ? 0 : b[k].GetDouble();
        EXPECT_NEAR(sum, b["wall_ms"].GetDouble(), 1e-6) << name;
    }
    for (const auto& [rank, w] : windows)
        for (size_t i = 1; i < w.size(); ++i)
            EXPECT_EQ(w[i].first, w[i - 1].second) << name << " rank " << rank << " window " << i;
}

// The run index (details panel, timeline strips, measure tool) answers each step exactly as the
// whole-run breakdown does, on the real run: the same window and the same five parts.
void expectIndexAgrees(const fs::path& db)
{
    auto run = lockstep::core::loadRun(db.string());
    ASSERT_TRUE(run.has_value()) << run.error().message;
    const auto all = lockstep::core::stepBreakdown(*run);
    const lockstep::core::RunIndex index(*run);
    ASSERT_FALSE(all.empty());
    for (const auto& b : all) {
        const auto one = index.stepBreakdown(b.rank, b.step);
        ASSERT_TRUE(one.has_value());
        EXPECT_EQ(one->start, b.start) << db << " rank " << b.rank << " step " << b.step;
        EXPECT_EQ(one->end, b.end);
        EXPECT_EQ(one->computeOnly, b.computeOnly);
        EXPECT_EQ(one->overlapped, b.overlapped);
        EXPECT_EQ(one->exposed, b.exposed);
        EXPECT_EQ(one->memoryOnly, b.memoryOnly);
        EXPECT_EQ(one->idle, b.idle);
        // The measure tool over the same range says the same.
        const auto range = index.rangeBreakdown(b.rank, b.start, b.end);
        EXPECT_EQ(range.overlapped, b.overlapped);
        EXPECT_EQ(range.exposed, b.exposed);
    }
}

class RecordedRun : public ::testing::TestWithParam<const char*> {};

TEST_P(RecordedRun, ReportMatchesTheRawSpans)
{
    const std::string name = GetParam();
    const rapidjson::Document r = report(kData / (name + ".db"));
    ASSERT_TRUE(r.IsObject());
    EXPECT_EQ(r["schema_version"].GetInt(), lockstep::core::kReportSchemaVersion);
    expectRunNumbers(r, expected()[name.c_str()], name);
    expectTiling(r, name);
    expectIndexAgrees(kData / (name + ".db"));
}

INSTANTIATE_TEST_SUITE_P(Gpu, RecordedRun, ::testing::Values("record-nccl-1", "record-nccl-tx", "record-gloo-cuda-2"),
                         [](const auto& info) {
                             std::string s = info.param;
                             std::erase(s, '-');
                             return s;
                         });

TEST(GlooOverCuda, HostCollectivesCountOnAGpuRank)
{
    test::TempDir dir;
    const fs::path db = dir.file("gloo2.db");
    const test::Outcome imported =
        test::lockstep({"import", "-q", "-o", db.string(), (kData / "kineto-gloo2-rank-0.json.gz").string(),
                        (kData / "kineto-gloo2-rank-1.json.gz").string()},
                       120'000);
    ASSERT_EQ(imported.exitCode, 0) << imported.describe();
    const rapidjson::Document r = report(db);
    ASSERT_TRUE(r.IsObject());
    const auto& e = expected()["kineto-gloo2"];
    expectRunNumbers(r, e, "kineto-gloo2");
    expectTiling(r, "kineto-gloo2");
    expectIndexAgrees(db);
    // Each rank's communication per step within 10 % of the gloo ops' true time in flight.
    for (const auto& rank : r["ranks"].GetArray()) {
        const std::string key = std::to_string(rank["rank"].GetInt());
        expectNear(rank["comm_ms"].GetDouble(), e["gloo_in_flight_ms"][key.c_str()].GetDouble(),
                   tol("gloo_in_flight_rel"), 0, "in flight, rank " + key);
    }
    EXPECT_FALSE(r["overlap_ratio"].IsNull());
    // Bucket sizes from the staging copies (no record_param_comms in these traces).
    const auto& bytes = e["bucket_bytes"].GetArray();
    ASSERT_EQ(r["buckets"].GetArray().Size(), bytes.Size());
    for (rapidjson::SizeType i = 0; i < bytes.Size(); ++i)
        EXPECT_EQ(r["buckets"][i]["bytes"].GetInt64(), bytes[i].GetInt64()) << "bucket " << i;
    EXPECT_EQ(r["buckets"][0]["bytes"].GetInt64(), 9713704);
    // Rank 0 is the late one (it launches most buckets last), in the bucket table.
    int late0 = 0, late1 = 0;
    for (const auto& b : r["buckets"].GetArray()) {
        late0 += b["late_rank"].IsInt() && b["late_rank"].GetInt() == 0;
        late1 += b["late_rank"].IsInt() && b["late_rank"].GetInt() == 1;
    }
    EXPECT_GT(late0, late1);
    EXPECT_GT(e["late_rank_buckets"]["0"].GetInt(), e["late_rank_buckets"]["1"].GetInt());
    // What the rules did is in the diagnostics, never silent.
    std::set<std::string> kinds;
    for (const auto& d : r["diagnostics"].GetArray())
        kinds.insert(d["kind"].GetString());
    EXPECT_TRUE(kinds.count("host collectives on a GPU rank"));
    EXPECT_TRUE(kinds.count("collective staging copy"));
    EXPECT_TRUE(kinds.count("bucket size from staging copy"));
}

} // namespace
