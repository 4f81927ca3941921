// The exit status of every executable's failures, declared once: the CLI (lockstep,
// lockstep-worker) and lockstep-ui's command line. A failure's status follows from its error's
// code (core/result.h), never from its message.
#pragma once

#include "lockstep/core/result.h"

namespace lockstep::app {

// What kExitStatusHelp (cli_flags.h) says in words: 2 for a usage error or a job that could not
// start, 1 for any other failure. An interrupted command's 128 + the signal is
// core::yieldToStopSignal's.
constexpr int exitStatusFor(core::ErrorCode code)
{
    switch (code) {
    case core::ErrorCode::Usage:
    case core::ErrorCode::NotStarted: return 2;
    case core::ErrorCode::Failed:
    case core::ErrorCode::BadFile:
    case core::ErrorCode::DiskFull:
    case core::ErrorCode::Cancelled: return 1;
    }
    return 1;
}

} // namespace lockstep::app
