// Where a job's files live: the one place the shard folder layout is built or searched.
//
//   <folder of RUN.db>/
//     RUN.db                          the merged run (written whole at the end)
//     .RUN.db.shards-XXXXXX/          the job's private folder (mkdtemp), next to the run file so
//       rank-<r>.db                   that everything stays on one filesystem
//       rank-<r>.log                  the rank's stderr, kept with --keep-shards
//       rendezvous                    the ranks' c10d FileStore (local runs need no socket for it)
//
// A worker started by hand (torchrun, srun) writes rank-<r>.db into its --out-dir the same way.
#pragma once

#include "lockstep/core/result.h"

#include <string>
#include <vector>

namespace lockstep::job {

// Creates the private shard folder of a job writing `runFile` (mode 0700).
core::Result<std::string> createShardFolder(const std::string& runFile);

std::string shardFile(const std::string& folder, int rank);  // folder/rank-<r>.db
std::string logFile(const std::string& folder, int rank);    // folder/rank-<r>.log
std::string rendezvousFile(const std::string& folder);       // folder/rendezvous

// The non-empty rank-<r>.db files of a shard folder, in rank order.
std::vector<std::string> shardFilesIn(const std::string& folder);

// Which files make the run of a job whose ranks have all exited (the launcher's merge): the
// shards of `folder`, each recovered first (a killed rank's committed steps are in its -wal), in
// rank order; a shard core cannot read, or one whose rank stopped before writing its
// configuration, is left out with the reason. The one place that decides it.
struct RunShards {
    struct LeftOut {
        std::string file;
        std::string reason;    // for the user: names the file and what is wrong with it
        bool noConfig = false; // readable, but its rank stopped before writing its configuration
    };
    std::vector<std::string> files;
    std::vector<LeftOut> leftOut;
};
RunShards runShardsIn(const std::string& folder);

// The shard folders of jobs writing `runFile` (kept with --keep-shards, or of a job still
// running), newest first.
std::vector<std::string> shardFoldersOf(const std::string& runFile);

// What to read for a live view of a job writing `runFile`: the run file once it is a readable
// run database, else the shards of its newest shard folder (which may still be empty).
std::vector<std::string> liveFilesFor(const std::string& runFile);

} // namespace lockstep::job
