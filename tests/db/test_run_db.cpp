// The run database: a whole run survives save/load field by field, clocks are corrected on load,
// a reader sees committed steps only and never blocks the writer, window queries match a brute
// force scan (long spans included), and a version-1 file is read as is and migrated on write.
#include "db_test_util.h"
#include "sqlite_test_util.h"

#include "lockstep/core/analysis.h"
#include "schema.h"

#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <atomic>
#include <thread>
#include <cmath>
#include <random>

using namespace lockstep::core;
using namespace dbtest;
namespace core = lockstep::core;

namespace {

std::vector<Span> bruteWindow(const std::vector<Span>& all, LaneId lane, TimeNs t0, TimeNs t1)
{
    std::vector<Span> out;
    for (const Span& s : all)
        if (s.lane == lane && s.start < t1 && (s.end > t0 || s.start >= t0))
            out.push_back(s);
    std::stable_sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    return out;
}

bool sameSpans(std::vector<Span> a, std::vector<Span> b)
{
    const auto key = [](const Span& s) { return std::tuple(s.start, s.end, s.bytes, s.step, s.bucket); };
    const auto less = [&](const Span& x, const Span& y) { return key(x) < key(y); };
    std::sort(a.begin(), a.end(), less);
    std::sort(b.begin(), b.end(), less);
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (key(a[i]) != key(b[i]) || a[i].kind != b[i].kind)
            return false;
    return true;
}

} // namespace

class RunDb : public ::testing::Test {
protected:
    lockstep::test::TempDir m_dir;
    std::string file(const char* name) const { return m_dir.file(name); }

};

TEST_F(RunDb, roundTripKeepsEveryField)
{
    const core::Run in = makeRun(2, 3);
    const std::string path = file("roundtrip.db");
    ASSERT_TRUE(saveRun(in, path).has_value());
    ASSERT_EQ(queryInt(path, "PRAGMA application_id"), int64_t(kApplicationId));
    ASSERT_EQ(queryInt(path, "PRAGMA user_version"), int64_t(kSchemaVersion));
    ASSERT_EQ(kSchemaVersion, 8);
    ASSERT_TRUE(!exists(path + "-wal")) << ("closing leaves no WAL");
    ASSERT_TRUE(validateRunFile(path).has_value());

    auto out = loadRun(path, LoadOptions{.correctClocks = false});
    ASSERT_TRUE(out.has_value()) << (out ? "" : out.error().message.c_str());
    ASSERT_TRUE(!out->clocksCorrected);
    const RunConfig& c = out->config;
    ASSERT_EQ(c.name, in.config.name);
    ASSERT_EQ(c.model, std::string("mlp"));
    ASSERT_EQ(c.worldSize, 2);
    ASSERT_EQ(c.backend, std::string("gloo"));
    ASSERT_EQ(c.bucketCapBytes, int64_t(4096));
    ASSERT_EQ(c.batchPerRank, int64_t(8));
    ASSERT_EQ(c.warmupSteps, 1);
    ASSERT_EQ(c.commandLine, in.config.commandLine);
    ASSERT_EQ(c.createdNs, kBase);
    ASSERT_EQ(c.status, RunStatus::Completed);
    ASSERT_EQ(c.extra.at("seed"), std::string("7"));
    ASSERT_EQ(out->ranks.size(), size_t(2));
    ASSERT_EQ(out->ranks[1].clockOffsetNs, TimeNs(1000));
    ASSERT_EQ(out->ranks[1].pid, int64_t(101));
    ASSERT_EQ(out->lanes.size(), size_t(4));
    ASSERT_EQ(out->lanes[3].kind, LaneKind::Comm);
    ASSERT_EQ(out->lanes[3].rank, 1);
    ASSERT_EQ(out->steps.size(), size_t(6));
    ASSERT_EQ(out->steps[2].loss, 1.0 / 3);
    for (size_t i = 0; i < in.steps.size(); ++i) {
        ASSERT_EQ(out->steps[i].cpuNs, in.steps[i].cpuNs) << i;
        ASSERT_EQ(out->steps[i].runqNs, in.steps[i].runqNs) << i;
    }
    ASSERT_EQ(out->steps[0].cpuNs, -1) << "not measured stays not measured (NULL)";
    ASSERT_EQ(out->steps[2].runqNs, 3000);
    ASSERT_EQ(out->buckets.size(), size_t(2));
    ASSERT_EQ(out->buckets[1].params, (std::vector<std::string>{"fc1.bias", "fc1.weight"}));
    ASSERT_EQ(out->spans.size(), in.spans.size());
    for (size_t i = 0; i < in.spans.size(); ++i) {
        const Span& a = in.spans[i];
        const Span& b = out->spans[i];
        ASSERT_EQ(b.start, a.start);
        ASSERT_EQ(b.end, a.end);
        ASSERT_EQ(b.lane, a.lane);
        ASSERT_EQ(b.kind, a.kind);
        ASSERT_EQ(b.step, a.step);
        ASSERT_EQ(b.bucket, a.bucket);
        ASSERT_EQ(b.bytes, a.bytes);
        ASSERT_EQ(out->strings.text(b.name), in.strings.text(a.name));
    }
    ASSERT_EQ(out->instants.size(), in.instants.size());
    ASSERT_EQ(out->strings.text(out->instants[1].name), std::string("fc1.weight"));
    ASSERT_EQ(out->diagnostics.size(), size_t(1));
    ASSERT_EQ(out->diagnostics[0].count, int64_t(2));
    ASSERT_EQ(out->diagnostics[0].severity, Severity::Info);
}

