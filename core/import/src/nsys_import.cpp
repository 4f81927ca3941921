// Nsight Systems SQLite export (`nsys export --type sqlite`) → RankTrace.
//
// Tables and columns read (the rest of the export is ignored):
//   StringIds(id, value)                                   names of kernels and NVTX ranges
//   CUPTI_ACTIVITY_KIND_KERNEL(start, end, deviceId, streamId, shortName|demangledName → StringIds)
//   CUPTI_ACTIVITY_KIND_MEMCPY(start, end, deviceId, streamId, bytes)
//   CUPTI_ACTIVITY_KIND_MEMSET(start, end, deviceId, streamId, bytes)
//   NVTX_EVENTS(start, end, eventType, text | textId → StringIds, globalTid)   push/pop and
//       start/end ranges: steps ("ProfilerStep#N", "step 12", ...) and host-thread spans
//   TARGET_INFO_SESSION_START_TIME(utcEpochNs)             optional: nsys times are ns since the
//       session started; adding this puts them on CLOCK_REALTIME like every other run
//   CUPTI_ACTIVITY_KIND_RUNTIME(start, correlationId)      the host's CUDA runtime calls: a
//       kernel, copy or memset belongs to the step whose window holds the start of the call
//       with its correlationId (the activity tables' correlationId column)
// Every table and column is optional except that one of the activity or NVTX tables must exist.
#include "import_internal.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace lockstep::core::detail {

std::string_view normaliseCollective(std::string_view name);

namespace {

struct Db {
    sqlite3* db = nullptr;
    ~Db()
    {
        if (db)
            sqlite3_close_v2(db);
    }
};

struct Stmt {
    sqlite3_stmt* s = nullptr;
    ~Stmt()
    {
        if (s)
            sqlite3_finalize(s);
    }
};

bool isSpace(char c) { return c == ' ' || c == '_' || c == '#' || c == ':' || c == '=' || c == '-'; }

// "ProfilerStep#12", "step 12", "train_step_12", "Step:12" → 12. Only the first "step" that is
// followed (after separators) by digits counts.
std::optional<int32_t> stepNumber(std::string_view name)
{
    for (size_t i = 0; i + 4 <= name.size(); ++i) {
        const std::string_view w = name.substr(i, 4);
        if (!(w[0] == 's' || w[0] == 'S') || !(w[1] == 't' || w[1] == 'T') || !(w[2] == 'e' || w[2] == 'E')
            || !(w[3] == 'p' || w[3] == 'P'))
            continue;
        size_t j = i + 4;
        while (j < name.size() && isSpace(name[j]))
            ++j;
        int64_t n = 0;
        size_t digits = 0;
        while (j < name.size() && name[j] >= '0' && name[j] <= '9' && digits < 10) {
            n = n * 10 + (name[j] - '0');
            ++j;
            ++digits;
        }
        if (digits > 0 && n <= INT32_MAX && (j == name.size() || !(name[j] >= '0' && name[j] <= '9')))
            return static_cast<int32_t>(n);
    }
    return std::nullopt;
}

class NsysParser {
public:
    NsysParser(sqlite3* db, Interner& strings, RankTrace& out)
        : m_db(db), m_strings(strings), m_out(out)
    {
    }
    Status run();

private:
    bool hasTable(const char* table);
    std::unordered_set<std::string> columns(const char* table);
    StringId nameOf(int64_t stringId);
    uint32_t gpuLane(int64_t device, int64_t stream);
    uint32_t hostLane(int64_t globalTid);
    Status readActivity(const char* table, SpanKind kind);
    Status readRuntime();
    Status readNvtx();
    Status sqliteError(const std::string& what)
    {
        return fail(what + ": " + sqlite3_errmsg(m_db));
    }

