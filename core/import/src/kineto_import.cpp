// torch.profiler (Kineto) Chrome trace-event JSON → RankTrace: one rank's lanes, spans and
// steps. Plain or gzip (the ByteSource inflates as it reads), object form
// ({"traceEvents": [...], "distributedInfo": {...}, "baseTimeNanoseconds": N}) or bare array.
#include "import_internal.h"

#include "lockstep/core/fields.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <unordered_set>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace lockstep::core::detail {

namespace {

namespace od = simdjson::ondemand;

constexpr size_t kInitialBuffer = 8u << 20; // read size: big enough to amortise syscalls and inflate
constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;

// Finding where one JSON value ends, resumably across buffer refills.
//
// Why a scanner of our own in front of simdjson: a trace is one huge array. simdjson's
// On-Demand API iterates a document that must sit whole in memory, and it also allocates a
// structural index of up to 4 bytes per input byte; for a 1 GB trace (or a gzip one, once
// inflated) that alone breaks the "peak memory ≤ 2× the file" promise. So this state machine
// walks the bytes once, tracking only "inside a string", "after a backslash" and a bracket
// depth counter, and hands each complete element of traceEvents to On-Demand on its own.
// Memory is one read buffer plus the largest single event, whatever the file size. The depth is
// a counter, not recursion, so a file nested a million levels deep cannot exhaust the stack
// (On-Demand then refuses such an event with its own depth limit, counted as malformed).
class ValueScanner {
public:
    // Scans d[i, len). Returns true when the value ended; i is then one past its end.
    bool feed(const char* d, size_t len, size_t& i)
    {
        if (!m_started) {
            m_started = true;
            const char c = d[i];
            if (c == '{' || c == '[') {
                m_depth = 1;
                ++i;
            } else if (c == '"') {
                m_inString = true;
                m_stringOnly = true;
                ++i;
            } else {
                m_scalar = true;
            }
        }
        if (m_scalar) {
            for (; i < len; ++i) {
                const char c = d[i];
                if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
                    return true;
            }
            return false;
        }
        while (i < len) {
#ifdef __SSE2__
            // 64 bytes at a time (simdjson's idea, reduced): quote, backslash and bracket masks;
            // the in-string mask is the prefix XOR of the quote mask, carried across blocks.
            // A block with a backslash in it (or right before it) goes through the scalar path,
            // which handles escapes exactly; traces rarely contain any.
            while (!m_stringOnly && i + 64 <= len && (i == 0 || d[i - 1] != '\\')) {
                const Masks m = masks(d + i);
                if (m.backslash)
                    break;
                const uint64_t inside = prefixXor(m.quote) ^ (m_inString ? ~uint64_t(0) : 0);
                m_inString = (inside >> 63) != 0;
                uint64_t structural = (m.open | m.close) & ~inside;
                if ((m.close & structural) == 0) {
                    m_depth += popcount(structural);
                    i += 64;
                    continue;
                }
                while (structural) {
                    const int k = __builtin_ctzll(structural);
                    if ((m.open >> k) & 1) {
                        ++m_depth;
                    } else if (--m_depth == 0) {
                        i += static_cast<size_t>(k) + 1;
                        return true;
                    }
                    structural &= structural - 1;
                }
                i += 64;
            }
#endif
            if (scalarBlock(d, std::min(len, i + 64), i))
                return true;
        }
        return false;
    }
    bool scalar() const { return m_scalar; }

private:
#ifdef __SSE2__
    struct Masks {
        uint64_t quote, backslash, open, close;
    };
    static uint64_t eq(const __m128i* chunks, char c)
    {
        const __m128i v = _mm_set1_epi8(c);
        uint64_t r = 0;
        for (int k = 0; k < 4; ++k)
            r |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(chunks[k], v)))) << (16 * k);
        return r;
    }
    static Masks masks(const char* p)
    {
        __m128i chunks[4];
        for (int k = 0; k < 4; ++k)
            chunks[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
        return Masks{eq(chunks, '"'), eq(chunks, '\\'), eq(chunks, '{') | eq(chunks, '['),
                     eq(chunks, '}') | eq(chunks, ']')};
    }
    // SWAR popcount: the baseline x86-64 target has no POPCNT instruction and the libgcc call
    // showed up in profiles.
    static int popcount(uint64_t x)
    {
        x = x - ((x >> 1) & 0x5555555555555555ull);
        x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
        x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
        return static_cast<int>((x * 0x0101010101010101ull) >> 56);
    }
    static uint64_t prefixXor(uint64_t x)
    {
        x ^= x << 1;
        x ^= x << 2;
        x ^= x << 4;
        x ^= x << 8;
        x ^= x << 16;
        x ^= x << 32;
        return x;
    }
#endif
    // The exact byte-level path: escapes, and the tail of the buffer. Scans d[i, end) (a
    // string may be followed past `end`, up to the data's end).
    bool scalarBlock(const char* d, size_t end, size_t& i)
    {
        while (i < end) {
            if (m_inString) {
                const void* q = std::memchr(d + i, '"', end - i);
                if (!q) {
                    i = end;
                    return false;
                }
                const size_t qi = static_cast<size_t>(static_cast<const char*>(q) - d);
                size_t b = qi;
                while (b > 0 && d[b - 1] == '\\')
                    --b;
                i = qi + 1;
                if (((qi - b) & 1) == 0) {
                    m_inString = false;
                    if (m_stringOnly)
                        return true;
                }
                continue;
            }
            while (i < end && !kSpecial[static_cast<unsigned char>(d[i])])
                ++i;
            if (i == end)
                return false;
            switch (d[i++]) {
            case '"': m_inString = true; break;
            case '{':
            case '[': ++m_depth; break;
            default:
                if (--m_depth == 0)
                    return true;
            }
        }
        return false;
    }

    static constexpr std::array<bool, 256> kSpecial = [] {
        std::array<bool, 256> t{};
        t['"'] = t['{'] = t['}'] = t['['] = t[']'] = true;
        return t;
    }();
    int64_t m_depth = 0;
    bool m_started = false;
    bool m_inString = false;
    bool m_stringOnly = false;
    bool m_scalar = false;
};

bool iequals(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z')
            x = static_cast<char>(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = static_cast<char>(y - 'A' + 'a');
        if (x != y)
            return false;
    }
    return true;
}

bool icontains(std::string_view hay, std::string_view needle)
{
    if (needle.size() > hay.size())
        return false;
    for (size_t i = 0; i + needle.size() <= hay.size(); ++i)
        if (iequals(hay.substr(i, needle.size()), needle))
            return true;
    return false;
}

