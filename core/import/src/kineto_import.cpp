// placeholder: filled in by the importers work (API in lockstep/import/import.h)
#include "lockstep/import/import.h"

namespace lockstep::core {
const char* traceFormatName(TraceFormat) { return "unknown"; }
TraceFormat detectTraceFormat(std::string_view) { return TraceFormat::Unknown; }
Result<TraceFormat> detectTraceFormat(const std::string&) { return fail("import: not implemented yet"); }
Result<ImportStats> importTraces(const std::vector<std::string>&, const std::string&, const ImportOptions&,
                                 std::function<void(double)>) { return fail("import: not implemented yet"); }
Result<Run> importTracesToRun(const std::vector<std::string>&, const ImportOptions&, std::function<void(double)>,
                              ImportStats*) { return fail("import: not implemented yet"); }
Result<Run> importTraceBytes(std::string_view, const ImportOptions&, ImportStats*) { return fail("import: not implemented yet"); }
} // namespace lockstep::core
