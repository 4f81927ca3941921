// Private to lockstep::core: the pieces the binary codecs share (span_block.cpp, instant_block.cpp,
// summary_store.cpp): zigzag, varints, and a bounds-checked reader.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>

namespace lockstep::core::blockcodec {

inline uint64_t zigzag(int64_t v)
{
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t unzigzag(uint64_t v)
{
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

inline void putVarint(std::string& out, uint64_t v)
{
    char buf[10];
    size_t n = 0;
    while (v >= 0x80) {
        buf[n++] = static_cast<char>(v | 0x80);
        v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out.append(buf, n);
}

inline bool fitsInt32(int64_t v)
{
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

// A bounds-checked cursor over the blob: every read says whether it stayed inside.
class Reader {
public:
    explicit Reader(std::span<const uint8_t> data)
        : m_p(data.data())
        , m_end(data.data() + data.size())
    {
    }
    bool byte(uint8_t& v)
    {
        if (m_p == m_end)
            return false;
        v = *m_p++;
        return true;
    }
    // At most 10 bytes; the 10th may only carry the top bit of a 64-bit value.
    bool varint(uint64_t& v)
    {
        uint64_t out = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_p == m_end)
                return false;
            const uint8_t b = *m_p++;
            if (shift == 63 && b > 1)
                return false;
            out |= static_cast<uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) {
                v = out;
                return true;
            }
        }
        return false;
    }
    // The next n bytes, in place (`p` points at them).
    bool take(size_t n, const uint8_t*& p)
    {
        if (n > left())
            return false;
        p = m_p;
        m_p += n;
        return true;
    }
    bool atEnd() const { return m_p == m_end; }
    size_t left() const { return static_cast<size_t>(m_end - m_p); }

private:
    const uint8_t* m_p;
    const uint8_t* m_end;
};

} // namespace lockstep::core::blockcodec
