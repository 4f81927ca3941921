// libFuzzer target: the Nsight Systems SQLite importer on arbitrary database images (opened
// in memory through sqlite3_deserialize). Inputs that are not SQLite get the SQLite header so
// that mutations reach the table readers.
#include "lockstep/import/import.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static const std::string_view kMagic("SQLite format 3\0", 16);
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    std::string image;
    if (!bytes.starts_with(kMagic)) {
        image.assign(kMagic);
        image.append(bytes);
        bytes = image;
    }
    auto run = lockstep::core::importTraceBytes(bytes);
    if (run)
        (void)run->spans.size();
    return 0;
}