TEST_F(RunDb, loadCorrectsClocks)
{
    const core::Run in = makeRun(2, 2);
    const std::string path = file("clocks.db");
    ASSERT_TRUE(saveRun(in, path).has_value());
    auto out = loadRun(path);
    ASSERT_TRUE(out.has_value());
    ASSERT_TRUE(out->clocksCorrected);
    // makeRun puts rank 1's clock 1000 ns behind: after correction both ranks' steps align.
    ASSERT_EQ(out->steps[0].start, kBase);
    ASSERT_EQ(out->steps[2].rank, 1);
    ASSERT_EQ(out->steps[2].start, kBase);
    const auto [lo, hi] = out->laneSpanRange(LaneId{2});
    ASSERT_TRUE(hi > lo);
    ASSERT_EQ(out->spans[lo].start, kBase - 500'000); // the setup span, corrected
    ASSERT_EQ(out->instants.back().ts % 1000, in.instants.front().ts % 1000);
    // Saving a corrected run stores zero offsets, so a reload does not correct twice.
    ASSERT_TRUE(saveRun(*out, file("clocks2.db")).has_value());
    auto again = loadRun(file("clocks2.db"));
    ASSERT_TRUE(again.has_value());
    ASSERT_EQ(again->steps[2].start, kBase);
}

TEST_F(RunDb, createNewRefusesAnExistingFile)
{
    const std::string path = file("exists.db");
    ASSERT_TRUE(saveRun(makeRun(1, 1), path).has_value());
    const std::string before = fileBytes(path);
    auto w = RunWriter::create(path, RunConfig{});
    ASSERT_TRUE(!w.has_value());
    ASSERT_TRUE(w.error().message.find("already exists") != std::string::npos);
    ASSERT_TRUE(fileBytes(path) == before);
    ASSERT_TRUE(saveRun(makeRun(2, 1), path, RunWriter::Mode::Overwrite).has_value());
    ASSERT_EQ(loadRun(path)->ranks.size(), size_t(2));
}

TEST_F(RunDb, diagnosticsAreSummedByKind)
{
    auto w = RunWriter::create(file("diag.db"), RunConfig{});
    ASSERT_TRUE(w.has_value());
    ASSERT_TRUE((*w)->addDiagnostic({"malformed event", Severity::Warning, 3, "first"}).has_value());
    ASSERT_TRUE((*w)->addDiagnostic({"malformed event", Severity::Warning, 4, "second"}).has_value());
    ASSERT_TRUE((*w)->addDiagnostic({"replica drift", Severity::Error, 1, ""}).has_value());
    // Kinds are a closed list (core/diagnostics.h): an unknown one is refused.
    ASSERT_FALSE((*w)->addDiagnostic({"misplaced end event", Severity::Warning, 1, ""}).has_value());
    ASSERT_TRUE((*w)->close().has_value());
    auto r = RunReader::open(file("diag.db"));
    ASSERT_TRUE(r.has_value());
    auto d = (*r)->diagnostics();
    ASSERT_TRUE(d.has_value());
    ASSERT_EQ(d->size(), size_t(2));
    ASSERT_EQ((*d)[0].kind, std::string("malformed event"));
    ASSERT_EQ((*d)[0].count, int64_t(7));
    ASSERT_EQ((*d)[0].message, std::string("first"));
    ASSERT_EQ((*d)[1].severity, Severity::Error);
}

// Run's invariant: spans sorted by (lane, start, end), even when equal starts were
// appended in another order and lanes interleave in a batch.
TEST_F(RunDb, loadKeepsTheSpanOrderInvariant)
{
    auto w = RunWriter::create(file("order.db"), RunConfig{});
    ASSERT_TRUE(w.has_value());
    const LaneId a = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
    const LaneId b = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Comm});
    const std::vector<Span> spans = {
        {kBase + 5, kBase + 9, 0, b, StringId{0}, kNoStep, kNoBucket, SpanKind::Comm},
        {kBase, kBase + 30, 0, a, StringId{0}, kNoStep, kNoBucket, SpanKind::Forward},
        {kBase, kBase + 10, 0, a, StringId{0}, kNoStep, kNoBucket, SpanKind::Forward},
        {kBase + 1, kBase + 2, 0, b, StringId{0}, kNoStep, kNoBucket, SpanKind::Comm},
        {kBase, kBase + 20, 0, a, StringId{0}, kNoStep, kNoBucket, SpanKind::Forward},
    };
    ASSERT_TRUE((*w)->appendSpans(spans).has_value());
    ASSERT_TRUE((*w)->close().has_value());
    auto run = loadRun(file("order.db"));
    ASSERT_TRUE(run.has_value());
    ASSERT_EQ(run->spans.size(), size_t(5));
    const std::vector<TimeNs> ends = {kBase + 10, kBase + 20, kBase + 30, kBase + 2, kBase + 9};
    for (size_t i = 0; i < ends.size(); ++i)
        ASSERT_EQ(run->spans[i].end, ends[i]);
    ASSERT_EQ(run->laneSpanRange(b), std::make_pair(size_t(3), size_t(5)));
}

