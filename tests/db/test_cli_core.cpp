// The `lockstep` CLI's report, export and merge sub-commands, run as a process (LOCKSTEP_CLI).
#include "db_test_util.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <rapidjson/document.h>

using namespace lockstep::core;
using namespace dbtest;

namespace {
struct Outcome {
    int exitCode = -1;
    QByteArray out;
    QByteArray err;
};
} // namespace

class TestCliCore : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString m_cli;

    Outcome runCli(const QStringList& args)
    {
        QProcess p;
        p.start(m_cli, args);
        if (!p.waitForFinished(60'000)) {
            p.kill();
            p.waitForFinished();
        }
        return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
                p.readAllStandardError()};
    }

private slots:
    void initTestCase()
    {
        m_cli = qEnvironmentVariable("LOCKSTEP_CLI");
        if (m_cli.isEmpty())
            m_cli = QStringLiteral(LOCKSTEP_BINARY_DIR "/app/lockstep");
        QVERIFY2(QFileInfo(m_cli).isExecutable(), qPrintable("no lockstep binary at " + m_cli));
        QVERIFY(saveRun(makeRun(2, 6), str(m_dir.filePath("run.db"))).has_value());
    }

    void helpForEachCommand()
    {
        const std::pair<const char*, const char*> cases[] = {
            {"report", "--json"}, {"export", "--chrome"}, {"merge", "--out"}};
        for (const auto& [cmd, option] : cases) {
            const Outcome o = runCli({cmd, "--help"});
            QCOMPARE(o.exitCode, 0);
            QVERIFY2(o.out.contains(option), o.out.constData());
        }
    }

    void badFilesFailWithAMessage()
    {
        QFile text(m_dir.filePath("notes.txt"));
        QVERIFY(text.open(QIODevice::WriteOnly));
        text.write("hello\n");
        text.close();
        for (const QString& f : {m_dir.filePath("notes.txt"), m_dir.filePath("missing.db")}) {
            const Outcome r = runCli({"report", f});
            QVERIFY(r.exitCode != 0);
            QVERIFY2(r.err.contains("lockstep:"), r.err.constData());
            QVERIFY(r.out.isEmpty());
            const Outcome e = runCli({"export", f, "--chrome", m_dir.filePath("x.json")});
            QVERIFY(e.exitCode != 0);
            QVERIFY(!QFileInfo::exists(m_dir.filePath("x.json")));
        }
        QVERIFY(runCli({"report", m_dir.filePath("notes.txt")}).err.contains("not a Lockstep run database"));
        QVERIFY(runCli({"export", m_dir.filePath("run.db")}).exitCode != 0); // --chrome is required
    }

    void exportWritesATrace()
    {
        const QString out = m_dir.filePath("trace.json");
        const Outcome o = runCli({"export", m_dir.filePath("run.db"), "--chrome", out});
        QVERIFY2(o.exitCode == 0, o.err.constData());
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray json = f.readAll();
        rapidjson::Document doc;
        doc.Parse(json.constData(), static_cast<size_t>(json.size()));
        QVERIFY(!doc.HasParseError());
        int complete = 0;
        for (const auto& e : doc["traceEvents"].GetArray())
            complete += std::string(e["ph"].GetString()) == "X";
        QCOMPARE(complete, 2 * (1 + 6 * 6) + 2 * 6); // the spans, then each rank's 6 steps
    }

    void mergeShards()
    {
        const QString a = m_dir.filePath("rank0.db");
        const QString b = m_dir.filePath("rank1.db");
        QVERIFY(saveRun(makeRun(1, 4, 0, 2), str(a)).has_value());
        QVERIFY(saveRun(makeRun(1, 4, 1, 2), str(b)).has_value());
        const QString out = m_dir.filePath("merged.db");
        Outcome o = runCli({"merge", b, a, "--out", out});
        QVERIFY2(o.exitCode == 0, o.err.constData());
        auto run = loadRun(str(out));
        QVERIFY(run.has_value());
        QCOMPARE(run->config.worldSize, 2);
        QCOMPARE(run->steps.size(), size_t(8));
        o = runCli({"merge", a, b, "--out", out});
        QVERIFY(o.exitCode != 0);
        QVERIFY(o.err.contains("already exists"));
        o = runCli({"merge", a, b, "--out", out, "--force"});
        QCOMPARE(o.exitCode, 0);
    }

    void reportJsonHasTheKeys()
    {
        const Outcome o = runCli({"report", m_dir.filePath("run.db"), "--json"});
        QVERIFY2(o.exitCode == 0, o.err.constData());
        rapidjson::Document doc;
        doc.Parse(o.out.constData(), static_cast<size_t>(o.out.size()));
        QVERIFY2(!doc.HasParseError() && doc.IsObject(), o.out.constData());
        for (const char* key : {"world_size", "bucket_cap_bytes", "steps", "step_time_ms", "compute_ms", "comm_ms",
                                "overlap_ratio", "exposed_comm_ms", "idle_ms", "stragglers", "buckets"})
            QVERIFY2(doc.HasMember(key), key);
        QCOMPARE(doc["world_size"].GetInt(), 2);
        QCOMPARE(doc["bucket_cap_bytes"].GetInt64(), int64_t(4096));
        const Outcome text = runCli({"report", m_dir.filePath("run.db")});
        QCOMPARE(text.exitCode, 0);
        QVERIFY(!text.out.isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestCliCore)
#include "test_cli_core.moc"
