// A run file's summary (see run_files.h).
#include "lockstep/core/run_files.h"

#include "lockstep/core/run_db.h"

namespace lockstep::core {

Result<FileSummary> summarizeFile(const std::string& path)
{
    auto run = loadRun(path);
    if (!run)
        return std::unexpected(run.error());
    FileSummary out;
    out.summary = summarize(*run);
    out.createdNs = run->config.createdNs;
    return out;
}

} // namespace lockstep::core
