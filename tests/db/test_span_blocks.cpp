// Span blocks (schema version 6): the codec round-trips every value a span can hold and refuses
// every damaged blob with a BadFile error; the writer's blocks keep (start, append order) through
// out-of-order appends, overlapping blocks and reopening; window queries equal a brute-force
// filter in order; a version-5 file migrates to the same spans; a damaged block is reported.
#include "sqlite_test_util.h"
#include "db_test_util.h"

#include "lockstep/core/span_block.h"
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

auto fields(const Span& s)
{
    return std::tuple(s.start, s.end, s.bytes, s.lane.v, s.name.v, s.step, s.bucket, static_cast<int>(s.kind));
}

void expectSame(const std::vector<Span>& got, const std::vector<Span>& want, const char* what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(fields(got[i]), fields(want[i])) << what << ", span " << i;
}

// What a reader must return for one lane: the lane's spans in append order, stably sorted by
// start (equal starts keep append order), those overlapping [t0, t1).
std::vector<Span> expectedWindow(const std::vector<Span>& appended, LaneId lane, TimeNs t0, TimeNs t1)
{
    std::vector<Span> out;
    for (const Span& s : appended)
        if (s.lane == lane && s.start < t1 && (s.end > t0 || s.start >= t0))
            out.push_back(s);
    std::stable_sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    return out;
}

// What load() returns for a lane: that order, then equal starts by end (normalizeLoaded).
std::vector<Span> expectedLoad(const std::vector<Span>& appended, LaneId lane)
{
    auto out = expectedWindow(appended, lane, std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max());
    std::stable_sort(out.begin(), out.end(), [](const Span& a, const Span& b) {
        return a.start != b.start ? a.start < b.start : a.end < b.end;
    });
    return out;
}

std::vector<Span> laneOf(const Run& run, LaneId lane)
{
    std::vector<Span> out;
    for (const Span& s : run.spans)
        if (s.lane == lane)
            out.push_back(s);
    return out;
}

} // namespace

class SpanBlocks : public ::testing::Test {
protected:
    lockstep::test::TempDir m_dir;
    std::string file(const char* name) const { return m_dir.file(name); }
};

TEST_F(SpanBlocks, codecRoundTripsExtremeValues)
{
    constexpr TimeNs kMin = std::numeric_limits<TimeNs>::min(), kMax = std::numeric_limits<TimeNs>::max();
    const LaneId lane{3};
    std::vector<Span> in = {
        {kMin, kMin, 0, lane, StringId{0}, kNoStep, kNoBucket, SpanKind::DataLoad},
        {kMin, kMax, std::numeric_limits<int64_t>::max(), lane, StringId{std::numeric_limits<uint32_t>::max()},
         std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max(), SpanKind::Comm},
        {kMin + 1, 0, std::numeric_limits<int64_t>::min(), lane, StringId{7}, std::numeric_limits<int32_t>::min(),
         std::numeric_limits<int32_t>::min(), SpanKind::Other},
        {0, 0, -1, lane, StringId{7}, kNoStep, kNoBucket, SpanKind::Forward}, // zero length
        {0, 5, 1ll << 40, lane, StringId{8}, 3, 2, SpanKind::Forward},        // equal start
        {kBase, kBase + 10, 0, lane, StringId{8}, 3, 2, SpanKind::Forward},
        {kMax, kMax, 0, lane, StringId{1}, 4, kNoBucket, SpanKind::Memcpy},
    };
    std::string blob;
    SpanBlockSummary enc;
    ASSERT_TRUE(encodeSpanBlock(in, blob, &enc).has_value());
    std::vector<Span> out;
    SpanBlockSummary dec;
    auto s = decodeSpanBlock(bytesOf(blob), lane, out, &dec);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    expectSame(out, in, "round trip");
    EXPECT_EQ(std::tuple(enc.firstStart, enc.lastStart, enc.maxEnd, enc.count), std::tuple(kMin, kMax, kMax, int64_t(7)));
    EXPECT_EQ(std::tuple(dec.firstStart, dec.lastStart, dec.maxEnd, dec.count),
              std::tuple(enc.firstStart, enc.lastStart, enc.maxEnd, enc.count));
}

