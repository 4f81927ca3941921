// Instant blocks (schema version 8): the codec round-trips every value an instant can hold and
// refuses every damaged blob with a BadFile error; the writer's blocks, appended across commits,
// out of order and after reopening, read back as appended (time, then append order), a live
// reader seeing committed steps only; a version-6 file (instants rows) migrates to the same
// instants; a damaged block is reported.
#include "sqlite_test_util.h"
#include "db_test_util.h"

#include "lockstep/core/instant_block.h"
#include "schema.h"

#include <gtest/gtest.h>

#include <sqlite3.h>

#include <algorithm>
#include <limits>
#include <random>
#include <tuple>

using namespace lockstep::core;
using namespace dbtest;

namespace {

auto fields(const Instant& i)
{
    return std::tuple(i.ts, i.lane.v, i.name.v, i.step, i.bucket, static_cast<int>(i.kind));
}

void expectSame(const std::vector<Instant>& got, const std::vector<Instant>& want, const char* what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(fields(got[i]), fields(want[i])) << what << ", instant " << i;
}

// What load() returns: by lane, then time, equal times in append order.
std::vector<Instant> expectedLoad(std::vector<Instant> appended)
{
    std::stable_sort(appended.begin(), appended.end(), [](const Instant& a, const Instant& b) {
        return a.lane.v != b.lane.v ? a.lane.v < b.lane.v : a.ts < b.ts;
    });
    return appended;
}

// Blocks the writer closed (all but each lane's last) that are neither full by bytes nor by
// count, plus blocks over the byte limit: none in a well-made file.
int64_t badlySizedBlocks(const std::string& path)
{
    const std::string sql = "SELECT count(*) FROM instant_blocks b WHERE length(data) > "
        + std::to_string(kInstantBlockBytes) + " OR (seq < (SELECT max(seq) FROM instant_blocks WHERE lane = b.lane)"
        + " AND length(data) <= " + std::to_string(kInstantBlockBytes - 64) + " AND count < "
        + std::to_string(kInstantBlockInstants) + ")";
    return queryInt(path, sql.c_str());
}

} // namespace

class InstantBlocks : public ::testing::Test {
protected:
    lockstep::test::TempDir m_dir;
    std::string file(const char* name) const { return m_dir.file(name); }
};

