// Stored summaries (summary_store.h): the codec of a RunAnalysis and the read/compute rule.
//
// Each record of analysis.h has ONE field list below (`fields(a, record)`), which the encoder, the
// decoder and the size check all use. A part is a sequence of values:
//   integers (and bools, enums) as zigzag varints; inside a vector of records each integer field
//   is written as the difference from the same field of the previous record (columns of times,
//   ranks and steps become small numbers: a bucket's launch minus the previous one's);
//   doubles as their 8 bytes (NaN written as one canonical NaN, so equal analyses encode
//   equally); strings and vectors as a varint count then their contents.
// The part's bytes are then zlib-compressed (level 1: fast, and the deltas leave it little to do).
// The decoder checks every read against the end of the part and every count against what is
// left, so a damaged summary is a clean error (and loadAnalyzedRun then computes instead).
#include "lockstep/core/summary_store.h"

#include "lockstep/core/run_db.h"

#include "block_codec.h"
#include "schema.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <type_traits>

namespace lockstep::core {

namespace {

// ---------------------------------------------------------------------------------------------
// Field lists: every field of every stored record, once. Adding a field to one of these records
// changes its size and stops the build here until the field is listed (and kSummaryVersion bumped).

static_assert(sizeof(SteadySteps) == 40 && sizeof(StepBreakdown) == 128 && sizeof(BucketStat) == 104
                  && sizeof(BucketSkew) == 48 && sizeof(StepStraggler) == 32 && sizeof(RankStepWait) == 24
                  && sizeof(RankStraggle) == 32 && sizeof(StragglerEvidence) == 208
                  && sizeof(BucketSummary) == 120 && sizeof(RankSummary) == 120
                  && sizeof(RunSummary) - sizeof(RunConfig) - sizeof(ConfigSignature) == 496
                  && sizeof(RunAnalysis) == 1472 && sizeof(Diagnostic) == 80,
              "a stored record changed: list its new field in summary_store.cpp and bump kSummaryVersion");

template <class A> void fields(A& a, SteadySteps& s) { a(s.warmupSteps, s.fallback, s.steps, s.allSteps); }
template <class A> void fields(A& a, StepBreakdown& b)
{
    a(b.rank, b.step, b.start, b.end, b.wall, b.compute, b.communication, b.memory, b.computeOnly, b.overlapped,
      b.exposed, b.memoryOnly, b.idle, b.overlapRatio, b.warmup, b.steady, b.window, b.cpuNs, b.runqNs);
}
template <class A> void fields(A& a, BucketStat& b)
{
    a(b.rank, b.step, b.bucket, b.ready, b.launch, b.completion, b.readyToLaunch, b.duration, b.exposed, b.hidden,
      b.ownStart, b.bytes, b.algbwGBps, b.busbwGBps);
}
template <class A> void fields(A& a, BucketSkew& s)
{
    a(s.step, s.bucket, s.ranks, s.skew, s.lateRank, s.waitCaused, s.rankTimeLost);
}
template <class A> void fields(A& a, StepStraggler& s) { a(s.step, s.rank, s.waitCaused, s.rankTimeLost, s.stepTime); }
template <class A> void fields(A& a, RankStepWait& w) { a(w.rank, w.step, w.waitCaused, w.latenessNs); }
template <class A> void fields(A& a, RankStraggle& r)
{
    a(r.rank, r.stepsAsStraggler, r.meanWaitNs, r.meanWaitFraction, r.medianLatenessNs);
}
template <class A> void fields(A& a, StragglerEvidence& e)
{
    a(e.applicable, e.notApplicable, e.candidate, e.steadySteps, e.stepsLate, e.meanWaitNs, e.meanStepNs,
      e.waitFraction, e.latenessAboveOthersNs, e.noiseSpreadNs, e.noiseFloorNs, e.systematicDelayNs,
      e.delayFraction, e.rankSpreadNs, e.rankFloorNs, e.chance, e.clockUncertaintyNs, e.clockFloorNs,
      e.mostSteps, e.waitAboveThreshold, e.clearsNoise, e.withinClock, e.straggler, e.cpuMs, e.othersCpuMs,
      e.runqMs, e.othersRunqMs, e.cause);
}
template <class A> void fields(A& a, BucketSummary& b)
{
    a(b.bucket, b.bytes, b.params, b.paramNames, b.meanReadyToLaunchMs, b.meanDurationMs, b.meanExposedMs,
      b.meanHiddenMs, b.meanAlgbwGBps, b.meanBusbwGBps, b.meanSkewMs, b.meanWaitCausedMs, b.lateRank);
}
template <class A> void fields(A& a, RankSummary& r)
{
    a(r.rank, r.steps, r.stepTimeMs, r.computeMs, r.commMs, r.memoryMs, r.computeOnlyMs, r.overlappedMs,
      r.exposedCommMs, r.memoryOnlyMs, r.idleMs, r.overlapRatio, r.stepsAsStraggler, r.meanWaitCausedMs, r.cpuMs,
      r.runqMs);
}
template <class A> void fields(A& a, Diagnostic& d) { a(d.kind, d.severity, d.count, d.message); }
template <class A> void fields(A& a, StringId& id) { a(id.v); }
template <class A> void fields(A& a, LaneWork& w) { a(w.spans, w.busyNs, w.communicates); }
template <class A> void fields(A& a, OverviewItem& it)
{
    a(it.start, it.end, it.maxDuration, it.count, it.row, it.bytes, it.name, it.step, it.bucket, it.kind);
}
template <class A> void fields(A& a, LaneOverview& l) { a(l.work, l.rows, l.gap, l.items); }
static_assert(sizeof(LaneWork) == 24 && sizeof(OverviewItem) == 56 && sizeof(LaneOverview) == 64,
              "a stored overview record changed: list its new field in summary_store.cpp and bump kSummaryVersion");
// RunSummary without config and signature: those are the file's configuration, read with the
// run (summarize() copies it; configSignature() derives the signature).
template <class A> void fields(A& a, RunSummary& s)
{
    a(s.worldSize, s.steps, s.steadySteps, s.steady, s.multiRank, s.window, s.stepTimeMs, s.computeMs, s.commMs,
      s.memoryMs, s.computeOnlyMs, s.overlappedMs, s.exposedCommMs, s.bucketExposedMs, s.memoryOnlyMs, s.idleMs,
      s.overlapRatio, s.throughput, s.stragglers, s.stragglerWaitMs, s.straggler, s.buckets, s.spans,
      s.diagnostics, s.deviceSpansWithoutStep);
}

// ---------------------------------------------------------------------------------------------
// Encoder and decoder: one visitor each over the field lists.

using blockcodec::putVarint;
using blockcodec::unzigzag;
using blockcodec::zigzag;

// Per vector of records: the previous record's integer fields, by position.
struct DeltaColumns {
    std::vector<int64_t> previous;
    size_t next = 0;
    int64_t& slot()
    {
        if (next == previous.size())
            previous.push_back(0);
        return previous[next++];
    }
};

// What the encoder and the decoder share: the walk over values, vectors and records, and the
// delta columns of a vector's records. Self supplies scalar(v) for integers, enums, doubles and
// strings, vectorSize(v) (writes or reads, and resizes, the count) and good().
template <class Self>
class Walker {
public:
    template <class... T> void operator()(T&... values) { (value(values), ...); }

protected:
    DeltaColumns* m_columns = nullptr; // set while walking the integer fields of a vector's record