// Equal starts and spans older than the lane's last start, also after the file is reopened for
// appending (the open block continued): every span must land (none overwritten) and equal starts
// must keep their append order.
TEST_F(RunDb, equalAndOutOfOrderStartsKeepEverySpan)
{
    const std::string path = file("seq.db");
    // Starts (offsets from kBase) in append order; a span's duration is its append index + 1.
    const std::vector<std::vector<TimeNs>> batches = {{100, 100, 100, 200}, {200, 50, 50, 200, 300}};
    const std::vector<TimeNs> afterReopen = {300, 300, 10, 50, 400};
    int64_t n = 0;
    std::vector<Span> all;
    const auto make = [&](const std::vector<TimeNs>& starts, LaneId lane) {
        std::vector<Span> out;
        for (TimeNs s : starts) {
            ++n;
            out.push_back(Span{kBase + s, kBase + s + n, n, lane, StringId{0}, kNoStep, kNoBucket, SpanKind::Forward});
        }
        all.insert(all.end(), out.begin(), out.end());
        return out;
    };
    {
        auto w = RunWriter::create(path, RunConfig{});
        ASSERT_TRUE(w.has_value());
        const LaneId a = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
        for (const auto& b : batches) {
            ASSERT_TRUE((*w)->appendSpans(make(b, a)).has_value());
            ASSERT_TRUE((*w)->commit().has_value());
        }
        ASSERT_TRUE((*w)->close().has_value());
    }
    {
        auto w = RunWriter::openExisting(path);
        ASSERT_TRUE(w.has_value()) << (w ? "" : w.error().message.c_str());
        auto st = (*w)->appendSpans(make(afterReopen, LaneId{0}));
        ASSERT_TRUE(st.has_value()) << (st ? "" : st.error().message.c_str());
        ASSERT_TRUE((*w)->close().has_value());
    }
    // Within each start, the file's order is append order (durations increase): the whole lane
    // through the window query is exactly the spans stably sorted by start.
    {
        auto reader = RunReader::open(path);
        ASSERT_TRUE(reader.has_value());
        ASSERT_EQ(*(*reader)->spanCount(), int64_t(all.size()));
        auto whole = (*reader)->spansInWindow(LaneId{0}, kBase, kBase + 1000);
        ASSERT_TRUE(whole.has_value());
        const auto expected = bruteWindow(all, LaneId{0}, kBase, kBase + 1000);
        ASSERT_EQ(whole->size(), expected.size());
        for (size_t i = 0; i < expected.size(); ++i)
            ASSERT_EQ(std::tuple((*whole)[i].start, (*whole)[i].end), std::tuple(expected[i].start, expected[i].end)) << i;
    }
    auto run = loadRun(path);
    ASSERT_TRUE(run.has_value());
    ASSERT_TRUE(sameSpans(run->spans, all));
    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader.has_value());
    for (TimeNs t0 : {0, 50, 199, 300, 350}) {
        auto got = (*reader)->spansInWindow(LaneId{0}, kBase + t0, kBase + t0 + 60);
        ASSERT_TRUE(got.has_value());
        ASSERT_TRUE(sameSpans(*got, bruteWindow(all, LaneId{0}, kBase + t0, kBase + t0 + 60)));
    }
}

TEST_F(RunDb, writerRejectsUnknownLanes)
{
    auto w = RunWriter::create(file("badlane.db"), RunConfig{});
    ASSERT_TRUE(w.has_value());
    const Span s{kBase, kBase + 1, 0, LaneId{5}, StringId{0}, 0, kNoBucket, SpanKind::Forward};
    auto st = (*w)->appendSpans(std::span(&s, 1));
    ASSERT_TRUE(!st.has_value());
    ASSERT_TRUE(st.error().message.find("lane 5") != std::string::npos);
    ASSERT_TRUE((*w)->close().has_value());
    ASSERT_TRUE(!(*w)->addStep(Step{}).has_value()) << ("a closed writer refuses, never crashes");
    ASSERT_TRUE(!(*w)->commit().has_value());
    ASSERT_TRUE(!RunWriter::create(m_dir.path(), RunConfig{}, RunWriter::Mode::Overwrite).has_value());
    ASSERT_TRUE(std::filesystem::is_directory(m_dir.path()));
}

