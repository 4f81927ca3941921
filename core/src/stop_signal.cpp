// The process's one stop-signal thread (stop_signal.h).
#include "lockstep/core/stop_signal.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep::core {

namespace {

std::mutex& cleanupsMutex()
{
    static std::mutex m;
    return m;
}

std::vector<std::function<void(int)>>& cleanups()
{
    static std::vector<std::function<void(int)>> v;
    return v;
}

std::atomic<int>& exitOverride()
{
    static std::atomic<int> status{-1};
    return status;
}

} // namespace

void setStopExitStatus(int status)
{
    exitOverride().store(status);
}

void onStopSignal(std::function<void(int sig)> cleanup)
{
    {
        std::lock_guard lock(cleanupsMutex());
        cleanups().push_back(std::move(cleanup));
    }
    static std::once_flag once;
    std::call_once(once, [] {
        sigset_t set;
        sigemptyset(&set);
        for (int sig : {SIGINT, SIGTERM, SIGHUP})
            sigaddset(&set, sig);
        if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0)
            return;
        std::thread([set] {
            int sig = 0;
            while (sigwait(&set, &sig) != 0) {
            }
            // Held to the exit: no cleanup is registered while they run.
            cleanupsMutex().lock();
            for (const auto& c : cleanups())
                c(sig);
            const int status = exitOverride().load();
            ::_exit(status >= 0 ? status : 128 + sig);
        }).detach();
    });
}

void yieldToStopSignal()
{
    // The signal thread keeps this lock to the exit once it has taken it.
    std::lock_guard lock(cleanupsMutex());
}

} // namespace lockstep::core
