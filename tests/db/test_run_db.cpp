// The run database: a whole run survives save/load field by field, clocks are corrected on load,
// a reader sees committed steps only and never blocks the writer, window queries match a brute
// force scan (long spans included), and a version-1 file is read as is and migrated on write.
#include "db_test_util.h"

#include "schema.h"

#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cmath>
#include <random>

using namespace lockstep::core;
using namespace dbtest;

namespace {

int64_t pragmaInt(const std::string& path, const char* pragma)
{
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    int64_t v = -999;
    if (sqlite3_prepare_v2(db, pragma, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

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

class TestRunDb : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    std::string file(const char* name) const { return str(m_dir.filePath(name)); }

private slots:
    void roundTripKeepsEveryField()
    {
        const Run in = makeRun(2, 3);
        const std::string path = file("roundtrip.db");
        QVERIFY(saveRun(in, path).has_value());
        QCOMPARE(pragmaInt(path, "PRAGMA application_id"), int64_t(kApplicationId));
        QCOMPARE(pragmaInt(path, "PRAGMA user_version"), int64_t(kSchemaVersion));
        QCOMPARE(kSchemaVersion, 2);
        QVERIFY2(!QFileInfo::exists(QString::fromStdString(path + "-wal")), "closing leaves no WAL");
        QVERIFY(validateRunFile(path).has_value());

        auto out = loadRun(path, LoadOptions{.correctClocks = false});
        QVERIFY2(out.has_value(), out ? "" : out.error().message.c_str());
        QVERIFY(!out->clocksCorrected);
        const RunConfig& c = out->config;
        QCOMPARE(c.name, in.config.name);
        QCOMPARE(c.model, std::string("mlp"));
        QCOMPARE(c.worldSize, 2);
        QCOMPARE(c.backend, std::string("gloo"));
        QCOMPARE(c.bucketCapBytes, int64_t(4096));
        QCOMPARE(c.batchPerRank, int64_t(8));
        QCOMPARE(c.warmupSteps, 1);
        QCOMPARE(c.commandLine, in.config.commandLine);
        QCOMPARE(c.createdNs, kBase);
        QCOMPARE(c.status, RunStatus::Completed);
        QCOMPARE(c.extra.at("seed"), std::string("7"));
        QCOMPARE(out->ranks.size(), size_t(2));
        QCOMPARE(out->ranks[1].clockOffsetNs, TimeNs(1000));
        QCOMPARE(out->ranks[1].pid, int64_t(101));
        QCOMPARE(out->lanes.size(), size_t(4));
        QCOMPARE(out->lanes[3].kind, LaneKind::Comm);
        QCOMPARE(out->lanes[3].rank, 1);
        QCOMPARE(out->steps.size(), size_t(6));
        QCOMPARE(out->steps[2].loss, 1.0 / 3);
        QCOMPARE(out->buckets.size(), size_t(2));
        QCOMPARE(out->buckets[1].params, (std::vector<std::string>{"fc1.bias", "fc1.weight"}));
        QCOMPARE(out->spans.size(), in.spans.size());
        for (size_t i = 0; i < in.spans.size(); ++i) {
            const Span& a = in.spans[i];
            const Span& b = out->spans[i];
            QCOMPARE(b.start, a.start);
            QCOMPARE(b.end, a.end);
            QCOMPARE(b.lane, a.lane);
            QCOMPARE(b.kind, a.kind);
            QCOMPARE(b.step, a.step);
            QCOMPARE(b.bucket, a.bucket);
            QCOMPARE(b.bytes, a.bytes);
            QCOMPARE(out->strings.text(b.name), in.strings.text(a.name));
        }
        QCOMPARE(out->instants.size(), in.instants.size());
        QCOMPARE(out->strings.text(out->instants[1].name), std::string("fc1.weight"));
        QCOMPARE(out->diagnostics.size(), size_t(1));
        QCOMPARE(out->diagnostics[0].count, int64_t(2));
        QCOMPARE(out->diagnostics[0].severity, Severity::Info);
    }

    void loadCorrectsClocks()
    {
        const Run in = makeRun(2, 2);
        const std::string path = file("clocks.db");
        QVERIFY(saveRun(in, path).has_value());
        auto out = loadRun(path);
        QVERIFY(out.has_value());
        QVERIFY(out->clocksCorrected);
        // makeRun puts rank 1's clock 1000 ns behind: after correction both ranks' steps align.
        QCOMPARE(out->steps[0].start, kBase);
        QCOMPARE(out->steps[2].rank, 1);
        QCOMPARE(out->steps[2].start, kBase);
        const auto [lo, hi] = out->laneSpanRange(LaneId{2});
        QVERIFY(hi > lo);
        QCOMPARE(out->spans[lo].start, kBase - 500'000); // the setup span, corrected
        QCOMPARE(out->instants.back().ts % 1000, in.instants.front().ts % 1000);
        // Saving a corrected run stores zero offsets, so a reload does not correct twice.
        QVERIFY(saveRun(*out, file("clocks2.db")).has_value());
        auto again = loadRun(file("clocks2.db"));
        QVERIFY(again.has_value());
        QCOMPARE(again->steps[2].start, kBase);
    }

    void createNewRefusesAnExistingFile()
    {
        const std::string path = file("exists.db");
        QVERIFY(saveRun(makeRun(1, 1), path).has_value());
        const QByteArray before = fileHash(QString::fromStdString(path));
        auto w = RunWriter::create(path, RunConfig{});
        QVERIFY(!w.has_value());
        QVERIFY(w.error().message.find("already exists") != std::string::npos);
        QCOMPARE(fileHash(QString::fromStdString(path)), before);
        QVERIFY(saveRun(makeRun(2, 1), path, RunWriter::Mode::Overwrite).has_value());
        QCOMPARE(loadRun(path)->ranks.size(), size_t(2));
    }

    void diagnosticsAreSummedByKind()
    {
        auto w = RunWriter::create(file("diag.db"), RunConfig{});
        QVERIFY(w.has_value());
        QVERIFY((*w)->addDiagnostic({"malformed event", Severity::Warning, 3, "first"}).has_value());
        QVERIFY((*w)->addDiagnostic({"malformed event", Severity::Warning, 4, "second"}).has_value());
        QVERIFY((*w)->addDiagnostic({"replica drift", Severity::Error, 1, ""}).has_value());
        // Kinds are a closed list (core/diagnostics.h): an unknown one is refused.
        QVERIFY(!(*w)->addDiagnostic({"misplaced end event", Severity::Warning, 1, ""}).has_value());
        QVERIFY((*w)->close().has_value());
        auto r = RunReader::open(file("diag.db"));
        QVERIFY(r.has_value());
        auto d = (*r)->diagnostics();
        QVERIFY(d.has_value());
        QCOMPARE(d->size(), size_t(2));
        QCOMPARE((*d)[0].kind, std::string("malformed event"));
        QCOMPARE((*d)[0].count, int64_t(7));
        QCOMPARE((*d)[0].message, std::string("first"));
        QCOMPARE((*d)[1].severity, Severity::Error);
    }

    // Run's invariant: spans sorted by (lane, start, end), even when equal starts were
    // appended in another order and lanes interleave in a batch.
    void loadKeepsTheSpanOrderInvariant()
    {
        auto w = RunWriter::create(file("order.db"), RunConfig{});
        QVERIFY(w.has_value());
        const LaneId a = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
        const LaneId b = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Comm});
        const std::vector<Span> spans = {
            {kBase + 5, kBase + 9, 0, b, StringId{0}, kNoStep, kNoBucket, SpanKind::Comm},
            {kBase, kBase + 30, 0, a, StringId{0}, kNoStep, kNoBucket, SpanKind::Forward},
            {kBase, kBase + 10, 0, a, StringId{0}, kNoStep, kNoBucket, SpanKind::Forward},
            {kBase + 1, kBase + 2, 0, b, StringId{0}, kNoStep, kNoBucket, SpanKind::Comm},
            {kBase, kBase + 20, 0, a, StringId{0}, kNoStep, kNoBucket, SpanKind::Forward},
        };
        QVERIFY((*w)->appendSpans(spans).has_value());
        QVERIFY((*w)->close().has_value());
        auto run = loadRun(file("order.db"));
        QVERIFY(run.has_value());
        QCOMPARE(run->spans.size(), size_t(5));
        const std::vector<TimeNs> ends = {kBase + 10, kBase + 20, kBase + 30, kBase + 2, kBase + 9};
        for (size_t i = 0; i < ends.size(); ++i)
            QCOMPARE(run->spans[i].end, ends[i]);
        QCOMPARE(run->laneSpanRange(b), std::make_pair(size_t(3), size_t(5)));
    }

    // seq makes the key (lane, start_ns, seq) unique: 0 for a new start, counting equal starts,
    // and a fallback counter for spans older than the lane's last start, also after the file is
    // reopened for appending. Every span must land (no constraint error, none overwritten) and
    // equal starts must keep their append order in seq.
    void equalAndOutOfOrderStartsKeepEverySpan()
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
            QVERIFY(w.has_value());
            const LaneId a = *(*w)->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
            for (const auto& b : batches) {
                QVERIFY((*w)->appendSpans(make(b, a)).has_value());
                QVERIFY((*w)->commit().has_value());
            }
            QVERIFY((*w)->close().has_value());
        }
        {
            auto w = RunWriter::openExisting(path);
            QVERIFY2(w.has_value(), w ? "" : w.error().message.c_str());
            auto st = (*w)->appendSpans(make(afterReopen, LaneId{0}));
            QVERIFY2(st.has_value(), st ? "" : st.error().message.c_str());
            QVERIFY((*w)->close().has_value());
        }
        QCOMPARE(pragmaInt(path, "SELECT count(*) FROM spans"), int64_t(all.size()));
        // Within each start, seq order is append order (durations increase).
        QCOMPARE(pragmaInt(path, "SELECT count(*) FROM spans a JOIN spans b ON a.lane = b.lane AND "
                                 "a.start_ns = b.start_ns AND a.seq < b.seq AND a.dur_ns > b.dur_ns"),
                 int64_t(0));
        const std::string seqAt100 = "SELECT max(seq) FROM spans WHERE start_ns = " + std::to_string(kBase + 100);
        QCOMPARE(pragmaInt(path, seqAt100.c_str()), int64_t(2));
        auto run = loadRun(path);
        QVERIFY(run.has_value());
        QVERIFY(sameSpans(run->spans, all));
        auto reader = RunReader::open(path);
        QVERIFY(reader.has_value());
        for (TimeNs t0 : {0, 50, 199, 300, 350}) {
            auto got = (*reader)->spansInWindow(LaneId{0}, kBase + t0, kBase + t0 + 60);
            QVERIFY(got.has_value());
            QVERIFY(sameSpans(*got, bruteWindow(all, LaneId{0}, kBase + t0, kBase + t0 + 60)));
        }
    }

