// Files that are not (usable) run databases: each is refused by validateRunFile, RunReader::open
// (or, for damage only a full read can see, by load) and RunWriter::openExisting with a message
// that names the problem, and the file is left byte for byte as it was, with no -wal/-shm beside it.
#include "db_test_util.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>

using namespace lockstep::core;
using namespace dbtest;

class TestBadFiles : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;

    QString path(const char* name) const { return m_dir.filePath(name); }

    static void write(const QString& p, const QByteArray& bytes)
    {
        QFile f(p);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        QCOMPARE(f.write(bytes), qint64(bytes.size()));
    }

    QString goodRun(const char* name, int steps = 400)
    {
        const QString p = path(name);
        const auto s = saveRun(makeRun(2, steps), str(p), RunWriter::Mode::Overwrite);
        return s ? p : QString();
    }

    // Every entry point refuses `p` with a message containing `expected`; nothing changes on disk.
    void expectRefused(const QString& p, const char* expected)
    {
        const bool existed = QFileInfo::exists(p);
        const QByteArray before = existed ? fileHash(p) : QByteArray();
        const qint64 sizeBefore = QFileInfo(p).size();

        auto v = validateRunFile(str(p));
        QVERIFY2(!v.has_value(), "validateRunFile accepted a bad file");
        QVERIFY2(v.error().message.find(expected) != std::string::npos, v.error().message.c_str());
        QVERIFY2(v.error().message.find(str(p)) != std::string::npos, "the message names the file");

        auto r = RunReader::open(str(p));
        QVERIFY2(!r.has_value(), "RunReader::open accepted a bad file");
        QVERIFY2(r.error().message.find(expected) != std::string::npos, r.error().message.c_str());

        auto l = loadRun(str(p));
        QVERIFY(!l.has_value());

        auto w = RunWriter::openExisting(str(p));
        QVERIFY2(!w.has_value(), "RunWriter::openExisting accepted a bad file");

        QCOMPARE(QFileInfo::exists(p), existed);
        if (existed) {
            QCOMPARE(QFileInfo(p).size(), sizeBefore);
            QCOMPARE(fileHash(p), before);
        }
        QVERIFY2(!QFileInfo::exists(p + "-wal"), "a -wal file was left behind");
        QVERIFY2(!QFileInfo::exists(p + "-shm"), "a -shm file was left behind");
        QVERIFY(!QFileInfo::exists(p + "-journal"));
    }

private slots:
    void missingFile() { expectRefused(path("nope.db"), "no such file"); }

    void directory()
    {
        QVERIFY(QDir(m_dir.path()).mkdir("adir"));
        expectRefused(path("adir"), "directory");
    }

    void emptyFile()
    {
        write(path("empty.db"), {});
        expectRefused(path("empty.db"), "empty");
    }

    void textFile()
    {
        write(path("notes.db"), "step,loss\n0,2.3\n1,2.1\n");
        expectRefused(path("notes.db"), "not an SQLite file");
    }

    void foreignSqliteDatabase()
    {
        for (const char* mode : {"DELETE", "WAL"}) {
            const QString p = path(qPrintable(QString("foreign_%1.db").arg(mode)));
            sqlite3* db = nullptr;
            QCOMPARE(sqlite3_open(str(p).c_str(), &db), SQLITE_OK);
            const std::string sql = std::string("PRAGMA journal_mode=") + mode
                + "; CREATE TABLE spans (a, b); INSERT INTO spans VALUES (1, 2);";
            QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
            QCOMPARE(sqlite3_close(db), SQLITE_OK);
            expectRefused(p, "not a Lockstep run database");
        }
    }

    void truncatedRunDatabase()
    {
        const QString p = goodRun("truncated.db");
        QVERIFY(!p.isEmpty());
        QFile f(p);
        QVERIFY(f.resize(f.size() / 2));
        expectRefused(p, "corrupt or truncated");
    }

    void truncatedHeader()
    {
        const QString p = goodRun("tiny.db", 1);
        QFile f(p);
        QVERIFY(f.resize(60));
        expectRefused(p, "corrupt or truncated");
    }

    // Garbage over pages in the middle: the header and size are fine, so only reading the pages
    // finds it. validateRunFile does (quick_check); RunReader::open stays cheap and load()
    // reports it with the same words.
    void corruptedRunDatabase()
    {
        const QString p = goodRun("corrupt.db");
        QVERIFY(!p.isEmpty());
        QFile f(p);
        QVERIFY(f.open(QIODevice::ReadWrite));
        const qint64 size = f.size();
        QVERIFY(size > 64 * 1024);
        QVERIFY(f.seek((size / 2) & ~qint64(8191)));
        QByteArray junk(3 * 8192, '\0');
        for (int i = 0; i < junk.size(); ++i)
            junk[i] = static_cast<char>((i * 7919 + 13) & 0xff);
        QCOMPARE(f.write(junk), qint64(junk.size()));
        f.close();
        const QByteArray before = fileHash(p);

        auto v = validateRunFile(str(p));
        QVERIFY(!v.has_value());
        QVERIFY2(v.error().message.find("corrupt or truncated") != std::string::npos, v.error().message.c_str());
        auto l = loadRun(str(p));
        QVERIFY(!l.has_value());
        QVERIFY2(l.error().message.find("corrupt") != std::string::npos, l.error().message.c_str());
        QCOMPARE(fileHash(p), before);
        QVERIFY(!QFileInfo::exists(p + "-wal"));
        QVERIFY(!QFileInfo::exists(p + "-shm"));
    }

    void newerSchemaVersion()
    {
        const QString p = goodRun("newer.db", 2);
        QVERIFY(!p.isEmpty());
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(str(p).c_str(), &db), SQLITE_OK);
        QCOMPARE(sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA user_version = 99;", nullptr, nullptr, nullptr), SQLITE_OK);
        QCOMPARE(sqlite3_close(db), SQLITE_OK);
        expectRefused(p, "newer");
        auto v = validateRunFile(str(p));
        QVERIFY(v.error().message.find("99") != std::string::npos);
    }

    // The control: a good file passes every check (so the cases above fail for their reason).
    void goodFilePasses()
    {
        const QString p = goodRun("good.db", 5);
        const QByteArray before = fileHash(p);
        QVERIFY(validateRunFile(str(p)).has_value());
        auto run = loadRun(str(p));
        QVERIFY(run.has_value());
        QCOMPARE(run->steps.size(), size_t(10));
        QCOMPARE(fileHash(p), before);
        QVERIFY(!QFileInfo::exists(p + "-wal"));
    }
};

QTEST_GUILESS_MAIN(TestBadFiles)
#include "test_bad_files.moc"