TEST_F(InstantBlocks, codecRoundTripsExtremeValues)
{
    constexpr TimeNs kMin = std::numeric_limits<TimeNs>::min(), kMax = std::numeric_limits<TimeNs>::max();
    constexpr int32_t kIntMin = std::numeric_limits<int32_t>::min(), kIntMax = std::numeric_limits<int32_t>::max();
    const LaneId lane{3};
    std::vector<Instant> in = {
        {kMin, lane, StringId{0}, kNoStep, kNoBucket, InstantKind::GradReady},
        {kMin, lane, StringId{std::numeric_limits<uint32_t>::max()}, kIntMax, kIntMax, InstantKind::Marker},
        {kMin + 1, lane, StringId{0}, kIntMin, kIntMin, InstantKind::GradReady}, // name back down by 2^32 - 1
        {0, lane, StringId{7}, -1, -1, InstantKind::GradReady},
        {0, lane, StringId{6}, -1, -1, InstantKind::GradReady}, // equal time, name one less
        {0, lane, StringId{6}, -1, -1, InstantKind::GradReady}, // equal in everything
        {kBase, lane, StringId{8}, 3, 2, InstantKind::Marker},
        {kBase + 1, lane, StringId{9}, 3, kNoBucket, InstantKind::GradReady},
        {kMax, lane, StringId{1}, kNoStep, 4, InstantKind::GradReady},
    };
    std::string blob;
    InstantBlockSummary enc;
    ASSERT_TRUE(encodeInstantBlock(in, blob, &enc).has_value());
    std::vector<Instant> out;
    InstantBlockSummary dec;
    auto s = decodeInstantBlock(bytesOf(blob), lane, out, &dec);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    expectSame(out, in, "round trip");
    EXPECT_EQ(std::tuple(enc.firstTs, enc.lastTs, enc.count), std::tuple(kMin, kMax, int64_t(9)));
    EXPECT_EQ(std::tuple(dec.firstTs, dec.lastTs, dec.count), std::tuple(enc.firstTs, enc.lastTs, enc.count));
    // A step's gradient-ready instants, one parameter after the other: flags, a time delta of two
    // bytes and the name's difference, about 4 bytes each.
    std::vector<Instant> grads;
    for (uint32_t i = 0; i < 1000; ++i)
        grads.push_back(Instant{kBase + 5000 * i, lane, StringId{500 - i / 2}, 12, static_cast<int32_t>(i / 100),
                                InstantKind::GradReady});
    ASSERT_TRUE(encodeInstantBlock(grads, blob).has_value());
    EXPECT_LE(blob.size(), size_t(4) * grads.size() + 16);
    out.clear();
    ASSERT_TRUE(decodeInstantBlock(bytesOf(blob), lane, out).has_value());
    expectSame(out, grads, "gradients");
    // A byte limit: the longest prefix whose block fits, and at least one instant.
    for (size_t limit : {size_t(1), size_t(100), size_t(1000), size_t(2000), size_t(3999)}) {
        InstantBlockSummary sum;
        ASSERT_TRUE(encodeInstantBlock(grads, blob, &sum, limit).has_value());
        EXPECT_TRUE(blob.size() <= limit || sum.count == 1) << limit;
        if (static_cast<size_t>(sum.count) < grads.size())
            EXPECT_GT(blob.size() + 16, limit) << "the block could have taken another instant";
        else
            EXPECT_EQ(limit, size_t(3999)); // all 1000 fit in ~3.5 KB
        out.clear();
        ASSERT_TRUE(decodeInstantBlock(bytesOf(blob), lane, out).has_value());
        expectSame(out, std::vector<Instant>(grads.begin(), grads.begin() + sum.count), "prefix");
        EXPECT_EQ(sum.lastTs, grads[static_cast<size_t>(sum.count) - 1].ts);
    }
}

TEST_F(InstantBlocks, encoderRefusesWhatItCannotStore)
{
    std::string blob;
    const Instant a{kBase, LaneId{0}, StringId{0}, 0, kNoBucket, InstantKind::GradReady};
    Instant earlier = a;
    earlier.ts = a.ts - 5;
    EXPECT_FALSE(encodeInstantBlock(std::vector<Instant>{a, earlier}, blob).has_value()) << "not sorted by time";
    EXPECT_FALSE(encodeInstantBlock(std::vector<Instant>{}, blob).has_value()) << "empty";
}

