// The launcher behind `lockstep run` and `lockstep sweep`: spawns N local `lockstep worker`
// processes (this same executable) with a rendezvous on 127.0.0.1, watches their progress
// lines, stops every rank within seconds when one dies or the job hangs, merges the rank
// shards into one run file and marks the run failed with its cause.
//
// It never includes LibTorch: it only starts processes and talks to core's run database, so
// its logic does not depend on how the trainer is built.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/run_db.h"

#include <functional>
#include <string>
#include <vector>

namespace lockstep::app {

// One step as reported by a worker's `LOCKSTEP step=... rank=... loss=... step_ms=...` line.
struct WorkerLine {
    enum class Kind { Step, Done, Failed, Other };
    Kind kind = Kind::Other;
    int rank = -1;
    int step = -1;
    double loss = 0;
    double stepMs = 0;
    std::string cause; // Failed only
};
// Parses one line of a worker's stdout (without the newline). Lines that are not the
// protocol's come back as Kind::Other.
WorkerLine parseWorkerLine(std::string_view line);

// How the progress is shown on stderr.
enum class ProgressStyle {
    Auto,  // a redrawn bar when stderr is a terminal, otherwise one plain line per step
    Bar,
    Plain, // "step 3/8 loss=2.301 step_ms=41.2" per step, for logs and the app
    None,
};

struct LaunchOptions {
    int nproc = 1;
    std::string out;                      // the merged run file
    bool force = false;                   // overwrite `out` if it exists
    bool keepShards = false;              // keep the rank shards and worker logs next to `out`
    std::string runName;                  // default: out's stem
    std::vector<std::string> workerArgs;  // training flags, passed to every worker verbatim
    int stepsPlanned = 0;                 // for the progress bar; 0 = unknown
    double hangTimeoutS = 60;             // no progress line from any rank for this long = hung
    double graceS = 3;                    // after a failure, how long the others may exit on their own
    double termS = 2;                     // after SIGTERM, how long before SIGKILL
    ProgressStyle progress = ProgressStyle::Auto;
    bool echoWorkerOutput = false;        // copy workers' stderr to ours, prefixed by rank
    std::string executable;               // default: /proc/self/exe
    std::string commandLine;              // recorded in the run's configuration
};

struct LaunchResult {
    bool success = false;
    std::string cause;         // why the run failed ("rank 1 exited with status 3 at step 5")
    bool interrupted = false;  // SIGINT/SIGTERM/SIGHUP reached the launcher
    bool haveRunFile = false;  // `out` was written (also for failed runs: completed steps)
    core::MergeStats merge;
    double wallS = 0;          // from spawning the first worker to the last one's exit
    double stopS = 0;          // from the first failure seen to the last worker's exit
    std::vector<int> exitCodes; // per rank: exit status, 128+signal when killed by one
};

// Runs the whole job. An Error means the job could not be started or merged at all (bad
// options, an existing output without --force, fork failure, an unwritable folder); a job that
// started and then failed comes back as a LaunchResult with success == false.
core::Result<LaunchResult> launchRun(const LaunchOptions& options);

// Picks a free TCP port on 127.0.0.1 (bind port 0, read it, close).
core::Result<int> pickFreePort();

} // namespace lockstep::app
