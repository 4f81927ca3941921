// The run's field table (fields.h): lookups and the one text form of a value.
#include "lockstep/core/fields.h"

#include <charconv>

namespace lockstep::core {

// Shortest text that reads back as the same double (link speeds like 1 and 0.5): std::to_chars'
// shortest round-trip form.
std::string shortestNumberText(double v)
{
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
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
