// placeholder until its owner fills it in: registers no sub-command yet.
#include "commands.h"

namespace lockstep::app {
void registerRunCommands(CLI::App&) {}
} // namespace lockstep::app
