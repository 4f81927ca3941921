// `lockstep run` and `lockstep sweep` end to end: real worker processes of the built CLI,
// real LibTorch and gloo over 127.0.0.1, real run files read back through core. Small models
// (mlp 4 x 256) and few steps keep each case to seconds.
#include "lockstep/core/analysis.h"
#include "lockstep/core/run_db.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <csignal>
#include <set>

using namespace lockstep;

namespace {

struct Outcome {
    int exitCode = -1;
    bool crashed = false;
    bool finished = false;
    QString out;
    QString err;
    qint64 ms = 0;
};

QString cli()
{
    return qEnvironmentVariable("LOCKSTEP_CLI");
}

// Every process is bounded: a hang fails the test instead of stalling CTest.
Outcome runProcess(const QString& program, const QStringList& args, int timeoutMs = 90000)
{
    Outcome o;
    QProcess p;
    QElapsedTimer timer;
    timer.start();
    p.start(program, args);
    if (!p.waitForStarted(10000)) {
        o.err = "could not start " + program;
        return o;
    }
    o.finished = p.waitForFinished(timeoutMs);
    if (!o.finished) {
        p.kill();
        p.waitForFinished(5000);
    }
    o.ms = timer.elapsed();
    o.exitCode = p.exitCode();
    o.crashed = p.exitStatus() == QProcess::CrashExit;
    o.out = QString::fromUtf8(p.readAllStandardOutput());
    o.err = QString::fromUtf8(p.readAllStandardError());
    return o;
}

Outcome lockstepCli(const QStringList& args, int timeoutMs = 90000)
{
    return runProcess(cli(), args, timeoutMs);
}

// The small, fast model every case trains.
QStringList smallModel(int steps)
{
    return {"--model", "mlp", "--layers", "4", "--width", "256", "--batch", "32", "--steps", QString::number(steps),
            "--warmup", "1", "--progress", "plain"};
}

QString describe(const Outcome& o)
{
    return QStringLiteral("exit %1%2 after %3 ms\nstdout:\n%4\nstderr:\n%5")
        .arg(o.exitCode)
        .arg(o.crashed ? " (crashed)" : "")
        .arg(o.ms)
        .arg(o.out.right(3000), o.err.right(3000));
}

core::Run load(const QString& path)
{
    auto run = core::loadRun(path.toStdString());
    if (!run)
        qWarning("cannot load %s: %s", qPrintable(path), run.error().message.c_str());
    return run ? std::move(*run) : core::Run {};
}

// The set of (rank, step) pairs present in the run.
std::set<std::pair<int, int>> stepsOf(const core::Run& run)
{
    std::set<std::pair<int, int>> out;
    for (const auto& s : run.steps)
        out.emplace(s.rank, s.step);
    return out;
}

int freePort()
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0
        && getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

// The worker processes of a launcher: children of `parent` whose environment has RANK=<rank>.
QList<qint64> childrenWithRank(qint64 parent, int rank)
{
    QList<qint64> out;
    const QStringList entries = QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    for (const QString& e : entries) {
        bool ok = false;
        const qint64 pid = e.toLongLong(&ok);
        if (!ok)
            continue;
        QFile stat("/proc/" + e + "/stat");
        if (!stat.open(QIODevice::ReadOnly))
            continue;
        const QByteArray text = stat.readAll();
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        const QList<QByteArray> fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
        if (fields.size() < 2 || fields[1].toLongLong() != parent)
            continue;
        QFile env("/proc/" + e + "/environ");
        if (env.open(QIODevice::ReadOnly) && env.readAll().split('\0').contains("RANK=" + QByteArray::number(rank)))
            out.append(pid);
    }
    return out;
}

// Starts `lockstep args...`, waits until stderr shows `marker`, calls `act(process)`, then
// waits for the end. Everything bounded.
Outcome runAndAct(const QStringList& args, const QString& marker, const std::function<void(QProcess&)>& act,
                  int timeoutMs = 90000)
{
    Outcome o;
    QProcess p;
    QElapsedTimer timer;
    timer.start();
    p.start(cli(), args);
    if (!p.waitForStarted(10000))
        return o;
    QByteArray err;
    while (!err.contains(marker.toUtf8()) && timer.elapsed() < timeoutMs && p.state() == QProcess::Running) {
        p.waitForReadyRead(200);
        err += p.readAllStandardError();
    }
    if (err.contains(marker.toUtf8()))
        act(p);
    o.finished = p.waitForFinished(int(std::max<qint64>(1000, timeoutMs - timer.elapsed())));
    if (!o.finished) {
        p.kill();
        p.waitForFinished(5000);
    }
    o.ms = timer.elapsed();
    o.exitCode = p.exitCode();
    o.crashed = p.exitStatus() == QProcess::CrashExit;
    o.out = QString::fromUtf8(p.readAllStandardOutput());
    o.err = QString::fromUtf8(err + p.readAllStandardError());
    return o;
}

} // namespace