    void writerRejectsUnknownLanes()
    {
        auto w = RunWriter::create(file("badlane.db"), RunConfig{});
        QVERIFY(w.has_value());
        const Span s{kBase, kBase + 1, 0, LaneId{5}, StringId{0}, 0, kNoBucket, SpanKind::Forward};
        auto st = (*w)->appendSpans(std::span(&s, 1));
        QVERIFY(!st.has_value());
        QVERIFY(st.error().message.find("lane 5") != std::string::npos);
        QVERIFY((*w)->close().has_value());
        QVERIFY2(!(*w)->addStep(Step{}).has_value(), "a closed writer refuses, never crashes");
        QVERIFY(!(*w)->commit().has_value());
        QVERIFY(!RunWriter::create(str(m_dir.path()), RunConfig{}, RunWriter::Mode::Overwrite).has_value());
        QVERIFY(QFileInfo(m_dir.path()).isDir());
    }

    // The recorder's pattern: a step's row commits with its spans; spans of the next step may
    // commit before that step's row. A reader sees step 0 only until step 1's row commits, and
    // a reader holding a read transaction does not block the writer's commits.
    void liveReaderSeesCommittedStepsOnly()
    {
        const std::string path = file("live.db");
        auto w = RunWriter::create(path, RunConfig{.name = "live", .worldSize = 1});
        QVERIFY(w.has_value());
        RunWriter& writer = **w;
        QVERIFY(writer.addRank(RankInfo{.rank = 0}).has_value());
        const LaneId lane = *writer.addLane(Lane{.rank = 0, .kind = LaneKind::Compute, .name = "compute"});
        const StringId fwd = writer.intern("forward");
        const Span s0{kBase, kBase + 10, 0, lane, fwd, 0, kNoBucket, SpanKind::Forward};
        const Span setup{kBase - 100, kBase - 50, 0, lane, fwd, kNoStep, kNoBucket, SpanKind::Other};
        QVERIFY(writer.appendSpans(std::vector<Span>{setup, s0}).has_value());
        QVERIFY(writer.addStep(Step{0, 0, kBase, kBase + 20, 0.5, 4}).has_value());
        const Span s1{kBase + 30, kBase + 40, 0, lane, writer.intern("next step's data"), 1, kNoBucket, SpanKind::DataLoad};
        QVERIFY(writer.appendSpans(std::span(&s1, 1)).has_value());
        QVERIFY(writer.appendInstants(std::vector<Instant>{{kBase + 35, lane, fwd, 1, 0, InstantKind::GradReady}}).has_value());
        QVERIFY(writer.commit().has_value());

        auto reader = RunReader::open(path);
        QVERIFY2(reader.has_value(), reader ? "" : reader.error().message.c_str());
        auto run = (*reader)->load();
        QVERIFY(run.has_value());
        QCOMPARE(run->steps.size(), size_t(1));
        QCOMPARE(run->spans.size(), size_t(2)); // setup (no step) + step 0
        QCOMPARE(run->instants.size(), size_t(0));
        // The window query is the raw file: it shows the uncommitted step's span too.
        QCOMPARE((*reader)->spansInWindow(lane, kBase, kBase + 100)->size(), size_t(2));

        // A raw reader holding a read transaction open (as load() does while it reads).
        sqlite3* raw = nullptr;
        QCOMPARE(sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
        QCOMPARE(sqlite3_exec(raw, "BEGIN; SELECT count(*) FROM spans;", nullptr, nullptr, nullptr), SQLITE_OK);
        QVERIFY(writer.addStep(Step{0, 1, kBase + 20, kBase + 50, 0.4, 4}).has_value());
        QVERIFY2(writer.commit().has_value(), "a reader must not block the writer");
        sqlite3_exec(raw, "COMMIT", nullptr, nullptr, nullptr);
        sqlite3_close(raw);

        run = (*reader)->load();
        QVERIFY(run.has_value());
        QCOMPARE(run->steps.size(), size_t(2));
        QCOMPARE(run->spans.size(), size_t(3));
        QCOMPARE(run->instants.size(), size_t(1));
        QCOMPARE(run->strings.text(run->spans.back().name), std::string("next step's data"));
        QVERIFY(writer.close().has_value());
    }

    // A writer thread records 150 steps (each commit: the step's own spans, its row, and the
    // next step's early spans) while this thread loads again and again: every snapshot holds
    // whole steps 0..n-1 only, with exactly their 100 spans each.
    void concurrentLoadsSeeWholeSteps()
    {
        const std::string path = file("concurrent.db");
        auto created = RunWriter::create(path, RunConfig{.name = "concurrent"});
        QVERIFY(created.has_value());
        std::unique_ptr<RunWriter> writer = std::move(*created);
        QVERIFY(writer->addRank(RankInfo{.rank = 0}).has_value());
        const LaneId lane = *writer->addLane(Lane{.rank = 0, .kind = LaneKind::Compute});
        const auto spansOf = [&](int step, TimeNs base) {
            std::vector<Span> v;
            for (int k = 0; k < 50; ++k)
                v.push_back(Span{base + k * 10, base + k * 10 + 5, 0, lane, StringId{0}, step, kNoBucket, SpanKind::Forward});
            return v;
        };
        constexpr int kSteps = 150;
        QVERIFY(writer->appendSpans(spansOf(0, kBase)).has_value()); // step 0's early spans
        QVERIFY(writer->commit().has_value());
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
        QVERIFY(reader.has_value());
        QVERIFY2(writerError.empty(), writerError.c_str());
        QVERIFY2(consistent, "a snapshot held a partial step");
        QVERIFY(snapshots > 0);
        QVERIFY(writer->close().has_value());
        auto final = (*reader)->load();
        QVERIFY(final.has_value());
        QCOMPARE(final->steps.size(), size_t(kSteps));
        QCOMPARE(final->spans.size(), size_t(100 * kSteps)); // step kSteps' early spans stay hidden
    }

    // A recorder that dies mid-run (here: a child process that _exit()s without closing) leaves
    // its WAL behind; the committed steps are still readable and mergeable, the open step not.
    void crashedWriterLeavesReadableSteps()
    {
        const std::string path = file("crashed.db");
        const pid_t pid = fork();
        QVERIFY(pid >= 0);
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
        QCOMPARE(waitpid(pid, &status, 0), pid);
        QVERIFY(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        QVERIFY(QFileInfo::exists(QString::fromStdString(path + "-wal")));
        QVERIFY2(validateRunFile(path).has_value(), validateRunFile(path) ? "" : validateRunFile(path).error().message.c_str());
        auto run = loadRun(path);
        QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
        QCOMPARE(run->config.status, RunStatus::Running);
        QCOMPARE(run->steps.size(), size_t(1));
        QCOMPARE(run->spans.size(), size_t(1));
        QCOMPARE(run->strings.text(run->spans[0].name), std::string("fwd"));
        auto stats = mergeRunFiles({path}, file("crashed_merged.db"));
        QVERIFY2(stats.has_value(), stats ? "" : stats.error().message.c_str());
        QCOMPARE(stats->steps, 1);
        QCOMPARE(stats->spans, int64_t(1));
    }

    void windowQueryMatchesBruteForce()
    {
        const std::string path = file("window.db");
        auto w = RunWriter::create(path, RunConfig{});
        QVERIFY(w.has_value());
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
        QVERIFY((*w)->appendSpans(std::span(all).first(3000)).has_value());
        QVERIFY((*w)->commit().has_value());
        QVERIFY((*w)->appendSpans(std::span(all).subspan(3000)).has_value());
        QVERIFY((*w)->close().has_value());
        auto reader = RunReader::open(path);
        QVERIFY(reader.has_value());
        QCOMPARE(*(*reader)->spanCount(), int64_t(all.size()));
        for (int q = 0; q < 300; ++q) {
            const LaneId lane = lanes[q % 3];
            const TimeNs t0 = kBase + static_cast<TimeNs>(rng() % 1'900'000);
            const TimeNs t1 = t0 + static_cast<TimeNs>(rng() % 50'000);
            auto got = (*reader)->spansInWindow(lane, t0, t1);
            QVERIFY(got.has_value());
            QVERIFY(std::is_sorted(got->begin(), got->end(),
                                   [](const Span& a, const Span& b) { return a.start < b.start; }));
            QVERIFY2(sameSpans(*got, bruteWindow(all, lane, t0, t1)), qPrintable(QString("window %1").arg(q)));
        }
        QVERIFY((*reader)->spansInWindow(lanes[0], kBase, kBase)->empty());
    }

    // A file written with the version-1 DDL: readable as is (max duration computed on the fly,
    // the file untouched), migrated to version 2 (max_dur_ns backfilled) when opened to write.
    void versionOneFileIsReadThenMigrated()
    {
        const std::string path = file("v1.db");
        {
            sqlite3* db = nullptr;
            QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
            QVERIFY(schema::createOrMigrate(db, 1).has_value());
            const char* fill =
                "INSERT INTO strings (id, text) VALUES (1, 'op');"
                "INSERT INTO ranks (rank, host) VALUES (0, 'old');"
                "INSERT INTO lanes (id, rank, kind, name) VALUES (0, 0, 'host_thread', 't0'), (1, 0, 'compute', 'c');"
                "INSERT INTO steps (rank, step, start_ns, end_ns, samples) VALUES (0, 0, 0, 100000, 4);"
                "INSERT INTO spans (lane, kind, name, start_ns, dur_ns, step, bucket, bytes, seq) VALUES"
                " (0, 10, 1, 1000, 100, 0, -1, 0, 0), (0, 10, 1, 2000, 50000, 0, -1, 0, 1),"
                " (0, 10, 1, 60000, 10, 0, -1, 0, 2), (1, 1, 1, 10, 20, 0, -1, 0, 3);";
            QCOMPARE(sqlite3_exec(db, fill, nullptr, nullptr, nullptr), SQLITE_OK);
            sqlite3_close(db);
        }
        QCOMPARE(pragmaInt(path, "PRAGMA user_version"), int64_t(1));
        const QString qpath = QString::fromStdString(path);
        const QByteArray before = fileHash(qpath);
        {
            auto reader = RunReader::open(path);
            QVERIFY2(reader.has_value(), reader ? "" : reader.error().message.c_str());
            QCOMPARE((*reader)->schemaVersion(), 1);
            // [40000, 41000) lies inside the long span [2000, 52000): found only because the
            // lower bound is widened by the lane's longest span.
            auto w = (*reader)->spansInWindow(LaneId{0}, 40000, 41000);
            QVERIFY(w.has_value());
            QCOMPARE(w->size(), size_t(1));
            QCOMPARE(w->front().start, TimeNs(2000));
            auto run = (*reader)->load();
            QVERIFY(run.has_value());
            QCOMPARE(run->spans.size(), size_t(4));
            QCOMPARE(run->ranks[0].host, std::string("old"));
        }
        QVERIFY(validateRunFile(path).has_value());
        QCOMPARE(fileHash(qpath), before);
        QVERIFY(!QFileInfo::exists(qpath + "-wal"));
        QVERIFY(!QFileInfo::exists(qpath + "-shm"));

        {
            auto w = RunWriter::openExisting(path);
            QVERIFY2(w.has_value(), w ? "" : w.error().message.c_str());
            const Span s{70000, 70500, 0, LaneId{1}, (*w)->intern("op"), 0, kNoBucket, SpanKind::Forward};
            QVERIFY((*w)->appendSpans(std::span(&s, 1)).has_value());
            QVERIFY((*w)->close().has_value());
        }
        QCOMPARE(pragmaInt(path, "PRAGMA user_version"), int64_t(2));
        QCOMPARE(pragmaInt(path, "SELECT max_dur_ns FROM lanes WHERE id = 0"), int64_t(50000));
        QCOMPARE(pragmaInt(path, "SELECT max_dur_ns FROM lanes WHERE id = 1"), int64_t(500));
        QCOMPARE(pragmaInt(path, "SELECT count(*) FROM strings"), int64_t(2)); // "op" reused
        auto reader = RunReader::open(path);
        QVERIFY(reader.has_value());
        QCOMPARE((*reader)->schemaVersion(), 2);
        auto w = (*reader)->spansInWindow(LaneId{0}, 40000, 41000);
        QCOMPARE(w->size(), size_t(1));
        QCOMPARE(w->front().end, TimeNs(52000));
        QCOMPARE((*reader)->spansInWindow(LaneId{0}, 52000, 59000)->size(), size_t(0));
        QCOMPARE(*(*reader)->spanCount(), int64_t(5));
    }
};

QTEST_GUILESS_MAIN(TestRunDb)
#include "test_run_db.moc"