std::string_view trimToken(std::string_view t)
{
    while (!t.empty() && (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' || t.back() == '\t'))
        t.remove_suffix(1);
    return t;
}

enum class EventClass : uint8_t { Host, Gpu, Skip };

struct Event {
    std::string_view name, ph, cat;
    std::string_view pid, tid;   // raw tokens ("7", "\"CPU functions\"")
    std::string_view ts, dur;    // raw tokens
    std::string_view id;         // raw token: a flow's id (ac2g: the correlation id)
    std::string_view argName;    // args.name of metadata events
    std::string_view collective, dtype;
    std::string_view group;      // args["Process Group Name"], quotes stripped (CommMeta::group)
    std::string_view argKind;    // Lockstep export: args.kind (span kind name)
    int64_t extId = -1, device = -1, stream = -1, bytes = -1, inNelems = -1, outNelems = -1;
    int64_t correlation = -1;    // args.correlation: runtime call <-> device activity
    int64_t argStep = kNoStep, argBucket = kNoBucket; // Lockstep export
    Step stepArgs;             // Lockstep export, a "lockstep.step" event's args (kStepFields)
    bool hasName = false, hasCommMeta = false;
};

// One pass over an event's bytes, for the events nearly every trace is made of: it finds where
// the event ends and reads the fields we use at once, where the general path scans the event
// to find its end (ValueScanner), then has simdjson index it (stage 1) and walk it (On-Demand).
//
// It takes only what it can read exactly as that path would: strict JSON of ASCII with no
// escapes and no control characters in strings, nesting up to kMaxDepth, values of the types
// the general path expects where it reads them (a string name, an object of args, ...), and no
// Lockstep step args. Anything else, and an event that runs past `limit`, is refused (false)
// before any side effect, and the caller hands the same bytes to the general path; so the
// result for any input is the general path's, and fewer than one event in a million of a
// torch.profiler trace goes that way.
class FastEventReader {
public:
    FastEventReader(const char* begin, const char* limit) : m_p(begin), m_end(limit) {}

    // Reads the object at `begin` into `e`; true with *size = its length in bytes.
    bool read(Event& e, size_t* size)
    {
        const char* const begin = m_p;
        if (!object(e))
            return false;
        *size = static_cast<size_t>(m_p - begin);
        return true;
    }

private:
    static constexpr int kMaxDepth = 64;

    // k == lit, with the length known when compiled (so no call to memcmp).
    template <size_t N>
    static bool is(std::string_view k, const char (&lit)[N])
    {
        return k.size() == N - 1 && std::memcmp(k.data(), lit, N - 1) == 0;
    }

    static constexpr std::array<bool, 256> kWs = [] {
        std::array<bool, 256> t{};
        t[' '] = t['\n'] = t['\r'] = t['\t'] = true;
        return t;
    }();
    void ws()
    {
        while (m_p < m_end && kWs[static_cast<unsigned char>(*m_p)])
            ++m_p;
    }
    // The next non-space byte, or 0 at the limit.
    char peek()
    {
        ws();
        return m_p < m_end ? *m_p : '\0';
    }
    bool expect(char c)
    {
        if (peek() != c)
            return false;
        ++m_p;
        return true;
    }
    // A string at m_p (its opening quote): its contents, and m_p one past the closing quote.
    // Refused: a backslash, a control character or a byte ≥ 0x80 before the closing quote.
    bool string(std::string_view* out)
    {
        const char* q = m_p + 1;
#ifdef __SSE2__
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        while (m_end - q >= 16) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
            // Signed compare: bytes ≥ 0x80 are negative, so "< 0x20" takes them too.
            const __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                             _mm_cmplt_epi8(v, space));
            const int mask = _mm_movemask_epi8(hit);
            if (mask != 0) {
                q += __builtin_ctz(static_cast<unsigned>(mask));
                if (*q != '"')
                    return false;
                *out = std::string_view(m_p + 1, static_cast<size_t>(q - m_p - 1));
                m_p = q + 1;
                return true;
            }
            q += 16;
        }
#endif
        for (; q < m_end; ++q) {
            const auto c = static_cast<unsigned char>(*q);
            if (c == '"') {
                *out = std::string_view(m_p + 1, static_cast<size_t>(q - m_p - 1));
                m_p = q + 1;
                return true;
            }
            if (c == '\\' || c < 0x20 || c >= 0x80)
                return false;
        }
        return false;
    }
    static bool isScalarChar(char c)
    {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-'
            || c == '+';
    }
    // A number or a literal (true, false, null; not checked further, as On-Demand does not
    // check a value it skips or takes raw).
    bool scalar(std::string_view* out)
    {
        const char* s = m_p;
        while (m_p < m_end && isScalarChar(*m_p))
            ++m_p;
        if (m_p == s)
            return false;
        *out = std::string_view(s, static_cast<size_t>(m_p - s));
        return true;
    }
    // A value's raw token as On-Demand's raw_json_token gives it, less its trailing spaces
    // (every reader trims them): a string with its quotes, or a scalar. Objects and arrays
    // are refused.
    bool token(std::string_view* out)
    {
        const char c = peek();
        if (c == '"') {
            const char* s = m_p;
            std::string_view body;
            if (!string(&body))
                return false;
            *out = std::string_view(s, static_cast<size_t>(m_p - s));
            return true;
        }
        return scalar(out);
    }
    // A string value into *out; another type of value (skipped) leaves `otherwise`, as the
    // general path's failed get_string does.
    bool stringOr(std::string_view* out, std::string_view otherwise)
    {
        if (peek() == '"')
            return string(out);
        *out = otherwise;
        return skip(0);
    }
    bool skip(int depth)
    {
        const char c = peek();
        if (c == '"') {
            std::string_view s;
            return string(&s);
        }
        if (c == '{' || c == '[') {
            if (depth >= kMaxDepth)
                return false;
            const char close = c == '{' ? '}' : ']';
            ++m_p;
            if (peek() == close) {
                ++m_p;
                return true;
            }
            for (;;) {
                if (c == '{') {
                    std::string_view key;
                    if (peek() != '"' || !string(&key) || !expect(':'))
                        return false;
                }
                if (!skip(depth + 1))
                    return false;
                const char next = peek();
                ++m_p;
                if (next == close)
                    return true;
                if (next != ',')
                    return false;
            }
        }
        std::string_view s;
        return scalar(&s);
    }
    // Calls field(key) for each member of the object at m_p; field reads the value.
    template <class Field>
    bool members(Field&& field)
    {
        if (!expect('{'))
            return false;
        if (peek() == '}') {
            ++m_p;
            return true;
        }
        for (;;) {
            std::string_view key;
            if (peek() != '"' || !string(&key) || !expect(':'))
                return false;
            if (!field(key))
                return false;
            const char next = peek();
            ++m_p;
            if (next == '}')
                return true;
            if (next != ',')
                return false;
        }
    }
    bool intArg(int64_t* out)
    {
        std::string_view tok;
        if (!token(&tok))
            return false;
        if (parseInteger(tok, out) != NumberParse::Ok)
            *out = -1;
        return true;
    }
    // readArgs, for the same keys in the same order of tests.
    bool args(Event& e)
    {
        if (peek() != '{' || is(e.cat, "lockstep.step"))
            return false; // args of another type, step args: the general path
        return members([&](std::string_view k) {
            switch (k.size()) {
            case 4:
                if (is(k, "step"))
                    return intArg(&e.argStep);
                if (is(k, "kind"))
                    return stringOr(&e.argKind, {});
                if (is(k, "name"))
                    return stringOr(&e.argName, {});
                break;
            case 5:
                if (is(k, "bytes"))
                    return intArg(&e.bytes);
                if (is(k, "dtype"))
                    return stringOr(&e.dtype, {});
                break;
            case 6:
                if (is(k, "bucket"))
                    return intArg(&e.argBucket);
                if (is(k, "device"))
                    return intArg(&e.device);
                if (is(k, "stream"))
                    return intArg(&e.stream);
                break;
            case 10:
                if (is(k, "Group size")) {
                    e.hasCommMeta = true;
                    return skip(1);
                }
                break;
            case 11:
                if (is(k, "External id"))
                    return intArg(&e.extId);
                if (is(k, "correlation"))
                    return intArg(&e.correlation);
                if (is(k, "In msg size"))
                    return intArg(&e.inNelems);
                break;
            case 12:
                if (is(k, "Out msg size"))
                    return intArg(&e.outNelems);
                break;
            case 13:
                if (is(k, "In msg nelems"))
                    return intArg(&e.inNelems);
                break;
            case 14:
                if (is(k, "Out msg nelems"))
                    return intArg(&e.outNelems);
                break;
            case 15:
                if (is(k, "Collective name")) {
                    e.hasCommMeta = true;
                    return stringOr(&e.collective, {});
                }
                break;
            case 18:
                if (is(k, "Process Group Name")) {
                    e.hasCommMeta = true;
                    std::string_view tok;
                    if (!token(&tok))
                        return false;
                    if (tok.size() >= 2 && tok.front() == '"' && tok.back() == '"')
                        tok = tok.substr(1, tok.size() - 2);
                    e.group = tok;
                    return true;
                }
                break;
            case 19:
                if (is(k, "Process Group Ranks")) {
                    e.hasCommMeta = true;
                    return skip(1);
                }
                break;
            default: break;
            }
            return skip(1);
        });
    }
    // readEvent.
    bool object(Event& e)
    {
        return members([&](std::string_view k) {
            switch (k.size()) {
            case 2:
                if (is(k, "ph"))
                    return stringOr(&e.ph, "?");
                if (is(k, "ts"))
                    return token(&e.ts);
                if (is(k, "id"))
                    return token(&e.id);
                break;
            case 3:
                if (is(k, "dur"))
                    return token(&e.dur);
                if (is(k, "cat"))
                    return stringOr(&e.cat, {});
                if (is(k, "pid"))
                    return token(&e.pid);
                if (is(k, "tid"))
                    return token(&e.tid);
                break;
            case 4:
                if (is(k, "name")) {
                    e.hasName = true;
                    return peek() == '"' && string(&e.name); // another type: the general path
                }
                if (is(k, "args"))
                    return args(e);
                break;
            default: break;
            }
            return skip(0);
        });
    }

    const char* m_p;
    const char* m_end;
};

} // namespace

