// The launcher behind `lockstep run`, `lockstep sweep` and `lockstep record`: starts N local
// ranks of ANY worker command with the environment torchrun gives its workers, watches their
// progress lines (progress.h), stops every rank within seconds when one dies or the job hangs,
// merges the rank shards into one run file and marks the run failed with its cause.
//
// What every rank gets (the contract with the worker command):
//   argv                exactly WorkerCommand::argv (argv[0] is a path; no shell, no PATH search)
//   environment         this process's environment, minus any RANK-like variables it had, plus
//                       WorkerCommand::env (replacing variables of the same name), plus these,
//                       which always win
//     RANK, LOCAL_RANK            r (0 .. N-1)
//     WORLD_SIZE, LOCAL_WORLD_SIZE  N
//     GROUP_RANK                  0 (one node)
//     MASTER_ADDR, MASTER_PORT    127.0.0.1 and a free port (for env:// rendezvous; note that a
//                                 torch TCPStore server listens on every interface, so prefer
//                                 the file below)
//     (with LaunchOptions::hosts, emulated hosts: N x nproc ranks, LOCAL_RANK and
//     LOCAL_WORLD_SIZE per host, GROUP_RANK = the host, MASTER_ADDR = host 0's address,
//     GLOO_SOCKET_IFNAME = eth0, LOCKSTEP_EMULATED_NET; see netns.h)
//     LOCKSTEP_RENDEZVOUS_FILE    a file in the job's private shard folder for a c10d FileStore
//                                 (torch: init_method="file://" + it): no socket at all
//     LOCKSTEP_SHARD_DIR          where rank r writes its shard: shardFile(dir, r) (shard_layout.h)
//     LOCKSTEP_RUN_NAME           the run's name
//     OMP_NUM_THREADS             cores / N, unless already set (torchrun's habit: N ranks with
//                                 all cores' threads each would measure the scheduler)
//   stdin               /dev/null
//   stdout              the protocol: `LOCKSTEP step=...`, `done`, `failed ... cause=...`; other
//                       lines are kept in rank-<r>.log (and shown with echoWorkerOutput)
//   stderr              free text: kept in rank-<r>.log; its last lines explain a silent death
// A worker that prints no protocol line still runs; it only shows no progress, and the hang
// watchdog (hangTimeoutS, startupTimeoutS until the first step) counts from the start: set it to
// 0 for such workers.
//
// At the end, the non-empty, readable shards are merged (core::mergeRunFiles) into `out`, written
// whole or not at all; the launcher's verdict (success, or the ranked cause of the first failure,
// see failure.h) is written into the run. Without any shard, `out` still says why the run failed.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/run_db.h"
#include "lockstep/job/netns.h"

#include <string>
#include <vector>

