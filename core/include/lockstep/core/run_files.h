// A run file's summary, the one way the run browser, `lockstep run` and `lockstep sweep` read it.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/result.h"

#include <string>

namespace lockstep::core {

struct FileSummary {
    RunSummary summary; // name defaults to the file's stem (RunReader::config)
    TimeNs createdNs = 0;
};

// Loads `path` (refusing what validateRunFile refuses, with its message) and summarizes it.
Result<FileSummary> summarizeFile(const std::string& path);

} // namespace lockstep::core