TEST_F(SpanBlocks, encoderRefusesWhatItCannotStore)
{
    std::string blob;
    const Span a{kBase, kBase + 10, 0, LaneId{0}, StringId{0}, 0, kNoBucket, SpanKind::Forward};
    Span negative = a;
    negative.end = a.start - 1;
    EXPECT_FALSE(encodeSpanBlock(std::vector<Span>{negative}, blob).has_value()) << "negative durations are invalid";
    Span earlier = a;
    earlier.start = a.start - 5;
    EXPECT_FALSE(encodeSpanBlock(std::vector<Span>{a, earlier}, blob).has_value()) << "not sorted by start";
    EXPECT_FALSE(encodeSpanBlock(std::vector<Span>{}, blob).has_value()) << "empty";
}

// Every prefix of a block, every block with a byte changed or a byte appended: decoded or a
// BadFile error, never a crash or a read past the blob (ASan's and the fuzzer's part).
TEST_F(SpanBlocks, corruptBlobsAreBadFileErrors)
{
    std::vector<Span> in;
    std::mt19937_64 rng(5);
    TimeNs t = kBase;
    for (int i = 0; i < 300; ++i) {
        t += static_cast<TimeNs>(rng() % 50'000);
        in.push_back(Span{t, t + static_cast<TimeNs>(rng() % 40'000), static_cast<int64_t>(rng() % 3) << 20, LaneId{0},
                          StringId{static_cast<uint32_t>(rng() % 60)}, static_cast<int32_t>(i / 100),
                          static_cast<int32_t>(rng() % 5) - 1, static_cast<SpanKind>(rng() % kSpanKindCount)});
    }
    std::string blob;
    ASSERT_TRUE(encodeSpanBlock(in, blob).has_value());
    std::vector<Span> out;
    for (size_t n = 0; n < blob.size(); ++n) {
        out.clear();
        const std::string cut = blob.substr(0, n);
        auto s = decodeSpanBlock(bytesOf(cut), LaneId{0}, out);
        ASSERT_FALSE(s.has_value()) << "a block cut to " << n << " bytes decoded";
        ASSERT_EQ(s.error().code, ErrorCode::BadFile);
    }
    out.clear();
    ASSERT_FALSE(decodeSpanBlock(bytesOf(blob + '\0'), LaneId{0}, out).has_value()) << "trailing bytes";
    int refused = 0;
    for (size_t i = 0; i < blob.size(); ++i) {
        std::string bad = blob;
        bad[i] = static_cast<char>(bad[i] ^ (1 + rng() % 255));
        out.clear();
        auto s = decodeSpanBlock(bytesOf(bad), LaneId{0}, out);
        if (!s) {
            ++refused;
            ASSERT_EQ(s.error().code, ErrorCode::BadFile);
        }
    }
    EXPECT_GT(refused, 0);
    // A header that promises more spans than the bytes can hold is refused before any allocation.
    const std::string huge = std::string("\x01\xff\xff\xff\xff\x0f\x00", 7);
    out.clear();
    EXPECT_FALSE(decodeSpanBlock(bytesOf(huge), LaneId{0}, out).has_value());
    EXPECT_TRUE(out.empty());
}

// Several blocks per lane, equal starts across commits, spans older than full blocks (the blocks
// overlap in time), a reopened file: load() and every window give the spans in (start, append
// order), exactly as a brute-force filter of what was appended.
TEST_F(SpanBlocks, outOfOrderAppendsKeepStartThenAppendOrder)
{
    const std::string path = file("order.db");
    std::vector<Span> all;
    std::mt19937_64 rng(11);
    int64_t n = 0;
    const auto batch = [&](LaneId lane, int count, TimeNs from, TimeNs spread) {
        std::vector<Span> out;
        for (int i = 0; i < count; ++i) {
            const TimeNs start = from + static_cast<TimeNs>(rng() % static_cast<uint64_t>(spread)) / 10 * 10;
            out.push_back(Span{start, start + static_cast<TimeNs>(rng() % 3000), ++n, lane, StringId{0},
                               kNoStep, kNoBucket, SpanKind::CpuOp});
        }
        all.insert(all.end(), out.begin(), out.end());
        return out;
    };
    {
        auto w = RunWriter::create(path, RunConfig{});
        ASSERT_TRUE(w.has_value());
        const LaneId a = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
        const LaneId b = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Comm});
        for (int c = 0; c < 6; ++c) {
            // Mostly in order, coarse starts (many equal), one lane per batch interleaved.
            ASSERT_TRUE((*w)->appendSpans(batch(a, 1500, kBase + c * 1'000'000, 1'000'000)).has_value());
            ASSERT_TRUE((*w)->appendSpans(batch(b, 700, kBase + c * 1'000'000, 1'000'000)).has_value());
            ASSERT_TRUE((*w)->commit().has_value());
        }
        // Spans far older than the blocks already full, and equal to existing starts.
        ASSERT_TRUE((*w)->appendSpans(batch(a, 300, kBase, 3'000'000)).has_value());
        ASSERT_TRUE((*w)->close().has_value());
    }
    {
        auto w = RunWriter::openExisting(path);
        ASSERT_TRUE(w.has_value()) << w.error().message;
        ASSERT_TRUE((*w)->appendSpans(batch(LaneId{1}, 500, kBase + 2'000'000, 5'000'000)).has_value());
        ASSERT_TRUE((*w)->appendSpans(batch(LaneId{0}, 10, kBase + 6'000'000, 10)).has_value());
        ASSERT_TRUE((*w)->close().has_value());
    }
    ASSERT_TRUE(validateRunFile(path).has_value());
    // 9300 spans on lane 0 in blocks of 2048 (the reopened file continued the open one).
    EXPECT_EQ(queryInt(path, "SELECT count(*) FROM span_blocks WHERE lane = 0"), int64_t((9310 + 2047) / 2048));
    EXPECT_EQ(queryInt(path, "SELECT max(count) FROM span_blocks"), int64_t(kSpanBlockSpans));
    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader.has_value());
    ASSERT_EQ(*(*reader)->spanCount(), int64_t(all.size()));
    auto run = (*reader)->load();
    ASSERT_TRUE(run.has_value());
    for (uint32_t l = 0; l < 2; ++l)
        expectSame(laneOf(*run, LaneId{l}), expectedLoad(all, LaneId{l}), "load");
    for (int q = 0; q < 200; ++q) {
        const LaneId lane{static_cast<uint32_t>(q % 2)};
        const TimeNs t0 = kBase - 5000 + static_cast<TimeNs>(rng() % 7'200'000);
        const TimeNs t1 = t0 + static_cast<TimeNs>(rng() % (q % 10 == 0 ? 2'000'000 : 20'000));
        auto got = (*reader)->spansInWindow(lane, t0, t1);
        ASSERT_TRUE(got.has_value());
        expectSame(*got, expectedWindow(all, lane, t0, t1), "window");
    }
}

// A version-5 file (spans rows, with equal starts, seqs from the fallback counter and more than a
// block per lane) reads the same spans, in the same order, before and after its migration.
TEST_F(SpanBlocks, versionFiveFileMigratesToTheSameSpans)
{
    const std::string path = file("v5.db");
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        ASSERT_TRUE(schema::createOrMigrate(db, 5).has_value());
        std::string sql = "BEGIN; INSERT INTO strings (id, text) VALUES (1, 'op'), (2, 'ar');"
                          "INSERT INTO ranks (rank, host) VALUES (0, 'h');"
                          "INSERT INTO lanes (id, rank, kind, name) VALUES (0, 0, 'compute', 'c'), (1, 0, 'comm', 'm');"
                          "INSERT INTO steps (rank, step, start_ns, end_ns, samples) VALUES (0, 0, 0, 10000000, 4);";
        std::mt19937_64 rng(2);
        for (int i = 0; i < 5000; ++i) {
            const int lane = i % 3 == 0 ? 1 : 0;
            const int64_t start = 1000 + static_cast<int64_t>(rng() % 400'000) / 7 * 7;
            // seq: a count for equal starts or the fallback counter's range, as the old writer did.
            sql += "INSERT OR IGNORE INTO spans (lane, start_ns, seq, dur_ns, kind, name, step, bucket, bytes) VALUES ("
                + std::to_string(lane) + "," + std::to_string(start) + "," + std::to_string(i % 4 ? i : (1ll << 31) + i)
                + "," + std::to_string(rng() % 9000) + "," + std::to_string(lane ? 4 : 1) + "," + std::to_string(1 + lane)
                + "," + (i % 5 ? "0" : "-1") + "," + std::to_string(lane ? i % 7 : -1) + ","
                + std::to_string(lane ? 1 << 20 : 0) + ");";
        }
        sql += "UPDATE lanes SET max_dur_ns = (SELECT max(dur_ns) FROM spans WHERE spans.lane = lanes.id); COMMIT;";
        ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    }
    const auto snapshot = [&](std::vector<std::vector<Span>>& windows) {
        auto reader = RunReader::open(path);
        EXPECT_TRUE(reader.has_value());
        auto run = (*reader)->load();
        EXPECT_TRUE(run.has_value());
        for (int q = 0; q < 50; ++q) {
            const TimeNs t0 = q * 8000, t1 = t0 + (q % 5 ? 3000 : 100'000);
            windows.push_back(*(*reader)->spansInWindow(LaneId{static_cast<uint32_t>(q % 2)}, t0, t1));
        }
        return std::move(*run);
    };
    std::vector<std::vector<Span>> before, after;
    const lockstep::core::Run old = snapshot(before);
    ASSERT_EQ(old.spans.size(), size_t(5000));
    {
        auto w = RunWriter::openExisting(path);
        ASSERT_TRUE(w.has_value()) << w.error().message;
        ASSERT_TRUE((*w)->close().has_value());
    }
    ASSERT_EQ(queryInt(path, "PRAGMA user_version"), int64_t(kSchemaVersion));
    ASSERT_TRUE(validateRunFile(path).has_value());
    EXPECT_EQ(queryInt(path, "SELECT count(*) FROM span_blocks WHERE lane = 0"), int64_t(2)); // 3333 spans
    const lockstep::core::Run migrated = snapshot(after);
    expectSame(migrated.spans, old.spans, "load");
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < before.size(); ++i)
        expectSame(after[i], before[i], "window");
}

// A block whose bytes were damaged (here rewritten with SQL, as a disk fault could) makes the
// validator, load() and the window query fail with BadFile; a row whose bounds disagree with its
// block is caught by the validator.
TEST_F(SpanBlocks, aDamagedBlockIsABadFile)
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
    damage("UPDATE span_blocks SET max_end_ns = max_end_ns + 1 WHERE lane = 0");
    auto v = validateRunFile(path);
    ASSERT_FALSE(v.has_value());
    EXPECT_EQ(v.error().code, ErrorCode::BadFile);
    damage("UPDATE span_blocks SET data = substr(data, 1, length(data) - 2) WHERE lane = 0");
    v = validateRunFile(path);
    ASSERT_FALSE(v.has_value());
    EXPECT_EQ(v.error().code, ErrorCode::BadFile);
    auto run = loadRun(path);
    ASSERT_FALSE(run.has_value());
    EXPECT_EQ(run.error().code, ErrorCode::BadFile);
    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader.has_value());
    auto window = (*reader)->spansInWindow(LaneId{0}, 0, std::numeric_limits<TimeNs>::max());
    ASSERT_FALSE(window.has_value());
    EXPECT_EQ(window.error().code, ErrorCode::BadFile);
}

// The writer refuses a span that ends before it starts, with a message naming it.
TEST_F(SpanBlocks, writerRefusesNegativeDurations)
{
    auto w = RunWriter::create(file("negative.db"), RunConfig{});
    ASSERT_TRUE(w.has_value());
    const LaneId lane = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
    const Span s{kBase, kBase - 1, 0, lane, StringId{0}, 0, kNoBucket, SpanKind::Forward};
    auto st = (*w)->appendSpans(std::span(&s, 1));
    ASSERT_FALSE(st.has_value());
    EXPECT_NE(st.error().message.find("ends before it starts"), std::string::npos);
    ASSERT_TRUE((*w)->close().has_value());
}