// The recorder's pattern: a step's row commits with its spans; spans of the next step may
// commit before that step's row. A reader sees step 0 only until step 1's row commits, and
// a reader holding a read transaction does not block the writer's commits.
TEST_F(RunDb, liveReaderSeesCommittedStepsOnly)
{
    const std::string path = file("live.db");
    auto w = RunWriter::create(path, RunConfig{.name = "live", .worldSize = 1});
    ASSERT_TRUE(w.has_value());
    RunWriter& writer = **w;
    ASSERT_TRUE(writer.addRank(RankInfo{.rank = 0}).has_value());
    const LaneId lane = *writer.addLane(Lane{.rank = 0, .kind = LaneKind::Compute, .name = "compute"});
    const StringId fwd = writer.intern("forward");
    const Span s0{kBase, kBase + 10, 0, lane, fwd, 0, kNoBucket, SpanKind::Forward};
    const Span setup{kBase - 100, kBase - 50, 0, lane, fwd, kNoStep, kNoBucket, SpanKind::Other};
    ASSERT_TRUE(writer.appendSpans(std::vector<Span>{setup, s0}).has_value());
    ASSERT_TRUE(writer.addStep(Step{0, 0, kBase, kBase + 20, 0.5, 4}).has_value());
    const Span s1{kBase + 30, kBase + 40, 0, lane, writer.intern("next step's data"), 1, kNoBucket, SpanKind::DataLoad};
    ASSERT_TRUE(writer.appendSpans(std::span(&s1, 1)).has_value());
    ASSERT_TRUE(writer.appendInstants(std::vector<Instant>{{kBase + 35, lane, fwd, 1, 0, InstantKind::GradReady}}).has_value());
    ASSERT_TRUE(writer.commit().has_value());

    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader.has_value()) << (reader ? "" : reader.error().message.c_str());
    auto run = (*reader)->load();
    ASSERT_TRUE(run.has_value());
    ASSERT_EQ(run->steps.size(), size_t(1));
    ASSERT_EQ(run->spans.size(), size_t(2)); // setup (no step) + step 0
    ASSERT_EQ(run->instants.size(), size_t(0));
    // The window query is the raw file: it shows the uncommitted step's span too.
    ASSERT_EQ((*reader)->spansInWindow(lane, kBase, kBase + 100)->size(), size_t(2));

    // A raw reader holding a read transaction open (as load() does while it reads).
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "BEGIN; SELECT count(*) FROM span_blocks;", nullptr, nullptr, nullptr), SQLITE_OK);
    ASSERT_TRUE(writer.addStep(Step{0, 1, kBase + 20, kBase + 50, 0.4, 4}).has_value());
    ASSERT_TRUE(writer.commit().has_value()) << ("a reader must not block the writer");
    sqlite3_exec(raw, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(raw);

    run = (*reader)->load();
    ASSERT_TRUE(run.has_value());
    ASSERT_EQ(run->steps.size(), size_t(2));
    ASSERT_EQ(run->spans.size(), size_t(3));
    ASSERT_EQ(run->instants.size(), size_t(1));
    ASSERT_EQ(run->strings.text(run->spans.back().name), std::string("next step's data"));
    ASSERT_TRUE(writer.close().has_value());
}

// A writer thread records 150 steps (each commit: the step's own spans, its row, and the
// next step's early spans) while this thread loads again and again: every snapshot holds
// whole steps 0..n-1 only, with exactly their 100 spans each.
TEST_F(RunDb, concurrentLoadsSeeWholeSteps)
{
    const std::string path = file("concurrent.db");
    auto created = RunWriter::create(path, RunConfig{.name = "concurrent"});
    ASSERT_TRUE(created.has_value());
    std::unique_ptr<RunWriter> writer = std::move(*created);
    ASSERT_TRUE(writer->addRank(RankInfo{.rank = 0}).has_value());
    const LaneId lane = *writer->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
    const auto spansOf = [&](int step, TimeNs base) {
        std::vector<Span> v;
        for (int k = 0; k < 50; ++k)
            v.push_back(Span{base + k * 10, base + k * 10 + 5, 0, lane, StringId{0}, step, kNoBucket, SpanKind::Forward});
        return v;
    };
    constexpr int kSteps = 150;
    ASSERT_TRUE(writer->appendSpans(spansOf(0, kBase)).has_value()); // step 0's early spans
    ASSERT_TRUE(writer->commit().has_value());
    std::atomic<bool> done = false;
    std::string writerError;
    std::thread t([&] {
        for (int s = 0; s < kSteps && writerError.empty(); ++s) {
            const TimeNs base = kBase + (s + 1) * 10'000;
            Status st = writer->appendSpans(spansOf(s, base + 1000));
            if (st)
                st = writer->addStep(Step{0, s, base, base + 2000, 0.1, 1});
            if (st)
                st = writer->appendSpans(spansOf(s + 1, base + 5000)); // the next step's early spans
            if (st)
                st = writer->commit();
            if (!st)
                writerError = st.error().message;
        }
        done = true;
    });
    auto reader = RunReader::open(path);
    int snapshots = 0;
    bool consistent = true;
    while (reader && consistent && (!done || snapshots == 0)) {
        auto run = (*reader)->load();
        if (!run) {
            consistent = false;
            break;
        }
        ++snapshots;
        const size_t n = run->steps.size();
        for (size_t i = 0; i < n; ++i)
            consistent = consistent && run->steps[i].step == static_cast<int32_t>(i);
        consistent = consistent && run->spans.size() == 100 * n;
        for (const Span& sp : run->spans)
            consistent = consistent && sp.step >= 0 && static_cast<size_t>(sp.step) < n;
    }
    t.join();
    ASSERT_TRUE(reader.has_value());
    ASSERT_TRUE(writerError.empty()) << (writerError.c_str());
    ASSERT_TRUE(consistent) << ("a snapshot held a partial step");
    ASSERT_TRUE(snapshots > 0);
    ASSERT_TRUE(writer->close().has_value());
    auto final = (*reader)->load();
    ASSERT_TRUE(final.has_value());
    ASSERT_EQ(final->steps.size(), size_t(kSteps));
    ASSERT_EQ(final->spans.size(), size_t(100 * kSteps)); // step kSteps' early spans stay hidden
}

