// Errors as values: core throws nothing across its boundary. A Result<T> is either a T or an
// Error: a message meant for the user ("file is not a Lockstep run database: ...") and a code
// that says what kind of failure it is. Code decides by the code, never by the message's words:
// the CLI's exit status (app/exit_status.h exitStatusFor), the recorder stopping on a full disk,
// a superseded load in the app. docs/design.md "Errors" lists the codes.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <utility>

namespace lockstep::core {

enum class ErrorCode : uint8_t {
    Failed = 0, // none of the below: the operation failed (an output that could not be written, a run that failed)
    Usage,      // a bad flag or value, flags that contradict each other or the inputs
    NotStarted, // a job that could not start (no worker executable, an output refused before launch)
    BadFile,    // an input that is not what it must be: missing, not a run database, truncated,
                // corrupt, a newer schema, a damaged or unknown trace
    DiskFull,   // the disk refused a write: full, a file-size limit, a quota
    Cancelled,  // a stop was requested before the work was done (a superseded load)
};

// The code's name, for messages and tests ("usage", "disk full", ...).
constexpr const char* errorCodeName(ErrorCode code)
{
    switch (code) {
    case ErrorCode::Failed: return "failed";
    case ErrorCode::Usage: return "usage";
    case ErrorCode::NotStarted: return "not started";
    case ErrorCode::BadFile: return "bad file";
    case ErrorCode::DiskFull: return "disk full";
    case ErrorCode::Cancelled: return "cancelled";
    }
    return "failed";
}

struct Error {
    std::string message;
    ErrorCode code = ErrorCode::Failed;
};

template <class T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(std::string message)
{
    return std::unexpected<Error>(Error{std::move(message), ErrorCode::Failed});
}

inline std::unexpected<Error> fail(ErrorCode code, std::string message)
{
    return std::unexpected<Error>(Error{std::move(message), code});
}

// Passes an error on with a message that says more ("path: " + cause.message): the code stays
// the cause's, so a full disk deep in a writer is still a full disk to whoever decides.
inline std::unexpected<Error> fail(const Error& cause, std::string message)
{
    return std::unexpected<Error>(Error{std::move(message), cause.code});
}

inline std::unexpected<Error> fail(Error error) { return std::unexpected<Error>(std::move(error)); }

} // namespace lockstep::core