// Collective of a communication op or kernel, normalised so that "allreduce", "all_reduce",
// "c10d::allreduce_", "gloo:all_reduce" and "ncclDevKernel_AllReduce_Sum_f32" agree.
std::string_view normaliseCollective(std::string_view name)
{
    if (icontains(name, "allreduce") || icontains(name, "all_reduce"))
        return "allreduce";
    if (icontains(name, "reduce_scatter") || icontains(name, "reducescatter"))
        return "reduce_scatter";
    if (icontains(name, "allgather") || icontains(name, "all_gather"))
        return "allgather";
    if (icontains(name, "alltoall") || icontains(name, "all_to_all"))
        return "alltoall";
    if (icontains(name, "broadcast"))
        return "broadcast";
    if (icontains(name, "barrier"))
        return "barrier";
    if (icontains(name, "sendrecv") || icontains(name, "send") || icontains(name, "recv"))
        return "p2p";
    if (icontains(name, "reduce"))
        return "reduce";
    return "collective";
}

namespace {

class KinetoParser {
public:
    KinetoParser(ByteSource& source, const ImportOptions& options, Interner& strings, RankTrace& out,
                 const ProgressFn& progress)
        : m_source(source), m_options(options), m_strings(strings), m_out(out), m_progress(progress)
    {
        // Small inputs get a small buffer (the fuzzer runs thousands of them); big ones 8 MB.
        const int64_t hint = std::max<int64_t>(source.total(), 0) * 8 + 1;
        const std::string_view mapped = source.mapped();
        if (mapped.data() != nullptr) {
            // The whole input is addressable (a mapped file, a memory buffer): parse it in place.
            m_data = mapped.data();
            m_capacity = mapped.size();
            m_len = mapped.size();
            m_eof = true;
            m_mapped = true;
            m_out.bytes = static_cast<int64_t>(mapped.size());
        } else {
            m_buf.resize(static_cast<size_t>(std::clamp<int64_t>(hint, 64 << 10, kInitialBuffer)) + kPadding);
            m_data = m_buf.data();
            m_capacity = m_buf.size();
        }
    }

    Status run();

private:
    enum class State { Start, ObjKey, ObjColon, ObjValue, ObjAfterValue, Item, AfterItem, Done };

    // Buffer: bytes [0, m_len) are valid; m_pos is the scan position. refill() keeps
    // [keep, m_len), moves it to the front and reads more; returns the shift applied.
    size_t refill(size_t keep);
    int peekNonWs();
    void releaseConsumed();
    bool scanValue(size_t* start, size_t* end);
    Status structuralError(const std::string& what);
    Status finish();
    void onTopValue(std::string_view key, std::string_view text);
    void onEvent(const char* p, size_t n);
    bool readEvent(od::object& obj, Event& e);
    void addEvent(const Event& e);
    void onMetadata(const Event& e);
    bool eventTime(const Event& e, int64_t* ts);
    bool isSpanPhase(char ph);
    EventClass classify(const Event& e, SpanKind* gpuKind);
    void beginSpan(uint32_t lane, TimeNs ts, const Event& e);
    void endSpan(uint32_t lane, TimeNs ts, EventClass cls, SpanKind gpuKind);
    void completeSpan(uint32_t lane, TimeNs ts, EventClass cls, SpanKind gpuKind, const Event& e);
    void addDeviceSpan(uint32_t lane, TimeNs start, TimeNs end, std::string_view name, SpanKind gpuKind,
                       const Event& e);
    uint32_t laneFor(EventClass cls, const Event& e);
    size_t addSpan(uint32_t lane, TimeNs start, TimeNs end, StringId name, SpanKind kind, int64_t bytes);
    void addHostSpan(uint32_t lane, TimeNs start, TimeNs end, std::string_view name, const Event& e);
    void diag(DiagnosticKind kind) { m_out.diagnostics.add(kind); }
    void onLockstepMeta(std::string_view text);
    void addLockstepEvent(char ph, const Event& e, TimeNs ts);
    void resolveLaunches();

    ByteSource& m_source;
    const ImportOptions& m_options;
    Interner& m_strings;
    RankTrace& m_out;
    const ProgressFn& m_progress;

    // A read buffer that is not zero-filled on allocation or growth (std::vector would be).
    class Buffer {
    public:
        char* data() { return m_data.get(); }
        size_t size() const { return m_size; }
        void resize(size_t n)
        {
            auto bigger = std::make_unique_for_overwrite<char[]>(n);
            if (m_data)
                std::memcpy(bigger.get(), m_data.get(), std::min(n, m_size));
            m_data = std::move(bigger);
            m_size = n;
        }
        char operator[](size_t i) const { return m_data[i]; }

    private:
        std::unique_ptr<char[]> m_data;
        size_t m_size = 0;
    };
    Buffer m_buf;
    // The bytes being parsed: m_buf's, or the whole mapped input. m_capacity bytes are readable
    // from m_data (for m_buf that includes simdjson's padding; a mapping has none past its end).
    const char* m_data = nullptr;
    size_t m_capacity = 0;
    bool m_mapped = false;
    size_t m_released = 0; // mapped mode: input before this offset was handed back to the OS
    simdjson::padded_string m_scratch;
    size_t m_len = 0;
    size_t m_pos = 0;
    bool m_eof = false;
    int64_t m_bufOffset = 0; // input offset of m_buf[0]
    int64_t m_lastProgress = 0;
    bool m_topArray = false;
    std::string m_key;
    od::parser m_parser;

