// Helpers shared by tests of the run database that look at the file with plain SQLite
// (test_run_db, test_span_blocks, test_instant_blocks): one integer read from it, a blob's bytes.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <span>
#include <string>

namespace dbtest {

inline std::span<const uint8_t> bytesOf(const std::string& s)
{
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The first column of the first row of `sql` on the file, -999 if there is none.
inline int64_t queryInt(const std::string& path, const char* sql)
{
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    int64_t v = -999;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

} // namespace dbtest
