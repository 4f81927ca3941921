// Export of a run to Chrome trace-event JSON ({"traceEvents": [...]}) that Perfetto and
// chrome://tracing open: one process per rank, one thread per lane plus a "steps" thread per
// rank, complete ("X") events with kind, bucket, step and bytes in args, instant events for
// gradient-ready, flow arrows for each bucket's all-reduce across ranks and from its last
// gradient-ready instant to its launch, process/thread names as metadata events. Timestamps in
// microseconds (the format's unit, exact to the ns), clock-corrected. A "lockstepRun" header
// makes the file import back (`lockstep import`) into the same run.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <ostream>
#include <string>

namespace lockstep::core {

Status writeChromeTrace(const Run& run, std::ostream& out);
Status exportChromeTrace(const Run& run, const std::string& path);

} // namespace lockstep::core