    std::optional<int64_t> m_baseNs;
    std::string m_laneKey;
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> m_laneByKey;
    // laneFor's last answer per family: its key's parts (host: the trimmed pid and tid tokens).
    uint32_t m_lastGpuLane = UINT32_MAX, m_lastHostLane = UINT32_MAX;
    int64_t m_lastGpuDevice = 0, m_lastGpuStream = 0;
    std::string m_lastHostPid, m_lastHostTid;
    std::vector<std::pair<std::string, std::string>> m_laneTokens; // (pid, tid) per host lane
    std::unordered_map<std::string, std::string> m_threadNames;  // "pid\x1ftid" -> name
    std::unordered_map<std::string, std::string> m_processNames; // pid -> name
    struct Open {
        TimeNs start;
        std::string name;
        Event e; // views into the event text are not kept: only scalar fields are used
    };
    std::unordered_map<uint32_t, std::vector<Open>> m_open; // B events per lane
    // External-id links: comm CPU ops by their External id, kernels waiting to be classified.
    struct CommOp {
        int64_t bytes;
        StringId collective;
    };
    std::unordered_map<int64_t, CommOp> m_commOps;
    std::vector<std::pair<size_t, int64_t>> m_kernelsWithExtId;
    std::unordered_set<int32_t> m_stepsSeen;
    // Launch correlation (see resolveLaunches): runtime calls and ac2g flow starts by correlation
    // id, host ops by External id, and each device span's ids.
    std::unordered_map<int64_t, std::pair<TimeNs, uint32_t>> m_runtimeByCorrelation; // start, lane
    std::unordered_map<int64_t, TimeNs> m_flowStartById;
    std::vector<std::pair<int64_t, TimeNs>> m_hostOpsByExtId;
    struct DeviceLink {
        size_t span;
        int64_t correlation, extId;
    };
    std::vector<DeviceLink> m_deviceLinks;
    bool m_traceEventsNotArray = false;
    // A trace Lockstep exported: its header, and lane id (tid) -> index into m_out.lanes.
    std::unordered_map<int64_t, uint32_t> m_lockstepLane;
};

size_t KinetoParser::refill(size_t keep)
{
    if (m_mapped)
        return 0;
    const size_t kept = m_len - keep;
    const size_t capacity = m_buf.size() - kPadding;
    if (keep > 0) {
        std::memmove(m_buf.data(), m_buf.data() + keep, kept);
    } else if (kept == capacity) {
        // One value larger than the buffer: grow (bounded by the input itself).
        m_buf.resize(capacity * 2 + kPadding);
        m_data = m_buf.data();
        m_capacity = m_buf.size();
    }
    m_len = kept;
    m_pos -= keep;
    m_bufOffset += static_cast<int64_t>(keep);
    const size_t room = m_buf.size() - kPadding - m_len;
    const size_t n = m_eof ? 0 : m_source.read(m_buf.data() + m_len, room);
    if (n == 0)
        m_eof = true;
    m_len += n;
    m_out.bytes += static_cast<int64_t>(n);
    std::memset(m_buf.data() + m_len, 0, kPadding);
    if (m_progress && m_source.consumed() - m_lastProgress >= (16 << 20)) {
        m_lastProgress = m_source.consumed();
        m_progress(m_lastProgress);
    }
    return keep;
}

// Mapped input: pages behind the parse position are handed back (their page cache stays), so
// resident memory follows the parse window instead of growing to the file size.
void KinetoParser::releaseConsumed()
{
    m_source.release(m_pos);
    m_released = m_pos;
    if (m_progress && m_source.consumed() - m_lastProgress >= (16 << 20)) {
        m_lastProgress = m_source.consumed();
        m_progress(m_lastProgress);
    }
}

int KinetoParser::peekNonWs()
{
    for (;;) {
        while (m_pos < m_len) {
            const char c = m_data[m_pos];
            if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
                ++m_pos;
            else
                return static_cast<unsigned char>(c);
        }
        if (m_eof)
            return -1;
        refill(m_pos);
    }
}

bool KinetoParser::scanValue(size_t* start, size_t* end)
{
    ValueScanner scanner;
    size_t begin = m_pos;
    size_t i = m_pos;
    for (;;) {
        if (i < m_len && scanner.feed(m_data, m_len, i)) {
            *start = begin;
            *end = i;
            m_pos = i;
            return true;
        }
        if (m_eof) {
            if (scanner.scalar() && i > begin) { // a number that ends the file
                *start = begin;
                *end = i;
                m_pos = i;
                return true;
            }
            m_pos = m_len; // the value runs to the end of the input: the caller sees EOF next
            return false;
        }
        m_pos = i;
        const size_t shift = refill(begin);
        begin -= shift;
        i -= shift;
    }
}

Status KinetoParser::structuralError(const std::string& what)
{
    const int64_t offset = m_bufOffset + static_cast<int64_t>(m_pos);
    const std::string message = what + " at byte " + std::to_string(offset);
    if (m_out.events == 0)
        return fail("not a valid trace-event JSON file: " + message);
    m_out.diagnostics.add(DiagnosticKind::MalformedJson, 1, message);
    return {};
}

Status KinetoParser::run()
{
    if (!m_mapped)
        refill(0);
    if (m_len >= 3 && std::memcmp(m_data, "\xEF\xBB\xBF", 3) == 0)
        m_pos = 3; // UTF-8 byte order mark
    State state = State::Start;
    while (state != State::Done) {
        const int c = peekNonWs();
        if (c < 0) {
            if (!m_source.error().empty())
                return structuralError(m_source.error());
            if (state == State::Start)
                return fail("empty file: no JSON trace in it");
            if (m_out.events == 0)
                return fail("truncated trace-event JSON: the file ends before any event");
            m_out.diagnostics.add(DiagnosticKind::TruncatedInput);
            break;
        }
        switch (state) {
        case State::Start:
            ++m_pos;
            if (c == '{') {
                state = State::ObjKey;
            } else if (c == '[') {
                m_topArray = true;
                state = State::Item;
            } else {
                return fail("not a trace-event JSON file: it starts with neither '{' nor '['");
            }
            break;
        case State::ObjKey: {
            if (c == '}') {
                ++m_pos;
                state = State::Done;
                break;
            }
            if (c != '"')
                return structuralError("expected a key string in the top-level object");
            size_t s = 0, e = 0;
            if (!scanValue(&s, &e))
                continue; // EOF: reported at the top of the loop
            m_key.assign(m_data + s + 1, e - s - 2);
            state = State::ObjColon;
            break;
        }
        case State::ObjColon:
            if (c != ':')
                return structuralError("expected ':' after a key");
            ++m_pos;
            state = State::ObjValue;
            break;
        case State::ObjValue: {
            if (m_key == "traceEvents" && c == '[') {
                ++m_pos;
                state = State::Item;
                break;
            }
            size_t s = 0, e = 0;
            if (!scanValue(&s, &e))
                continue;
            onTopValue(m_key, std::string_view(m_data + s, e - s));
            state = State::ObjAfterValue;
            break;
        }
        case State::ObjAfterValue:
            ++m_pos;
            if (c == ',')
                state = State::ObjKey;
            else if (c == '}')
                state = State::Done;
            else
                return structuralError("expected ',' or '}' in the top-level object");
            break;
        case State::Item: {
            if (c == ']') {
                ++m_pos;
                state = m_topArray ? State::Done : State::ObjAfterValue;
                break;
            }
            if (c == '{') {
                // Most events: read in one pass where they lie (see FastEventReader).
                Event event;
                size_t n = 0;
                if (FastEventReader(m_data + m_pos, m_data + m_len).read(event, &n)) {
                    m_pos += n;
                    ++m_out.events;
                    addEvent(event);
                    state = State::AfterItem;
                    if (m_mapped && m_pos - m_released >= (64u << 20))
                        releaseConsumed();
                    break;
                }
            }
            size_t s = 0, e = 0;
            if (!scanValue(&s, &e))
                continue;
            if (c == '{')
                onEvent(m_data + s, e - s);
            else
                diag(DiagnosticKind::EventNotObject);
            state = State::AfterItem;
            if (m_mapped && m_pos - m_released >= (64u << 20))
                releaseConsumed();
            break;
        }
        case State::AfterItem:
            ++m_pos;
            if (c == ',')
                state = State::Item;
            else if (c == ']')
                state = m_topArray ? State::Done : State::ObjAfterValue;
            else
                return structuralError("expected ',' or ']' between events");
            break;
        case State::Done: break;
        }
    }
    return finish();
}

void KinetoParser::onTopValue(std::string_view key, std::string_view text)
{
    if (key == "traceEvents") {
        m_traceEventsNotArray = true; // no events in it: finish() refuses the file if that is all
        return;
    }
    if (key == "lockstepRun") {
        onLockstepMeta(text);
        return;
    }
    if (key != "distributedInfo" && key != "baseTimeNanoseconds")
        return;
    simdjson::padded_string padded(text);
    od::document doc;
    if (m_parser.iterate(padded).get(doc)) {
        diag(DiagnosticKind::MalformedMetadata);
        return;
    }
    if (key == "baseTimeNanoseconds") {
        std::string_view tok;
        int64_t base = 0;
        if (doc.raw_json_token().get(tok) || parseInteger(trimToken(tok), &base) != NumberParse::Ok || base < 0) {
            diag(DiagnosticKind::MalformedMetadata);
            return;
        }
        m_baseNs = base;
        return;
    }
    od::object obj;
    if (doc.get_object().get(obj)) {
        diag(DiagnosticKind::MalformedMetadata);
        return;
    }
    for (auto fieldResult : obj) {
        od::field field;
        if (std::move(fieldResult).get(field))
            break;
        std::string_view k;
        if (field.unescaped_key().get(k))
            break;
        if (k == "rank" || k == "world_size") {
            int64_t v = 0;
            std::string_view tok;
            od::value fv = field.value();
            tok = fv.raw_json_token();
            if (parseInteger(trimToken(tok), &v) != NumberParse::Ok
                || v < 0 || v > 1'000'000) {
                diag(DiagnosticKind::MalformedMetadata);
                continue;
            }
            (k == "rank" ? m_out.rank : m_out.worldSize) = static_cast<int>(v);
        } else if (k == "backend") {
            std::string_view b;
            if (!field.value().get_string().get(b))
                m_out.backend = std::string(b);
        }
    }
}

// A "lockstep.step" event's arg into its field of the step (a number; anything else, or a
// field that is not a number, leaves the step's default).
void stepArg(const StepField& f, od::value v, Step& st)
{
    const std::string_view tok = trimToken(v.raw_json_token());
    visitField(f, st, [&](auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) {
            double d = 0;
            const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), d);
            if (r.ec == std::errc{} && r.ptr == tok.data() + tok.size())
                x = d;
        } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
            int64_t n = 0;
            if (parseInteger(tok, &n) == NumberParse::Ok)
                x = static_cast<T>(std::clamp<int64_t>(n, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
        }
    });
}

// The step field whose key an arg has, or nullptr.
const StepField* stepFieldOf(od::raw_json_string key)
{
    for (const StepField& f : kStepFields)
        if (key == std::string_view(f.key()))
            return &f;
    return nullptr;
}

