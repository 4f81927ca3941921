// Byte sources (plain file, gzip file, memory, gzip memory), the diagnostics counter, the
// interner and the number parsers the importers share.
#include "import_internal.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lockstep::core::detail {

namespace {

class FileSource final : public ByteSource {
public:
    FileSource(int fd, int64_t size) : m_fd(fd), m_size(size) {}
    ~FileSource() override { ::close(m_fd); }
    size_t read(char* out, size_t capacity) override
    {
        size_t got = 0;
        while (got < capacity) {
            const ssize_t n = ::read(m_fd, out + got, capacity - got);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                m_error = std::string("read error: ") + std::strerror(errno);
                break;
            }
            if (n == 0)
                break;
            got += static_cast<size_t>(n);
        }
        m_consumed += static_cast<int64_t>(got);
        return got;
    }
    int64_t consumed() const override { return m_consumed; }
    int64_t total() const override { return m_size; }

private:
    int m_fd;
    int64_t m_size;
    int64_t m_consumed = 0;
};

// Inflates gzip (or zlib) members one after another (`cat a.gz b.gz` is a valid gzip file) from
// an input refilled by `fill`. A stream that ends inside a member is reported as truncated.
class GzipSource final : public ByteSource {
public:
    GzipSource(std::function<size_t(char*, size_t)> fill, int64_t total)
        : m_fill(std::move(fill)), m_total(total), m_in(kInChunk)
    {
        std::memset(&m_zs, 0, sizeof m_zs);
        m_ok = inflateInit2(&m_zs, 15 + 32) == Z_OK; // 15 + 32: gzip or zlib header, detected
        if (!m_ok)
            m_error = "cannot initialise zlib";
    }
    ~GzipSource() override { inflateEnd(&m_zs); }
    size_t read(char* out, size_t capacity) override
    {
        if (!m_ok || m_done)
            return 0;
        m_zs.next_out = reinterpret_cast<Bytef*>(out);
        m_zs.avail_out = static_cast<uInt>(std::min<size_t>(capacity, 1u << 30));
        const uInt wanted = m_zs.avail_out;
        while (m_zs.avail_out > 0) {
            if (m_zs.avail_in == 0) {
                const size_t n = m_fill(m_in.data(), m_in.size());
                m_consumed += static_cast<int64_t>(n);
                if (n == 0) {
                    if (m_inMember)
                        m_error = "truncated gzip stream (the file ends inside compressed data)";
                    m_done = true;
                    break;
                }
                m_zs.next_in = reinterpret_cast<Bytef*>(m_in.data());
                m_zs.avail_in = static_cast<uInt>(n);
            }
            if (!m_inMember) {
                // Between members: padding zeros after the last member are tolerated.
                if (m_zs.next_in[0] == 0) {
                    ++m_zs.next_in;
                    --m_zs.avail_in;
                    continue;
                }
                m_inMember = true;
            }
            const int rc = inflate(&m_zs, Z_NO_FLUSH);
            if (rc == Z_STREAM_END) {
                m_inMember = false;
                inflateReset(&m_zs);
                continue;
            }
            if (rc != Z_OK && rc != Z_BUF_ERROR) {
                m_error = std::string("corrupt gzip data: ") + (m_zs.msg ? m_zs.msg : "inflate failed");
                m_done = true;
                m_ok = false;
                break;
            }
        }
        return wanted - m_zs.avail_out;
    }
    int64_t consumed() const override { return m_consumed; }
    int64_t total() const override { return m_total; }

private:
    static constexpr size_t kInChunk = 1 << 20;
    std::function<size_t(char*, size_t)> m_fill;
    int64_t m_total;
    std::vector<char> m_in;
    z_stream m_zs;
    bool m_ok = false;
    bool m_done = false;
    bool m_inMember = false;
    int64_t m_consumed = 0;
};

// A plain file mapped read-only. Why: read() copies every byte out of the page cache, which
// was the largest single cost of an import in profiles; a mapping hands the parser the page
// cache itself. Pages behind the parser are released (MADV_DONTNEED on a private read-only
// mapping only drops this process' view), so resident memory stays near the parse window.
class MappedFileSource final : public ByteSource {
public:
    MappedFileSource(const char* data, size_t size) : m_data(data), m_size(size) {}
    ~MappedFileSource() override { ::munmap(const_cast<char*>(m_data), m_size); }
    size_t read(char*, size_t) override { return 0; }
    std::string_view mapped() const override { return {m_data, m_size}; }
    void release(size_t offset) override
    {
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        const size_t upTo = std::min(offset, m_size) / page * page;
        if (upTo > m_releasedTo) {
            ::madvise(const_cast<char*>(m_data) + m_releasedTo, upTo - m_releasedTo, MADV_DONTNEED);
            m_releasedTo = upTo;
        }
        m_consumed = static_cast<int64_t>(std::min(offset, m_size));
    }
    int64_t consumed() const override { return m_consumed; }
    int64_t total() const override { return static_cast<int64_t>(m_size); }

private:
    const char* m_data;
    size_t m_size;
    size_t m_releasedTo = 0;
    int64_t m_consumed = 0;
};

