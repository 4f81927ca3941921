// This process's peak resident memory so far (VmHWM of /proc/self/status), in KiB; -1 when it
// cannot be read. The benchmarks that run a piece of work in a forked child report it from there,
// so that it is that work's peak alone.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace lockstep::bench {

inline int64_t peakRssKb()
{
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmHWM:", 0) == 0)
            return std::atoll(line.c_str() + 6);
    return -1;
}

} // namespace lockstep::bench