    sqlite3* m_db;
    Interner& m_strings;
    RankTrace& m_out;
    Stmt m_nameStmt;
    std::unordered_map<int64_t, StringId> m_names;
    std::unordered_map<int64_t, uint32_t> m_gpuLanes; // device << 32 | stream
    std::unordered_map<int64_t, uint32_t> m_hostLanes;
    std::unordered_map<int64_t, TimeNs> m_runtimeStart; // correlationId -> start of the runtime call
    int64_t m_base = 0;
};

bool NsysParser::hasTable(const char* table)
{
    Stmt st;
    if (sqlite3_prepare_v2(m_db, "SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name = ?", -1,
                           &st.s, nullptr) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st.s, 1, table, -1, SQLITE_STATIC);
    return sqlite3_step(st.s) == SQLITE_ROW;
}

std::unordered_set<std::string> NsysParser::columns(const char* table)
{
    std::unordered_set<std::string> out;
    Stmt st;
    const std::string sql = std::string("PRAGMA table_info(\"") + table + "\")";
    if (sqlite3_prepare_v2(m_db, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
        return out;
    while (sqlite3_step(st.s) == SQLITE_ROW) {
        const auto* name = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 1));
        if (name)
            out.insert(name);
    }
    return out;
}

StringId NsysParser::nameOf(int64_t stringId)
{
    auto it = m_names.find(stringId);
    if (it != m_names.end())
        return it->second;
    StringId id = m_strings.intern("?");
    bool found = false;
    if (m_nameStmt.s) {
        sqlite3_reset(m_nameStmt.s);
        sqlite3_bind_int64(m_nameStmt.s, 1, stringId);
        if (sqlite3_step(m_nameStmt.s) == SQLITE_ROW) {
            const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(m_nameStmt.s, 0));
            const int n = sqlite3_column_bytes(m_nameStmt.s, 0);
            if (text) {
                id = m_strings.intern(std::string_view(text, static_cast<size_t>(n)));
                found = true;
            }
        }
    }
    if (!found)
        m_out.diagnostics.add(DiagnosticKind::UnknownStringId);
    m_names.emplace(stringId, id);
    return id;
}

uint32_t NsysParser::gpuLane(int64_t device, int64_t stream)
{
    const int64_t key = (device << 32) ^ (stream & 0xffffffff);
    auto it = m_gpuLanes.find(key);
    if (it != m_gpuLanes.end())
        return it->second;
    RawLane lane;
    lane.kind = LaneKind::GpuStream;
    lane.device = static_cast<int32_t>(device);
    lane.stream = stream;
    lane.name = "gpu " + std::to_string(device) + " stream " + std::to_string(stream);
    const auto index = static_cast<uint32_t>(m_out.lanes.size());
    m_out.lanes.push_back(std::move(lane));
    m_gpuLanes.emplace(key, index);
    return index;
}

uint32_t NsysParser::hostLane(int64_t globalTid)
{
    auto it = m_hostLanes.find(globalTid);
    if (it != m_hostLanes.end())
        return it->second;
    // nsys packs the process id and thread id into globalTid; the low 24 bits are the tid.
    const int64_t tid = globalTid & 0xffffff;
    if (m_out.pid == 0)
        m_out.pid = (globalTid >> 24) & 0xffffff;
    RawLane lane;
    lane.kind = LaneKind::HostThread;
    lane.stream = tid;
    lane.name = "thread " + std::to_string(tid);
    const auto index = static_cast<uint32_t>(m_out.lanes.size());
    m_out.lanes.push_back(std::move(lane));
    m_hostLanes.emplace(globalTid, index);
    return index;
}