// An event's args: the ones we use, into `e`. False when the object is malformed; args of
// another type than an object are nothing we use.
bool readArgs(od::value& v, Event& e)
{
    od::object args;
    if (v.get_object().get(args))
        return true;
    for (auto argResult : args) {
        od::field arg;
        if (std::move(argResult).get(arg))
            return false;
        od::raw_json_string ak = arg.key();
        auto intArg = [&](int64_t* out) {
            od::value av = arg.value();
            if (parseInteger(trimToken(av.raw_json_token()), out) != NumberParse::Ok)
                *out = -1;
        };
        if (ak == "External id")
            intArg(&e.extId);
        else if (ak == "correlation")
            intArg(&e.correlation);
        else if (ak == "step")
            intArg(&e.argStep);
        else if (ak == "bucket")
            intArg(&e.argBucket);
        else if (const StepField* f = e.cat == "lockstep.step" ? stepFieldOf(ak) : nullptr)
            stepArg(*f, arg.value(), e.stepArgs); // the exporter writes cat before args
        else if (ak == "kind") {
            if (arg.value().get_string().get(e.argKind))
                e.argKind = {};
        }
        else if (ak == "device")
            intArg(&e.device);
        else if (ak == "stream")
            intArg(&e.stream);
        else if (ak == "bytes")
            intArg(&e.bytes);
        else if (ak == "In msg nelems" || ak == "In msg size")
            intArg(&e.inNelems);
        else if (ak == "Out msg nelems" || ak == "Out msg size")
            intArg(&e.outNelems);
        else if (ak == "Collective name") {
            e.hasCommMeta = true;
            if (arg.value().get_string().get(e.collective))
                e.collective = {};
        } else if (ak == "dtype") {
            if (arg.value().get_string().get(e.dtype))
                e.dtype = {};
        } else if (ak == "Process Group Name") {
            e.hasCommMeta = true;
            od::value av = arg.value();
            std::string_view tok = trimToken(av.raw_json_token());
            if (tok.size() >= 2 && tok.front() == '"' && tok.back() == '"')
                tok = tok.substr(1, tok.size() - 2);
            e.group = tok;
        } else if (ak == "Process Group Ranks" || ak == "Group size") {
            e.hasCommMeta = true;
        } else if (ak == "name") {
            if (arg.value().get_string().get(e.argName))
                e.argName = {};
        }
    }
    return true;
}

bool KinetoParser::readEvent(od::object& obj, Event& e)
{
    for (auto fieldResult : obj) {
        od::field field;
        if (std::move(fieldResult).get(field))
            return false;
        od::raw_json_string key = field.key();
        od::value v = field.value();
        if (key == "ph") {
            if (v.get_string().get(e.ph))
                e.ph = "?";
        } else if (key == "name") {
            if (v.get_string().get(e.name)) {
                diag(DiagnosticKind::WrongType);
                e.name = "?";
            }
            e.hasName = true;
        } else if (key == "ts") {
            e.ts = v.raw_json_token();
        } else if (key == "dur") {
            e.dur = v.raw_json_token();
        } else if (key == "cat") {
            if (v.get_string().get(e.cat))
                e.cat = {};
        } else if (key == "pid") {
            e.pid = v.raw_json_token();
        } else if (key == "tid") {
            e.tid = v.raw_json_token();
        } else if (key == "id") {
            e.id = v.raw_json_token();
        } else if (key == "args") {
            if (!readArgs(v, e))
                return false;
        }
    }
    return true;
}

void KinetoParser::onEvent(const char* p, size_t n)
{
    ++m_out.events;
    {
        // An event the one-pass reader refused only because it ran past the read buffer.
        Event e;
        size_t size = 0;
        if (FastEventReader(p, p + n).read(e, &size) && size == n) {
            addEvent(e);
            return;
        }
    }
    size_t capacity = static_cast<size_t>(m_data + m_capacity - p);
    if (capacity < n + kPadding) {
        // The last bytes of a mapping: simdjson may read up to kPadding past the event.
        m_scratch = simdjson::padded_string(p, n);
        p = m_scratch.data();
        capacity = n + kPadding;
    }
    od::document doc;
    od::object obj;
    if (m_parser.iterate(p, n, capacity).get(doc) || doc.get_object().get(obj)) {
        diag(DiagnosticKind::MalformedEvent);
        return;
    }
    Event e;
    if (!readEvent(obj, e)) {
        diag(DiagnosticKind::MalformedEvent);
        return;
    }
    addEvent(e);
}

uint32_t KinetoParser::laneFor(EventClass cls, const Event& e)
{
    // Key: class + the identifying numbers. GPU lanes by (device, stream) from args when
    // present (Kineto puts them there), else by (pid, tid) which Kineto sets to the same.
    m_laneKey.clear();
    int64_t device = e.device, stream = e.stream;
    if (cls == EventClass::Gpu) {
        if (device < 0 && parseInteger(trimToken(e.pid), &device) != NumberParse::Ok)
            device = 0;
        if (stream < 0 && parseInteger(trimToken(e.tid), &stream) != NumberParse::Ok)
            stream = 0;
        // Consecutive events mostly share their lane: the last one of each family is kept.
        if (m_lastGpuLane != UINT32_MAX && device == m_lastGpuDevice && stream == m_lastGpuStream)
            return m_lastGpuLane;
        m_laneKey.push_back('g');
        m_laneKey.append(std::to_string(device));
        m_laneKey.push_back('/');
        m_laneKey.append(std::to_string(stream));
    } else {
        if (m_lastHostLane != UINT32_MAX && trimToken(e.pid) == m_lastHostPid && trimToken(e.tid) == m_lastHostTid)
            return m_lastHostLane;
        m_laneKey.push_back('h');
        m_laneKey.append(trimToken(e.pid));
        m_laneKey.push_back('\x1f');
        m_laneKey.append(trimToken(e.tid));
    }
    auto remember = [&](uint32_t lane) {
        if (cls == EventClass::Gpu) {
            m_lastGpuLane = lane;
            m_lastGpuDevice = device;
            m_lastGpuStream = stream;
        } else {
            m_lastHostLane = lane;
            m_lastHostPid = trimToken(e.pid);
            m_lastHostTid = trimToken(e.tid);
        }
        return lane;
    };
    auto it = m_laneByKey.find(m_laneKey);
    if (it != m_laneByKey.end())
        return remember(it->second);
    const auto index = static_cast<uint32_t>(m_out.lanes.size());
    RawLane lane;
    if (cls == EventClass::Gpu) {
        lane.kind = LaneKind::GpuStream;
        lane.device = static_cast<int32_t>(std::clamp<int64_t>(device, -1, INT32_MAX));
        lane.stream = stream;
        lane.name = "gpu " + std::to_string(device) + " stream " + std::to_string(stream);
    } else {
        lane.kind = LaneKind::HostThread;
        int64_t tid = 0;
        lane.stream = parseInteger(trimToken(e.tid), &tid) == NumberParse::Ok ? tid : static_cast<int64_t>(index);
        lane.name = "thread " + std::string(trimToken(e.tid));
    }
    m_out.lanes.push_back(std::move(lane));
    m_laneTokens.emplace_back(std::string(trimToken(e.pid)), std::string(trimToken(e.tid)));
    m_laneByKey.emplace(m_laneKey, index);
    return remember(index);
}

size_t KinetoParser::addSpan(uint32_t lane, TimeNs start, TimeNs end, StringId name, SpanKind kind, int64_t bytes)
{
    Span s;
    s.start = start;
    s.end = end;
    s.lane = LaneId{lane};
    s.name = name;
    s.kind = kind;
    s.bytes = std::max<int64_t>(bytes, 0);
    m_out.spans.push_back(s);
    return m_out.spans.size() - 1;
}

bool isCommOpName(std::string_view n)
{
    return n == "record_param_comms" || n.starts_with("c10d::") || n.starts_with("gloo:")
        || n.starts_with("nccl:") || n.starts_with("ProcessGroupNCCL::") || n.starts_with("ProcessGroupGloo::");
}

int64_t commBytes(const Event& e)
{
    const int64_t nelems = e.inNelems >= 0 ? e.inNelems : e.outNelems;
    if (nelems < 0)
        return 0;
    const int size = dtypeSize(e.dtype);
    const int64_t elem = size > 0 ? size : 4; // float32 when the dtype is not recorded
    return nelems > INT64_MAX / elem ? INT64_MAX : nelems * elem;
}

