// Errors as values: core throws nothing across its boundary. A Result<T> is either a T or an
// Error with a message meant for the user ("file is not a Lockstep run database: ...").
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace lockstep::core {

struct Error {
    std::string message;
};

template <class T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(std::string message)
{
    return std::unexpected<Error>(Error{std::move(message)});
}

} // namespace lockstep::core
