// Clock alignment (clock_sync.h, docs/design.md "Time and clocks"): the best of many exchanges,
// the rule that ranks sharing rank 0's boot id take no offset, the fallback to host names for
// files older than boot ids, and the straggler verdict that the clocks' uncertainty can veto.
// On real files: a written run per rule, and the recorded GPU job tests/data/gpu/record-gloo-cuda-2.db
// (lockstep record, 2 ranks on one H100 host, schema 3: no boot ids; its stored offsets,
// 0.97-4.78 ms with a 10.28 ms round trip, once made rank 1 "the straggler").
#include "lockstep/core/analysis.h"
#include "lockstep/core/clock_sync.h"
#include "lockstep/core/report.h"
#include "lockstep/core/run_db.h"
#include "db_test_util.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>

using namespace lockstep::core;
namespace core = lockstep::core;
using dbtest::kBase;

namespace {

const std::string kFixture = std::string(LOCKSTEP_TEST_DATA_DIR) + "/gpu/record-gloo-cuda-2.db";

RankInfo rank(int32_t r, std::string host, std::string boot, TimeNs offset, TimeNs rtt)
{
    RankInfo i;
    i.rank = r;
    i.host = std::move(host);
    i.bootId = std::move(boot);
    i.clockOffsetNs = i.clockOffsetEndNs = offset;
    i.clockRttNs = rtt;
    i.clockSyncStartNs = offset != 0 || rtt != 0 ? kBase : 0;
    return i;
}

// Per (step, bucket) present on both ranks: rank 1's completion of the GPU communication span
// minus rank 0's, in the run's (corrected) times.
std::vector<TimeNs> completionGaps(const core::Run& run)
{
    std::map<std::pair<int32_t, int32_t>, std::map<int32_t, TimeNs>> ends;
    for (const Span& s : run.spans)
        if (s.kind == SpanKind::CommKernel && s.bucket >= 0)
            ends[{s.step, s.bucket}][run.lanes[s.lane.v].rank] = s.end;
    std::vector<TimeNs> gaps;
    for (const auto& [key, byRank] : ends)
        if (byRank.size() == 2)
            gaps.push_back(byRank.at(1) - byRank.at(0));
    return gaps;
}

TimeNs median(std::vector<TimeNs> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

void exec(const std::string& path, const char* sql)
{
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    const std::string msg = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << msg;
}

} // namespace

TEST(ClockSync, TheExchangeWithTheSmallestRoundTripIsKept)
{
    // Reference clock = ours + 1000. Exchange 1: round trip 400, the reply read at 200 of it
    // (symmetric): offset 1000. Exchange 2: round trip 100 (the best), reply read 90 in (a slow
    // return leg): its estimate is 1000 + 90 - 50 = 1040, off by 40 <= half the round trip.
    // Exchange 3: an answer before the ping (a clock step): skipped.
    const std::vector<ClockExchange> ex = {
        {10'000, 10'000 + 200 + 1000, 10'400},
        {20'000, 20'000 + 90 + 1000, 20'100},
        {30'000, 31'000, 29'000},
    };
    const auto best = bestClockExchange(ex);
    ASSERT_TRUE(best.has_value());
    EXPECT_EQ(best->rttNs, 100);
    EXPECT_EQ(best->offsetNs, 1040);
    EXPECT_EQ(best->uncertaintyNs, 50);
    EXPECT_EQ(best->atNs, 20'000);
    EXPECT_LE(std::abs(best->offsetNs - 1000), best->uncertaintyNs);
    // Ties keep the earliest; an odd round trip rounds the bound up; nothing valid: nullopt.
    const std::vector<ClockExchange> tie = {{0, 5, 11}, {100, 100, 111}};
    EXPECT_EQ(bestClockExchange(tie)->atNs, 0);
    EXPECT_EQ(bestClockExchange(tie)->uncertaintyNs, 6);
    EXPECT_FALSE(bestClockExchange(std::vector<ClockExchange>{{5, 0, 4}}).has_value());
    EXPECT_FALSE(bestClockExchange({}).has_value());
}

TEST(ClockSync, TheBootIdIsReadable)
{
    const std::string id = readBootId();
    EXPECT_EQ(id.size(), 36u) << id; // a UUID, without its newline
    EXPECT_EQ(id, readBootId());
}

TEST(ClockSync, RanksThatShareRankZerosBootIdTakeNoOffset)
{
    std::vector<RankInfo> ranks = {rank(0, "a", "boot-a", 0, 0), rank(1, "a", "boot-a", 3'000'000, 10'000'000),
                                   rank(2, "b", "boot-b", -7'000, 1'001), rank(3, "c", "boot-c", 0, 0)};
    const ClockAlignment al = alignClocks(ranks, true);
    EXPECT_FALSE(al.assumedFromHostNames);
    EXPECT_TRUE(al.anyMeasured);
    EXPECT_EQ(ranks[0].clockBasis, ClockBasis::Reference);
    EXPECT_EQ(ranks[1].clockBasis, ClockBasis::SameBoot);
    EXPECT_EQ(ranks[1].clockOffsetNs, 0);
    EXPECT_EQ(ranks[1].clockOffsetEndNs, 0);
    EXPECT_EQ(ranks[1].clockUncertaintyNs, 0);
    EXPECT_EQ(ranks[1].correct(kBase + 5), kBase + 5);
    EXPECT_EQ(ranks[2].clockBasis, ClockBasis::Measured);
    EXPECT_EQ(ranks[2].clockOffsetNs, -7'000);
    EXPECT_EQ(ranks[2].clockUncertaintyNs, 501);
    EXPECT_EQ(ranks[3].clockBasis, ClockBasis::NotMeasured);
    EXPECT_EQ(pairClockUncertainty(ranks[1], ranks[2]), 501);
}

TEST(ClockSync, HostNamesStandInForBootIdsOnlyInOlderFiles)
{
    // Older file, one host name: taken as one clock, and the note says what was not applied.
    std::vector<RankInfo> old = {rank(0, "vm", "", 0, 0), rank(1, "vm", "", 970'133, 10'280'485)};
    old[1].clockOffsetEndNs = 4'777'185;
    ClockAlignment al = alignClocks(old, false);
    EXPECT_TRUE(al.assumedFromHostNames);
    EXPECT_EQ(old[1].clockBasis, ClockBasis::SameHostName);
    EXPECT_EQ(old[1].clockOffsetNs, 0);
    EXPECT_NE(al.note.find("0.970 ms to 4.777 ms, round trip up to 10.280 ms"), std::string::npos) << al.note;
    // Older file, two host names: the measured offset, uncertain by half its round trip.
    std::vector<RankInfo> two = {rank(0, "vm", "", 0, 0), rank(1, "vm2", "", 970'133, 10'280'485)};
    al = alignClocks(two, false);
    EXPECT_FALSE(al.assumedFromHostNames);
    EXPECT_EQ(two[1].clockBasis, ClockBasis::Measured);
    EXPECT_EQ(two[1].clockUncertaintyNs, 5'140'243);
    // A file with boot ids: a shared host name proves nothing (containers, "localhost").
    std::vector<RankInfo> v4 = {rank(0, "localhost", "x", 0, 0), rank(1, "localhost", "y", 2'000, 100)};
    al = alignClocks(v4, true);
    EXPECT_FALSE(al.assumedFromHostNames);
    EXPECT_EQ(v4[1].clockOffsetNs, 2'000);
    EXPECT_EQ(v4[1].clockUncertaintyNs, 50);
}

TEST(ClockSync, TheReaderAppliesTheRuleAndKeepsBootIdsAndUncertainty)
{
    lockstep::test::TempDir dir;
    for (const bool sameBoot : {true, false}) {
        core::Run in = dbtest::makeRun(2, 3); // rank 1's clock reads 1000 ns less, offset +1000
        in.ranks[0].bootId = "boot-0";
        in.ranks[1].bootId = sameBoot ? "boot-0" : "boot-1";
        in.ranks[1].clockUncertaintyNs = 25;
        const std::string path = dir.file(sameBoot ? "same.db" : "other.db");
        ASSERT_TRUE(saveRun(in, path).has_value());
        auto raw = loadRun(path, LoadOptions{.correctClocks = false});
        ASSERT_TRUE(raw.has_value());
        EXPECT_EQ(raw->ranks[1].bootId, in.ranks[1].bootId);
        EXPECT_EQ(raw->ranks[1].clockUncertaintyNs, 25);
        EXPECT_EQ(raw->ranks[1].clockOffsetNs, 1000);
        auto run = loadRun(path);
        ASSERT_TRUE(run.has_value());
        EXPECT_EQ(run->ranks[1].clockBasis, sameBoot ? ClockBasis::SameBoot : ClockBasis::Measured);
        EXPECT_EQ(run->ranks[1].clockOffsetNs, sameBoot ? 0 : 1000);
        EXPECT_EQ(run->ranks[1].clockUncertaintyNs, sameBoot ? 0 : 25);
        // Rank 1's first step: stored in its own clock; shifted only across boots.
        const auto step = std::find_if(run->steps.begin(), run->steps.end(), [](const Step& s) { return s.rank == 1; });
        const auto rawStep = std::find_if(raw->steps.begin(), raw->steps.end(), [](const Step& s) { return s.rank == 1; });
        EXPECT_EQ(step->start, rawStep->start + (sameBoot ? 0 : 1000));
    }
}

TEST(ClockSync, TheRecordedGpuJobNamesNoStraggler)
{
    lockstep::test::TempDir dir;
    // Raw: one host, one clock. Rank 1 completes each all-reduce a median 0.15 ms after rank 0
    // (sqlite3 over the file, rank 1's end minus rank 0's of the "cuda:0 communication" span of
    // each (step, bucket): median 151,833 ns over the 352 pairs, 149,604 ns over steps 3+).
    auto raw = loadRun(kFixture, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(raw.has_value()) << raw.error().message;
    EXPECT_EQ(raw->ranks[1].clockOffsetNs, 970'133); // what the recorder stored
    const std::vector<TimeNs> rawGaps = completionGaps(*raw);
    ASSERT_EQ(rawGaps.size(), 352u);
    EXPECT_EQ(median(rawGaps), 151'833);

    // Loaded: schema 3, both ranks on host "vm": one clock, said in the diagnostics; the same
    // gaps as raw, and no straggler.
    auto run = loadRun(kFixture);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->ranks[1].clockBasis, ClockBasis::SameHostName);
    EXPECT_EQ(completionGaps(*run), rawGaps);
    const auto diag = std::find_if(run->diagnostics.begin(), run->diagnostics.end(),
                                   [](const Diagnostic& d) { return d.kind == "clock assumed shared"; });
    ASSERT_NE(diag, run->diagnostics.end());
    EXPECT_NE(diag->message.find("host 'vm'"), std::string::npos) << diag->message;
    const RunAnalysis a = analyze(*run);
    EXPECT_TRUE(a.summary.stragglers.empty());
    EXPECT_FALSE(a.summary.straggler.straggler);
    EXPECT_EQ(a.summary.straggler.clockUncertaintyNs, 0.0);
    EXPECT_NE(reportText(*run, a).find("same host name"), std::string::npos);

    // The same file as if rank 1 were on another host: the stored offsets apply (1-5 ms, the
    // completions 3+ ms apart, rank 1 late in 36 of 37 steady steps), but they are uncertain by
    // half the 10.28 ms round trip, more than the lead they make: no straggler, and the verdict
    // says why.
    const std::string copy = dir.file("two-hosts.db");
    std::filesystem::copy_file(kFixture, copy);
    std::filesystem::permissions(copy, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
    exec(copy, "UPDATE ranks SET host = 'vm2' WHERE rank = 1");
    auto moved = loadRun(copy);
    ASSERT_TRUE(moved.has_value());
    EXPECT_EQ(moved->ranks[1].clockBasis, ClockBasis::Measured);
    EXPECT_EQ(moved->ranks[1].clockUncertaintyNs, 5'140'243);
    EXPECT_GT(median(completionGaps(*moved)), 3'000'000); // 3.3 ms (3.279 ms over steps 3+)
    const RunAnalysis m = analyze(*moved);
    const StragglerEvidence& e = m.summary.straggler;
    EXPECT_EQ(e.candidate, 1);
    EXPECT_TRUE(e.mostSteps);
    EXPECT_TRUE(e.waitAboveThreshold);
    EXPECT_GT(e.latenessAboveOthersNs, e.noiseFloorNs); // the floors alone would have named it
    EXPECT_EQ(e.clockUncertaintyNs, 5'140'243.0);
    EXPECT_EQ(e.clockFloorNs, 2 * 5'140'243.0); // x N/(N-1), N = 2
    EXPECT_TRUE(e.withinClock);
    EXPECT_FALSE(e.clearsNoise);
    EXPECT_FALSE(e.straggler);
    EXPECT_TRUE(m.summary.stragglers.empty());
    EXPECT_NE(summaryTable({m.summary}).find("none (clock \u00b15.140 ms)"), std::string::npos)
        << summaryTable({m.summary});
    EXPECT_NE(reportText(*moved, m).find("none (clock \u00b15.140 ms)"), std::string::npos);
    EXPECT_NE(reportJson(*moved, m).find("\"within_clock\":true"), std::string::npos);
}
