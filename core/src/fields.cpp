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

std::string joinTextList(const std::vector<std::string>& items)
{
    std::string out;
    for (size_t i = 0; i < items.size(); ++i)
        (out += i ? "\n" : "") += items[i];
    return out;
}

std::vector<std::string> splitTextList(std::string_view text)
{
    std::vector<std::string> out;
    if (text.empty())
        return out;
    for (size_t pos = 0;;) {
        const size_t nl = text.find('\n', pos);
        out.emplace_back(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
        if (nl == std::string_view::npos)
            return out;
        pos = nl + 1;
    }
}

} // namespace lockstep::core