// A recorder that dies mid-run (here: a child process that _exit()s without closing) leaves
// its WAL behind; the committed steps are still readable and mergeable, the open step not.
TEST_F(RunDb, crashedWriterLeavesReadableSteps)
{
    const std::string path = file("crashed.db");
    const pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        auto w = RunWriter::create(path, RunConfig{.name = "crashed", .status = RunStatus::Running});
        if (!w)
            _exit(2);
        (void)(*w)->addRank(RankInfo{.rank = 0});
        const LaneId lane = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
        const Span a{kBase, kBase + 10, 0, lane, (*w)->intern("fwd"), 0, kNoBucket, SpanKind::Forward};
        (void)(*w)->appendSpans(std::span(&a, 1));
        (void)(*w)->addStep(Step{0, 0, kBase, kBase + 20, 1.0, 1});
        if (!(*w)->commit())
            _exit(3);
        const Span b{kBase + 30, kBase + 40, 0, lane, (*w)->intern("fwd2"), 1, kNoBucket, SpanKind::Forward};
        (void)(*w)->appendSpans(std::span(&b, 1));
        (void)(*w)->addStep(Step{0, 1, kBase + 20, kBase + 50, 1.0, 1}); // never committed
        _exit(0);
    }
    int status = -1;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_TRUE(exists(path + "-wal"));
    ASSERT_TRUE(validateRunFile(path).has_value()) << (validateRunFile(path) ? "" : validateRunFile(path).error().message.c_str());
    auto run = loadRun(path);
    ASSERT_TRUE(run.has_value()) << (run ? "" : run.error().message.c_str());
    ASSERT_EQ(run->config.status, RunStatus::Running);
    ASSERT_EQ(run->steps.size(), size_t(1));
    ASSERT_EQ(run->spans.size(), size_t(1));
    ASSERT_EQ(run->strings.text(run->spans[0].name), std::string("fwd"));
    auto stats = mergeRunFiles({path}, file("crashed_merged.db"));
    ASSERT_TRUE(stats.has_value()) << (stats ? "" : stats.error().message.c_str());
    ASSERT_EQ(stats->steps, 1);
    ASSERT_EQ(stats->spans, int64_t(1));
}

TEST_F(RunDb, windowQueryMatchesBruteForce)
{
    const std::string path = file("window.db");
    auto w = RunWriter::create(path, RunConfig{});
    ASSERT_TRUE(w.has_value());
    std::vector<LaneId> lanes;
    for (int i = 0; i < 3; ++i)
        lanes.push_back(*(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::HostThread, .stream = i}));
    std::mt19937_64 rng(3);
    std::vector<Span> all;
    TimeNs t = kBase;
    for (int i = 0; i < 6000; ++i) {
        Span s;
        s.lane = lanes[static_cast<size_t>(i % 3)];
        s.start = t + static_cast<TimeNs>(rng() % 1000);
        // Mostly short, a few very long (they must be found from far before the window),
        // some zero-length.
        const auto r = rng() % 100;
        s.end = s.start + (r == 0 ? 200'000 : r < 5 ? 0 : static_cast<TimeNs>(rng() % 3000));
        s.kind = SpanKind::CpuOp;
        t += 300;
        all.push_back(s);
    }
    // Two batches with a commit between: max_dur must be right after each.
    ASSERT_TRUE((*w)->appendSpans(std::span(all).first(3000)).has_value());
    ASSERT_TRUE((*w)->commit().has_value());
    ASSERT_TRUE((*w)->appendSpans(std::span(all).subspan(3000)).has_value());
    ASSERT_TRUE((*w)->close().has_value());
    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader.has_value());
    ASSERT_EQ(*(*reader)->spanCount(), int64_t(all.size()));
    for (int q = 0; q < 300; ++q) {
        const LaneId lane = lanes[q % 3];
        const TimeNs t0 = kBase + static_cast<TimeNs>(rng() % 1'900'000);
        const TimeNs t1 = t0 + static_cast<TimeNs>(rng() % 50'000);
        auto got = (*reader)->spansInWindow(lane, t0, t1);
        ASSERT_TRUE(got.has_value());
        ASSERT_TRUE(std::is_sorted(got->begin(), got->end(),
                               [](const Span& a, const Span& b) { return a.start < b.start; }));
        ASSERT_TRUE(sameSpans(*got, bruteWindow(all, lane, t0, t1))) << "window " << q;
    }
    ASSERT_TRUE((*reader)->spansInWindow(lanes[0], kBase, kBase)->empty());
}