    // An integer field: the difference from the previous record's inside a vector of records.
    int64_t toDelta(int64_t v)
    {
        if (!m_columns)
            return v;
        int64_t& prev = m_columns->slot();
        const int64_t d = static_cast<int64_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(prev));
        prev = v;
        return d;
    }
    int64_t fromDelta(int64_t d)
    {
        if (!m_columns)
            return d;
        int64_t& prev = m_columns->slot();
        prev = static_cast<int64_t>(static_cast<uint64_t>(prev) + static_cast<uint64_t>(d));
        return prev;
    }

private:
    Self& self() { return static_cast<Self&>(*this); }
    template <class T> void value(T& v)
    {
        if (!self().good())
            return;
        if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string>) {
            self().scalar(v);
        } else if constexpr (requires { v.size(); v.begin(); }) {
            self().vectorSize(v);
            DeltaColumns columns;
            DeltaColumns* outer = m_columns;
            for (auto& item : v) {
                using Item = std::remove_cvref_t<decltype(item)>;
                if constexpr (std::is_class_v<Item> && !std::is_same_v<Item, std::string>) {
                    columns.next = 0;
                    m_columns = &columns;
                    fields(self(), item);
                } else {
                    m_columns = nullptr; // a vector of plain values (steps, names): no deltas
                    value(item);
                }
                if (!self().good())
                    break;
            }
            m_columns = outer;
        } else {
            DeltaColumns* outer = m_columns;
            m_columns = nullptr; // a record inside a record: its own fields, plain
            fields(self(), v);
            m_columns = outer;
        }
    }
};

