// Sub-commands of the `lockstep` CLI. Each area registers its own; main() only dispatches.
// A command's callback stores its exit status in exitStatus(); errors go to stderr.
#pragma once

namespace CLI {
class App;
}

namespace lockstep::app {

int& exitStatus();

void registerCoreCommands(CLI::App& app);   // report, export, merge   (cli_core.cpp)
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
