// Export of a run to Chrome trace-event JSON ({"traceEvents": [...]}) that Perfetto and
// chrome://tracing open: one process per rank, one thread per lane, complete ("X") events with
// bucket, step and bytes in args, instant events for gradient-ready, process/thread names as
// metadata events. Timestamps in microseconds (the format's unit), clock-corrected.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <ostream>
#include <string>

namespace lockstep::core {

Status writeChromeTrace(const Run& run, std::ostream& out);
Status exportChromeTrace(const Run& run, const std::string& path);

} // namespace lockstep::core