void KinetoParser::addHostSpan(uint32_t lane, TimeNs start, TimeNs end, std::string_view name, const Event& e)
{
    // Launch records: a host event with a correlation id is a CUDA runtime or driver call
    // (cudaLaunchKernel, cudaMemcpyAsync, ...); one with an External id is the operator that
    // made it. The first one seen of each id is the launch.
    if (e.correlation >= 0)
        m_runtimeByCorrelation.emplace(e.correlation, std::pair{start, lane});
    if (e.extId >= 0)
        m_hostOpsByExtId.emplace_back(e.extId, start);
    SpanKind kind = SpanKind::CpuOp;
    int64_t bytes = 0;
    const bool comm = e.hasCommMeta || isCommOpName(name);
    if (name.starts_with("ProfilerStep#")) {
        kind = SpanKind::Other;
        int64_t n = 0;
        if (parseInteger(name.substr(13), &n) == NumberParse::Ok && n >= 0 && n <= INT32_MAX) {
            if (m_stepsSeen.insert(static_cast<int32_t>(n)).second) {
                Step st;
                st.step = static_cast<int32_t>(n);
                st.start = start;
                st.end = end;
                m_out.steps.push_back(st);
            } else {
                diag(DiagnosticKind::DuplicateStep);
            }
        } else {
            diag(DiagnosticKind::MalformedStepName);
        }
    } else if (comm) {
        kind = SpanKind::Comm;
        bytes = commBytes(e);
    } else if (name.starts_with("DistributedDataParallel.forward") || name.starts_with("## forward")) {
        kind = SpanKind::Forward;
    } else if (name.starts_with("Optimizer.")) {
        kind = SpanKind::Optimizer;
    } else if (name.starts_with("enumerate(DataLoader)")) {
        kind = SpanKind::DataLoad;
    } else if (!e.cat.empty() && (iequals(e.cat, "Trace") || iequals(e.cat, "overhead"))) {
        kind = SpanKind::Other;
    }
    const size_t index = addSpan(lane, start, end, m_strings.intern(name), kind, bytes);
    if (kind == SpanKind::Comm) {
        const StringId collective =
            m_strings.intern(normaliseCollective(e.collective.empty() ? name : e.collective));
        m_out.collective.emplace(index, CommMeta{collective, m_strings.intern(e.group)});
        if (e.extId >= 0)
            m_commOps[e.extId] = CommOp{bytes, collective};
    }
}

void KinetoParser::onMetadata(const Event& e)
{
    if (e.argName.empty())
        return;
    if (e.name == "thread_name")
        m_threadNames[std::string(trimToken(e.pid)) + '\x1f' + std::string(trimToken(e.tid))] = std::string(e.argName);
    else if (e.name == "process_name")
        m_processNames[std::string(trimToken(e.pid))] = std::string(e.argName);
}

bool KinetoParser::eventTime(const Event& e, int64_t* ts)
{
    if (e.ts.empty()) {
        diag(DiagnosticKind::MissingTimestamp);
        return false;
    }
    switch (parseMicrosToNs(e.ts, ts)) {
    case NumberParse::Ok: return true;
    case NumberParse::NotNumber: diag(DiagnosticKind::WrongType); return false;
    case NumberParse::OutOfRange: diag(DiagnosticKind::TimestampOutOfRange); return false;
    }
    return false;
}

bool KinetoParser::isSpanPhase(char ph)
{
    switch (ph) {
    case 'X':
    case 'B':
    case 'E': return true;
    case 's': case 'f': case 't':
    case 'i': case 'I': case 'C': case 'b': case 'e': case 'n': case 'P': case 'O': case 'N': case 'D':
    case 'R': case 'c':
        m_out.diagnostics.add(DiagnosticKind::IgnoredPhase);
        return false;
    default:
        diag(DiagnosticKind::UnknownPhase);
        return false;
    }
}

EventClass KinetoParser::classify(const Event& e, SpanKind* gpuKind)
{
    *gpuKind = SpanKind::Kernel;
    if (e.cat.empty())
        return EventClass::Host;
    if (iequals(e.cat, "kernel"))
        return EventClass::Gpu;
    if (iequals(e.cat, "gpu_memcpy") || iequals(e.cat, "memcpy")) {
        *gpuKind = SpanKind::Memcpy;
        return EventClass::Gpu;
    }
    if (iequals(e.cat, "gpu_memset") || iequals(e.cat, "memset")) {
        *gpuKind = SpanKind::Memset;
        return EventClass::Gpu;
    }
    if (iequals(e.cat, "gpu_user_annotation") || iequals(e.cat, "cuda_sync")) {
        // A range annotation drawn on the device, or a stream waiting on an event or the
        // host ("Stream Sync", "Event Sync", "Context Sync"): shown on its stream, never
        // work (newer HTA: neither compute nor communication).
        *gpuKind = SpanKind::Other;
        return EventClass::Gpu;
    }
    if (iequals(e.cat, "python_function") && !m_options.includePythonFunctions) {
        m_out.diagnostics.add(DiagnosticKind::PythonFunctionsSkipped);
        return EventClass::Skip;
    }
    return EventClass::Host;
}

void KinetoParser::beginSpan(uint32_t lane, TimeNs ts, const Event& e)
{
    m_open[lane].push_back(Open{ts, std::string(e.hasName ? e.name : "?"), {}});
    auto& o = m_open[lane].back();
    o.e.hasCommMeta = e.hasCommMeta;
    o.e.inNelems = e.inNelems;
    o.e.outNelems = e.outNelems;
    o.e.extId = e.extId;
    o.e.cat = iequals(e.cat, "Trace") ? "Trace" : "";
}

void KinetoParser::endSpan(uint32_t lane, TimeNs ts, EventClass cls, SpanKind gpuKind)
{
    auto it = m_open.find(lane);
    if (it == m_open.end() || it->second.empty()) {
        diag(DiagnosticKind::UnmatchedBeginEnd);
        return;
    }
    Open o = std::move(it->second.back());
    it->second.pop_back();
    if (ts < o.start) {
        diag(DiagnosticKind::NegativeDuration);
        return;
    }
    if (cls == EventClass::Gpu) {
        const size_t index = addSpan(lane, o.start, ts, m_strings.intern(o.name), gpuKind, 0);
        if (isDeviceKind(gpuKind))
            m_deviceLinks.push_back({index, -1, -1}); // B/E pairs carry no correlation
    } else
        addHostSpan(lane, o.start, ts, o.name, o.e);
}

// An 'X' event.
void KinetoParser::completeSpan(uint32_t lane, TimeNs ts, EventClass cls, SpanKind gpuKind, const Event& e)
{
    if (e.dur.empty()) {
        diag(DiagnosticKind::MissingDuration);
        return;
    }
    int64_t dur = 0;
    switch (parseMicrosToNs(e.dur, &dur)) {
    case NumberParse::Ok: break;
    case NumberParse::NotNumber: diag(DiagnosticKind::WrongType); return;
    case NumberParse::OutOfRange: diag(DiagnosticKind::TimestampOutOfRange); return;
    }
    if (dur < 0) {
        diag(DiagnosticKind::NegativeDuration);
        return;
    }
    int64_t end = 0;
    if (__builtin_add_overflow(ts, dur, &end)) {
        diag(DiagnosticKind::TimestampOutOfRange);
        return;
    }
    if (!e.hasName)
        diag(DiagnosticKind::MissingName);
    const std::string_view name = e.hasName ? e.name : std::string_view("?");
    if (cls == EventClass::Host)
        addHostSpan(lane, ts, end, name, e);
    else
        addDeviceSpan(lane, ts, end, name, gpuKind, e);
}

void KinetoParser::addDeviceSpan(uint32_t lane, TimeNs start, TimeNs end, std::string_view name, SpanKind gpuKind,
                                 const Event& e)
{
    SpanKind kind = gpuKind;
    int64_t bytes = gpuKind == SpanKind::Memcpy || gpuKind == SpanKind::Memset ? e.bytes : 0;
    bool comm = false;
    if (gpuKind == SpanKind::Kernel
        && (e.hasCommMeta || name.starts_with("nccl") || name.starts_with("ncclKernel_")
            || name.starts_with("ncclDevKernel_"))) {
        // Metadata first; the nccl name prefix is the fallback for traces without it.
        comm = true;
        kind = SpanKind::CommKernel;
        bytes = commBytes(e);
    }
    const size_t index = addSpan(lane, start, end, m_strings.intern(name), kind, bytes);
    if (comm) {
        const StringId collective =
            m_strings.intern(normaliseCollective(e.collective.empty() ? name : e.collective));
        m_out.collective.emplace(index, CommMeta{collective, m_strings.intern(e.group)});
    } else if (gpuKind == SpanKind::Kernel && e.extId >= 0) {
        m_kernelsWithExtId.emplace_back(index, e.extId);
    }
    if (isDeviceKind(kind))
        m_deviceLinks.push_back({index, e.correlation, e.extId});
}

