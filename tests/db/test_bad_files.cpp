// Files that are not (usable) run databases: each is refused by validateRunFile, RunReader::open
// (or, for damage only a full read can see, by load) and RunWriter::openExisting with a message
// that names the problem, and the file is left byte for byte as it was, with no -wal/-shm beside it.
#include "db_test_util.h"

#include <gtest/gtest.h>

#include <sqlite3.h>

#include <filesystem>

using namespace lockstep::core;
using namespace dbtest;

class BadFiles : public ::testing::Test {
protected:
    lockstep::test::TempDir m_dir;

    std::string path(const char* name) const { return m_dir.file(name); }

    static void write(const std::string& p, const std::string& bytes) { lockstep::test::writeFile(p, bytes); }

    std::string goodRun(const char* name, int steps = 400)
    {
        const std::string p = path(name);
        const auto s = saveRun(makeRun(2, steps), p, RunWriter::Mode::Overwrite);
        return s ? p : std::string();
    }

    // Every entry point refuses `p` with a message containing `expected` and the code of a bad file;
    // nothing changes on disk.
    void expectRefused(const std::string& p, const char* expected)
    {
        const bool existed = exists(p);
        const std::string before = existed ? fileBytes(p) : std::string();

        auto v = validateRunFile(p);
        ASSERT_TRUE(!v.has_value()) << "validateRunFile accepted a bad file";
        ASSERT_TRUE(v.error().message.find(expected) != std::string::npos) << v.error().message.c_str();
        ASSERT_TRUE(v.error().message.find(p) != std::string::npos) << "the message names the file";
        ASSERT_EQ(v.error().code, ErrorCode::BadFile) << errorCodeName(v.error().code);

        auto r = RunReader::open(p);
        ASSERT_TRUE(!r.has_value()) << "RunReader::open accepted a bad file";
        ASSERT_TRUE(r.error().message.find(expected) != std::string::npos) << r.error().message.c_str();
        ASSERT_EQ(r.error().code, ErrorCode::BadFile) << errorCodeName(r.error().code);

        auto l = loadRun(p);
        ASSERT_TRUE(!l.has_value());
        ASSERT_EQ(l.error().code, ErrorCode::BadFile) << l.error().message;

        auto w = RunWriter::openExisting(p);
        ASSERT_TRUE(!w.has_value()) << "RunWriter::openExisting accepted a bad file";
        ASSERT_EQ(w.error().code, ErrorCode::BadFile) << w.error().message;

        ASSERT_EQ(exists(p), existed);
        if (existed) {
            ASSERT_TRUE(fileBytes(p) == before) << "the file changed";
        }
        ASSERT_TRUE(!exists(p + "-wal")) << "a -wal file was left behind";
        ASSERT_TRUE(!exists(p + "-shm")) << "a -shm file was left behind";
        ASSERT_TRUE(!exists(p + "-journal"));
    }

};

TEST_F(BadFiles, missingFile)
{
    expectRefused(path("nope.db"), "no such file");
}

TEST_F(BadFiles, directory)
{
    ASSERT_TRUE(std::filesystem::create_directory(path("adir")));
    expectRefused(path("adir"), "directory");
}

TEST_F(BadFiles, emptyFile)
{
    write(path("empty.db"), "");
    expectRefused(path("empty.db"), "empty");
}

TEST_F(BadFiles, textFile)
{
    write(path("notes.db"), "step,loss\n0,2.3\n1,2.1\n");
    expectRefused(path("notes.db"), "not an SQLite file");
}

TEST_F(BadFiles, foreignSqliteDatabase)
{
    for (const char* mode : {"DELETE", "WAL"}) {
        const std::string p = path((std::string("foreign_") + mode + ".db").c_str());
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
        const std::string sql = std::string("PRAGMA journal_mode=") + mode
            + "; CREATE TABLE spans (a, b); INSERT INTO spans VALUES (1, 2);";
        ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        ASSERT_EQ(sqlite3_close(db), SQLITE_OK);
        expectRefused(p, "not a Lockstep run database");
    }
}

TEST_F(BadFiles, truncatedRunDatabase)
{
    const std::string p = goodRun("truncated.db");
    ASSERT_FALSE(p.empty());
    std::filesystem::resize_file(p, std::filesystem::file_size(p) / 2);
    expectRefused(p, "corrupt or truncated");
}

TEST_F(BadFiles, truncatedHeader)
{
    const std::string p = goodRun("tiny.db", 1);
    std::filesystem::resize_file(p, 60);
    expectRefused(p, "corrupt or truncated");
}

// Garbage over pages in the middle: the header and size are fine, so only reading the pages
// finds it. validateRunFile does (quick_check); RunReader::open stays cheap and load()
// reports it with the same words.
TEST_F(BadFiles, corruptedRunDatabase)
{
    const std::string p = goodRun("corrupt.db");
    ASSERT_FALSE(p.empty());
    const int64_t size = int64_t(std::filesystem::file_size(p));
    ASSERT_TRUE(size > 64 * 1024);
    std::string bytes = fileBytes(p);
    const size_t at = size_t((size / 2) & ~int64_t(8191));
    for (size_t i = 0; i < 3 * 8192; ++i)
        bytes[at + i] = static_cast<char>((i * 7919 + 13) & 0xff);
    lockstep::test::writeFile(p, bytes);
    const std::string before = fileBytes(p);

    auto v = validateRunFile(p);
    ASSERT_TRUE(!v.has_value());
    ASSERT_TRUE(v.error().message.find("corrupt or truncated") != std::string::npos) << v.error().message.c_str();
    auto l = loadRun(p);
    ASSERT_TRUE(!l.has_value());
    ASSERT_TRUE(l.error().message.find("corrupt") != std::string::npos) << l.error().message.c_str();
    ASSERT_EQ(v.error().code, ErrorCode::BadFile) << v.error().message;
    ASSERT_EQ(l.error().code, ErrorCode::BadFile) << l.error().message;
    ASSERT_TRUE(fileBytes(p) == before);
    ASSERT_TRUE(!exists(p + "-wal"));
    ASSERT_TRUE(!exists(p + "-shm"));
}

TEST_F(BadFiles, newerSchemaVersion)
{
    const std::string p = goodRun("newer.db", 2);
    ASSERT_FALSE(p.empty());
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA user_version = 99;", nullptr, nullptr, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_close(db), SQLITE_OK);
    expectRefused(p, "newer");
    auto v = validateRunFile(p);
    ASSERT_TRUE(v.error().message.find("99") != std::string::npos);
}

// The control: a good file passes every check (so the cases above fail for their reason).
TEST_F(BadFiles, goodFilePasses)
{
    const std::string p = goodRun("good.db", 5);
    const std::string before = fileBytes(p);
    ASSERT_TRUE(validateRunFile(p).has_value());
    auto run = loadRun(p);
    ASSERT_TRUE(run.has_value());
    ASSERT_EQ(run->steps.size(), size_t(10));
    ASSERT_TRUE(fileBytes(p) == before);
    ASSERT_TRUE(!exists(p + "-wal"));
}


