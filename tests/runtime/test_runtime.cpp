// The runtime, tested through the worker processes it ships as (`$LOCKSTEP_CLI worker`):
//  - exactness: N ranks on B/N samples each end K steps with the parameters one process gets
//    on the full batch B (N = 2, 4; several bucket caps; accumulation; transformer + AdamW;
//    convnet), and every rank holds bit-identical parameters;
//  - fp16/bf16 wire compression stays close to the exact result and keeps replicas identical;
//  - a recorded 2-rank run: every step, span kind, gradient-ready instant and bucket all-reduce
//    is in each shard, with clock offsets and the replica check;
//  - fault injection at the worker: a crashed rank makes its peer fail fast with a cause and a
//    failed shard that keeps the completed steps; straggler and link emulation show up;
//  - bad input gives a clear error and a non-zero exit, never a hang.
#include "lockstep/core/analysis.h"
#include "lockstep/core/run_db.h"
#include "lockstep/rt/worker.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <vector>

using namespace lockstep;

namespace {

QString cli() { return QString::fromLocal8Bit(qgetenv("LOCKSTEP_CLI")); }

int freePort()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    const int port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}

struct RankResult {
    int exitCode = -1;
    bool finished = false;
    QString output;
};

// Starts `world` worker processes with torchrun's environment and waits for all of them.
std::vector<RankResult> runRanks(int world, const QStringList& args, int timeoutMs = 90000)
{
    const int port = freePort();
    std::vector<std::unique_ptr<QProcess>> procs;
    for (int r = 0; r < world; ++r) {
        auto p = std::make_unique<QProcess>();
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        if (world > 1) {
            env.insert("RANK", QString::number(r));
            env.insert("WORLD_SIZE", QString::number(world));
            env.insert("LOCAL_RANK", QString::number(r));
            env.insert("LOCAL_WORLD_SIZE", QString::number(world));
            env.insert("MASTER_ADDR", "127.0.0.1");
            env.insert("MASTER_PORT", QString::number(port));
        } else {
            for (const char* k : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS"})
                env.remove(k);
        }
        p->setProcessEnvironment(env);
        p->setProcessChannelMode(QProcess::MergedChannels);
        p->start(cli(), QStringList{"worker"} + args + QStringList{"--threads", "1"});
        procs.push_back(std::move(p));
    }
    std::vector<RankResult> out(world);
    for (int r = 0; r < world; ++r) {
        out[r].finished = procs[r]->waitForFinished(timeoutMs);
        if (!out[r].finished) {
            procs[r]->kill();
            procs[r]->waitForFinished(5000);
        }
        out[r].exitCode = procs[r]->exitCode();
        out[r].output = QString::fromLocal8Bit(procs[r]->readAll());
    }
    return out;
}

std::vector<float> readFloats(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray b = f.readAll();
    std::vector<float> v(b.size() / sizeof(float));
    std::memcpy(v.data(), b.constData(), v.size() * sizeof(float));
    return v;
}

QString dump(const QString& base, int rank) { return base + ".rank" + QString::number(rank); }

void requireAllDone(const std::vector<RankResult>& rs)
{
    for (size_t r = 0; r < rs.size(); ++r) {
        QVERIFY2(rs[r].finished, qPrintable(QString("rank %1 hung:\n%2").arg(r).arg(rs[r].output)));
        QVERIFY2(rs[r].exitCode == 0, qPrintable(QString("rank %1 exit %2:\n%3").arg(r).arg(rs[r].exitCode).arg(rs[r].output)));
        QVERIFY(rs[r].output.contains(QString("LOCKSTEP done rank=%1").arg(r)));
    }
}

} // namespace

class TestRuntime : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void exactness_data();
    void exactness();
    void compression_data();
    void compression();
    void recordedShards();
    void crashedPeerFailsFast();
    void stragglerAndSlowLink();
    void underTorchrun();
    void badInput();
    void rankValueParsing();
};

void TestRuntime::initTestCase()
{
    QVERIFY2(QFile::exists(cli()), "LOCKSTEP_CLI must name the lockstep binary");
}

