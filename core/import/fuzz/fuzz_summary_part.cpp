// libFuzzer target: the stored summary decoder (core/summary_store.h) on arbitrary bytes, as each
// part (the analysis parts and the overview). Every input must decode or be refused, never read past the bytes (ASan), overflow (UBSan)
// or allocate without bound (-rss_limit_mb); what decodes must encode to bytes that decode to the
// same encoding again.
#include "lockstep/core/summary_store.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace lockstep::core;
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    for (SummaryPart part : {kSummaryRun, kSummarySteps, kSummaryBuckets}) {
        RunAnalysis analysis;
        Run run;
        if (!decodeSummaryPart(bytes, part, analysis, run.diagnostics))
            continue;
        const std::string once = encodeSummaryPart(run, analysis, part);
        RunAnalysis again;
        Run runAgain;
        if (!decodeSummaryPart(once, part, again, runAgain.diagnostics))
            std::abort();
        if (encodeSummaryPart(runAgain, again, part) != once)
            std::abort();
    }
    RunOverview overview;
    if (decodeOverviewPart(bytes, overview)) {
        const std::string once = encodeOverviewPart(overview);
        RunOverview again;
        if (!decodeOverviewPart(once, again) || encodeOverviewPart(again) != once)
            std::abort();
    }
    return 0;
}
