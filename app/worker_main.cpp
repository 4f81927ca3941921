// lockstep-worker: one rank of a recorded DDP training run, the only executable that links
// LibTorch. Its flags are the job library's table (the same as `lockstep run`'s, plus where this
// rank writes); rank, world size and rendezvous come from the environment, so it runs unchanged
// under `lockstep run` (which starts it directly), `lockstep worker`, torchrun --no-python and
// srun.
#include "cli_flags.h"

#include "lockstep/job/flags.h"
#include "lockstep/rt/worker.h"

#include <CLI/CLI.hpp>

#include <cstdio>

int main(int argc, char** argv)
{
    CLI::App app{"lockstep-worker — one rank of a recorded DDP training run"};
    app.set_version_flag("--version", "lockstep-worker " LOCKSTEP_VERSION);
    app.footer(std::string(
                   "Rank and world size come from RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun) or\n"
                   "SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun), the rendezvous from\n"
                   "LOCKSTEP_RENDEZVOUS_FILE (a c10d FileStore; `lockstep run` sets it) or MASTER_ADDR/MASTER_PORT.\n"
                   "With none of them it is a world of one. It writes rank-<r>.db into --out-dir and prints\n"
                   "LOCKSTEP progress lines on stdout.\n\n")
               + lockstep::app::kExitStatusHelp);
    lockstep::app::TrainingFlags flags(&app, true);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : lockstep::app::exitStatusFor(lockstep::core::ErrorCode::Usage);
    }
    const lockstep::job::TrainingOptions options = flags.options();
    if (auto s = lockstep::job::checkOptions(options, 0); !s)
        return lockstep::app::reportError("lockstep-worker", s.error());
    return lockstep::rt::runWorker(options);
}