void TestRuntime::exactness_data()
{
    QTest::addColumn<int>("world");
    QTest::addColumn<QStringList>("model");
    QTest::addColumn<QString>("firstBucketMb");
    QTest::addColumn<QString>("bucketMb");
    QTest::addColumn<int>("accumulate");
    const QStringList mlp{"--model", "mlp", "--layers", "3", "--width", "48"};
    // Caps: one bucket per tensor (tiny), a few buckets, everything in one bucket (defaults).
    QTest::newRow("mlp N=2 tiny buckets") << 2 << mlp << "0.001" << "0.001" << 1;
    QTest::newRow("mlp N=2 small buckets") << 2 << mlp << "0.01" << "0.02" << 1;
    QTest::newRow("mlp N=2 default buckets") << 2 << mlp << "1" << "25" << 1;
    QTest::newRow("mlp N=4 small buckets") << 4 << mlp << "0.01" << "0.02" << 1;
    QTest::newRow("mlp N=4 default buckets") << 4 << mlp << "1" << "25" << 1;
    QTest::newRow("mlp N=2 accumulate 2") << 2 << mlp << "0.01" << "0.02" << 2;
    QTest::newRow("transformer adamw N=2") << 2
        << QStringList{"--model", "transformer", "--layers", "2", "--width", "32", "--heads", "4", "--seq", "8",
                       "--optimizer", "adamw", "--lr", "0.001"}
        << "0.01" << "0.05" << 1;
    QTest::newRow("convnet N=2") << 2 << QStringList{"--model", "convnet", "--layers", "1", "--width", "8"} << "0.001"
                                 << "0.002" << 1;
}

// The seeds' identity: averaging the gradients of N shards of a batch equals the gradient of
// the whole batch, so N replicas that start equal (rank 0's broadcast; each rank initializes
// with its own seed) and apply the same update stay equal to one process on the full batch.
void TestRuntime::exactness()
{
    QFETCH(int, world);
    QFETCH(QStringList, model);
    QFETCH(QString, firstBucketMb);
    QFETCH(QString, bucketMb);
    QFETCH(int, accumulate);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const int perRank = 4;
    QStringList common = model + QStringList{"--steps", "4", "--no-record", "--quiet", "--seed", "7",
                                             "--dataset-size", "256"};
    if (!model.contains("--lr"))
        common += QStringList{"--lr", "0.05"};
    // Reference: one process, the whole batch (all ranks' micro-batches of a step at once).
    const QString ref = dir.filePath("ref.bin");
    auto r1 = runRanks(1, common + QStringList{"--batch", QString::number(perRank * world * accumulate),
                                                 "--dump-params", ref});
    requireAllDone(r1);
    const QString par = dir.filePath("par.bin");
    auto rn = runRanks(world, common + QStringList{"--batch", QString::number(perRank), "--accumulate",
                                                   QString::number(accumulate), "--first-bucket-mb", firstBucketMb,
                                                   "--bucket-mb", bucketMb, "--dump-params", par, "--check-every", "2"});
    requireAllDone(rn);
    const auto expected = readFloats(ref);
    QVERIFY(expected.size() > 100);
    const auto rank0 = readFloats(dump(par, 0));
    QCOMPARE(rank0.size(), expected.size());
    double maxDiff = 0, maxAbs = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
        maxDiff = std::max(maxDiff, std::fabs(double(rank0[i]) - double(expected[i])));
        maxAbs = std::max(maxAbs, std::fabs(double(expected[i])));
    }
    QVERIFY2(maxDiff <= 2e-5 * std::max(1.0, maxAbs), qPrintable(QString("max |diff| %1").arg(maxDiff)));
    // Training moved the parameters (a reducer that dropped gradients would fail above too,
    // but only if the reference moved).
    for (int r = 1; r < world; ++r) {
        const auto other = readFloats(dump(par, r));
        QCOMPARE(other.size(), rank0.size());
        QVERIFY2(std::memcmp(other.data(), rank0.data(), rank0.size() * sizeof(float)) == 0,
                 qPrintable(QString("rank %1 differs from rank 0").arg(r)));
        QVERIFY(!rn[r].output.contains("drift"));
    }
}

void TestRuntime::compression_data()
{
    QTest::addColumn<QString>("compress");
    QTest::newRow("fp16") << "fp16";
    QTest::newRow("bf16") << "bf16";
}

