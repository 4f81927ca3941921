// `lockstep import FILE... --out RUN.db`: torch.profiler (Kineto) JSON / gzip traces and Nsight
// Systems SQLite exports, one file per rank, into one run database (lockstep/import/import.h).
#include "cli_flags.h"
#include "commands.h"

#include "lockstep/core/report.h"

#include "lockstep/core/output_file.h"
#include "lockstep/import/import.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace lockstep::app {

namespace {

struct ImportArgs {
    std::vector<std::string> files;
    std::string out;
    int rank = -1;
    int worldSize = 0;
    bool force = false;
    bool quiet = false;
    bool pythonFunctions = false;
    int warmup = -1;
    int jobs = 0;
    std::string name;
};

int runImport(const ImportArgs& a)
{
    // Flags that contradict each other: usage errors, before anything is read.
    const char* me = "lockstep import";
    if (a.rank >= 0 && a.worldSize > 0 && int64_t(a.rank) + int64_t(a.files.size()) > a.worldSize)
        return reportError(me, core::Error{"--rank " + std::to_string(a.rank) + " with " + std::to_string(a.files.size())
                                               + " file(s) needs ranks up to " + std::to_string(int64_t(a.rank) + int64_t(a.files.size()) - 1)
                                               + ", outside --world-size " + std::to_string(a.worldSize),
                                           core::ErrorCode::Usage});
    for (const std::string& f : a.files) {
        std::error_code ec;
        const auto st = std::filesystem::status(f, ec);
        if (!std::filesystem::exists(st))
            return reportError(me, core::Error{f + ": no such file", core::ErrorCode::BadFile});
        if (std::filesystem::is_directory(st))
            return reportError(me, core::Error{f + ": is a folder; give the trace files in it", core::ErrorCode::BadFile});
    }
    // The run database is written whole or not at all (saveRun); refuse an output that is a trace,
    // a folder, a device, or an existing file without --force before the import starts.
    if (auto s = core::refuseOutputIsInput(a.out, a.files); !s)
        return reportError(me, s.error());
    if (auto s = core::checkOutputPath(a.out, a.force); !s)
        return reportError(me, s.error());
    core::removeOutputsOnSignal();
    core::ImportOptions options;
    if (a.rank >= 0)
        options.rank = a.rank;
    if (a.worldSize > 0)
        options.worldSize = a.worldSize;
    if (a.warmup >= 0)
        options.warmupSteps = a.warmup;
    options.overwrite = a.force;
    options.runName = a.name;
    options.includePythonFunctions = a.pythonFunctions;
    options.jobs = a.jobs;

    // Progress on stderr: files added to the run, input parsed and its rate; a line redrawn in
    // place on a terminal (a few times a second), a line per quarter otherwise.
    const bool tty = isatty(STDERR_FILENO) != 0;
    int lastQuarter = -1;
    bool open = false; // a redrawn line without its newline yet
    auto progress = [&](const core::ImportProgress& p) {
        if (a.quiet)
            return;
        const double mb = double(p.bytesDone) / double(1 << 20);
        const double rate = p.seconds > 0 ? mb / p.seconds : 0.0;
        const int pct = p.bytesTotal > 0 ? static_cast<int>(100.0 * double(p.bytesDone) / double(p.bytesTotal)) : 0;
        if (tty) {
            std::fprintf(stderr, "\rimporting: %d/%d files, %.0f of %.0f MB (%3d%%), %.0f MB/s ", p.filesDone, p.files, mb,
                         double(p.bytesTotal) / double(1 << 20), pct, rate);
            open = true;
        } else {
            const int quarter = p.files > 0 ? 4 * p.filesDone / p.files : 4;
            if (quarter == lastQuarter)
                return;
            lastQuarter = quarter;
            std::fprintf(stderr, "importing: %d/%d files, %.0f MB, %.0f MB/s\n", p.filesDone, p.files, mb, rate);
        }
        std::fflush(stderr);
    };
    auto stats = core::importTraces(a.files, a.out, options, progress);
    if (open)
        std::fputc('\n', stderr);
    if (!stats) {
        // --rank / --world-size that do not fit the traces: a usage error (exit 2), by its code.
        return reportError(me, stats.error());
    }
    std::cout << "imported " << stats->files << " file(s) into " << a.out << ": " << stats->ranks << " rank(s), world size "
              << stats->worldSize << ", " << stats->steps << " step rows, " << stats->lanes << " lanes, " << stats->spans
              << " spans (" << stats->commSpans << " communication)\n";
    for (const auto& d : stats->diagnostics)
        std::cout << "  " << core::severityName(d.severity) << ": " << d.kind << " x" << d.count << " — " << d.message
                  << "\n";
    return 0;
}

} // namespace

void registerImportCommands(CLI::App& app)
{
    auto args = std::make_shared<ImportArgs>();
    auto* cmd = app.add_subcommand(
        "import",
        "Import torch.profiler (Kineto) Chrome-trace JSON (plain or .gz) or Nsight Systems SQLite exports "
        "(nsys export --type sqlite), one file per rank, or a trace `lockstep export --chrome` wrote, into one "
        "run database. GPU kernels, copies and memsets belong to the step that launched them (correlation "
        "ids); device work without a launch record is counted in the diagnostics. Names longer than "
        + std::to_string(core::kImportNameLimit) + " bytes are cut (counted as \"name truncated\")");
    cmd->add_option("files", args->files, "trace files, one per rank (format detected from content)")->required();
    cmd->add_option("-o,--out", args->out, "run database to write")->required();
    cmd->add_option("--rank", args->rank, "rank of the first file; the next files get the following ranks "
                                          "(default: distributedInfo in the trace, else file order)")
        ->check(integerCheck(0, 1'000'000));
    cmd->add_option("--world-size", args->worldSize, "world size of the run (default: from the traces)")
        ->check(integerCheck(1, 1'000'000));
    cmd->add_option("--warmup", args->warmup,
                    "the first N steps of the trace (its N lowest step numbers, wherever the profiler's "
                    "schedule started counting) are warm-up and left out of run-level numbers; default "
                    + std::to_string(core::kDefaultImportWarmup)
                    + " (the first profiled step carries the profiler's start-up). A trace with no more than "
                      "N steps has no steady step: its report says so and uses every step. A trace written "
                      "by `lockstep export --chrome` keeps its own warm-up unless this is given")
        ->check(integerCheck(0, 1'000'000));
    cmd->add_option("-j,--jobs", args->jobs,
                    "files parsed at once, one thread each (default: one per hardware thread); the run is the same "
                    "whatever it is: a single writer adds the files in order, and at most N + 2 parsed files wait in memory")
        ->check(integerCheck(1, 4096));
    cmd->add_option("--name", args->name, "run name (default: the output file's stem)");
    cmd->add_flag("--python-functions", args->pythonFunctions, "also import python_function events");
    cmd->add_flag("-f,--force", args->force, "replace the output file if it exists");
    cmd->add_flag("-q,--quiet", args->quiet, "no progress display");
    cmd->callback([args] { exitStatus() = runImport(*args); });
    cmd->footer(kExitStatusHelp);
}

} // namespace lockstep::app