class Encoder : public Walker<Encoder> {
public:
    std::string out;
    bool good() const { return true; }
    template <class T> void scalar(T& v)
    {
        if constexpr (std::is_same_v<T, double>) {
            const uint64_t bits = std::bit_cast<uint64_t>(std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : v);
            for (int i = 0; i < 8; ++i)
                out.push_back(static_cast<char>(bits >> (8 * i)));
        } else if constexpr (std::is_same_v<T, std::string>) {
            putVarint(out, v.size());
            out.append(v);
        } else {
            putVarint(out, zigzag(toDelta(static_cast<int64_t>(v))));
        }
    }
    template <class V> void vectorSize(V& v) { putVarint(out, v.size()); }
};

// The fewest bytes a value of each type takes encoded (a varint 1, a double 8, an empty string or
// vector 1): the decoder refuses a vector count that the bytes left could not hold, so a damaged
// count cannot make it allocate more than a few times the part's size.
struct MinSize {
    size_t bytes = 0;
    template <class... T> void operator()(T&... values) { (add(values), ...); }
    template <class T> void add(T& v)
    {
        if constexpr (std::is_same_v<T, double>)
            bytes += 8;
        else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string>
                           || requires { v.size(); v.begin(); })
            bytes += 1;
        else
            fields(*this, v);
    }
};
template <class T> size_t minEncodedSize()
{
    if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string>) {
        MinSize m;
        T probe{};
        fields(m, probe);
        return std::max<size_t>(m.bytes, 1);
    } else {
        return std::is_same_v<T, double> ? 8 : 1;
    }
}

class Decoder : public Walker<Decoder> {
public:
    explicit Decoder(const std::string& data)
        : m_in(std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size())) {}
    bool ok = true;
    bool good() const { return ok; }
    bool atEnd() const { return m_in.atEnd(); }

    template <class T> void scalar(T& v)
    {
        if constexpr (std::is_same_v<T, double>) {
            const uint8_t* p = nullptr;
            if (!(ok = m_in.take(8, p)))
                return;
            uint64_t bits = 0;
            for (int i = 0; i < 8; ++i)
                bits |= static_cast<uint64_t>(p[i]) << (8 * i);
            v = std::bit_cast<double>(bits);
        } else if constexpr (std::is_same_v<T, std::string>) {
            const size_t n = count(1);
            const uint8_t* p = nullptr;
            if (ok && (ok = m_in.take(n, p)))
                v.assign(reinterpret_cast<const char*>(p), n);
        } else {
            using Int = typename std::conditional_t<std::is_enum_v<T>, std::underlying_type<T>, std::type_identity<T>>::type;
            uint64_t raw = 0;
            ok = m_in.varint(raw);
            const int64_t x = fromDelta(unzigzag(raw));
            if constexpr (std::is_same_v<Int, bool>)
                ok = ok && (x == 0 || x == 1);
            else if constexpr (std::is_same_v<Int, uint64_t>)
                ; // every 64-bit pattern is one (its range does not fit the int64_t comparison below)
            else
                ok = ok && x >= static_cast<int64_t>(std::numeric_limits<Int>::min())
                     && x <= static_cast<int64_t>(std::numeric_limits<Int>::max());
            v = static_cast<T>(static_cast<Int>(x));
        }
    }
    template <class V> void vectorSize(V& v)
    {
        const size_t n = count(minEncodedSize<typename V::value_type>());
        v.clear();
        v.resize(n);
    }

private:
    blockcodec::Reader m_in;

    // A count of items that each take at least `itemBytes` bytes: never more than the bytes left hold.
    size_t count(size_t itemBytes)
    {
        uint64_t n = 0;
        if (!m_in.varint(n) || n > m_in.left() / itemBytes) {
            ok = false;
            return 0;
        }
        return static_cast<size_t>(n);
    }
};