class TestLauncher : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;

    QString path(const QString& name) const { return m_dir.filePath(name); }

    // A completed run with every step of every rank and analyses in range.
    void checkCompletedRun(const QString& file, int nproc, int steps)
    {
        const core::Run run = load(file);
        QCOMPARE(run.config.status, core::RunStatus::Completed);
        QCOMPARE(run.config.worldSize, nproc);
        QCOMPARE(int(run.ranks.size()), nproc);
        std::set<std::pair<int, int>> want;
        for (int r = 0; r < nproc; ++r)
            for (int s = 0; s < steps; ++s)
                want.emplace(r, s);
        QCOMPARE(stepsOf(run), want);
        QVERIFY(!run.buckets.empty());
        const auto breakdown = core::stepBreakdown(run);
        QCOMPARE(int(breakdown.size()), nproc * steps);
        for (const auto& b : breakdown) {
            QVERIFY2(b.compute > 0, qPrintable(QStringLiteral("rank %1 step %2: no compute").arg(b.rank).arg(b.step)));
            QVERIFY2(b.communication > 0, qPrintable(QStringLiteral("rank %1 step %2: no communication").arg(b.rank).arg(b.step)));
            QVERIFY(b.overlapRatio >= 0.0 && b.overlapRatio <= 1.0);
            QVERIFY(b.compute <= b.wall && b.communication <= b.wall);
            QCOMPARE(b.overlapped + b.exposed, b.communication);
        }
    }

