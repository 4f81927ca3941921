// The progress protocol: the lines a worker prints and a launcher reads, and the lines the
// launcher prints for the app. Formatted and parsed here only (the trainer, the launcher, the
// Launch panel and `lockstep record`'s Python recorder all speak it).
//
// A protocol line is one line of text starting with "LOCKSTEP ", then a verb (or none, for a
// step) and space-separated key=value fields. A field named in kRestOfLine (cause, shards, out)
// is always the last one and takes the rest of the line, spaces included; every other value has
// no spaces. Lines that do not start with "LOCKSTEP " are free text (a worker's own output).
//
// Worker -> launcher (the worker's stdout):
//   LOCKSTEP step=<s> rank=<r> loss=<f> step_ms=<f>    step s (from 0) completed on rank r
//   LOCKSTEP done rank=<r>                             rank r finished every step
//   LOCKSTEP failed rank=<r> [step=<s>] cause=<text>   rank r failed (at step s); text to the end
//   LOCKSTEP layout rank=<r> ...                       informational (bucket layout)
//   LOCKSTEP crash rank=<r> step=<s> (injected)        informational (fault injection)
//   LOCKSTEP drift rank=<r> step=<s>                   informational (replica check)
//   LOCKSTEP waiting rank=<r> step=<s>                 rank r launched step s's first all-reduce:
//                                                      from here it waits for the others (names
//                                                      the rank that hung: the one not waiting)
//   LOCKSTEP phase rank=<r> name=<phase>               rank r entered a phase before its first
//                                                      step: rendezvous, warm-up, training
// Launcher -> app (`lockstep run|sweep --progress protocol`, on stderr):
//   LOCKSTEP job nproc=<n> steps=<k> shards=<dir>      a job started; its shard folder
//   LOCKSTEP progress step=<s> steps=<k> loss=<f> step_ms=<f>
//                                                      step s completed on every rank (mean loss,
//                                                      slowest rank's step time); steps 0 = unknown
//   LOCKSTEP point index=<i> points=<n> out=<file>     a sweep started its point i (from 0) of n
//   LOCKSTEP phase name=<phase> ranks=<k> nproc=<n>    where the job is before its first step: the
//                                                      phase of its slowest rank (starting: the
//                                                      workers are being started and load), k of
//                                                      the n ranks already past it
//
// The phases, in order (Phase): starting (the launcher started the workers; they load LibTorch
// and build the model), rendezvous (the rank connects to the others: store and process group),
// warm-up (startup probes, parameter broadcast, clock sync), training (the first step runs; step
// lines follow). phaseLabel() is the one wording the CLI and the app show.
#pragma once

#include <limits>
#include <string>
#include <string_view>

namespace lockstep::job {

enum class Phase { Starting, Rendezvous, WarmUp, Training };
// The protocol's name of a phase ("starting", "rendezvous", "warm-up", "training").
std::string_view phaseName(Phase phase);
// What a user reads ("starting workers", "rendezvous", "warm-up", "first step").
std::string_view phaseLabel(Phase phase);

struct ProgressLine {
    enum class Kind { Step, Done, Failed, Info, Job, Progress, Point, Phase, Other };
    Kind kind = Kind::Other;
    int rank = -1;
    int step = -1;
    double loss = std::numeric_limits<double>::quiet_NaN();
    double stepMs = 0;
    int steps = 0;     // Job, Progress: planned steps (0 = unknown)
    int nproc = 0;     // Job
    int index = -1;    // Point
    int points = 0;    // Point
    Phase phase = Phase::Starting; // Phase
    int ranksPast = 0; // Phase from the launcher: ranks already past it (rank is -1 there)
    std::string text;  // Failed: cause; Job: shard folder; Point: run file; Info: the verb
};

// Parses one line (without its newline; a trailing '\r' is ignored). A line that is not a
// well-formed protocol line comes back as Kind::Other.
ProgressLine parseProgressLine(std::string_view line);

// Formatters (no trailing newline). Causes and paths are made single-line.
std::string stepLine(int rank, int step, double loss, double stepMs);
std::string doneLine(int rank);
// step: where the failure happened when that is not the step the rank is in (a recording that
// failed at step 1 of a script that trained 20); -1: not said, the launcher takes the rank's.
std::string failedLine(int rank, std::string_view cause, int step = -1);
std::string layoutLine(int rank, size_t buckets, std::string_view bucketBytes, int threads, bool pairwise);
std::string crashLine(int rank, int step);
std::string driftLine(int rank, int step);
std::string waitingLine(int rank, int step);
std::string jobLine(int nproc, int steps, std::string_view shardFolder);
std::string progressLine(int step, int steps, double loss, double stepMs);
std::string pointLine(int index, int points, std::string_view runFile);
// Worker -> launcher: rank `rank` entered `phase`.
std::string phaseLine(int rank, Phase phase);
// Launcher -> app: the job's phase (its slowest rank's), `ranksPast` of `nproc` ranks past it.
std::string jobPhaseLine(Phase phase, int ranksPast, int nproc);

} // namespace lockstep::job