void TestRuntime::compression()
{
    QFETCH(QString, compress);
    QTemporaryDir dir;
    const QStringList common{"--model", "mlp", "--layers", "2", "--width", "32", "--steps", "3", "--no-record",
                             "--quiet", "--dataset-size", "256", "--lr", "0.05"};
    const QString ref = dir.filePath("ref.bin");
    requireAllDone(runRanks(1, common + QStringList{"--batch", "8", "--dump-params", ref}));
    const QString par = dir.filePath("par.bin");
    requireAllDone(runRanks(2, common + QStringList{"--batch", "4", "--compress", compress, "--first-bucket-mb",
                                                    "0.002", "--bucket-mb", "0.004", "--dump-params", par}));
    const auto expected = readFloats(ref);
    const auto a = readFloats(dump(par, 0));
    const auto b = readFloats(dump(par, 1));
    QCOMPARE(a.size(), expected.size());
    QCOMPARE(b.size(), expected.size());
    QVERIFY(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    double maxDiff = 0;
    for (size_t i = 0; i < a.size(); ++i)
        maxDiff = std::max(maxDiff, std::fabs(double(a[i]) - double(expected[i])));
    // Rounded gradients: close to the exact run, but not equal to it.
    QVERIFY2(maxDiff < 5e-3, qPrintable(QString("max |diff| %1").arg(maxDiff)));
    QVERIFY2(maxDiff > 0, "compression had no effect");
}

void TestRuntime::recordedShards()
{
    QTemporaryDir dir;
    const int steps = 5;
    auto rs = runRanks(2, {"--model", "mlp", "--layers", "3", "--width", "64", "--batch", "8", "--steps",
                           QString::number(steps), "--first-bucket-mb", "0.01", "--bucket-mb", "0.01", "--out-dir",
                           dir.path(), "--run-name", "rt-test", "--check-every", "2"});
    requireAllDone(rs);
    for (int r = 0; r < 2; ++r) {
        QVERIFY(rs[r].output.contains(QString("LOCKSTEP step=%1 rank=%2 loss=").arg(steps - 1).arg(r)));
        auto run = core::loadRun(dir.filePath(QString("rank-%1.db").arg(r)).toStdString());
        QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
        QCOMPARE(run->config.status, core::RunStatus::Completed);
        QCOMPARE(run->config.worldSize, 2);
        QCOMPARE(run->config.model, std::string("mlp"));
        QCOMPARE(run->config.backend, std::string("gloo"));
        QCOMPARE(run->config.firstBucketCapBytes, int64_t(0.01 * 1024 * 1024));
        QCOMPARE(run->config.name, std::string("rt-test"));
        QVERIFY(run->config.commandLine.find("worker") != std::string::npos);
        QCOMPARE(int(run->ranks.size()), 1);
        QCOMPARE(run->ranks[0].rank, r);
        if (r == 1) {
            QVERIFY(run->ranks[0].clockRttNs > 0);
            QVERIFY(run->ranks[0].clockSyncEndNs > run->ranks[0].clockSyncStartNs);
        }
        QCOMPARE(int(run->steps.size()), steps);
        // Reverse order, 10 KiB caps: {head.*, layer2.*}, {layer1.*}, {layer0.*} (a 64x64 weight is 16 KiB).
        QCOMPARE(int(run->buckets.size()), 3);
        int64_t bucketParams = 0;
        for (const auto& b : run->buckets)
            bucketParams += int64_t(b.params.size());
        QCOMPARE(bucketParams, int64_t(8));
        // The last layer's parameters are in bucket 0 (reverse registration order).
        QVERIFY(run->buckets[0].params[0].rfind("head.", 0) == 0);
        std::map<core::SpanKind, int> kinds;
        std::map<int, int> commPerStep;
        for (const auto& s : run->spans) {
            ++kinds[s.kind];
            QVERIFY(s.end >= s.start);
            QVERIFY(s.step >= 0 && s.step < steps);
            if (s.kind == core::SpanKind::Comm) {
                ++commPerStep[s.step];
                QVERIFY(s.bucket >= 0 && s.bucket < int(run->buckets.size()));
                QCOMPARE(s.bytes, run->buckets[s.bucket].bytes);
                QCOMPARE(run->lanes[s.lane.v].kind, core::LaneKind::Comm);
            }
        }
        QCOMPARE(kinds[core::SpanKind::DataLoad], steps);
        QCOMPARE(kinds[core::SpanKind::Forward], steps * 4); // layer0..2 + head
        QVERIFY(kinds[core::SpanKind::Backward] >= steps * 4);
        QCOMPARE(kinds[core::SpanKind::Wait], steps);
        QCOMPARE(kinds[core::SpanKind::Optimizer], steps);
        for (int s = 0; s < steps; ++s)
            QCOMPARE(commPerStep[s], int(run->buckets.size()));
        QCOMPARE(int(run->instants.size()), steps * 8);
        for (const auto& in : run->instants)
            QCOMPARE(in.kind, core::InstantKind::GradReady);
        // Per step: the all-reduces launch in bucket order, after that bucket's gradients.
        for (const auto& st : run->steps) {
            QVERIFY(st.end > st.start);
            QVERIFY(std::isfinite(st.loss));
            QCOMPARE(st.samples, int64_t(8));
        }
        bool checked = false;
        for (const auto& d : run->diagnostics) {
            if (d.kind == "replica check")
                checked = d.count == 2;
            QVERIFY(d.kind != "replica drift");
        }
        QVERIFY(checked);
    }
    // The merged run analyses: two ranks, every step, buckets with durations.
    const QString merged = dir.filePath("run.db");
    auto m = core::mergeRunFiles({dir.filePath("rank-0.db").toStdString(), dir.filePath("rank-1.db").toStdString()},
                                 merged.toStdString());
    QVERIFY2(m.has_value(), m ? "" : m.error().message.c_str());
    auto run = core::loadRun(merged.toStdString());
    QVERIFY(run.has_value());
    const auto summary = core::summarize(*run);
    QCOMPARE(summary.worldSize, 2);
    QCOMPARE(summary.steps, steps);
    QVERIFY(summary.stepTimeMs > 0);
    QVERIFY(summary.commMs > 0);
    QVERIFY(summary.computeMs > 0);
    QCOMPARE(int(summary.buckets.size()), int(run->buckets.size()));
}

void TestRuntime::crashedPeerFailsFast()
{
    QTemporaryDir dir;
    QElapsedTimer t;
    t.start();
    auto rs = runRanks(2, {"--model", "mlp", "--layers", "2", "--width", "32", "--batch", "4", "--steps", "50",
                           "--crash", "1:3", "--timeout-s", "20", "--out-dir", dir.path()},
                       60000);
    QVERIFY(rs[0].finished && rs[1].finished);
    QCOMPARE(rs[1].exitCode, 3);
    QVERIFY(rs[0].exitCode != 0);
    QVERIFY2(rs[0].output.contains("LOCKSTEP failed rank=0 cause=step 3: "), qPrintable(rs[0].output));
    for (int r = 0; r < 2; ++r) {
        auto run = core::loadRun(dir.filePath(QString("rank-%1.db").arg(r)).toStdString());
        QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
        QVERIFY(run->steps.size() >= 3); // steps 0..2 completed on both ranks
        for (int s = 0; s < 3; ++s)
            QCOMPARE(run->steps[s].step, s);
        if (r == 0) {
            QCOMPARE(run->config.status, core::RunStatus::Failed);
            QVERIFY(!run->config.failureCause.empty());
        }
    }
}

void TestRuntime::stragglerAndSlowLink()
{
    QTemporaryDir dir;
    const QStringList common{"--model", "mlp", "--layers", "2", "--width", "64", "--batch", "4", "--steps", "8",
                             "--warmup", "2", "--first-bucket-mb", "0.01", "--bucket-mb", "0.02"};
    const QString sdir = dir.filePath("straggler");
    // 16 steps (14 steady): a run straggler must be late in enough steady steps that chance
    // cannot explain it (core/src/stragglers.cpp), so one stalled step does not hide it.
    QStringList longer = common;
    longer[longer.indexOf("--steps") + 1] = "16";
    requireAllDone(runRanks(2, longer + QStringList{"--straggler", "1:30", "--out-dir", sdir}));
    std::vector<std::string> shards{QDir(sdir).filePath("rank-0.db").toStdString(),
                                    QDir(sdir).filePath("rank-1.db").toStdString()};
    QVERIFY(core::mergeRunFiles(shards, QDir(sdir).filePath("run.db").toStdString()).has_value());
    auto run = core::loadRun(QDir(sdir).filePath("run.db").toStdString());
    QVERIFY(run.has_value());
    QCOMPARE(run->config.extra["straggler"].substr(0, 2), std::string("1:"));
    const auto report = core::stragglers(*run);
    QCOMPARE(report.stragglers, std::vector<int32_t>{1});

    const QString ldir = dir.filePath("link");
    requireAllDone(runRanks(2, common + QStringList{"--link-gbps", "0.01", "--out-dir", ldir}));
    auto slow = core::loadRun(QDir(ldir).filePath("rank-0.db").toStdString());
    QVERIFY(slow.has_value());
    QCOMPARE(slow->config.linkGbps, 0.01);
    // 0.01 Gbit/s: every bucket of ~10-20 KiB takes >= 8 ms on the emulated link.
    for (const auto& s : slow->spans)
        if (s.kind == core::SpanKind::Comm)
            QVERIFY(s.duration() >= static_cast<core::TimeNs>(s.bytes * 8 / 0.01));
}

// The worker runs unchanged under Debian's torchrun, whose agent hosts the rendezvous store.
void TestRuntime::underTorchrun()
{
    if (!QFile::exists("/usr/bin/python3"))
        QSKIP("no /usr/bin/python3 (Debian's python3-torch) on this machine");
    QTemporaryDir dir;
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start("/usr/bin/python3", {"-m", "torch.distributed.run", "--no_python", "--nproc_per_node", "2",
                                 "--master_port", QString::number(freePort()), "--log_dir", dir.filePath("logs"),
                                 "-r", "1", "-t", "1", cli(), "worker", "--model", "mlp", "--layers", "2", "--width",
                                 "32", "--batch", "4", "--steps", "3", "--threads", "1", "--out-dir", dir.path()});
    QVERIFY(p.waitForFinished(90000));
    const QString out = QString::fromLocal8Bit(p.readAll());
    if (p.exitCode() != 0 && out.contains("No module named torch"))
        QSKIP("Debian's python3-torch is not installed");
    QVERIFY2(p.exitCode() == 0, qPrintable(out));
    for (int r = 0; r < 2; ++r) {
        auto run = core::loadRun(dir.filePath(QString("rank-%1.db").arg(r)).toStdString());
        QVERIFY2(run.has_value(), qPrintable(out));
        QCOMPARE(run->config.status, core::RunStatus::Completed);
        QCOMPARE(run->config.worldSize, 2);
        QCOMPARE(int(run->steps.size()), 3);
        QCOMPARE(run->ranks[0].rank, r);
    }
}

void TestRuntime::badInput()
{
    {
        QProcess p;
        p.start(cli(), {"worker", "--model", "resnet9000"});
        QVERIFY(p.waitForFinished(30000));
        QVERIFY(p.exitCode() != 0);
    }
    {
        QProcess p;
        p.start(cli(), {"worker", "--straggler", "one:fifty", "--no-record"});
        QVERIFY(p.waitForFinished(30000));
        QVERIFY(p.exitCode() != 0);
        QVERIFY(p.readAllStandardError().contains("--straggler"));
    }
    {
        // A world of two without a rendezvous address: a clear failure, no hang.
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("WORLD_SIZE", "2");
        env.insert("RANK", "0");
        env.remove("MASTER_ADDR");
        env.remove("MASTER_PORT");
        p.setProcessEnvironment(env);
        p.start(cli(), {"worker", "--no-record", "--steps", "1"});
        QVERIFY(p.waitForFinished(30000));
        QVERIFY(p.exitCode() != 0);
        const QByteArray out = p.readAllStandardOutput();
        QVERIFY(out.contains("LOCKSTEP failed rank=0 cause="));
        QVERIFY(out.contains("WORLD_SIZE > 1 needs MASTER_ADDR"));
    }
    {
        // A transformer whose width does not split into heads.
        QProcess p;
        p.start(cli(), {"worker", "--model", "transformer", "--width", "30", "--heads", "4", "--no-record"});
        QVERIFY(p.waitForFinished(30000));
        QVERIFY(p.exitCode() != 0);
        QVERIFY(p.readAllStandardOutput().contains("multiple of --heads"));
    }
}

void TestRuntime::rankValueParsing()
{
    int r = -1;
    double v = 0;
    QVERIFY(rt::parseRankValue("1:50", &r, &v));
    QCOMPARE(r, 1);
    QCOMPARE(v, 50.0);
    QVERIFY(rt::parseRankValue("3:2.5", &r, &v));
    QCOMPARE(v, 2.5);
    QVERIFY(!rt::parseRankValue("1", &r, &v));
    QVERIFY(!rt::parseRankValue(":5", &r, &v));
    QVERIFY(!rt::parseRankValue("a:5", &r, &v));
    QVERIFY(!rt::parseRankValue("1:5x", &r, &v));
    QVERIFY(!rt::parseRankValue("-1:5", &r, &v));
}

QTEST_GUILESS_MAIN(TestRuntime)
#include "test_runtime.moc"
