// lockstep: the command line. Sub-commands live with their areas (commands.h).
#include "commands.h"

#include <CLI/CLI.hpp>

#include <iostream>

namespace lockstep::app {
int& exitStatus()
{
    static int status = 0;
    return status;
}
} // namespace lockstep::app

int main(int argc, char** argv)
{
    CLI::App app{"lockstep — record, analyse and compare data-parallel (DDP) training runs"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "lockstep 0.1.0");
    lockstep::app::registerCoreCommands(app);
    lockstep::app::registerImportCommands(app);
    lockstep::app::registerWhatIfCommands(app);
#ifdef LOCKSTEP_HAVE_RUNTIME
    lockstep::app::registerWorkerCommand(app);
    lockstep::app::registerRunCommands(app);
#endif
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    return lockstep::app::exitStatus();
}
