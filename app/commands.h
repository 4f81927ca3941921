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
#ifdef LOCKSTEP_HAVE_RUNTIME
void registerWorkerCommand(CLI::App& app);  // worker (one rank)       (cli_worker.cpp)
void registerRunCommands(CLI::App& app);    // run, sweep              (cli_run.cpp)
#endif

} // namespace lockstep::app
