// One way for a process to stop on SIGINT, SIGTERM or SIGHUP without losing or leaving anything:
// the first call blocks those signals in the calling thread and in every thread it starts later,
// and waits for them in a thread of its own (an ordinary thread, not a signal handler, so a
// cleanup may take locks and do I/O). On a signal every registered cleanup runs, in the order
// registered, and the process exits with 128 + the signal (130 for Ctrl-C), the code the default
// action gives. A cleanup may keep a lock it took: nothing runs after the process exits, and a
// thread that needs that lock waits for the exit (what keeps an output from being committed, or a
// step from being reported, after the cleanup ran). Call before starting other threads.
#pragma once

#include <functional>

namespace lockstep::core {

void onStopSignal(std::function<void(int sig)> cleanup);

// Called by a process's main before it returns: if a stop signal's cleanups are running, waits for
// them (the process then exits 128 + signal), so that an ordinary exit never races the signal's
// and the exit status always says the command was interrupted. Returns at once otherwise.
void yieldToStopSignal();

// Called from a cleanup: the process exits with `status` instead of 128 + signal (an output that
// was already whole when the signal came: the command succeeded).
void setStopExitStatus(int status);

} // namespace lockstep::core
