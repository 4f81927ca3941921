// Screenshots keep the promises of issue 9: the output is never one of the runs it shows (by
// identity: a symlink is refused too), and a screenshot that cannot be written leaves no file and
// no temporary behind. The disk is filled by a file-size limit (`ulimit -f` in a shell that then
// execs lockstep-ui): the PNG write fails as on a full disk.
#include "ui_test_support.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

using namespace lockstep;

namespace {
struct Outcome {
    int exitCode = -1;
    QString err;
};

Outcome run(const QString& program, const QStringList& args)
{
    QProcess p;
    p.start(program, args);
    if (!p.waitForFinished(120000))
        p.kill();
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardError())};
}

QByteArray bytes(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}
} // namespace

class TestUiOutputs : public QObject {
    Q_OBJECT
private slots:
    void screenshotIsNeverAnInput()
    {
        QTemporaryDir dir;
        const QString runFile = dir.filePath("run.db");
        QCOMPARE(uitest::makeRunFile(runFile, 2, 4, 3, 0.3, 25, "run"), QString());
        QVERIFY(QFile::link(runFile, dir.filePath("link.db")));
        const QByteArray before = bytes(runFile);
        for (const QString& out : {runFile, dir.filePath("link.db")}) {
            const Outcome o = run(LOCKSTEP_UI_EXE, {"--screenshot", out, "--view", "timeline", runFile});
            QVERIFY2(o.exitCode != 0, qPrintable(o.err));
            QVERIFY2(o.err.contains("is also an input"), qPrintable(o.err));
            QCOMPARE(bytes(runFile), before);
        }
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
                 (QStringList{"link.db", "run.db"}));
    }

    void aScreenshotThatCannotBeWrittenLeavesNothing()
    {
        QTemporaryDir dir;
        const QString runFile = dir.filePath("run.db");
        QCOMPARE(uitest::makeRunFile(runFile, 2, 4, 3, 0.3, 25, "run"), QString());
        const QString out = dir.filePath("shot.png");
        // 4 KiB: far less than a 1400x860 PNG of the timeline.
        const Outcome o = run("/bin/sh", {"-c", "ulimit -f 4 && exec \"$0\" \"$@\"", LOCKSTEP_UI_EXE, "--screenshot", out,
                                          "--view", "timeline", runFile});
        QVERIFY2(o.exitCode != 0, qPrintable(o.err));
        QVERIFY(!QFile::exists(out));
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot), QStringList{"run.db"});
        // The same screenshot without the limit is written: the failure above was the disk's.
        QCOMPARE(run(LOCKSTEP_UI_EXE, {"--screenshot", out, "--view", "timeline", runFile}).exitCode, 0);
        QVERIFY(QFileInfo(out).size() > 4096);
    }
};

QTEST_GUILESS_MAIN(TestUiOutputs)
#include "test_ui_outputs.moc"
