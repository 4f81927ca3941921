// The run's field table (fields.h): lookups and the one text form of a value.
#include "lockstep/core/fields.h"

#include <cstdio>
#include <cstdlib>

namespace lockstep::core {

// Shortest text that reads back as the same double (link speeds like 1 and 0.5).
std::string shortestNumberText(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    for (int precision = 1; precision <= 17; ++precision) {
        char shortBuf[32];
        std::snprintf(shortBuf, sizeof shortBuf, "%.*g", precision, v);
        if (std::strtod(shortBuf, nullptr) == v)
            return shortBuf;
    }
    return buf;
}

const RunConfigField* findRunConfigField(std::string_view name)
{
    for (const RunConfigField& f : kRunConfigFields)
        if (name == f.name)
            return &f;
    return nullptr;
}

const RankField* findRankField(std::string_view name)
{
    for (const RankField& f : kRankFields)
        if (name == f.name)
            return &f;
    return nullptr;
}

} // namespace lockstep::core
