// libFuzzer target: the run database's span block decoder (core/span_block.h) on arbitrary bytes.
// Every input must decode or fail with ErrorCode::BadFile, never read past the bytes (ASan) or
// overflow (UBSan); what decodes must encode and decode again to the same spans.
#include "lockstep/core/span_block.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace lockstep::core;
    std::vector<Span> spans;
    SpanBlockSummary summary;
    auto decoded = decodeSpanBlock(std::span(data, size), LaneId{1}, spans, &summary);
    if (!decoded) {
        if (decoded.error().code != ErrorCode::BadFile)
            std::abort();
        return 0;
    }
    if (spans.empty() || summary.count != static_cast<int64_t>(spans.size()))
        std::abort();
    std::string again;
    std::vector<Span> back;
    if (!encodeSpanBlock(spans, again) || !decodeSpanBlock(std::span(reinterpret_cast<const uint8_t*>(again.data()), again.size()), LaneId{1}, back))
        std::abort();
    for (size_t i = 0; i < spans.size(); ++i) {
        const Span& a = spans[i];
        const Span& b = back.at(i);
        if (a.start != b.start || a.end != b.end || a.bytes != b.bytes || a.name.v != b.name.v || a.step != b.step
            || a.bucket != b.bucket || a.kind != b.kind)
            std::abort();
    }
    return 0;
}
