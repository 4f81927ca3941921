// `lockstep worker ARGS...`: one rank of a DDP run, as documented for torchrun and srun. The
// rank itself is lockstep-worker (worker_main.cpp), the only executable that links LibTorch;
// this process replaces itself with it (same arguments, same environment), so the `lockstep` CLI
// starts in milliseconds for every other command.
#include "commands.h"

#include "cli_flags.h"

#include "lockstep/job/process.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace lockstep::app {

void registerWorkerCommand(CLI::App& app)
{
    // Never parsed here: main() hands `lockstep worker ...` to execWorker first.
    app.add_subcommand("worker", "Run one rank of a recorded DDP training run (lockstep-worker; rank and "
                                 "rendezvous from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT or Slurm; see "
                                 "`lockstep worker --help`)");
}

int execWorker(int argc, char** argv)
{
    auto worker = job::siblingExecutable("lockstep-worker");
    if (!worker)
        return reportError("lockstep worker", core::Error{worker.error().message + "; this build has no training runtime "
                                                                                   "(LOCKSTEP_BUILD_RUNTIME=OFF?)",
                                                          worker.error().code});
    std::vector<char*> args;
    args.push_back(worker->data());
    for (int i = 2; i < argc; ++i)
        args.push_back(argv[i]);
    args.push_back(nullptr);
    execv(worker->c_str(), args.data());
    const int err = errno;
    return reportError("lockstep worker", core::Error{"cannot start " + *worker + ": " + std::strerror(err), core::ErrorCode::NotStarted});
}

} // namespace lockstep::app