class MemorySource final : public ByteSource {
public:
    explicit MemorySource(std::string_view bytes) : m_bytes(bytes) {}
    std::string_view mapped() const override { return m_bytes; }
    void release(size_t offset) override { m_pos = std::max(m_pos, std::min(offset, m_bytes.size())); }
    size_t read(char* out, size_t capacity) override
    {
        const size_t n = std::min(capacity, m_bytes.size() - m_pos);
        std::memcpy(out, m_bytes.data() + m_pos, n);
        m_pos += n;
        return n;
    }
    int64_t consumed() const override { return static_cast<int64_t>(m_pos); }
    int64_t total() const override { return static_cast<int64_t>(m_bytes.size()); }

private:
    std::string_view m_bytes;
    size_t m_pos = 0;
};

} // namespace

Result<std::unique_ptr<ByteSource>> openFileSource(const std::string& path, bool gzip)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail("cannot open " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return fail(path + " is not a regular file");
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if (!gzip && st.st_size > 0) {
        void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            ::close(fd);
            ::madvise(map, static_cast<size_t>(st.st_size), MADV_SEQUENTIAL);
            return std::unique_ptr<ByteSource>(new MappedFileSource(static_cast<const char*>(map), static_cast<size_t>(st.st_size)));
        }
    }
    if (!gzip)
        return std::unique_ptr<ByteSource>(new FileSource(fd, st.st_size));
    auto file = std::make_shared<FileSource>(fd, st.st_size);
    return std::unique_ptr<ByteSource>(new GzipSource(
        [file](char* out, size_t cap) { return file->read(out, cap); }, st.st_size));
}

std::unique_ptr<ByteSource> memorySource(std::string_view bytes, bool gzip)
{
    if (!gzip)
        return std::make_unique<MemorySource>(bytes);
    auto mem = std::make_shared<MemorySource>(bytes);
    return std::make_unique<GzipSource>([mem](char* out, size_t cap) { return mem->read(out, cap); },
                                        static_cast<int64_t>(bytes.size()));
}

void DiagnosticCounter::add(DiagnosticKind kind, int64_t n, std::string_view detail)
{
    Entry& e = m_byKind[kind];
    e.count += n;
    if (!detail.empty()) {
        auto it = e.details.find(detail);
        if (it == e.details.end())
            it = e.details.emplace(std::string(detail), 0).first;
        it->second += n;
    }
}

int64_t DiagnosticCounter::total() const
{
    int64_t n = 0;
    for (const auto& [kind, e] : m_byKind)
        n += e.count;
    return n;
}

std::vector<Diagnostic> DiagnosticCounter::list() const
{
    std::vector<Diagnostic> out;
    for (const auto& [kind, e] : m_byKind) {
        // "kernel × 700, memcpy × 175" (keys may end in a number: "rank 0 × 1, rank 1 × 2"); a
        // single key that holds the whole count is shown alone.
        std::string detail;
        const bool alone = e.details.size() == 1 && e.details.begin()->second == e.count;
        for (const auto& [key, n] : e.details)
            detail += (detail.empty() ? "" : ", ") + key + (alone ? "" : " × " + std::to_string(n));
        out.push_back(makeDiagnostic(kind, e.count, detail));
    }
    return out;
}

void DiagnosticCounter::mergeFrom(const DiagnosticCounter& other)
{
    for (const auto& [kind, e] : other.m_byKind) {
        Entry& mine = m_byKind[kind];
        mine.count += e.count;
        for (const auto& [key, n] : e.details)
            mine.details[key] += n;
    }
}

std::string_view capName(std::string_view text)
{
    if (text.size() <= kMaxNameBytes)
        return text;
    size_t n = kMaxNameBytes;
    // Back up over UTF-8 continuation bytes so the cut never splits a character.
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80)
        --n;
    return text.substr(0, n);
}

StringId Interner::intern(std::string_view text)
{
    if (text.size() > kMaxNameBytes) {
        ++m_truncated;
        text = capName(text);
    }
    auto it = m_cache.find(text);
    if (it != m_cache.end())
        return it->second;
    const StringId id = m_table.intern(text);
    m_cache.emplace(std::string(text), id);
    return id;
}

