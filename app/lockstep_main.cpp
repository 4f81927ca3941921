// lockstep: the command line. Sub-commands live with their areas (commands.h). This executable
// never links LibTorch: `lockstep worker` hands over to lockstep-worker.
#include "cli_flags.h"
#include "commands.h"

#include <CLI/CLI.hpp>

#include <signal.h>

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
    app.set_version_flag("--version", "lockstep 0.1.0");
    app.footer(lockstep::app::kExitStatusHelp);
    lockstep::app::registerCoreCommands(app);
    lockstep::app::registerImportCommands(app);
    lockstep::app::registerWhatIfCommands(app);
    lockstep::app::registerRunCommands(app);
#ifdef LOCKSTEP_HAVE_RECORD
    lockstep::app::registerRecordCommand(app);
#endif
    lockstep::app::registerWorkerCommand(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help and --version exit 0; every usage error exits 2, as the help says.
        return app.exit(e) == 0 ? 0 : 2;
    }
    return lockstep::app::exitStatus();
}
