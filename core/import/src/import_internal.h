// Internal pieces shared by the importers: byte sources (plain, gzip, memory), the per-rank
// intermediate trace each parser fills, and the diagnostics counter. Not installed.
#pragma once

#include "lockstep/core/diagnostics.h"
#include "lockstep/core/result.h"
#include "lockstep/core/types.h"
#include "lockstep/import/import.h"

#include <cstdint>
#include <functional>
#include <limits>
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
// Kinds come from the closed list (core/diagnostics.h); `detail` splits a kind's count by a
// sub-key (e.g. the span kind of device work without a launch record) shown in the message.
class DiagnosticCounter {
public:
    void add(DiagnosticKind kind, int64_t n = 1, std::string_view detail = {});
    int64_t total() const;
    std::vector<Diagnostic> list() const;
    void mergeFrom(const DiagnosticCounter& other);

private:
    struct Entry {
        int64_t count = 0;
        std::map<std::string, int64_t, std::less<>> details;
    };
    std::map<DiagnosticKind, Entry> m_byKind;
};

// Names are capped at this many bytes (cut at a UTF-8 character boundary): a 50 MB event name
// must not become a 50 MB string in the run file, the timeline and every report. Long enough
// for any real kernel or operator name (C++ template kernels reach a few hundred bytes).
inline constexpr size_t kMaxNameBytes = kImportNameLimit;
// `text` cut to at most kMaxNameBytes at a character boundary.
std::string_view capName(std::string_view text);

// Interning into the run's string table without building a std::string per lookup. Names are
// capped (capName); every capped name is counted in truncated().
class Interner {
public:
    explicit Interner(StringTable& table) : m_table(table) {}
    StringId intern(std::string_view text);
    const std::string& text(StringId id) const { return m_table.text(id); }
    int64_t truncated() const { return m_truncated; }

private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    StringTable& m_table;
    std::unordered_map<std::string, StringId, Hash, std::equal_to<>> m_cache;
    int64_t m_truncated = 0;
};

struct RawLane {
    LaneKind kind = LaneKind::HostThread;
    int32_t device = -1;
    int64_t stream = -1;
    std::string name;
    std::optional<int32_t> rank; // a Lockstep export names each lane's rank; other traces do not
};

// The header of a trace Lockstep itself exported (chrome_export.h): the run's configuration,
// ranks, lanes and buckets, so the trace imports back into the same run.
struct LockstepMeta {
    RunConfig config;
    std::vector<RankInfo> ranks;
    std::vector<Lane> lanes;   // ids as exported (the trace events' tid)
    std::vector<Bucket> buckets;
};

// A device span's launch: the host time of the runtime call that launched it (Kineto: the
// cuda_runtime / cuda_driver event with the same correlation id, or the ac2g flow's start, or
// the CPU op with the same External id; nsys: the CUPTI_ACTIVITY_KIND_RUNTIME row with the same
// correlationId), or kNoLaunch when the trace has none.
inline constexpr TimeNs kNoLaunch = std::numeric_limits<TimeNs>::min();

// What a trace says about one communication span. `group` is the process group's name as the
// trace spells it (Kineto's "Process Group Name" arg, newer torch), the empty string (StringId{})
// when the event does not say: real gloo worker ops (gloo:all_reduce) never do, and Debian's
// torch 1.13 writes no args at all.
struct CommMeta {
    StringId collective;
    StringId group;
};

// One trace file as a parser leaves it: lanes local to the file (Span::lane indexes `lanes`),
// times already in ns of the trace's clock, steps without rank (a Lockstep export: with rank).
struct RankTrace {
    std::string source;                 // "kineto" | "nsys" | "lockstep"
    std::optional<int> rank;            // from distributedInfo
    std::optional<int> worldSize;
    std::string backend;
    int64_t pid = 0;
    std::vector<RawLane> lanes;
    std::vector<Span> spans;
    std::vector<Step> steps;
    // Per span index, only for communication spans: the collective it belongs to ("allreduce",
    // "broadcast", ...) and its process group where the trace names it; used to number
    // all-reduce buckets within each step.
    std::unordered_map<size_t, CommMeta> collective;
    // Every device span (isDeviceKind on a GPU lane) with its launch time (kNoLaunch: none) and
    // the local lane (host thread) of the call that launched it, where the trace says.
    struct DeviceLaunch {
        size_t span = 0;
        TimeNs launch = kNoLaunch;
        uint32_t lane = UINT32_MAX;
    };
    std::vector<DeviceLaunch> deviceLaunch;
    // A Lockstep export: spans carry their own step and bucket, instants and the run header.
    std::optional<LockstepMeta> lockstep;
    std::vector<Instant> instants;
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
