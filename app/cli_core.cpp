// placeholder until its owner fills it in: registers no sub-command yet.
#include "commands.h"

namespace lockstep::app {
void registerCoreCommands(CLI::App&) {}
} // namespace lockstep::app
