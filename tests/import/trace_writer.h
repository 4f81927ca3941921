// Small helpers the import tests use to write traces: Kineto-style JSON events, gzip files and
// nsys-like SQLite exports. Shared by tests/import and bench/import.
#pragma once

#include <sqlite3.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace lockstep::testing {

inline void writeFile(const std::string& path, const std::string& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline bool writeGzip(const std::string& path, const std::string& bytes)
{
    gzFile f = gzopen(path.c_str(), "wb6");
    if (!f)
        return false;
    const bool ok = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size());
    return gzclose(f) == Z_OK && ok;
}

inline std::string gzipBytes(const std::string& bytes)
{
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&zs, bytes.size()) + 64, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs.avail_in = static_cast<uInt>(bytes.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

// One complete ("X") event; `args` is the JSON text inside args {...} (may be empty).
inline std::string xEvent(const std::string& cat, const std::string& name, double tsUs, double durUs,
                          const std::string& pid, const std::string& tid, const std::string& args = {})
{
    char ts[64], dur[64];
    std::snprintf(ts, sizeof ts, "%.3f", tsUs);
    std::snprintf(dur, sizeof dur, "%.3f", durUs);
    std::string e = "{\"ph\": \"X\", ";
    if (!cat.empty())
        e += "\"cat\": \"" + cat + "\", ";
    e += "\"name\": \"" + name + "\", \"pid\": " + pid + ", \"tid\": " + tid + ", \"ts\": " + ts + ", \"dur\": " + dur;
    if (!args.empty())
        e += ", \"args\": {" + args + "}";
    return e + "}";
}

inline std::string joinEvents(const std::vector<std::string>& events)
{
    std::string s;
    for (size_t i = 0; i < events.size(); ++i)
        s += (i ? ",\n" : "") + events[i];
    return s;
}

// The object form Kineto writes: metadata, traceEvents, then trailer keys.
inline std::string objectTrace(const std::vector<std::string>& events, const std::string& head = {},
                               const std::string& tail = {})
{
    std::string s = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"Fake GPU\"}],\n";
    if (!head.empty())
        s += "  " + head + ",\n";
    s += "  \"traceEvents\": [\n" + joinEvents(events) + "\n  ]";
    if (!tail.empty())
        s += ",\n  " + tail;
    s += ",\n  \"traceName\": \"x.json\"\n}\n";
    return s;
}

inline std::string arrayTrace(const std::vector<std::string>& events) { return "[" + joinEvents(events) + "]"; }

// An Nsight Systems-like SQLite export. Mirrors these tables/columns of `nsys export --type
// sqlite` (Nsight Systems 2023.x): StringIds(id, value); CUPTI_ACTIVITY_KIND_KERNEL(start, end,
// deviceId, contextId, streamId, correlationId, globalPid, demangledName, shortName, gridX);
// CUPTI_ACTIVITY_KIND_MEMCPY(start, end, deviceId, contextId, streamId, correlationId, globalPid,
// bytes, copyKind); CUPTI_ACTIVITY_KIND_MEMSET(start, end, deviceId, contextId, streamId,
// correlationId, globalPid, value, bytes); CUPTI_ACTIVITY_KIND_RUNTIME(start, end, eventClass,
// globalTid, correlationId, nameId, returnValue); NVTX_EVENTS(start, end, eventType, rangeId,
// category, color, text, globalTid, endGlobalTid, textId, domainId);
// TARGET_INFO_SESSION_START_TIME(utcEpochNs, utcTime, localTime). Times are ns since the
// session start. A device row's correlationId names the runtime call that launched it.
class NsysWriter {
public:
    explicit NsysWriter(const std::string& path)
    {
        std::remove(path.c_str());
        sqlite3_open(path.c_str(), &m_db);
        exec("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)");
        exec("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER "
             "NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
             "demangledName INTEGER NOT NULL REFERENCES StringIds(id), shortName INTEGER NOT NULL REFERENCES "
             "StringIds(id), gridX INTEGER)");
        exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER "
             "NOT NULL, contextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes "
             "INTEGER NOT NULL, copyKind INTEGER)");
        exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER "
             "NOT NULL, contextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value "
             "INTEGER, bytes INTEGER NOT NULL)");
        exec("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId "
             "INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId "
             "INTEGER REFERENCES StringIds(id), domainId INTEGER)");
        exec("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass "
             "INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER)");
        exec("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)");
        exec("BEGIN");
    }
    ~NsysWriter() { close(); }
    void close()
    {
        if (m_db) {
            exec("COMMIT");
            sqlite3_close(m_db);
            m_db = nullptr;
        }
    }
    void exec(const std::string& sql) { sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, nullptr); }
    int64_t string(const std::string& s)
    {
        const int64_t id = m_nextString++;
        exec("INSERT INTO StringIds VALUES (" + std::to_string(id) + ", '" + s + "')");
        return id;
    }
    void sessionStart(int64_t utcNs)
    {
        exec("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (" + std::to_string(utcNs) + ", '', '')");
    }
    // Device rows; `correlation` names the runtime call that launched them (0: none).
    void kernel(int64_t start, int64_t end, int device, int stream, const std::string& name, int64_t correlation = 0)
    {
        const int64_t id = string(name);
        exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + std::to_string(start) + "," + std::to_string(end) + ","
             + std::to_string(device) + ",1," + std::to_string(stream) + "," + std::to_string(correlation) + ",0,"
             + std::to_string(id) + "," + std::to_string(id) + ",1)");
    }
    void memcpy(int64_t start, int64_t end, int device, int stream, int64_t bytes, int64_t correlation = 0)
    {
        exec("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (" + std::to_string(start) + "," + std::to_string(end) + ","
             + std::to_string(device) + ",1," + std::to_string(stream) + "," + std::to_string(correlation) + ",0,"
             + std::to_string(bytes) + ",1)");
    }
    void memset(int64_t start, int64_t end, int device, int stream, int64_t bytes, int64_t correlation = 0)
    {
        exec("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (" + std::to_string(start) + "," + std::to_string(end) + ","
             + std::to_string(device) + ",1," + std::to_string(stream) + "," + std::to_string(correlation) + ",0,0,"
             + std::to_string(bytes) + ")");
    }
    // A CUDA runtime call on the host (cudaLaunchKernel, cudaMemcpyAsync, ...).
    void runtime(int64_t start, int64_t end, int64_t correlation, int64_t globalTid)
    {
        exec("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (" + std::to_string(start) + "," + std::to_string(end)
             + ",1," + std::to_string(globalTid) + "," + std::to_string(correlation) + ",0,0)");
    }
    // NVTX push/pop range (eventType 59); text inline, or through StringIds when byId.
    void range(int64_t start, int64_t end, const std::string& text, int64_t globalTid, bool byId = false)
    {
        const std::string t = byId ? "NULL" : "'" + text + "'";
        const std::string tid = byId ? std::to_string(string(text)) : "NULL";
        exec("INSERT INTO NVTX_EVENTS VALUES (" + std::to_string(start) + "," + std::to_string(end) + ",59,0,0,0," + t
             + "," + std::to_string(globalTid) + "," + std::to_string(globalTid) + "," + tid + ",0)");
    }

private:
    sqlite3* m_db = nullptr;
    int64_t m_nextString = 1;
};

} // namespace lockstep::testing