void KinetoParser::addEvent(const Event& e)
{
    if (e.ph.empty()) {
        diag(DiagnosticKind::MissingPhase);
        return;
    }
    const char ph = e.ph.size() == 1 ? e.ph[0] : '?';
    if (ph == 'M') {
        onMetadata(e);
        return;
    }
    if (m_out.lockstep) {
        int64_t ts = 0;
        if (eventTime(e, &ts))
            addLockstepEvent(ph, e, ts);
        return;
    }
    if (ph == 's' && iequals(e.cat, "ac2g")) {
        // The start of a CPU -> GPU flow: at the launching runtime call, id = the correlation id.
        int64_t ts = 0, id = 0;
        if (eventTime(e, &ts) && parseInteger(trimToken(e.id), &id) == NumberParse::Ok)
            m_flowStartById.emplace(id, ts);
        return;
    }
    if (!isSpanPhase(ph))
        return;
    // Which lane family.
    SpanKind gpuKind = SpanKind::Kernel;
    const EventClass cls = classify(e, &gpuKind);
    if (cls == EventClass::Skip)
        return;
    int64_t ts = 0;
    if (!eventTime(e, &ts))
        return;
    const uint32_t lane = laneFor(cls, e);
    if (ph == 'B')
        beginSpan(lane, ts, e);
    else if (ph == 'E')
        endSpan(lane, ts, cls, gpuKind);
    else
        completeSpan(lane, ts, cls, gpuKind, e);
}