Status NsysParser::readActivity(const char* table, SpanKind kind)
{
    if (!hasTable(table))
        return {};
    const auto cols = columns(table);
    if (!cols.contains("start") || !cols.contains("end")) {
        m_out.diagnostics.add(DiagnosticKind::MalformedTable, 1, std::string(table) + " has no start/end");
        return {};
    }
    const std::string device = cols.contains("deviceId") ? "deviceId" : "0";
    const std::string stream = cols.contains("streamId") ? "streamId" : "0";
    std::string name = "NULL";
    if (kind == SpanKind::Kernel)
        name = cols.contains("shortName") ? "shortName" : cols.contains("demangledName") ? "demangledName" : "NULL";
    const std::string bytes = kind != SpanKind::Kernel && cols.contains("bytes") ? "bytes" : "0";
    const std::string correlation = cols.contains("correlationId") ? "correlationId" : "NULL";
    const std::string sql = "SELECT start, end, " + device + ", " + stream + ", " + name + ", " + bytes + ", "
        + correlation + " FROM " + table;
    Stmt st;
    if (sqlite3_prepare_v2(m_db, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
        return sqliteError(std::string("cannot read ") + table);
    const StringId memcpyName = m_strings.intern("Memcpy");
    const StringId memsetName = m_strings.intern("Memset");
    int rc = 0;
    while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
        ++m_out.events;
        if (sqlite3_column_type(st.s, 0) != SQLITE_INTEGER || sqlite3_column_type(st.s, 1) != SQLITE_INTEGER) {
            m_out.diagnostics.add(DiagnosticKind::MissingTimestamp);
            continue;
        }
        const int64_t start = sqlite3_column_int64(st.s, 0);
        const int64_t end = sqlite3_column_int64(st.s, 1);
        if (end < start) {
            m_out.diagnostics.add(DiagnosticKind::NegativeDuration);
            continue;
        }
        Span s;
        if (__builtin_add_overflow(start, m_base, &s.start) || __builtin_add_overflow(end, m_base, &s.end)) {
            m_out.diagnostics.add(DiagnosticKind::TimestampOutOfRange);
            continue;
        }
        const int64_t dev = sqlite3_column_int64(st.s, 2);
        const int64_t str = sqlite3_column_int64(st.s, 3);
        s.lane = LaneId{gpuLane(std::clamp<int64_t>(dev, -1, INT32_MAX), str)};
        s.kind = kind;
        if (kind == SpanKind::Kernel) {
            s.name = sqlite3_column_type(st.s, 4) == SQLITE_INTEGER ? nameOf(sqlite3_column_int64(st.s, 4))
                                                                      : m_strings.intern("?");
        } else {
            s.name = kind == SpanKind::Memcpy ? memcpyName : memsetName;
            s.bytes = std::max<int64_t>(0, sqlite3_column_int64(st.s, 5));
        }
        m_out.spans.push_back(s);
        TimeNs launch = kNoLaunch;
        if (sqlite3_column_type(st.s, 6) == SQLITE_INTEGER) {
            auto it = m_runtimeStart.find(sqlite3_column_int64(st.s, 6));
            if (it != m_runtimeStart.end())
                launch = it->second;
        }
        m_out.deviceLaunch.push_back({m_out.spans.size() - 1, launch});
        if (kind == SpanKind::Kernel) {
            // No collective metadata in an nsys export: the nccl kernel names are the signal.
            const std::string& text = m_strings.text(s.name);
            if (text.starts_with("nccl")) {
                m_out.spans.back().kind = SpanKind::CommKernel;
                m_out.collective.emplace(m_out.spans.size() - 1, CommMeta{m_strings.intern(normaliseCollective(text)), {}});
            }
        }
    }
    if (rc != SQLITE_DONE)
        return sqliteError(std::string("cannot read ") + table);
    return {};
}

Status NsysParser::readRuntime()
{
    const char* table = "CUPTI_ACTIVITY_KIND_RUNTIME";
    if (!hasTable(table))
        return {};
    const auto cols = columns(table);
    if (!cols.contains("start") || !cols.contains("correlationId")) {
        m_out.diagnostics.add(DiagnosticKind::MalformedTable, 1, std::string(table) + " has no start/correlationId");
        return {};
    }
    Stmt st;
    if (sqlite3_prepare_v2(m_db, "SELECT start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME", -1, &st.s, nullptr)
        != SQLITE_OK)
        return sqliteError("cannot read CUPTI_ACTIVITY_KIND_RUNTIME");
    int rc = 0;
    while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
        ++m_out.events;
        TimeNs start = 0;
        if (sqlite3_column_type(st.s, 0) != SQLITE_INTEGER || sqlite3_column_type(st.s, 1) != SQLITE_INTEGER
            || __builtin_add_overflow(sqlite3_column_int64(st.s, 0), m_base, &start))
            continue; // the device rows it would have linked are counted as without a launch record
        m_runtimeStart.emplace(sqlite3_column_int64(st.s, 1), start);
    }
    if (rc != SQLITE_DONE)
        return sqliteError("cannot read CUPTI_ACTIVITY_KIND_RUNTIME");
    return {};
}

Status NsysParser::readNvtx()
{
    if (!hasTable("NVTX_EVENTS"))
        return {};
    const auto cols = columns("NVTX_EVENTS");
    if (!cols.contains("start") || !cols.contains("end"))
        return {};
    const std::string text = cols.contains("text") ? "text" : "NULL";
    const std::string textId = cols.contains("textId") ? "textId" : "NULL";
    const std::string type = cols.contains("eventType") ? "eventType" : "59";
    const std::string tid = cols.contains("globalTid") ? "globalTid" : "0";
    const std::string sql = "SELECT start, end, " + type + ", " + text + ", " + textId + ", " + tid
        + " FROM NVTX_EVENTS ORDER BY start";
    Stmt st;
    if (sqlite3_prepare_v2(m_db, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
        return sqliteError("cannot read NVTX_EVENTS");
    std::unordered_set<int32_t> seen;
    int rc = 0;
    while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
        ++m_out.events;
        const int64_t eventType = sqlite3_column_int64(st.s, 2);
        // 59: push/pop range, 60: start/end range. Marks (34) and domain/name rows are skipped.
        if (eventType != 59 && eventType != 60)
            continue;
        if (sqlite3_column_type(st.s, 0) != SQLITE_INTEGER || sqlite3_column_type(st.s, 1) != SQLITE_INTEGER) {
            m_out.diagnostics.add(DiagnosticKind::UnmatchedBeginEnd);
            continue;
        }
        const int64_t start = sqlite3_column_int64(st.s, 0);
        const int64_t end = sqlite3_column_int64(st.s, 1);
        if (end < start) {
            m_out.diagnostics.add(DiagnosticKind::NegativeDuration);
            continue;
        }
        Span s;
        if (__builtin_add_overflow(start, m_base, &s.start) || __builtin_add_overflow(end, m_base, &s.end)) {
            m_out.diagnostics.add(DiagnosticKind::TimestampOutOfRange);
            continue;
        }
        if (sqlite3_column_type(st.s, 3) == SQLITE_TEXT) {
            const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 3));
            s.name = m_strings.intern(std::string_view(t, static_cast<size_t>(sqlite3_column_bytes(st.s, 3))));
        } else if (sqlite3_column_type(st.s, 4) == SQLITE_INTEGER) {
            s.name = nameOf(sqlite3_column_int64(st.s, 4));
        } else {
            s.name = m_strings.intern("?");
        }
        s.lane = LaneId{hostLane(sqlite3_column_int64(st.s, 5))};
        s.kind = SpanKind::Other;
        m_out.spans.push_back(s);
        if (auto n = stepNumber(m_strings.text(s.name))) {
            if (seen.insert(*n).second) {
                Step step;
                step.step = *n;
                step.start = s.start;
                step.end = s.end;
                m_out.steps.push_back(step);
            } else {
                m_out.diagnostics.add(DiagnosticKind::DuplicateStep);
            }
        }
    }
    if (rc != SQLITE_DONE)
        return sqliteError("cannot read NVTX_EVENTS");
    return {};
}

