// One rank of a Lockstep DDP run: the torch-free entry point of the runtime.
// lockstep-worker fills the options from the job library's flag table and calls runWorker();
// rank, world size and rendezvous come from the environment (RANK/WORLD_SIZE/LOCAL_RANK/
// LOCAL_WORLD_SIZE, Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID as fallback; none at all: a
// world of one; the rendezvous: LOCKSTEP_RENDEZVOUS_FILE, else MASTER_ADDR/MASTER_PORT).
#pragma once

#include "lockstep/job/training_options.h"

namespace lockstep::rt {

using WorkerOptions = job::TrainingOptions;

// Runs one rank to the end. Returns the process exit status (0 = completed). Never throws:
// every failure is printed as a protocol `failed` line (lockstep/job/progress.h) and recorded in
// the shard.
int runWorker(const WorkerOptions& options);

} // namespace lockstep::rt