// The records of each part, in order; `diagnostics` are the loaded run's (the diagnostics a
// load adds, such as spans on unknown lanes, are not in the file's table).
template <class A>
void partFields(A& a, SummaryPart part, RunAnalysis& x, std::vector<Diagnostic>& diagnostics, RunOverview& overview)
{
    switch (part) {
    case kSummaryRun:
        a(x.steady, x.summary, x.ranks, x.stragglers.perStep, x.stragglers.perRank, x.stragglers.stragglers,
          x.stragglers.evidence, diagnostics);
        break;
    case kSummarySteps:
        a(x.steps, x.stragglers.perRankStep);
        break;
    case kSummaryBuckets:
        a(x.buckets, x.stragglers.skews);
        break;
    case kSummaryOverview:
        a(overview.lanes);
        break;
    default:
        break;
    }
}

constexpr SummaryPart kParts[] = {kSummaryRun, kSummarySteps, kSummaryBuckets, kSummaryOverview};

// ---------------------------------------------------------------------------------------------
// The stamp: what of the file the analysis depends on, in a line. FNV-1a over the steps (with
// their times on the corrected clocks), the ranks' clock offsets and hosts, lanes, buckets and
// the configuration fields the analysis reads; with the span count beside it.

struct Fnv {
    uint64_t h = 1469598103934665603ull;
    void bytes(const void* p, size_t n)
    {
        const auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = 0; i < n; ++i)
            h = (h ^ b[i]) * 1099511628211ull;
    }
    template <class T> void operator()(const T& v)
    {
        if constexpr (std::is_same_v<T, std::string>) {
            (*this)(v.size());
            bytes(v.data(), v.size());
        } else {
            static_assert(std::is_trivially_copyable_v<T>);
            bytes(&v, sizeof v);
        }
    }
};

std::string stampOf(const Run& run, int64_t spans)
{
    Fnv f;
    for (const Step& s : run.steps) {
        f(s.rank), f(s.step), f(s.start), f(s.end), f(s.samples), f(s.cpuNs), f(s.runqNs);
        f(std::bit_cast<uint64_t>(s.loss));
    }
    for (const RankInfo& r : run.ranks)
        f(r.rank), f(r.host), f(r.bootId), f(r.clockOffsetNs), f(r.clockUncertaintyNs), f(r.clockBasis);
    for (const Lane& l : run.lanes)
        f(l.rank), f(l.kind), f(l.device), f(l.stream), f(l.name);
    for (const Bucket& b : run.buckets) {
        f(b.index), f(b.bytes), f(b.params.size());
        for (const std::string& p : b.params)
            f(p);
    }
    const RunConfig& c = run.config;
    f(c.worldSize), f(c.warmupSteps), f(c.batchPerRank);
    char line[200];
    std::snprintf(line, sizeof line, "spans=%lld steps=%zu ranks=%zu lanes=%zu buckets=%zu hash=%016llx code=%s",
                  static_cast<long long>(spans), run.steps.size(), run.ranks.size(), run.lanes.size(),
                  run.buckets.size(), static_cast<unsigned long long>(f.h), LOCKSTEP_ANALYSIS_FINGERPRINT);
    return line;
}

Result<std::string> compress(const std::string& raw)
{
    uLongf size = compressBound(static_cast<uLong>(raw.size()));
    std::string out(size + 8, '\0');
    const uint64_t n = raw.size();
    std::memcpy(out.data(), &n, 8); // the uncompressed size first
    if (compress2(reinterpret_cast<Bytef*>(out.data() + 8), &size, reinterpret_cast<const Bytef*>(raw.data()),
                  static_cast<uLong>(raw.size()), 1) != Z_OK)
        return fail("compressing a summary failed");
    out.resize(size + 8);
    return out;
}

