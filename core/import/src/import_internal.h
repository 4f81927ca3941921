// Internal pieces shared by the importers: byte sources (plain, gzip, memory), the per-rank
// intermediate trace each parser fills, and the diagnostics counter. Not installed.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"
#include "lockstep/import/import.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep::core::detail {

// A stream of input bytes: a file (read in big chunks), a gzip file or buffer (inflated as it
// is read, never whole), or a plain buffer. read() returns 0 at the end; errors (a corrupt or
// truncated gzip stream) are reported through error() after read() returned 0.
class ByteSource {
public:
    virtual ~ByteSource() = default;
    virtual size_t read(char* out, size_t capacity) = 0;
    virtual const std::string& error() const { return m_error; }
    // Bytes of the underlying input consumed so far (compressed bytes for gzip): progress.
    virtual int64_t consumed() const = 0;
    virtual int64_t total() const = 0;
    // The whole input when it is addressable without copying (a mapped plain file, a memory
    // buffer), else empty with a null data(). release(offset) tells a mapped source that bytes
    // before offset are no longer needed; consumed() then follows it.
    virtual std::string_view mapped() const { return {}; }
    virtual void release(size_t offset) { (void)offset; }

protected:
    std::string m_error;
};
Result<std::unique_ptr<ByteSource>> openFileSource(const std::string& path, bool gzip);
std::unique_ptr<ByteSource> memorySource(std::string_view bytes, bool gzip);

// Anomalies counted per kind (Perfetto's habit): the import never aborts for one bad event.
class DiagnosticCounter {
public:
    void add(std::string_view kind, Severity severity, std::string_view message, int64_t n = 1);
    int64_t total() const;
    std::vector<Diagnostic> list() const;
    void mergeFrom(const DiagnosticCounter& other);

private:
    std::map<std::string, Diagnostic, std::less<>> m_byKind;
};

// Interning into the run's string table without building a std::string per lookup.
class Interner {
public:
    explicit Interner(StringTable& table) : m_table(table) {}
    StringId intern(std::string_view text);
    const std::string& text(StringId id) const { return m_table.text(id); }

private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    StringTable& m_table;
    std::unordered_map<std::string, StringId, Hash, std::equal_to<>> m_cache;
};

struct RawLane {
    LaneKind kind = LaneKind::HostThread;
    int32_t device = -1;
    int64_t stream = -1;
    std::string name;
};

// One rank's trace as a parser leaves it: lanes local to the file (Span::lane indexes
// `lanes`), times already in ns of the trace's clock, steps without rank.
struct RankTrace {
    std::string source;                 // "kineto" | "nsys"
    std::optional<int> rank;            // from distributedInfo
    std::optional<int> worldSize;
    std::string backend;
    int64_t pid = 0;
    std::vector<RawLane> lanes;
    std::vector<Span> spans;
    std::vector<Step> steps;
    // Per span index: the collective it belongs to ("allreduce", "broadcast", ...), only for
    // communication spans; used to number all-reduce buckets within each step.
    std::unordered_map<size_t, StringId> collective;
    int64_t events = 0;
    int64_t bytes = 0;
    DiagnosticCounter diagnostics;
};

using ProgressFn = std::function<void(int64_t consumedBytes)>;

// Kineto / Chrome trace-event JSON from `source` (already decompressed by the source).
Status parseKineto(ByteSource& source, const ImportOptions& options, Interner& strings, RankTrace& out,
                   const ProgressFn& progress);
// Nsight Systems SQLite export at `path` (a file; memory images are written to a temp file
// by the caller, or opened through sqlite3_deserialize).
Status parseNsysFile(const std::string& path, const ImportOptions& options, Interner& strings,
                     RankTrace& out);
Status parseNsysImage(std::string_view image, const ImportOptions& options, Interner& strings,
                      RankTrace& out);

// Size in bytes of one element of a c10 scalar type name as record_param_comms writes it
// ("Float", "Half", "BFloat16", "c10::Half", "float32" ...); 0 when unknown.
int dtypeSize(std::string_view dtype);

// Parses a trace-event timestamp token (µs: integer, fraction, exponent, or a quoted number)
// into integer ns without losing the sub-µs digits. false when it is not a number or does
// not fit in int64 ns.
enum class NumberParse { Ok, NotNumber, OutOfRange };
NumberParse parseMicrosToNs(std::string_view token, int64_t* ns);
NumberParse parseInteger(std::string_view token, int64_t* value);

} // namespace lockstep::core::detail