namespace lockstep::job {

// Environment variables the launcher sets for every rank (besides torchrun's).
inline constexpr const char* kEnvShardDir = "LOCKSTEP_SHARD_DIR";
inline constexpr const char* kEnvRunName = "LOCKSTEP_RUN_NAME";
inline constexpr const char* kEnvRendezvousFile = "LOCKSTEP_RENDEZVOUS_FILE";
// With emulated hosts (LaunchOptions::hosts): what they are, "hosts=2 nproc=2 gbps=1 delay_us=0
// jitter_us=0 loss_pct=0", recorded by the worker as the run's extra "emulated_net".
inline constexpr const char* kEnvEmulatedNet = "LOCKSTEP_EMULATED_NET";

struct WorkerCommand {
    std::vector<std::string> argv; // argv[0]: the executable's path
    std::vector<std::string> env;  // extra "KEY=VALUE" for every rank
};

// How progress is shown on stderr.
enum class ProgressStyle {
    Auto,     // a redrawn bar when stderr is a terminal, otherwise Plain
    Bar,
    Plain,    // "step 3/8 loss=2.301 step_ms=41.2" per step, for logs
    Protocol, // protocol lines (progress.h: job, progress) for a program such as the app
    None,
};

struct LaunchOptions {
    int nproc = 1;                  // ranks (per emulated host with `hosts`)
    // Emulated hosts (netns.h): 0 = every rank on this machine's own network (the default). N:
    // N network namespaces with nproc ranks each (world N x nproc, host h has ranks h*nproc ..),
    // linked through a bridge and shaped by `net`; each rank gets GROUP_RANK = its host,
    // LOCAL_RANK = its place on it, MASTER_ADDR = host 0's address, GLOO_SOCKET_IFNAME = eth0,
    // and its host's name (UTS namespace). Needs CAP_NET_ADMIN and CAP_SYS_ADMIN.
    int hosts = 0;
    NetShape net;
    std::string out;                // the merged run file
    bool force = false;             // replace `out` if it exists
    bool keepShards = false;        // keep the shard folder (shards and rank logs) next to `out`
    std::string runName;            // default: out's stem
    WorkerCommand worker;           // what every rank runs
    int stepsPlanned = 0;           // for the progress display; 0 = unknown
    double hangTimeoutS = 60;       // no progress line from any rank for this long = hung (0 = never)
    double startupTimeoutS = 0;     // before any rank's first step the watchdog waits
                                    // max(hangTimeoutS, this): start-up (importing a framework,
                                    // loading data) is not a step, and on a loaded machine it is slow
    double graceS = 3;              // after a failure, how long the others may exit on their own
    double termS = 2;               // after SIGTERM, how long before SIGKILL
    ProgressStyle progress = ProgressStyle::Auto;
    bool echoWorkerOutput = false;  // copy workers' free text to stderr, prefixed by rank
    std::vector<std::string> inputs; // files `out` must not be (the script and its arguments)
    std::string commandLine;        // recorded in the run's configuration when no shard has one
    std::string messagePrefix = "lockstep run"; // how the launcher's own messages start
    // Set: a job whose ranks all exited 0 without one reporting a step is a failed run with this
    // cause (a script that never built DistributedDataParallel, or ended before its first step).
    std::string noStepCause;
    // For a command that launches once and then ends (run, record): SIGINT, SIGTERM and SIGHUP
    // stay blocked after launchRun returns, so a signal after the verdict (the run file is in
    // place) cannot make the command exit 128+signal with a whole, completed run file.
    bool blockSignalsAtEnd = false;
};

struct LaunchResult {
    bool success = false;
    std::string cause;          // why the run failed ("rank 1 exited with status 3 at step 5")
    bool interrupted = false;   // SIGINT/SIGTERM/SIGHUP reached the launcher
    int signal = 0;             // which (the first), when interrupted
    bool hung = false;          // the hang watchdog stopped the job (failedRank: the rank that hung)
    bool haveRunFile = false;   // `out` was written (also for failed runs: completed steps)
    core::MergeStats merge;
    double wallS = 0;           // from starting the first rank to the last one's exit
    double stopS = 0;           // from the first failure seen to the last rank's exit
    std::vector<int> exitCodes; // per rank: exit status, 128+signal when killed by one
    int failedRank = -1;        // the rank whose failure is the cause, or that hung (-1: none, an interrupt)
};

// Checks the options and everything that must hold before a rank starts (nproc in
// 1..kMaxLocalRanks, finite timeouts, `out` writable and not existing without force, the worker
// executable present). Errors have the code ErrorCode::Usage (a bad value) or
// ErrorCode::NotStarted (anything else): the CLI exits 2 for both.
core::Status checkLaunchOptions(const LaunchOptions& options);

// Runs the whole job. An Error means the job could not be started at all (checkLaunchOptions,
// fork failure, an unwritable folder; ErrorCode::NotStarted or ErrorCode::Usage); a job that started and then failed — including a run file
// that could not be written — comes back as a LaunchResult with success == false.
core::Result<LaunchResult> launchRun(const LaunchOptions& options);

// Picks a free TCP port on 127.0.0.1 (bind port 0, read it, close).
core::Result<int> pickFreePort();

} // namespace lockstep::job