// The most bytes an encoded part of this run can take: a generous 256 bytes per record it can hold
// (records encode to a few dozen), per (rank, step) and bucket, rank, lane and step, plus the
// text it carries. A declared size beyond it is damage (or a decompression bomb), refused before
// anything is allocated; a real part never comes near it, and were one to, the analysis is
// computed instead, never wrong.
uint64_t maxPartBytes(const Run& run)
{
    uint64_t records = static_cast<uint64_t>(run.steps.size()) * (run.buckets.size() + 2) + run.ranks.size()
        + run.lanes.size() + run.buckets.size() + run.diagnostics.size() + 16
        // the overview's items (run_overview.h): the budget, or each lane's coarsest levels
        + kOverviewItemBudget + run.lanes.size() * (uint64_t{LaneLod::kMaxRows} * 1024 + kOverviewMinLaneItems);
    uint64_t text = 0;
    for (const Bucket& b : run.buckets)
        for (const std::string& p : b.params)
            text += p.size() + 8;
    for (const Diagnostic& d : run.diagnostics)
        text += d.kind.size() + d.message.size() + 16;
    return (uint64_t{1} << 20) + 256 * records + 2 * text;
}

std::optional<std::string> decompress(const std::string& stored, uint64_t maxBytes)
{
    if (stored.size() < 8)
        return std::nullopt;
    uint64_t n = 0;
    std::memcpy(&n, stored.data(), 8);
    // deflate expands at most 1032 to 1: a damaged (or hostile) size beyond what the bytes can
    // hold is refused before anything is allocated for it.
    if (n > maxBytes || n > (static_cast<uint64_t>(stored.size()) - 8) * 1032 + 64)
        return std::nullopt;
    std::string raw(static_cast<size_t>(n), '\0');
    uLongf size = static_cast<uLongf>(n);
    if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &size, reinterpret_cast<const Bytef*>(stored.data() + 8),
                   static_cast<uLong>(stored.size() - 8)) != Z_OK
        || size != n)
        return std::nullopt;
    return raw;
}

bool decodePart(const std::string& raw, SummaryPart part, RunAnalysis& out, std::vector<Diagnostic>& diagnostics,
                RunOverview& overview)
{
    Decoder d(raw);
    partFields(d, part, out, diagnostics, overview);
    return d.ok && d.atEnd();
}

std::string encodePart(const Run& run, const RunAnalysis& analysis, const RunOverview& overview, SummaryPart part)
{
    Encoder e;
    partFields(e, part, const_cast<RunAnalysis&>(analysis), const_cast<std::vector<Diagnostic>&>(run.diagnostics),
               const_cast<RunOverview&>(overview));
    return std::move(e.out);
}

// Why the stored parts cannot be used, or "" when every asked part decoded into `out`.
std::string readStored(RunReader& reader, const std::string& stamp, unsigned parts, AnalyzedRun& out)
{
    std::vector<Diagnostic> diagnostics;
    for (SummaryPart part : kParts) {
        if (!(parts & part))
            continue;
        auto stored = reader.storedSummary(summaryPartName(part));
        if (!stored)
            return "reading the stored summary failed (" + stored.error().message + ")";
        if (!*stored)
            return "no stored summary";
        if ((*stored)->version != kSummaryVersion)
            return "stored summary of another version (" + std::to_string((*stored)->version) + ")";
        if ((*stored)->stamp != stamp) {
            // The code's fingerprint is the stamp's last field: tell a newer build from a changed run.
            const auto code = [](const std::string& s) { return s.substr(std::min(s.size(), s.rfind(" code="))); };
            if (code((*stored)->stamp) != code(stamp))
                return "stored summary written by another build of Lockstep (its analysis code differs)";
            return "stale stored summary (the run changed after it was computed)";
        }
        const auto raw = decompress((*stored)->data, maxPartBytes(out.run));
        if (!raw)
            return "damaged stored summary";
        if (!decodePart(*raw, part, out.analysis, diagnostics, out.overview))
            return "damaged stored summary";
    }
    if (parts & kSummaryRun) {
        out.run.diagnostics = std::move(diagnostics);
        out.analysis.summary.config = out.run.config;
        out.analysis.summary.signature = configSignature(out.run.config);
    }
    return {};
}

} // namespace

const char* summaryPartName(SummaryPart part)
{
    switch (part) {
    case kSummaryRun: return "run";
    case kSummarySteps: return "steps";
    case kSummaryBuckets: return "buckets";
    case kSummaryOverview: return "overview";
    default: return "?";
    }
}

std::string encodeSummaryPart(const Run& run, const RunAnalysis& analysis, SummaryPart part)
{
    return part == kSummaryOverview ? std::string() : encodePart(run, analysis, RunOverview{}, part);
}

