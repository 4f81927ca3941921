// Failure ranking: which of the failures a launcher saw is the run's cause.
//
// When one rank fails, the others fail too, a moment later, with messages about their dead peer
// ("Connection reset by peer", "Timed out"). The run's cause must name the rank that started it,
// so failures seen within a short settle window of the first one are ranked: a cause that reads
// like a peer's consequence is kept only if nothing better arrives in the window; later failures
// are consequences. When the best cause still reads like a dead peer's echo, the ranks that never
// said a word and had to be killed (a hung or stopped rank) are named as the likelier culprits.
// Pure logic: tested without processes.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::job {

struct FailureEvent {
    int rank = -1;         // -1: not a rank's own failure (a hang, an interrupt)
    std::string cause;
    bool peerLike = false; // reads like the echo of another rank's death
    double atS = 0;        // seconds since the job started
};

// gloo's and c10d's wording for a peer that went away or never answered.
bool looksLikePeerFailure(std::string_view cause);

// What the launcher knows of one rank at the end of the job.
struct RankEnd {
    int rank = 0;
    int waitStatus = 0;            // from waitpid
    bool killedByLauncher = false; // the launcher signalled it
    bool explained = false;        // it printed a `failed` line
};

class FailureLog {
public:
    // Failures within this many seconds of the first compete for the cause: ranks that die of a
    // peer's death do so within milliseconds (gloo sees the sockets close); 0.5 s leaves room
    // for a loaded machine without letting an unrelated later failure win.
    static constexpr double kSettleS = 0.5;

    // Records a failure. `unambiguous`: it cannot be a peer's echo whatever its words (a rank
    // killed by a signal without explaining itself, a hang seen by the watchdog).
    void note(int rank, std::string cause, double atS, bool unambiguous = false);
    bool empty() const { return m_events.empty(); }
    double firstAtS() const { return m_events.empty() ? 0 : m_events.front().atS; }
    const std::vector<FailureEvent>& events() const { return m_events; }

    // The failure that explains the run (nullptr if none).
    const FailureEvent* primary() const;
    // The run's cause, for the run file and the user: the primary failure's words, the exit
    // status of the rank that explained itself, and the silent ranks the launcher had to kill
    // when the primary only blames a peer. "interrupted" for an interrupted job.
    std::string cause(std::span<const RankEnd> ranks, bool interrupted) const;

private:
    std::vector<FailureEvent> m_events; // in the order seen
};

} // namespace lockstep::job
