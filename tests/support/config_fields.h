// A RunConfig with every field of the run's table (core/fields.h) set to a value of its own, none
// its default: what the round-trip tests store, export and read back. A field added to the table
// is in it with no edit here.
#pragma once

#include "lockstep/core/fields.h"

#include <string>
#include <type_traits>

namespace lockstep::test {

inline core::RunConfig everyFieldConfig()
{
    core::RunConfig c;
    int i = 0;
    for (const core::RunConfigField& f : core::kRunConfigFields) {
        ++i;
        core::visitField(f, c, [&](auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
                v = std::string(f.name) + " value " + std::to_string(i) + " \xc3\xa9";
            else if constexpr (std::is_same_v<T, core::RunStatus>)
                v = core::RunStatus::Failed;
            else if constexpr (std::is_same_v<T, double>)
                v = 0.25 + i;
            else if constexpr (std::is_same_v<T, int64_t>)
                v = (int64_t{1} << 40) + i; // beyond 32 bits
            else
                v = 1000 + i;
        });
    }
    c.extra["seed"] = "7";
    return c;
}

} // namespace lockstep::test
