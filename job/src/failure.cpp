// Failure ranking (see failure.h).
#include "lockstep/job/failure.h"

#include "lockstep/job/process.h"

#include <sys/wait.h>

#include <array>

namespace lockstep::job {

bool looksLikePeerFailure(std::string_view cause)
{
    static constexpr std::array<std::string_view, 15> kPeerWords{
        "closed by peer", "Connection reset", "connection reset", "Broken pipe", "broken pipe",
        "Connection refused", "Timed out", "timed out", "Timeout", "timeout", "peer",
        "ECONNRESET", "EPIPE", "Connection closed", "interrupted by the launcher",
    };
    for (std::string_view word : kPeerWords)
        if (cause.find(word) != std::string_view::npos)
            return true;
    return false;
}

void FailureLog::note(int rank, std::string cause, double atS, bool unambiguous)
{
    FailureEvent ev;
    ev.rank = rank;
    ev.peerLike = !unambiguous && looksLikePeerFailure(cause);
    ev.cause = std::move(cause);
    ev.atS = atS;
    m_events.push_back(std::move(ev));
}

const FailureEvent* FailureLog::primary() const
{
    if (m_events.empty())
        return nullptr;
    const FailureEvent& first = m_events.front();
    for (const FailureEvent& f : m_events) {
        if (f.atS - first.atS > kSettleS)
            break;
        if (!f.peerLike)
            return &f;
    }
    return &first;
}

std::string FailureLog::cause(std::span<const RankEnd> ranks, bool interrupted) const
{
    if (interrupted)
        return "interrupted";
    const FailureEvent* best = primary();
    if (!best)
        return {};
    std::string cause = best->cause;
    for (const RankEnd& r : ranks) {
        if (r.rank != best->rank || !r.explained || r.killedByLauncher)
            continue;
        // The rank said why; its exit status completes the picture.
        if (WIFEXITED(r.waitStatus) || WIFSIGNALED(r.waitStatus))
            cause += " (" + (WIFEXITED(r.waitStatus) ? (WEXITSTATUS(r.waitStatus) == 0 ? std::string("its process exited 0")
                                                                                  : "exit status " + std::to_string(WEXITSTATUS(r.waitStatus)))
                                                     : "killed by " + signalName(WTERMSIG(r.waitStatus)))
                + ")";
    }
    if (best->peerLike) {
        std::string silent;
        for (const RankEnd& r : ranks)
            if (r.killedByLauncher && !r.explained && WIFSIGNALED(r.waitStatus))
                silent += (silent.empty() ? "" : ", ") + std::to_string(r.rank);
        if (!silent.empty())
            cause += "; rank " + silent + " stopped responding and was killed by the launcher";
    }
    return cause;
}

} // namespace lockstep::job