int dtypeSize(std::string_view t)
{
    if (t.starts_with("c10::"))
        t.remove_prefix(5);
    if (t.starts_with("torch."))
        t.remove_prefix(6);
    struct Entry {
        std::string_view name;
        int size;
    };
    static constexpr Entry kTypes[] = {
        {"Float", 4}, {"float", 4}, {"float32", 4}, {"Double", 8}, {"double", 8}, {"float64", 8},
        {"Half", 2}, {"half", 2}, {"float16", 2}, {"BFloat16", 2}, {"bfloat16", 2},
        {"Long", 8}, {"int64", 8}, {"long", 8}, {"Int", 4}, {"int32", 4}, {"int", 4},
        {"Short", 2}, {"int16", 2}, {"Char", 1}, {"int8", 1}, {"Byte", 1}, {"uint8", 1},
        {"Bool", 1}, {"bool", 1}, {"ComplexFloat", 8}, {"complex64", 8}, {"ComplexDouble", 16},
        {"complex128", 16}, {"ComplexHalf", 4}, {"Float8_e5m2", 1}, {"Float8_e4m3fn", 1},
        {"UInt16", 2}, {"UInt32", 4}, {"UInt64", 8}};
    for (const auto& e : kTypes)
        if (e.name == t)
            return e.size;
    return 0;
}

namespace {
std::string_view stripToken(std::string_view t)
{
    while (!t.empty() && (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' || t.back() == '\t'))
        t.remove_suffix(1);
    if (t.size() >= 2 && t.front() == '"' && t.back() == '"')
        t = t.substr(1, t.size() - 2);
    return t;
}
} // namespace

// Why not strtod: an absolute Kineto timestamp is ~1.7e15 µs; a double keeps only ~0.25 µs of
// it, so the integer and fractional digits are taken apart and combined in integer ns.
NumberParse parseMicrosToNs(std::string_view token, int64_t* ns)
{
    std::string_view t = stripToken(token);
    if (t.empty())
        return NumberParse::NotNumber;
    size_t i = 0;
    bool negative = false;
    if (t[i] == '-' || t[i] == '+') {
        negative = t[i] == '-';
        ++i;
    }
    if (i >= t.size() || !(t[i] >= '0' && t[i] <= '9'))
        return NumberParse::NotNumber;
    constexpr int64_t kMaxMicros = INT64_MAX / 1000 - 1;
    int64_t whole = 0;
    bool overflow = false;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
        if (whole > (kMaxMicros - (t[i] - '0')) / 10)
            overflow = true;
        else
            whole = whole * 10 + (t[i] - '0');
    }
    int64_t frac = 0; // ns below the µs, from up to three fractional digits, rounded on the fourth
    if (i < t.size() && t[i] == '.') {
        ++i;
        int digits = 0;
        int roundDigit = 0;
        const size_t fracStart = i;
        for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
            if (digits < 3)
                frac = frac * 10 + (t[i] - '0');
            else if (digits == 3)
                roundDigit = t[i] - '0';
            ++digits;
        }
        if (i == fracStart)
            return NumberParse::NotNumber;
        for (int d = digits; d < 3; ++d)
            frac *= 10;
        if (roundDigit >= 5)
            ++frac;
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        // Rare (writers that print doubles); precision of a double is all there is anyway.
        std::string copy(t);
        char* end = nullptr;
        const double v = std::strtod(copy.c_str(), &end);
        if (end != copy.c_str() + copy.size())
            return NumberParse::NotNumber;
        if (!std::isfinite(v))
            return NumberParse::OutOfRange;
        const double nsValue = v * 1000.0;
        if (!(std::fabs(nsValue) < 9.2e18))
            return NumberParse::OutOfRange;
        *ns = static_cast<int64_t>(std::llround(nsValue));
        return NumberParse::Ok;
    }
    if (i != t.size())
        return NumberParse::NotNumber;
    if (overflow)
        return NumberParse::OutOfRange;
    const int64_t v = whole * 1000 + frac;
    *ns = negative ? -v : v;
    return NumberParse::Ok;
}

NumberParse parseInteger(std::string_view token, int64_t* value)
{
    std::string_view t = stripToken(token);
    if (t.empty())
        return NumberParse::NotNumber;
    size_t i = 0;
    bool negative = false;
    if (t[0] == '-') {
        negative = true;
        ++i;
    }
    if (i >= t.size())
        return NumberParse::NotNumber;
    int64_t v = 0;
    bool overflow = false;
    for (; i < t.size(); ++i) {
        if (t[i] == '.' ) {
            // "3.0": accept an integral value written as a float; drop the fraction.
            for (size_t j = i + 1; j < t.size(); ++j)
                if (!(t[j] >= '0' && t[j] <= '9'))
                    return NumberParse::NotNumber;
            break;
        }
        if (!(t[i] >= '0' && t[i] <= '9'))
            return NumberParse::NotNumber;
        if (v > (INT64_MAX - (t[i] - '0')) / 10)
            overflow = true;
        else
            v = v * 10 + (t[i] - '0');
    }
    if (overflow)
        return NumberParse::OutOfRange;
    *value = negative ? -v : v;
    return NumberParse::Ok;
}

} // namespace lockstep::core::detail