bool decodeSummaryPart(const std::string& encoded, SummaryPart part, RunAnalysis& analysis,
                       std::vector<Diagnostic>& diagnostics)
{
    RunOverview unused;
    return part != kSummaryOverview && decodePart(encoded, part, analysis, diagnostics, unused);
}

std::string encodeOverviewPart(const RunOverview& overview)
{
    return encodePart(Run{}, RunAnalysis{}, overview, kSummaryOverview);
}

bool decodeOverviewPart(const std::string& encoded, RunOverview& overview)
{
    RunAnalysis unused;
    std::vector<Diagnostic> diagnostics;
    return decodePart(encoded, kSummaryOverview, unused, diagnostics, overview);
}

Result<AnalyzedRun> loadAnalyzedRun(const std::string& path, const AnalyzedRunOptions& options)
{
    auto reader = RunReader::open(path);
    if (!reader)
        return std::unexpected(reader.error());
    AnalyzedRun out;
    auto run = (*reader)->load(LoadOptions{.stop = options.stop, .spans = options.spans});
    if (!run)
        return std::unexpected(run.error());
    out.run = std::move(*run);
    auto spans = (*reader)->spanCount();
    if (!spans)
        return std::unexpected(spans.error());
    out.whyComputed = readStored(**reader, stampOf(out.run, *spans), options.parts, out);
    if (out.whyComputed.empty()) {
        out.stored = true;
        return out;
    }
    // Computed: the whole run, as the analysis has always been made.
    if (!options.spans) {
        auto full = (*reader)->load(LoadOptions{.stop = options.stop});
        if (!full)
            return std::unexpected(full.error());
        out.run = std::move(*full);
    }
    auto analysis = analyze(out.run, options.stop);
    if (!analysis)
        return std::unexpected(analysis.error());
    out.analysis = std::move(*analysis);
    if (!options.spans && !options.keepComputedSpans) {
        out.run.spans = {};
        out.run.instants = {};
    }
    return out;
}

Status storeSummaries(const std::string& path, std::stop_token stop)
{
    // A -wal beside the file: a writer has it open (a run still recording) or died with it open.
    // Its analysis would describe a moment of it, and closing a writer here would checkpoint the
    // log under the other writer's feet.
    std::error_code ec;
    if (std::filesystem::exists(path + "-wal", ec))
        return fail(path + ": is being written (a -wal file is beside it); store its analysis once it is "
                           "finished, or recover it first if its writer died (lockstep merge of its shards does)");
    std::string stamp;
    std::string parts[std::size(kParts)];
    {
        auto reader = RunReader::open(path);
        if (!reader)
            return std::unexpected(reader.error());
        // Storing migrates the file to this build's schema; a file older than version 4 would then
        // read differently (its ranks' clocks: shared by host name before, by boot id after, and
        // it has none), so its numbers would change under the user. Such files are analysed on
        // every read instead.
        if ((*reader)->schemaVersion() < schema::kBootIdVersion)
            return fail(path + ": written before schema version " + std::to_string(schema::kBootIdVersion)
                        + " (no boot ids); its summaries are computed when it is read, not stored");
        auto run = (*reader)->load(LoadOptions{.stop = stop});
        if (!run)
            return std::unexpected(run.error());
        auto spans = (*reader)->spanCount();
        if (!spans)
            return std::unexpected(spans.error());
        stamp = stampOf(*run, *spans);
        auto analysis = analyze(*run, stop);
        if (!analysis)
            return std::unexpected(analysis.error());
        const RunOverview overview = buildRunOverview(*run, stop);
        if (stop.stop_requested())
            return fail(ErrorCode::Cancelled, "cancelled");
        for (size_t i = 0; i < std::size(kParts); ++i) {
            auto packed = compress(encodePart(*run, *analysis, overview, kParts[i]));
            if (!packed)
                return std::unexpected(packed.error());
            parts[i] = std::move(*packed);
        }
    }
    auto writer = RunWriter::openExisting(path);
    if (!writer)
        return std::unexpected(writer.error());
    for (size_t i = 0; i < std::size(kParts); ++i)
        if (auto s = (*writer)->putSummary(summaryPartName(kParts[i]), kSummaryVersion, stamp, parts[i]); !s)
            return s;
    return (*writer)->close();
}

} // namespace lockstep::core