Status NsysParser::run()
{
    m_out.source = "nsys";
    sqlite3_busy_timeout(m_db, 1000);
    const bool any = hasTable("CUPTI_ACTIVITY_KIND_KERNEL") || hasTable("CUPTI_ACTIVITY_KIND_MEMCPY")
        || hasTable("CUPTI_ACTIVITY_KIND_MEMSET") || hasTable("NVTX_EVENTS");
    if (!any) {
        if (sqlite3_errcode(m_db) != SQLITE_OK && sqlite3_errcode(m_db) != SQLITE_DONE
            && sqlite3_errcode(m_db) != SQLITE_ROW)
            return sqliteError("cannot read the SQLite file");
        return fail("this SQLite file is not an Nsight Systems export: it has none of the "
                    "CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET or NVTX_EVENTS tables");
    }
    if (hasTable("StringIds"))
        sqlite3_prepare_v2(m_db, "SELECT value FROM StringIds WHERE id = ?", -1, &m_nameStmt.s, nullptr);
    if (hasTable("TARGET_INFO_SESSION_START_TIME") && columns("TARGET_INFO_SESSION_START_TIME").contains("utcEpochNs")) {
        Stmt st;
        if (sqlite3_prepare_v2(m_db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1", -1, &st.s,
                               nullptr) == SQLITE_OK
            && sqlite3_step(st.s) == SQLITE_ROW && sqlite3_column_type(st.s, 0) == SQLITE_INTEGER)
            m_base = std::max<int64_t>(0, sqlite3_column_int64(st.s, 0));
    }
    if (auto s = readRuntime(); !s)
        return s;
    if (auto s = readActivity("CUPTI_ACTIVITY_KIND_KERNEL", SpanKind::Kernel); !s)
        return s;
    if (auto s = readActivity("CUPTI_ACTIVITY_KIND_MEMCPY", SpanKind::Memcpy); !s)
        return s;
    if (auto s = readActivity("CUPTI_ACTIVITY_KIND_MEMSET", SpanKind::Memset); !s)
        return s;
    return readNvtx();
}

} // namespace

Status parseNsysFile(const std::string& path, const ImportOptions&, Interner& strings, RankTrace& out)
{
    Db db;
    if (sqlite3_open_v2(path.c_str(), &db.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
        return fail("cannot open " + path + " as SQLite: " + (db.db ? sqlite3_errmsg(db.db) : "out of memory"));
    NsysParser parser(db.db, strings, out);
    return parser.run();
}

Status parseNsysImage(std::string_view image, const ImportOptions&, Interner& strings, RankTrace& out)
{
    Db db;
    if (sqlite3_open_v2(":memory:", &db.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
        return fail("cannot open an in-memory SQLite database");
    auto* copy = static_cast<unsigned char*>(sqlite3_malloc64(image.size() ? image.size() : 1));
    if (!copy)
        return fail("out of memory");
    std::memcpy(copy, image.data(), image.size());
    if (sqlite3_deserialize(db.db, "main", copy, static_cast<sqlite3_int64>(image.size()),
                            static_cast<sqlite3_int64>(image.size()),
                            SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY) != SQLITE_OK)
        return fail(std::string("not a readable SQLite image: ") + sqlite3_errmsg(db.db));
    NsysParser parser(db.db, strings, out);
    return parser.run();
}

} // namespace lockstep::core::detail