// Every prefix of a block, every block with a byte changed or a byte appended: decoded or a
// BadFile error, never a crash or a read past the blob (ASan's and the fuzzer's part).
TEST_F(InstantBlocks, corruptBlobsAreBadFileErrors)
{
    std::vector<Instant> in;
    std::mt19937_64 rng(5);
    TimeNs t = kBase;
    for (int i = 0; i < 300; ++i) {
        t += static_cast<TimeNs>(rng() % 50'000);
        in.push_back(Instant{t, LaneId{0}, StringId{static_cast<uint32_t>(rng() % 60)}, static_cast<int32_t>(i / 100),
                             static_cast<int32_t>(rng() % 5) - 1,
                             rng() % 7 ? InstantKind::GradReady : InstantKind::Marker});
    }
    std::string blob;
    ASSERT_TRUE(encodeInstantBlock(in, blob).has_value());
    std::vector<Instant> out;
    for (size_t n = 0; n < blob.size(); ++n) {
        out.clear();
        const std::string cut = blob.substr(0, n);
        auto s = decodeInstantBlock(bytesOf(cut), LaneId{0}, out);
        ASSERT_FALSE(s.has_value()) << "a block cut to " << n << " bytes decoded";
        ASSERT_EQ(s.error().code, ErrorCode::BadFile);
        ASSERT_NE(s.error().message.find("corrupt instant block"), std::string::npos) << s.error().message;
    }
    out.clear();
    ASSERT_FALSE(decodeInstantBlock(bytesOf(blob + '\0'), LaneId{0}, out).has_value()) << "trailing bytes";
    int refused = 0;
    for (size_t i = 0; i < blob.size(); ++i) {
        std::string bad = blob;
        bad[i] = static_cast<char>(bad[i] ^ (1 + rng() % 255));
        out.clear();
        auto s = decodeInstantBlock(bytesOf(bad), LaneId{0}, out);
        if (!s) {
            ++refused;
            ASSERT_EQ(s.error().code, ErrorCode::BadFile);
        }
    }
    EXPECT_GT(refused, 0);
    const auto refuses = [&](const std::string& bytes, const char* what) {
        out.clear();
        auto s = decodeInstantBlock(bytesOf(bytes), LaneId{0}, out);
        ASSERT_FALSE(s.has_value()) << what;
        EXPECT_EQ(s.error().code, ErrorCode::BadFile) << what;
    };
    // A header that promises more instants than the bytes can hold is refused before any allocation.
    refuses(std::string("\x01\xff\xff\xff\xff\x0f\x00", 7), "huge count");
    EXPECT_TRUE(out.empty());
    refuses(std::string("\x02\x01\x00\x00\x00", 5), "unknown format");
    refuses(std::string("\x01\x01\x00\x10\x00", 5), "unknown flags");
    refuses(std::string("\x01\x01\x00\x02\x00\x01", 6), "a name below 0");
    refuses(std::string("\x01\x01\x00\x04\x00\xfe\xff\xff\xff\x1f", 10), "a step beyond int32");
    refuses(std::string("\x01\x01\x00\x08\x00\x80\x80\x80\x80\x20", 10), "a bucket beyond int32");
    // First time INT64_MAX - 1 (zigzag 2^64 - 4), then a delta of 2: past INT64_MAX.
    refuses(std::string("\x01\x02\xfc\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x00\x00\x02", 16), "time overflow");
}

// Two lanes, many commits (one step each), more than a block per lane, equal times within and
// across commits, instants older than a full block (blocks overlap in time), then a reopened file
// that continues the open blocks: load() gives exactly what was appended, in (time, append
// order) per lane; a live reader after each commit sees the committed steps' instants only.
TEST_F(InstantBlocks, writerAcrossCommitsAndBlocksReadsBackWhatWasAppended)
{
    const std::string path = file("instants.db");
    std::vector<Instant> committed, all;
    std::mt19937_64 rng(17);
    const auto batch = [&](LaneId lane, int count, TimeNs from, TimeNs spread, int32_t step) {
        std::vector<Instant> out;
        for (int i = 0; i < count; ++i) {
            const TimeNs ts = from + static_cast<TimeNs>(rng() % static_cast<uint64_t>(spread)) / 100 * 100;
            out.push_back(Instant{ts, lane, StringId{static_cast<uint32_t>(1 + rng() % 3)}, step,
                                  static_cast<int32_t>(rng() % 4) - 1,
                                  rng() % 9 ? InstantKind::GradReady : InstantKind::Marker});
        }
        return out;
    };
    {
        auto w = RunWriter::create(path, RunConfig{});
        ASSERT_TRUE(w.has_value());
        const LaneId a = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
        const LaneId b = *(*w)->addLane(Lane{.rank = 1, .kind = LaneKind::Compute});
        for (const char* name : {"p0", "p1", "p2"})
            (*w)->intern(name);
        for (int32_t step = 0; step < 8; ++step) {
            const TimeNs t = kBase + step * kStepNs;
            std::vector<Instant> step0 = batch(a, 900, t, kStepNs, step);
            std::vector<Instant> step1 = batch(b, 400, t, kStepNs, step);
            // No step row for rank 1 at step 7 yet: its instants stay invisible.
            ASSERT_TRUE((*w)->appendInstants(step0).has_value());
            ASSERT_TRUE((*w)->appendInstants(step1).has_value());
            ASSERT_TRUE((*w)->addStep(Step{0, step, t, t + kStepNs}).has_value());
            if (step < 7) {
                ASSERT_TRUE((*w)->addStep(Step{1, step, t, t + kStepNs}).has_value());
            }
            ASSERT_TRUE((*w)->commit().has_value());
            all.insert(all.end(), step0.begin(), step0.end());
            all.insert(all.end(), step1.begin(), step1.end());
            committed.insert(committed.end(), step0.begin(), step0.end());
            if (step < 7)
                committed.insert(committed.end(), step1.begin(), step1.end());
            if (step % 3 == 0) {
                auto live = loadRun(path, LoadOptions{.correctClocks = false});
                ASSERT_TRUE(live.has_value()) << live.error().message;
                expectSame(live->instants, expectedLoad(committed), "live");
            }
        }
        // Instants outside any step, far older than the full blocks, on an equal time.
        std::vector<Instant> old = batch(a, 50, kBase, kStepNs, kNoStep);
        ASSERT_TRUE((*w)->appendInstants(old).has_value());
        all.insert(all.end(), old.begin(), old.end());
        committed.insert(committed.end(), old.begin(), old.end());
        ASSERT_TRUE((*w)->close().has_value());
    }
    {
        auto w = RunWriter::openExisting(path);
        ASSERT_TRUE(w.has_value()) << w.error().message;
        std::vector<Instant> more = batch(LaneId{0}, 30, kBase + 8 * kStepNs, 100, kNoStep);
        more.push_back(more.front()); // an equal instant, appended later
        ASSERT_TRUE((*w)->appendInstants(more).has_value());
        ASSERT_TRUE((*w)->addStep(Step{1, 7, kBase + 7 * kStepNs, kBase + 8 * kStepNs}).has_value());
        ASSERT_TRUE((*w)->close().has_value());
        all.insert(all.end(), more.begin(), more.end());
    }
    ASSERT_TRUE(validateRunFile(path).has_value());
    // Lane 0: 8 x 900 + 50 + 31 = 7281 instants (~5 bytes each) in blocks of up to 9 KiB, every
    // one but the last full (the reopened file continued the open one).
    EXPECT_EQ(queryInt(path, "SELECT sum(count) FROM instant_blocks"), int64_t(all.size()));
    EXPECT_GE(queryInt(path, "SELECT count(*) FROM instant_blocks WHERE lane = 0"), int64_t(3));
    EXPECT_EQ(badlySizedBlocks(path), int64_t(0));
    EXPECT_EQ(queryInt(path, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'instants%'"), int64_t(0));
    auto run = loadRun(path, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(run.has_value()) << run.error().message;
    expectSame(run->instants, expectedLoad(all), "load");
}

// A version-6 file (instants rows, equal times, more than a block on a lane, a step without its
// row, a row on a lane the file lacks) reads the same instants before and after its migration.
TEST_F(InstantBlocks, versionSixFileMigratesToTheSameInstants)
{
    const std::string path = file("v6.db");
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        ASSERT_TRUE(schema::createOrMigrate(db, 6).has_value());
        std::string sql = "BEGIN; INSERT INTO strings (id, text) VALUES (1, 'fc1.weight'), (2, 'fc2.weight');"
                          "INSERT INTO ranks (rank, host) VALUES (0, 'h'), (1, 'h');"
                          "INSERT INTO lanes (id, rank, kind, name) VALUES (0, 0, 'compute', 'c'), (1, 1, 'compute', 'c');"
                          "INSERT INTO steps (rank, step, start_ns, end_ns, samples) VALUES (0, 0, 0, 10000000, 4),"
                          " (0, 1, 10000000, 20000000, 4), (1, 0, 0, 10000000, 4);";
        std::mt19937_64 rng(3);
        for (int i = 0; i < 5000; ++i) {
            const int lane = i % 4 == 0 ? 1 : 0;
            const int64_t ts = kBase + static_cast<int64_t>(rng() % 2'000'000) / 1000 * 1000;
            sql += "INSERT INTO instants (lane, kind, name, ts_ns, step, bucket) VALUES (" + std::to_string(lane) + ","
                + (i % 11 ? "0" : "1") + "," + std::to_string(1 + i % 2) + "," + std::to_string(ts) + ","
                + (i % 13 ? std::to_string(i % 3 == 0 ? 1 : 0) : "-1") + "," + std::to_string(i % 5 - 1) + ");";
        }
        sql += "INSERT INTO instants (lane, kind, name, ts_ns, step, bucket) VALUES (9, 0, 1, 5, 0, 0);";
        sql += "COMMIT;";
        ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    }
    auto before = loadRun(path, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(before.has_value()) << before.error().message;
    // Rank 1 has no step 1: its instants of step 1 are left out, before and after.
    ASSERT_GT(before->instants.size(), size_t(4000));
    ASSERT_LT(before->instants.size(), size_t(5000));
    {
        auto w = RunWriter::openExisting(path);
        ASSERT_TRUE(w.has_value()) << w.error().message;
        ASSERT_TRUE((*w)->close().has_value());
    }
    ASSERT_EQ(queryInt(path, "PRAGMA user_version"), int64_t(kSchemaVersion));
    ASSERT_TRUE(validateRunFile(path).has_value());
    EXPECT_EQ(queryInt(path, "SELECT count(*) FROM sqlite_schema WHERE name IN ('instants', 'instants_lane_ts')"),
              int64_t(0));
    EXPECT_EQ(queryInt(path, "SELECT sum(count) FROM instant_blocks"), int64_t(5001)); // every row, kept or not
    EXPECT_GE(queryInt(path, "SELECT count(*) FROM instant_blocks WHERE lane = 0"), int64_t(2)); // 3750 instants
    EXPECT_EQ(badlySizedBlocks(path), int64_t(0));
    auto after = loadRun(path, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(after.has_value()) << after.error().message;
    expectSame(after->instants, before->instants, "migrated");
    EXPECT_EQ(after->diagnostics.size(), before->diagnostics.size()); // the orphan row still counted
}

// A block whose bytes were damaged (rewritten with SQL, as a disk fault could) makes the
// validator and load() fail with BadFile; a row whose bounds disagree with its block is caught
// by the validator.
TEST_F(InstantBlocks, aDamagedBlockIsABadFile)
{
    const std::string path = file("damaged.db");
    ASSERT_TRUE(saveRun(makeRun(1, 3), path).has_value());
    ASSERT_TRUE(validateRunFile(path).has_value());
    const auto damage = [&](const char* sql) {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    };
    damage("UPDATE instant_blocks SET last_ts_ns = last_ts_ns + 1 WHERE lane = 0");
    auto v = validateRunFile(path);
    ASSERT_FALSE(v.has_value());
    EXPECT_EQ(v.error().code, ErrorCode::BadFile);
    damage("UPDATE instant_blocks SET data = substr(data, 1, length(data) - 1) WHERE lane = 0");
    v = validateRunFile(path);
    ASSERT_FALSE(v.has_value());
    EXPECT_EQ(v.error().code, ErrorCode::BadFile);
    EXPECT_NE(v.error().message.find("corrupt instant block"), std::string::npos) << v.error().message;
    auto run = loadRun(path);
    ASSERT_FALSE(run.has_value());
    EXPECT_EQ(run.error().code, ErrorCode::BadFile);
    EXPECT_NE(run.error().message.find("corrupt instant block"), std::string::npos) << run.error().message;
}
