// Sub-commands of the `lockstep` CLI. Each area registers its own; main() only dispatches.
// A command's callback stores its exit status in exitStatus(); errors go to stderr.
#pragma once

#include "lockstep/job/training_options.h"

#include <string>

namespace CLI {
class App;
}

namespace lockstep::app {

int& exitStatus();

// One real run through `lockstep run`'s launch path (cli_run.cpp), for other commands
// (`lockstep advise --measure`): the training options, nproc local ranks, into `out`. Shows the
// run's progress as `run` does; returns its exit status (0, 1 failed, 2 could not start, 128+sig).
int launchRecordedRun(const job::TrainingOptions& training, int nproc, const std::string& out, bool force,
                      const char* messagePrefix);

void registerCoreCommands(CLI::App& app);   // report, export, merge, index (cli_core.cpp)
void registerImportCommands(CLI::App& app); // import                  (cli_import.cpp)
void registerWhatIfCommands(CLI::App& app); // predict, advise         (cli_predict.cpp)
void registerRunCommands(CLI::App& app);    // run, sweep              (cli_run.cpp)
#ifdef LOCKSTEP_HAVE_RECORD
void registerRecordCommand(CLI::App& app);  // record (a user's script) (cli_record.cpp)
#endif
// `lockstep worker ARGS...` is lockstep-worker: this process becomes it (exec), so the CLI itself
// never loads LibTorch. registerWorkerCommand only lists it in --help.  (cli_worker.cpp)
void registerWorkerCommand(CLI::App& app);
int execWorker(int argc, char** argv);

} // namespace lockstep::app