// A file written with the version-1 DDL: readable as is (max duration computed on the fly, steps
// without CPU time, the file untouched), migrated to the current version (max_dur_ns backfilled,
// steps' CPU columns NULL) when opened to write.
TEST_F(RunDb, versionOneFileIsReadThenMigrated)
{
    const std::string path = file("v1.db");
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        ASSERT_TRUE(schema::createOrMigrate(db, 1).has_value());
        const char* fill =
            "INSERT INTO strings (id, text) VALUES (1, 'op');"
            "INSERT INTO ranks (rank, host) VALUES (0, 'old');"
            "INSERT INTO ranks (rank, host, clock_offset_ns, clock_rtt_ns) VALUES (1, 'old', 700, 1001);"
            "INSERT INTO lanes (id, rank, kind, name) VALUES (0, 0, 'host_thread', 't0'), (1, 0, 'compute', 'c');"
            "INSERT INTO steps (rank, step, start_ns, end_ns, samples) VALUES (0, 0, 0, 100000, 4);"
            "INSERT INTO spans (lane, kind, name, start_ns, dur_ns, step, bucket, bytes, seq) VALUES"
            " (0, 10, 1, 1000, 100, 0, -1, 0, 0), (0, 10, 1, 2000, 50000, 0, -1, 0, 1),"
            " (0, 10, 1, 60000, 10, 0, -1, 0, 2), (1, 1, 1, 10, 20, 0, -1, 0, 3);";
        ASSERT_EQ(sqlite3_exec(db, fill, nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    }
    ASSERT_EQ(queryInt(path, "PRAGMA user_version"), int64_t(1));
    const std::string before = fileBytes(path);
    {
        auto reader = RunReader::open(path);
        ASSERT_TRUE(reader.has_value()) << (reader ? "" : reader.error().message.c_str());
        ASSERT_EQ((*reader)->schemaVersion(), 1);
        // [40000, 41000) lies inside the long span [2000, 52000): found only because the
        // lower bound is widened by the lane's longest span.
        auto w = (*reader)->spansInWindow(LaneId{0}, 40000, 41000);
        ASSERT_TRUE(w.has_value());
        ASSERT_EQ(w->size(), size_t(1));
        ASSERT_EQ(w->front().start, TimeNs(2000));
        auto run = (*reader)->load();
        ASSERT_TRUE(run.has_value());
        ASSERT_EQ(run->spans.size(), size_t(4));
        ASSERT_EQ(run->ranks[0].host, std::string("old"));
        ASSERT_EQ(run->steps.size(), size_t(1));
        ASSERT_EQ(run->steps[0].cpuNs, -1);
        ASSERT_EQ(run->steps[0].runqNs, -1);
    }
    ASSERT_TRUE(validateRunFile(path).has_value());
    ASSERT_TRUE(fileBytes(path) == before);
    ASSERT_TRUE(!exists(path + "-wal"));
    ASSERT_TRUE(!exists(path + "-shm"));

    {
        auto w = RunWriter::openExisting(path);
        ASSERT_TRUE(w.has_value()) << (w ? "" : w.error().message.c_str());
        const Span s{70000, 70500, 0, LaneId{1}, (*w)->intern("op"), 0, kNoBucket, SpanKind::Forward};
        ASSERT_TRUE((*w)->appendSpans(std::span(&s, 1)).has_value());
        ASSERT_TRUE((*w)->close().has_value());
    }
    ASSERT_EQ(queryInt(path, "PRAGMA user_version"), int64_t(kSchemaVersion));
    ASSERT_EQ(queryInt(path, "SELECT count(*) FROM steps WHERE cpu_ns IS NULL AND runq_ns IS NULL"), int64_t(1));
    // Version 4: no boot ids; the offset's uncertainty is half the stored round trip, rounded up.
    ASSERT_EQ(queryInt(path, "SELECT count(*) FROM ranks WHERE boot_id = ''"), int64_t(2));
    ASSERT_EQ(queryInt(path, "SELECT clock_uncertainty_ns FROM ranks WHERE rank = 1"), int64_t(501));
    ASSERT_EQ(queryInt(path, "SELECT clock_uncertainty_ns FROM ranks WHERE rank = 0"), int64_t(0));
    ASSERT_EQ(queryInt(path, "SELECT max_dur_ns FROM lanes WHERE id = 0"), int64_t(50000));
    ASSERT_EQ(queryInt(path, "SELECT max_dur_ns FROM lanes WHERE id = 1"), int64_t(500));
    ASSERT_EQ(queryInt(path, "SELECT count(*) FROM strings"), int64_t(2)); // "op" reused
    // Version 6: the spans rows became blocks (one per lane here) and the table is gone.
    ASSERT_EQ(queryInt(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'spans'"), int64_t(0));
    ASSERT_EQ(queryInt(path, "SELECT count(*) FROM span_blocks"), int64_t(2));
    ASSERT_EQ(queryInt(path, "SELECT block_reach_ns FROM lanes WHERE id = 0"), int64_t(60010 - 1000));
    ASSERT_TRUE(validateRunFile(path).has_value());
    auto reader = RunReader::open(path);
    ASSERT_TRUE(reader.has_value());
    ASSERT_EQ((*reader)->schemaVersion(), kSchemaVersion);
    auto w = (*reader)->spansInWindow(LaneId{0}, 40000, 41000);
    ASSERT_EQ(w->size(), size_t(1));
    ASSERT_EQ(w->front().end, TimeNs(52000));
    ASSERT_EQ((*reader)->spansInWindow(LaneId{0}, 52000, 59000)->size(), size_t(0));
    ASSERT_EQ(*(*reader)->spanCount(), int64_t(5));
}



// The spans column list (schema.h) that the readers' SELECTs of files before version 6 are built
// from is the version-5 table's own, in its order.
TEST_F(RunDb, spanColumnListIsTheTables)
{
    const std::string path = file("columns.db");
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_TRUE(schema::createOrMigrate(db, schema::kSpanBlocksVersion - 1).has_value());
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT name FROM pragma_table_info('spans') ORDER BY cid", -1, &st, nullptr), SQLITE_OK);
    std::vector<std::string> columns;
    while (sqlite3_step(st) == SQLITE_ROW)
        columns.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    sqlite3_close(db);
    ASSERT_EQ(columns.size(), size_t(schema::kSpanColumnCount));
    for (size_t i = 0; i < columns.size(); ++i)
        EXPECT_EQ(columns[i], schema::kSpanColumnNames[i]);
    EXPECT_EQ(schema::spanColumnList(), "lane, start_ns, seq, dur_ns, kind, name, step, bucket, bytes");
    EXPECT_EQ(schema::spanColumnList(true), "lane, start_ns, dur_ns, kind, name, step, bucket, bytes");
}

// Issue 9: reading a finished run creates nothing beside it — a run closed normally (rollback
// journal) and one left in WAL mode with no -wal (a writer whose last fold was skipped) — also for
// a reader that cannot write to the folder. As root (which ignores folder permissions) the reader
// is a child process that drops to uid/gid 65534 (nobody) first.
TEST_F(RunDb, readersCreateNothingEvenInAReadOnlyFolder)
{
    const std::string folder = file("ro");
    std::filesystem::create_directory(folder);
    // The test's own folder (mkdtemp: 0700) must let the other user through to "ro".
    std::filesystem::permissions(m_dir.path(), std::filesystem::perms::others_exec, std::filesystem::perm_options::add);
    const std::string closed = folder + "/closed.db";
    const std::string walAtRest = folder + "/wal.db";
    ASSERT_TRUE(saveRun(makeRun(2, 3), closed).has_value());
    ASSERT_TRUE(saveRun(makeRun(2, 3), walAtRest).has_value());
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(walAtRest.c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA user_version;", nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db); // the last connection removes the -wal; the header still says WAL
    }
    const auto entries = lockstep::test::listDir(folder);
    ASSERT_EQ(entries, (std::vector<std::string>{"closed.db", "wal.db"}));
    const std::string walBytes = fileBytes(walAtRest);
    ASSERT_EQ(walBytes[18], 2) << "the file is in WAL mode"; // header bytes 18/19: 2 = WAL
    std::filesystem::permissions(folder, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec
                                             | std::filesystem::perms::group_read | std::filesystem::perms::group_exec
                                             | std::filesystem::perms::others_read | std::filesystem::perms::others_exec);
    const auto readAll = [&] {
        for (const std::string& p : {closed, walAtRest}) {
            if (!validateRunFile(p))
                return 10;
            auto run = loadRun(p);
            if (!run || run->steps.size() != 6)
                return 11;
            auto reader = RunReader::open(p);
            if (!reader || !(*reader)->spansInWindow(LaneId{0}, kBase - 1'000'000, kBase + 10'000'000))
                return 12;
        }
        return 0;
    };
    if (geteuid() == 0) {
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(20);
            // Now this process cannot write into the folder: prove it, then read.
            if (access(folder.c_str(), W_OK) == 0)
                _exit(21);
            _exit(readAll());
        }
        int status = -1;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        EXPECT_EQ(WEXITSTATUS(status), 0) << "10: refused, 11: not loaded, 12: window query failed, 2x: set-up";
    } else {
        EXPECT_EQ(readAll(), 0);
    }
    std::filesystem::permissions(folder, std::filesystem::perms::owner_all);
    EXPECT_EQ(lockstep::test::listDir(folder), entries);
    EXPECT_TRUE(fileBytes(walAtRest) == walBytes);
}

// A writer that closes while a reader still has the file open cannot leave WAL mode; it folds
// every committed frame into the file anyway (TRUNCATE checkpoint), so the file does not depend
// on its -wal: a copy of the file alone holds every step.
TEST_F(RunDb, closeWithAReaderAttachedStillFoldsTheLog)
{
    const std::string path = file("attached.db");
    auto w = RunWriter::create(path, RunConfig{.name = "attached"});
    ASSERT_TRUE(w.has_value());
    ASSERT_TRUE((*w)->addRank(RankInfo{.rank = 0}).has_value());
    const LaneId lane = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
    for (int s = 0; s < 20; ++s) {
        const Span sp{kBase + s * 100, kBase + s * 100 + 50, 0, lane, StringId{0}, s, kNoBucket, SpanKind::Forward};
        ASSERT_TRUE((*w)->appendSpans(std::span(&sp, 1)).has_value());
        ASSERT_TRUE((*w)->addStep(Step{0, s, kBase + s * 100, kBase + s * 100 + 100, 1.0, 1}).has_value());
        ASSERT_TRUE((*w)->commit().has_value());
    }
    auto reader = RunReader::open(path); // stays open across the writer's close
    ASSERT_TRUE(reader.has_value());
    ASSERT_TRUE((*w)->close().has_value());
    std::filesystem::copy_file(path, file("copy.db"));
    auto copy = loadRun(file("copy.db"));
    ASSERT_TRUE(copy.has_value()) << copy.error().message;
    EXPECT_EQ(copy->steps.size(), 20u);
    EXPECT_EQ(copy->spans.size(), 20u);
}

// A writer killed while creating its file leaves a hot journal; one killed while recording leaves
// a -wal. recoverRunFile makes either read like a closed run (the launcher does this to the shards
// of killed ranks before merging them).
TEST_F(RunDb, recoverRunFileFoldsWhatAKilledWriterLeft)
{
    const std::string path = file("killed.db");
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        auto w = RunWriter::create(path, RunConfig{.name = "killed"});
        if (!w)
            _exit(2);
        (void)(*w)->addRank(RankInfo{.rank = 0});
        const LaneId lane = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
        for (int s = 0; s < 3; ++s) {
            const Span a{kBase + s, kBase + s + 1, 0, lane, StringId{0}, s, kNoBucket, SpanKind::Forward};
            (void)(*w)->appendSpans(std::span(&a, 1));
            (void)(*w)->addStep(Step{0, s, kBase + s, kBase + s + 1, 1.0, 1});
            if (!(*w)->commit())
                _exit(3);
        }
        _exit(0); // without closing: as a killed process
    }
    int status = -1;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_TRUE(exists(path + "-wal"));
    ASSERT_TRUE(recoverRunFile(path).has_value());
    EXPECT_FALSE(exists(path + "-wal"));
    EXPECT_FALSE(exists(path + "-shm"));
    auto run = loadRun(path);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->steps.size(), 3u);
    // A file at rest is left as it is.
    const std::string before = fileBytes(path);
    ASSERT_TRUE(recoverRunFile(path).has_value());
    EXPECT_TRUE(fileBytes(path) == before);
}

