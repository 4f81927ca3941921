// Merging rank shards into one run database, and the Chrome trace export parsed back.
#include "db_test_util.h"

#include "lockstep/core/chrome_export.h"

#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <rapidjson/document.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

using namespace lockstep::core;
using namespace dbtest;

class TestMergeExport : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    std::string file(const QString& name) const { return str(m_dir.filePath(name)); }

private slots:
    void mergeShards_data()
    {
        QTest::addColumn<int>("shards");
        QTest::newRow("2 shards") << 2;
        QTest::newRow("3 shards") << 3;
        QTest::newRow("4 shards") << 4;
    }

    // One shard per rank, given out of order; each shard its own strings and lane numbering
    // (differently ordered strings to make re-interning matter) and its own diagnostics.
    void mergeShards()
    {
        QFETCH(int, shards);
        std::vector<std::string> paths;
        for (int i = shards - 1; i >= 0; --i) {
            Run shard = makeRun(1, 3, i, shards);
            if (i % 2) {
                // Shift string ids: intern extra strings first in a fresh table.
                Run shifted = shard;
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
            paths.push_back(file(QString("s%1_%2.db").arg(shards).arg(i)));
            QVERIFY(saveRun(shard, paths.back()).has_value());
        }
        const std::string out = file(QString("merged%1.db").arg(shards));
        auto stats = mergeRunFiles(paths, out);
        QVERIFY2(stats.has_value(), stats ? "" : stats.error().message.c_str());
        QCOMPARE(stats->ranks, shards);
        QCOMPARE(stats->steps, 3 * shards);
        QCOMPARE(stats->spans, int64_t(19 * shards));
        QCOMPARE(stats->instants, int64_t(6 * shards));

        auto merged = loadRun(out, LoadOptions{.correctClocks = false});
        QVERIFY(merged.has_value());
        QCOMPARE(merged->config.worldSize, shards);
        QCOMPARE(merged->config.name, std::string("shard 0")); // lowest rank's shard
        QCOMPARE(merged->config.status, shards > 2 ? RunStatus::Failed : RunStatus::Completed);
        if (shards > 2)
            QCOMPARE(merged->config.failureCause, std::string("rank 1: collective timed out"));
        QCOMPARE(merged->ranks.size(), size_t(shards));
        QCOMPARE(merged->lanes.size(), size_t(2 * shards));
        QCOMPARE(merged->buckets.size(), size_t(2));
        QCOMPARE(merged->diagnostics.size(), size_t(1));
        QCOMPARE(merged->diagnostics[0].count, int64_t(2 * shards));
        for (int r = 0; r < shards; ++r) {
            QCOMPARE(merged->ranks[static_cast<size_t>(r)].clockOffsetNs, TimeNs(1000 * r));
            // Each rank's compute lane holds its setup span and 4 per step, names intact.
            const Run expected = makeRun(1, 3, r, shards);
            int lanesOfRank = 0;
            for (const Lane& l : merged->lanes) {
                if (l.rank != r)
                    continue;
                ++lanesOfRank;
                const auto [lo, hi] = merged->laneSpanRange(l.id);
                const LaneId src{l.kind == LaneKind::Compute ? 0u : 1u};
                const auto [elo, ehi] = expected.laneSpanRange(src);
                QCOMPARE(hi - lo, ehi - elo);
                for (size_t k = 0; k < hi - lo; ++k) {
                    QCOMPARE(merged->spans[lo + k].start, expected.spans[elo + k].start);
                    QCOMPARE(merged->strings.text(merged->spans[lo + k].name),
                             expected.strings.text(expected.spans[elo + k].name));
                }
            }
            QCOMPARE(lanesOfRank, 2);
        }
        // The merged file is a run database like any other: merging it again is refused for
        // the duplicate ranks, and CreateNew refuses the existing output.
        QVERIFY(!mergeRunFiles({out, paths.front()}, file(QString("again%1.db").arg(shards))).has_value());
        QVERIFY(!mergeRunFiles(paths, out).has_value());
        QVERIFY(mergeRunFiles(paths, out, RunWriter::Mode::Overwrite).has_value());
    }

    void mergeRefusesBadInput()
    {
        auto none = mergeRunFiles({}, file("none.db"));
        QVERIFY(!none.has_value());
        const std::string a = file("dup_a.db");
        const std::string b = file("dup_b.db");
        QVERIFY(saveRun(makeRun(1, 1, 0), a).has_value());
        QVERIFY(saveRun(makeRun(1, 1, 0), b).has_value());
        auto dup = mergeRunFiles({a, b}, file("dup.db"));
        QVERIFY(!dup.has_value());
        QVERIFY2(dup.error().message.find("rank 0") != std::string::npos, dup.error().message.c_str());
        auto missing = mergeRunFiles({a, file("missing.db")}, file("m.db"));
        QVERIFY(!missing.has_value());
        QVERIFY(missing.error().message.find("no such file") != std::string::npos);
    }

    void chromeTraceParsesBack()
    {
        const Run run = makeRun(2, 2);
        std::ostringstream os;
        QVERIFY(writeChromeTrace(run, os).has_value());
        rapidjson::Document doc;
        doc.Parse(os.str().c_str());
        QVERIFY2(!doc.HasParseError(), "the export is valid JSON");
        QVERIFY(doc.IsObject() && doc.HasMember("traceEvents") && doc["traceEvents"].IsArray());
        // The same text with numbers kept as their literal strings.
        rapidjson::Document raw;
        raw.Parse<rapidjson::kParseNumbersAsStringsFlag>(os.str().c_str());
        QVERIFY(!raw.HasParseError());
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
                QCOMPARE(std::string(e["s"].GetString()), std::string("t"));
                QVERIFY(e["args"].HasMember("bucket"));
            }
        }
        QCOMPARE(phases["X"], int(run.spans.size() + run.steps.size())); // spans, then each rank's steps
        QCOMPARE(phases["i"], int(run.instants.size()));
        QCOMPARE(processNames.size(), size_t(2));
        QCOMPARE(processNames[1], std::string("rank 1 (node1)"));
        QCOMPARE(threadNames.size(), size_t(4 + 2)); // the lanes and a "steps" thread per rank
        QCOMPARE(threadNames[std::make_pair(1, 3)], std::string("comm"));
        QCOMPARE(threadNames[std::make_pair(0, 0)], std::string("compute"));

        // Spans come out in the run's order; check every field against the source, including
        // ns precision kept as fractional microseconds (400'123 ns -> 400.123 us).
        for (size_t i = 0; i < run.spans.size(); ++i) {
            const Span& s = run.spans[i];
            const rapidjson::Value& e = *complete[i];
            QCOMPARE(e["pid"].GetInt(), run.lanes[s.lane.v].rank);
            QCOMPARE(e["tid"].GetUint(), s.lane.v);
            QCOMPARE(std::string(e["name"].GetString()), run.strings.text(s.name));
            QCOMPARE(std::llround(e["dur"].GetDouble() * 1000.0), static_cast<long long>(s.end - s.start));
            // ts at epoch magnitude exceeds a double's ns resolution: compare the exact text.
            const std::string ts = std::to_string(s.start / 1000) + "." + std::to_string(1000 + s.start % 1000).substr(1);
            QCOMPARE(std::string(raw["traceEvents"][static_cast<rapidjson::SizeType>(firstX + i)]["ts"].GetString()), ts);
            QCOMPARE(e["args"]["step"].GetInt(), s.step);
            QCOMPARE(e["args"]["bucket"].GetInt(), s.bucket);
            QCOMPARE(e["args"]["bytes"].GetInt64(), s.bytes);
            QCOMPARE(std::string(e["args"]["kind"].GetString()), std::string(spanKindName(s.kind)));
        }
        QVERIFY(os.str().find("\"dur\":200.333") != std::string::npos); // 200'333 ns all-reduce
        QVERIFY(os.str().find("setup \\\"quoted\\\"") != std::string::npos);
    }

    void chromeExportToFile()
    {
        const std::string p = file("trace.json");
        QVERIFY(exportChromeTrace(makeRun(1, 1), p).has_value());
        QVERIFY(QFileInfo(QString::fromStdString(p)).size() > 100);
        auto bad = exportChromeTrace(makeRun(1, 1), file("no/such/dir/trace.json"));
        QVERIFY(!bad.has_value());
    }
};

QTEST_GUILESS_MAIN(TestMergeExport)
#include "test_merge_export.moc"
