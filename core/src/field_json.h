// A field of a table (lockstep/core/fields.h) as its JSON value, for any rapidjson writer: the
// Chrome export's header and step args, report --json's "config". Text as a string, a text list
// as an array of strings, an enum by its name, numbers as numbers (a non-finite real as null).
#pragma once

#include "lockstep/core/fields.h"

#include <rapidjson/rapidjson.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

namespace lockstep::core {

template <class Writer, class Record>
void writeFieldJson(Writer& w, const Field<Record>& f, const Record& record)
{
    const auto text = [&w](const std::string& s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); };
    visitField(f, record, [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>)
            text(v);
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            w.StartArray();
            for (const std::string& item : v)
                text(item);
            w.EndArray();
        } else if constexpr (std::is_enum_v<T>)
            w.String(enumName(v));
        else if constexpr (std::is_same_v<T, double>) {
            if (std::isfinite(v))
                w.Double(v);
            else
                w.Null();
        } else if constexpr (std::is_same_v<T, uint32_t>)
            w.Uint(v);
        else
            w.Int64(v);
    });
}

} // namespace lockstep::core