// A viewer's superseded load gives up instead of reading the run to the end: with its stop
// requested, loadRun, loadShards and analyze fail with ErrorCode::Cancelled; the same calls without a stop
// request read and analyse every span (the control: the file is fine).
TEST_F(RunDb, aLoadWhoseStopIsRequestedGivesUp)
{
    const std::string path = file("cancel.db");
    auto w = RunWriter::create(path, RunConfig{});
    ASSERT_TRUE(w.has_value());
    const LaneId lane = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::HostThread});
    // More rows than one check interval (65,536), so the reader reaches a checkpoint.
    std::vector<Span> spans(200'000);
    for (size_t i = 0; i < spans.size(); ++i) {
        spans[i].lane = lane;
        spans[i].start = kBase + static_cast<TimeNs>(i) * 100;
        spans[i].end = spans[i].start + 50;
        spans[i].kind = SpanKind::CpuOp;
    }
    ASSERT_TRUE((*w)->appendSpans(spans).has_value());
    ASSERT_TRUE((*w)->close().has_value());

    std::stop_source stopped;
    stopped.request_stop();
    auto cancelled = loadRun(path, LoadOptions{.stop = stopped.get_token()});
    ASSERT_FALSE(cancelled.has_value());
    EXPECT_EQ(cancelled.error().code, ErrorCode::Cancelled) << cancelled.error().message;
    auto cancelledShards = loadShards({path}, stopped.get_token());
    ASSERT_FALSE(cancelledShards.has_value());
    EXPECT_EQ(cancelledShards.error().code, ErrorCode::Cancelled) << cancelledShards.error().message;

    auto whole = loadRun(path, LoadOptions{.stop = std::stop_source().get_token()});
    ASSERT_TRUE(whole.has_value()) << whole.error().message;
    EXPECT_EQ(whole->spans.size(), spans.size());
    auto analysed = analyze(*whole, stopped.get_token());
    ASSERT_FALSE(analysed.has_value());
    EXPECT_EQ(analysed.error().code, ErrorCode::Cancelled) << analysed.error().message;
    auto complete = analyze(*whole, std::stop_token{});
    ASSERT_TRUE(complete.has_value());
    EXPECT_EQ(complete->summary.spans, int64_t(spans.size()));
}

