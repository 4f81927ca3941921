// libFuzzer target: the Kineto (Chrome trace-event JSON, plain or gzip) importer on arbitrary
// bytes. Any result is fine; a crash, a hang or a sanitizer report is the bug.
#include "lockstep/import/import.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    // Route everything to the JSON importer (the SQLite magic has its own target) so that the
    // fuzzer does not spend its time in format detection.
    if (size >= 16 && bytes.starts_with(std::string_view("SQLite format 3\0", 16)))
        return 0;
    auto run = lockstep::core::importTraceBytes(bytes);
    if (run)
        (void)run->spans.size();
    return 0;
}
