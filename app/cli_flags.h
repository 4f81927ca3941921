// The job library's flag table (lockstep/job/flags.h) on CLI11: how `lockstep run`, `lockstep
// sweep` and lockstep-worker declare their training flags, and the checks every other numeric
// flag of the CLI uses. Nothing is declared here: names, help, defaults, ranges and choices come
// from the table; this file only adapts them to CLI11.
#pragma once

#include "exit_status.h"
#include "lockstep/core/result.h"
#include "lockstep/job/flags.h"
#include "lockstep/job/launcher.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <string_view>
#include <vector>

namespace lockstep::app {

// CLI11 validators with the job library's parsing and messages (finite numbers only, whole
// numbers where asked, ranges; short messages).
CLI::Validator integerCheck(int64_t min, int64_t max);
CLI::Validator numberCheck(double min, double max, bool minOpen = false);

// --progress of the commands that launch jobs (run, sweep, record), declared once: auto (a bar
// on a terminal, else a line per step), bar, plain, protocol (the job library's progress
// protocol, progress.h, which the app's Launch panel reads), none. Default auto.
CLI::Option* addProgressOption(CLI::App* cmd, std::string& value);
job::ProgressStyle progressStyle(const std::string& value);

// Says "<command>: <message>" on stderr (control characters escaped: names and paths come from
// files and arguments) and returns exitStatusFor(error.code).
int reportError(std::string_view command, const core::Error& error);

// The exit statuses of every command, for --help.
inline constexpr const char* kExitStatusHelp =
    "Exit status: 0 success; 1 the command failed (a bad or unreadable input, a run that failed, an\n"
    "output that could not be written); 2 usage error (a bad flag or value) or a job that could not\n"
    "start; 128 + the signal when interrupted: 130 SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP (nothing\n"
    "half-written is left: an output is whole, and the status then says how the command ended, or\n"
    "absent).";

class TrainingFlags {
public:
    // Adds the table's flags to `cmd`, grouped by the table's groups: the Training scope, plus
    // the Worker scope when withWorkerFlags. `skip`: flags the command declares itself (sweep's
    // list of bucket caps).
    TrainingFlags(CLI::App* cmd, bool withWorkerFlags, std::vector<std::string_view> skip = {});

    // After parsing: the options, the given flags applied over TrainingOptions' defaults (the
    // values passed the table's checks already, as CLI11 validators).
    job::TrainingOptions options() const;
    bool given(std::string_view name) const;

private:
    struct Entry {
        const job::Flag* flag = nullptr;
        std::string value;
        bool on = false;
        CLI::Option* option = nullptr;
    };
    std::vector<std::unique_ptr<Entry>> m_entries;
};

} // namespace lockstep::app