// A write the disk refuses carries ErrorCode::DiskFull from SQLite up through the writer (the
// recorders stop the run on that code, never on the message's words). A child process writes a
// run under a 256 KiB file-size limit (SIGXFSZ ignored, as the CLI and the worker do) and exits
// with what its writer said; the control writes the same run without the limit.
TEST_F(RunDb, aWriteTheDiskRefusesHasTheDiskFullCode)
{
    const auto writeRun = [&](const std::string& path, bool limited) {
        const pid_t pid = fork();
        if (pid == 0) {
            if (limited) {
                signal(SIGXFSZ, SIG_IGN);
                struct rlimit lim {256 * 1024, 256 * 1024};
                if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
                    _exit(20);
            }
            auto w = RunWriter::create(path, RunConfig{});
            if (!w)
                _exit(w.error().code == ErrorCode::DiskFull ? 10 : 11);
            const LaneId lane = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::HostThread});
            std::vector<Span> spans(20'000);
            for (size_t i = 0; i < spans.size(); ++i) {
                spans[i].lane = lane;
                spans[i].start = kBase + static_cast<TimeNs>(i) * 100;
                spans[i].end = spans[i].start + 50;
                spans[i].kind = SpanKind::CpuOp;
            }
            for (int round = 0; round < 20; ++round) {
                Status s = (*w)->appendSpans(spans);
                if (s)
                    s = (*w)->commit();
                if (!s)
                    _exit(s.error().code == ErrorCode::DiskFull ? 10 : 11);
            }
            _exit(12); // everything written
        }
        int status = 0;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    EXPECT_EQ(writeRun(file("limited.db"), true), 10);
    EXPECT_EQ(writeRun(file("unlimited.db"), false), 12);
}