private slots:
    void initTestCase()
    {
        QVERIFY2(!cli().isEmpty(), "LOCKSTEP_CLI is not set");
        QVERIFY2(QFileInfo(cli()).isExecutable(), qPrintable(cli()));
        QVERIFY(m_dir.isValid());
    }

    void helpExplainsFlags()
    {
        const Outcome run = lockstepCli({"run", "--help"});
        QCOMPARE(run.exitCode, 0);
        for (const char* word : {"--nproc", "--out", "--keep-shards", "--hang-timeout-s", "--bucket-mb", "--crash", "Example"})
            QVERIFY2(run.out.contains(word), word);
        const Outcome sweep = lockstepCli({"sweep", "--help"});
        QCOMPARE(sweep.exitCode, 0);
        QVERIFY(sweep.out.contains("--out-dir"));
        QVERIFY(sweep.out.contains("Example"));
    }

    void badInputIsRefusedBeforeStarting()
    {
        // An existing output without --force: refused, file untouched.
        const QString existing = path("existing.db");
        {
            QFile f(existing);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("not a run");
        }
        Outcome o = lockstepCli(QStringList {"run", "--nproc", "2", "--out", existing} + smallModel(2));
        QCOMPARE(o.exitCode, 2);
        QVERIFY2(o.err.contains("already exists"), qPrintable(describe(o)));
        QFile f(existing);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), QByteArray("not a run"));

        o = lockstepCli({"run", "--nproc", "2", "--out", path("x.db"), "--crash", "one:two"});
        QVERIFY(o.exitCode != 0);
        QVERIFY(o.err.contains("RANK:STEP"));
        QVERIFY(!QFileInfo::exists(path("x.db")));
        o = lockstepCli({"run", "--nproc", "0", "--out", path("x.db")});
        QVERIFY(o.exitCode != 0);
        QVERIFY(!QFileInfo::exists(path("x.db")));
    }

    void twoRanks()
    {
        const QString file = path("two.db");
        const Outcome o = lockstepCli(QStringList {"run", "--nproc", "2", "--out", file} + smallModel(6));
        qInfo("2-rank run: %lld ms", o.ms);
        QVERIFY2(o.finished && o.exitCode == 0, qPrintable(describe(o)));
        QVERIFY(o.out.contains("run file:"));
        QVERIFY2(o.err.contains("step 6/6"), qPrintable(o.err));
        checkCompletedRun(file, 2, 6);
        // The shards folder is gone unless --keep-shards.
        const QStringList left = QDir(m_dir.path()).entryList({".two.db.shards-*"}, QDir::AllEntries | QDir::Hidden);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(' ')));
    }

    void fourRanks()
    {
        const QString file = path("four.db");
        const Outcome o = lockstepCli(QStringList {"run", "--nproc", "4", "--out", file, "--keep-shards"} + smallModel(6));
        qInfo("4-rank run: %lld ms", o.ms);
        QVERIFY2(o.finished && o.exitCode == 0, qPrintable(describe(o)));
        checkCompletedRun(file, 4, 6);
        const QStringList kept = QDir(m_dir.path()).entryList({".four.db.shards-*"}, QDir::Dirs | QDir::Hidden);
        QCOMPARE(kept.size(), 1);
        QVERIFY(QFileInfo::exists(m_dir.filePath(kept.front() + "/rank-3.db")));
    }

    void underTorchrun()
    {
        const QString python = "/usr/bin/python3";
        const Outcome probe = runProcess(python, {"-c", "import torch.distributed.run"}, 60000);
        if (probe.exitCode != 0)
            QSKIP("Debian's python3-torch (torch.distributed.run) is not installed");
        const QString shards = path("torchrun-shards");
        const QString logs = path("torchrun-logs");
        QVERIFY(QDir().mkpath(shards));
        const QStringList args = QStringList {"-m", "torch.distributed.run", "--no_python", "--nproc_per_node", "2",
                                              "--master_addr", "127.0.0.1", "--master_port",
                                              QString::number(freePort()), "--log_dir", logs, "-r", "1", "-t", "1",
                                              cli(), "worker", "--out-dir", shards, "--run-name", "torchrun",
                                              "--model", "mlp", "--layers", "4", "--width", "256", "--batch", "32",
                                              "--steps", "5", "--warmup", "1"};
        const Outcome o = runProcess(python, args, 120000);
        qInfo("2-rank run under torchrun: %lld ms", o.ms);
        QVERIFY2(o.finished && o.exitCode == 0, qPrintable(describe(o)));
        const QString file = path("torchrun.db");
        const Outcome m = lockstepCli({"merge", shards + "/rank-0.db", shards + "/rank-1.db", "--out", file});
        QVERIFY2(m.exitCode == 0, qPrintable(describe(m)));
        checkCompletedRun(file, 2, 5);
    }

    void crashedRankStopsTheRun()
    {
        const QString file = path("crash.db");
        QElapsedTimer timer;
        timer.start();
        const Outcome o = lockstepCli(QStringList {"run", "--nproc", "2", "--out", file, "--crash", "1:3", "--timeout-s", "20"}
                                          + smallModel(8),
                                      60000);
        const qint64 ms = timer.elapsed();
        qInfo("crashed run ended after %lld ms", ms);
        QVERIFY2(o.finished, qPrintable(describe(o)));
        QVERIFY(o.exitCode != 0);
        // The promise in DESIGN.md: a dead rank ends the whole run within seconds, not at
        // the collective timeout or never.
        QVERIFY2(ms < 30000, qPrintable(describe(o)));
        const core::Run run = load(file);
        QCOMPARE(run.config.status, core::RunStatus::Failed);
        QVERIFY2(QString::fromStdString(run.config.failureCause).contains("rank 1"), run.config.failureCause.c_str());
        const auto steps = stepsOf(run);
        for (int r = 0; r < 2; ++r)
            for (int s = 0; s < 3; ++s)
                QVERIFY2(steps.count({r, s}), qPrintable(QStringLiteral("rank %1 step %2 missing").arg(r).arg(s)));
        QVERIFY(!steps.count({1, 3}));
        QVERIFY(o.err.contains("FAILED"));
    }

    void hungRankStopsTheRun()
    {
        // Rank 1 is frozen (SIGSTOP) after step 2: rank 0 times out in its all-reduce, the
        // launcher stops everyone, and the cause names the silent rank.
        const QString file = path("hung.db");
        qint64 stoppedAt = 0;
        QElapsedTimer timer;
        timer.start();
        const Outcome o = runAndAct(QStringList {"run", "--nproc", "2", "--out", file, "--timeout-s", "3", "--grace-s", "1"}
                                        + smallModel(400),
                                    "step 2/", [&](QProcess& p) {
                                        const auto pids = childrenWithRank(p.processId(), 1);
                                        for (qint64 pid : pids)
                                            ::kill(pid_t(pid), SIGSTOP);
                                        stoppedAt = timer.elapsed();
                                    });
        qInfo("hung rank: run ended %lld ms after rank 1 was stopped", o.ms - stoppedAt);
        QVERIFY2(stoppedAt > 0, qPrintable(describe(o)));
        QVERIFY2(o.finished && o.exitCode == 1, qPrintable(describe(o)));
        const core::Run run = load(file);
        QCOMPARE(run.config.status, core::RunStatus::Failed);
        QVERIFY2(QString::fromStdString(run.config.failureCause).contains("rank 1"), run.config.failureCause.c_str());
        const auto steps = stepsOf(run);
        QVERIFY(steps.count({0, 0}) && steps.count({0, 1}) && steps.count({1, 0}) && steps.count({1, 1}));
    }

    void interruptStopsAndKeepsSteps()
    {
        const QString file = path("interrupted.db");
        QList<qint64> workers;
        const Outcome o = runAndAct(QStringList {"run", "--nproc", "2", "--out", file} + smallModel(400), "step 2/",
                                    [&](QProcess& p) {
                                        workers = childrenWithRank(p.processId(), 0) + childrenWithRank(p.processId(), 1);
                                        ::kill(pid_t(p.processId()), SIGINT);
                                    });
        QVERIFY2(o.finished && o.exitCode == 130, qPrintable(describe(o)));
        const core::Run run = load(file);
        QCOMPARE(run.config.status, core::RunStatus::Failed);
        QCOMPARE(run.config.failureCause, std::string("interrupted"));
        const auto steps = stepsOf(run);
        QVERIFY(steps.count({0, 1}) && steps.count({1, 1}));
        // Every worker is gone with the launcher.
        QCOMPARE(workers.size(), 2);
        for (qint64 pid : workers)
            QVERIFY2(!QFileInfo::exists(QStringLiteral("/proc/%1").arg(pid)), qPrintable(QString::number(pid)));
    }

    void stragglerIsNamed()
    {
        const QString file = path("straggler.db");
        // 30 steps: a run straggler must be late in enough steady steps that chance cannot explain
        // it and stand above the others' step-to-step spread (core/src/stragglers.cpp), so a few
        // stalled steps of a busy machine (ctest -j2 beside other jobs) do not hide it.
        const Outcome o = lockstepCli(QStringList {"run", "--nproc", "2", "--out", file, "--straggler", "1:30"} + smallModel(30));
        qInfo("straggler run: %lld ms", o.ms);
        QVERIFY2(o.exitCode == 0, qPrintable(describe(o)));
        const core::Run run = load(file);
        const auto report = core::stragglers(run);
        const core::StragglerEvidence& e = report.evidence;
        QVERIFY2(report.stragglers == std::vector<int32_t> {1},
                 qPrintable(QString("candidate %1, late %2 of %3 (chance %4), wait %5%, above %6 ms, floor %7 ms")
                                .arg(e.candidate).arg(e.stepsLate).arg(e.steadySteps).arg(e.chance)
                                .arg(e.waitFraction * 100).arg(e.latenessAboveOthersNs * 1e-6).arg(e.noiseFloorNs * 1e-6)));
    }

    void slowLinkExposesMoreCommunication()
    {
        // Several small buckets so that the fast link has overlap to lose. 0.05 Gbit/s makes the
        // model's 1 MiB of gradients cost ~170 ms per step on the wire, far above the scheduling
        // noise of a loaded CI machine (tens of ms of skew between ranks).
        const QStringList buckets {"--bucket-mb", "0.25", "--first-bucket-mb", "0.25"};
        const QString fast = path("link-fast.db");
        const QString slow = path("link-slow.db");
        Outcome o = lockstepCli(QStringList {"run", "--nproc", "2", "--out", fast} + buckets + smallModel(6));
        QVERIFY2(o.exitCode == 0, qPrintable(describe(o)));
        o = lockstepCli(QStringList {"run", "--nproc", "2", "--out", slow, "--link-gbps", "0.05"} + buckets + smallModel(6));
        qInfo("slow-link run: %lld ms", o.ms);
        QVERIFY2(o.exitCode == 0, qPrintable(describe(o)));
        const core::Run slowRun = load(slow);
        QCOMPARE(slowRun.config.linkGbps, 0.05);
        const core::RunSummary a = core::summarize(load(fast));
        const core::RunSummary b = core::summarize(slowRun);
        qInfo("exposed comm %.3f -> %.3f ms/step, overlap ratio %.3f -> %.3f", a.exposedCommMs, b.exposedCommMs,
              a.overlapRatio, b.overlapRatio);
        QVERIFY(b.exposedCommMs > a.exposedCommMs);
        QVERIFY(b.commMs > a.commMs);
        // Lower or equal; 0.02 absorbs scheduling noise when both are near zero.
        QVERIFY(b.overlapRatio <= a.overlapRatio + 0.02);
    }

    void sweepTwoPoints()
    {
        const QString dir = path("sweep");
        const Outcome o = lockstepCli(QStringList {"sweep", "--nproc", "1,2", "--bucket-mb", "1", "--out-dir", dir}
                                      + smallModel(5),
                                      150000);
        qInfo("sweep of 2 points: %lld ms", o.ms);
        QVERIFY2(o.exitCode == 0, qPrintable(describe(o)));
        QVERIFY(QFileInfo::exists(dir + "/mlp-n1-b1.db"));
        QVERIFY(QFileInfo::exists(dir + "/mlp-n2-b1.db"));
        QVERIFY2(o.out.contains("mlp-n1-b1") && o.out.contains("mlp-n2-b1"), qPrintable(o.out));
        QVERIFY2(o.out.contains("weak scaling"), qPrintable(o.out));
        QCOMPARE(load(dir + "/mlp-n2-b1.db").config.worldSize, 2);
    }
};

QTEST_GUILESS_MAIN(TestLauncher)
#include "test_launcher.moc"