// Each device span's launch: the runtime call with the same correlation id, else the start of
// the ac2g flow with that id (the same instant, written as a flow by newer Kineto), else the
// host operator with the same External id (the operator that made the call). Times are still
// relative to baseTimeNanoseconds here, like the spans; finish() shifts both.
void KinetoParser::resolveLaunches()
{
    bool needExt = false;
    for (const DeviceLink& d : m_deviceLinks)
        needExt |= d.extId >= 0 && !m_runtimeByCorrelation.count(d.correlation) && !m_flowStartById.count(d.correlation);
    if (needExt)
        std::stable_sort(m_hostOpsByExtId.begin(), m_hostOpsByExtId.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
    m_out.deviceLaunch.reserve(m_deviceLinks.size());
    for (const DeviceLink& d : m_deviceLinks) {
        TimeNs launch = kNoLaunch;
        uint32_t launchLane = UINT32_MAX;
        if (auto it = m_runtimeByCorrelation.find(d.correlation); d.correlation >= 0 && it != m_runtimeByCorrelation.end()) {
            launch = it->second.first;
            launchLane = it->second.second;
        }
        else if (auto f = m_flowStartById.find(d.correlation); d.correlation >= 0 && f != m_flowStartById.end())
            launch = f->second;
        else if (d.extId >= 0 && needExt) {
            auto op = std::lower_bound(m_hostOpsByExtId.begin(), m_hostOpsByExtId.end(), d.extId,
                                       [](const auto& a, int64_t v) { return a.first < v; });
            if (op != m_hostOpsByExtId.end() && op->first == d.extId)
                launch = op->second;
        }
        m_out.deviceLaunch.push_back({d.span, launch, launchLane});
    }
    std::vector<std::pair<int64_t, TimeNs>>().swap(m_hostOpsByExtId);
}

Status KinetoParser::finish()
{
    if (m_progress)
        m_progress(m_source.consumed());
    if (m_out.spans.empty() && m_out.steps.empty() && m_out.instants.empty()) {
        // Nothing to import is an error, not an empty run: a JSON that is not a trace (a config
        // file, `{}`, `[]`) must not become a run with 0 steps and exit status 0.
        if (m_traceEventsNotArray)
            return fail("not a trace: its traceEvents member is not an array of events");
        if (m_out.events == 0)
            return fail("not a trace: the JSON holds no trace events (expected torch.profiler's "
                        "{\"traceEvents\": [...]} or a bare array of events)");
        return fail("no usable trace events: all " + std::to_string(m_out.events)
                    + " events were skipped (see the counts above) or carry no time span");
    }
    for (auto& [lane, stack] : m_open)
        if (!stack.empty())
            m_out.diagnostics.add(DiagnosticKind::UnmatchedBeginEnd, static_cast<int64_t>(stack.size()));
    // A kernel launched by a communication op (same External id) is a communication kernel:
    // the way NCCL kernels are found when their names are not the usual ones.
    for (const auto& [index, extId] : m_kernelsWithExtId) {
        auto it = m_commOps.find(extId);
        if (it == m_commOps.end())
            continue;
        Span& s = m_out.spans[index];
        s.kind = SpanKind::CommKernel;
        s.bytes = it->second.bytes;
        m_out.collective.emplace(index, CommMeta{it->second.collective, {}});
    }
    resolveLaunches();
    // Newer Kineto writes ts relative to baseTimeNanoseconds (found after traceEvents).
    if (m_baseNs && *m_baseNs != 0) {
        const int64_t base = *m_baseNs;
        constexpr size_t kDropped = SIZE_MAX;
        std::vector<size_t> newIndex; // filled once a span is dropped (rare)
        size_t kept = 0;
        for (size_t i = 0; i < m_out.spans.size(); ++i) {
            Span s = m_out.spans[i];
            if (__builtin_add_overflow(s.start, base, &s.start) || __builtin_add_overflow(s.end, base, &s.end)) {
                diag(DiagnosticKind::TimestampOutOfRange);
                if (newIndex.empty()) {
                    newIndex.resize(m_out.spans.size());
                    for (size_t k = 0; k < i; ++k)
                        newIndex[k] = k;
                }
                newIndex[i] = kDropped;
                continue;
            }
            if (!newIndex.empty())
                newIndex[i] = kept;
            m_out.spans[kept++] = s;
        }
        m_out.spans.resize(kept);
        if (!newIndex.empty()) {
            // Keep the side tables aligned with the compacted spans.
            std::unordered_map<size_t, CommMeta> collective;
            for (const auto& [i, c] : m_out.collective)
                if (newIndex[i] != kDropped)
                    collective.emplace(newIndex[i], c);
            m_out.collective.swap(collective);
            std::erase_if(m_out.deviceLaunch, [&](auto& d) {
                d.span = newIndex[d.span];
                return d.span == kDropped;
            });
        }
        for (auto& [span, launch, launchLane] : m_out.deviceLaunch)
            if (launch != kNoLaunch && __builtin_add_overflow(launch, base, &launch))
                launch = kNoLaunch;
        std::erase_if(m_out.steps, [&](Step& st) {
            return __builtin_add_overflow(st.start, base, &st.start) || __builtin_add_overflow(st.end, base, &st.end);
        });
    }
    // Legacy exports (torch builds without Kineto) write ts relative to the profiler's start
    // and no base: such ranks line up only as well as their profilers started together.
    constexpr TimeNs kYear2000Ns = 946'684'800'000'000'000;
    if (!m_baseNs && !m_out.spans.empty()) {
        TimeNs first = m_out.spans.front().start;
        for (const Span& sp : m_out.spans)
            first = std::min(first, sp.start);
        if (first < kYear2000Ns / 1000)
            m_out.diagnostics.add(DiagnosticKind::RelativeTimestamps);
    }
    for (size_t i = 0; i < m_out.lanes.size() && !m_out.lockstep; ++i) {
        if (m_out.lanes[i].kind != LaneKind::HostThread)
            continue;
        const auto& [pid, tid] = m_laneTokens[i];
        auto it = m_threadNames.find(pid + '\x1f' + tid);
        if (it != m_threadNames.end() && !it->second.empty()) {
            if (it->second.size() > kMaxNameBytes)
                m_out.diagnostics.add(DiagnosticKind::NameTruncated);
            m_out.lanes[i].name = std::string(capName(it->second));
        }
        int64_t pidValue = 0;
        if (m_out.pid == 0 && parseInteger(pid, &pidValue) == NumberParse::Ok)
            m_out.pid = pidValue;
    }
    return {};
}

// ---------------------------------------------------------------------------------------------
// Traces Lockstep exported (core/chrome_export.h): a "lockstepRun" header before traceEvents
// carries the run's configuration, ranks, lanes (id = the events' tid, rank = their pid) and
// buckets; "X" events carry kind, step, bucket and bytes in args; "i" events are the instants;
// the per-rank "steps" track's "X" events (cat "lockstep.step") are the steps. Flows are drawn
// from the spans, so they are not read back.

namespace {

// A field of a table (fields.h) from the JSON object `e`, under its key. Absent: the record's
// value stays (its default); of another type: "" or 0, an enum's "unknown" (enumFromName), a
// nullable field's "unknown". Integers are clamped to their type; text is capped (capName).
template <class Record>
void readValue(const Field<Record>& f, simdjson::dom::element e, Record& record)
{
    simdjson::dom::element x;
    if (e[f.key()].get(x))
        return;
    const bool nullable = f.has(kFieldNullable);
    visitField(f, record, [&](auto& v) {
        using T = std::decay_t<decltype(v)>;
        std::string_view s;
        if constexpr (std::is_same_v<T, std::string>)
            v = x.get_string().get(s) ? std::string() : std::string(capName(s));
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            v.clear();
            simdjson::dom::array items;
            if (!x.get(items))
                for (simdjson::dom::element item : items)
                    if (!item.get_string().get(s))
                        v.emplace_back(capName(s));
        } else if constexpr (std::is_enum_v<T>)
            enumFromName(x.get_string().get(s) ? std::string_view() : s, &v);
        else if constexpr (std::is_same_v<T, double>) {
            double d = 0;
            v = !x.get_double().get(d) ? d : nullable ? std::numeric_limits<double>::quiet_NaN() : 0.0;
        } else {
            int64_t n = 0;
            if (x.get_int64().get(n))
                n = nullable ? -1 : 0;
            v = static_cast<T>(std::clamp<int64_t>(n, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
        }
    });
}

} // namespace

void KinetoParser::onLockstepMeta(std::string_view text)
{
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(text.data(), text.size()).get(root) || !root.is_object()) {
        diag(DiagnosticKind::MalformedMetadata);
        return;
    }
    LockstepMeta meta;
    simdjson::dom::element c;
    if (!root["config"].get(c) && c.is_object()) {
        RunConfig& rc = meta.config;
        // Every field of the run's table (fields.h) the export writes, under its name; one the
        // header lacks (an older export) keeps RunConfig's default.
        for (const RunConfigField& f : kRunConfigFields)
            if (!f.has(kFieldLocal))
                readValue(f, c, rc);
        // What no run can have: fewer than one rank or accumulation step, negative steps.
        rc.worldSize = std::clamp(rc.worldSize, 1, 1'000'000);
        rc.accumulate = std::max(rc.accumulate, 1);
        rc.stepsPlanned = std::max(rc.stepsPlanned, 0);
        simdjson::dom::object extra;
        if (!c["extra"].get(extra))
            for (auto [k, v] : extra) {
                std::string_view value;
                if (!v.get_string().get(value))
                    rc.extra[std::string(capName(k))] = std::string(capName(value));
            }
    }
    simdjson::dom::array ranks, lanes, buckets;
    if (!root["ranks"].get(ranks))
        for (simdjson::dom::element r : ranks) {
            RankInfo info;
            for (const RankField& f : kRankFields)
                if (!f.has(kFieldLocal)) // the export's times are corrected already: no clock fields
                    readValue(f, r, info);
            info.rank = std::max(info.rank, 0);
            meta.ranks.push_back(std::move(info));
        }
    if (!root["lanes"].get(lanes))
        for (simdjson::dom::element l : lanes) {
            Lane lane;
            for (const LaneField& f : kLaneFields)
                readValue(f, l, lane);
            lane.rank = std::max(lane.rank, 0);
            lane.device = std::max(lane.device, -1);
            meta.lanes.push_back(std::move(lane));
        }
    if (!root["buckets"].get(buckets))
        for (simdjson::dom::element b : buckets) {
            Bucket bucket;
            for (const BucketField& f : kBucketFields)
                readValue(f, b, bucket);
            bucket.index = std::max(bucket.index, 0);
            meta.buckets.push_back(std::move(bucket));
        }
    for (const Lane& lane : meta.lanes) {
        RawLane raw;
        raw.kind = lane.kind;
        raw.device = lane.device;
        raw.stream = lane.stream;
        raw.name = lane.name;
        raw.rank = lane.rank;
        m_lockstepLane.emplace(lane.id.v, static_cast<uint32_t>(m_out.lanes.size()));
        m_out.lanes.push_back(std::move(raw));
    }
    m_out.source = "lockstep";
    m_out.lockstep = std::move(meta);
}

void KinetoParser::addLockstepEvent(char ph, const Event& e, TimeNs ts)
{
    int64_t pid = 0, tid = 0;
    if (parseInteger(trimToken(e.pid), &pid) != NumberParse::Ok || pid < 0 || pid > INT32_MAX) {
        diag(DiagnosticKind::WrongType);
        return;
    }
    const std::string_view name = e.hasName ? e.name : std::string_view("?");
    if (ph == 'X') {
        int64_t dur = 0;
        if (parseMicrosToNs(e.dur, &dur) != NumberParse::Ok || dur < 0 || __builtin_add_overflow(ts, dur, &dur)) {
            diag(e.dur.empty() ? DiagnosticKind::MissingDuration : DiagnosticKind::WrongType);
            return;
        }
        const TimeNs end = dur;
        if (e.cat == "lockstep.step") {
            Step st = e.stepArgs; // the args; the event itself is rank, start and end
            st.rank = static_cast<int32_t>(pid);
            st.step = static_cast<int32_t>(std::clamp<int64_t>(e.argStep, INT32_MIN, INT32_MAX));
            st.start = ts;
            st.end = end;
            st.samples = std::max<int64_t>(0, st.samples);
            st.cpuNs = std::max<int64_t>(-1, st.cpuNs);
            st.runqNs = std::max<int64_t>(-1, st.runqNs);
            m_out.steps.push_back(st);
            return;
        }
        auto lane = m_lockstepLane.find(parseInteger(trimToken(e.tid), &tid) == NumberParse::Ok ? tid : -1);
        SpanKind kind = SpanKind::Other;
        if (lane == m_lockstepLane.end() || !spanKindFromName(e.argKind, &kind)) {
            diag(DiagnosticKind::MalformedEvent);
            return;
        }
        Span s;
        s.start = ts;
        s.end = end;
        s.lane = LaneId{lane->second};
        s.name = m_strings.intern(name);
        s.kind = kind;
        s.step = static_cast<int32_t>(std::clamp<int64_t>(e.argStep, -1, INT32_MAX));
        s.bucket = static_cast<int32_t>(std::clamp<int64_t>(e.argBucket, -1, INT32_MAX));
        s.bytes = std::max<int64_t>(0, e.bytes);
        m_out.spans.push_back(s);
        return;
    }
    if (ph == 'i' || ph == 'I') {
        auto lane = m_lockstepLane.find(parseInteger(trimToken(e.tid), &tid) == NumberParse::Ok ? tid : -1);
        if (lane == m_lockstepLane.end()) {
            diag(DiagnosticKind::MalformedEvent);
            return;
        }
        Instant in;
        in.ts = ts;
        in.lane = LaneId{lane->second};
        in.name = m_strings.intern(name);
        in.step = static_cast<int32_t>(std::clamp<int64_t>(e.argStep, -1, INT32_MAX));
        in.bucket = static_cast<int32_t>(std::clamp<int64_t>(e.argBucket, -1, INT32_MAX));
        in.kind = e.cat == "marker" ? InstantKind::Marker : InstantKind::GradReady;
        m_out.instants.push_back(in);
        return;
    }
    if (ph != 's' && ph != 't' && ph != 'f') // flows are drawn from the spans: nothing to read
        diag(DiagnosticKind::UnknownPhase);
}

} // namespace

Status parseKineto(ByteSource& source, const ImportOptions& options, Interner& strings, RankTrace& out,
                   const ProgressFn& progress)
{
    out.source = "kineto";
    // About one span per 500 bytes of JSON (torch.profiler's events, args and all): reserved, so
    // the vector does not grow by copies (untouched capacity costs no memory).
    out.spans.reserve(static_cast<size_t>(std::max<int64_t>(0, source.total())) / 512);
    KinetoParser parser(source, options, strings, out, progress);
    return parser.run();
}

} // namespace lockstep::core::detail
