// lockstep: the command line. Sub-commands live with their areas (commands.h). This executable
// never links LibTorch: `lockstep worker` hands over to lockstep-worker.
#include "cli_flags.h"
#include "commands.h"
#include "lockstep/core/report.h"
#include "lockstep/core/stop_signal.h"

#include <CLI/CLI.hpp>

#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace lockstep::app {
int& exitStatus()
{
    static int status = 0;
    return status;
}
} // namespace lockstep::app

int main(int argc, char** argv)
{
    if (argc >= 2 && std::string_view(argv[1]) == "worker")
        return lockstep::app::execWorker(argc, argv);
    // A write past a file-size limit must fail like one to a full disk (EFBIG), so that the
    // command removes its temporary output and says why, instead of dying on SIGXFSZ.
    signal(SIGXFSZ, SIG_IGN);
    CLI::App app{"lockstep — record, analyse and compare data-parallel (DDP) training runs"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "lockstep " LOCKSTEP_VERSION);
    app.footer(lockstep::app::kExitStatusHelp);
    lockstep::app::registerCoreCommands(app);
    lockstep::app::registerImportCommands(app);
    lockstep::app::registerWhatIfCommands(app);
    lockstep::app::registerRunCommands(app);
#ifdef LOCKSTEP_HAVE_RECORD
    lockstep::app::registerRecordCommand(app);
#endif
    lockstep::app::registerWorkerCommand(app);
    // A first word that is no command: say so and list them (CLI11 would only say that one is required).
    if (argc >= 2 && argv[1][0] != '-' && app.get_subcommands([&](CLI::App* c) { return c->check_name(argv[1]); }).empty()) {
        std::string names;
        for (const CLI::App* c : app.get_subcommands({}))
            names += (names.empty() ? "" : ", ") + c->get_name();
        std::fprintf(stderr, "lockstep: unknown command '%s'; the commands are: %s (lockstep --help)\n", lockstep::core::escapeControl(argv[1]).c_str(),
                     names.c_str());
        return lockstep::app::exitStatusFor(lockstep::core::ErrorCode::Usage);
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // A flag given more than once: "--steps given twice" rather than CLI11's count.
        const std::string what = e.what();
        if (const size_t at = what.find(": At Most 1 required but received "); at != std::string::npos) {
            const std::string count = what.substr(at + std::strlen(": At Most 1 required but received "));
            std::fprintf(stderr, "lockstep: %s given %s\n", what.substr(0, at).c_str(),
                         count == "2" ? "twice" : (count + " times").c_str());
            return lockstep::app::exitStatusFor(lockstep::core::ErrorCode::Usage);
        }
        // --help and --version exit 0; every usage error exits 2, as the help says, and its
        // message quotes the argument with control characters escaped (CLI11 quotes it raw).
        if (e.get_exit_code() == 0)
            return app.exit(e);
        std::fprintf(stderr, "%s\nRun with --help for more information.\n", lockstep::core::escapeControl(e.what()).c_str());
        return lockstep::app::exitStatusFor(lockstep::core::ErrorCode::Usage);
    }
    // A stop signal that arrived while the command finished decides the exit status (128+signal).
    lockstep::core::yieldToStopSignal();
    return lockstep::app::exitStatus();
}
