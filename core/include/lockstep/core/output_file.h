// Outputs that are whole or absent, and never an input.
//
// Every command that writes a file (merge, import, export, screenshots, the launcher's merged run)
// writes it through an OutputFile: into a private folder created beside the destination (same
// filesystem, so the final move is one atomic rename; SQLite's -wal/-shm/-journal land in that
// folder too), and moves it into place only in commit(), after the writer has finished (for a run
// database: the last commit and the checkpoint back to rollback-journal mode, RunWriter::close).
// Until then the destination is untouched; on any failure (or without commit) the private folder
// is removed with everything in it, so a failed command leaves neither a 0-byte file nor a run
// that reads as completed with 0 steps.
//
// Output is never input: the destination is compared with every input by identity
// (std::filesystem::equivalent: the same file through a symlink, a hard link or another spelling
// of the path is the same file) and refused.
#pragma once

#include "lockstep/core/result.h"

#include <string>
#include <vector>

namespace lockstep::core {

// Refuses `out` if it is one of `inputs` (by identity). Inputs that do not exist are ignored.
Status refuseOutputIsInput(const std::string& out, const std::vector<std::string>& inputs);

// Checks a destination before anything is written: not a folder, not something other than a
// regular file (a device, FIFO or socket is never replaced: /dev/full stays a device), not a
// dangling symbolic link, its folder exists, and it does not exist unless `overwrite`. Returns the
// path the output will be moved onto: the destination, or for a symbolic link to a regular file the
// file it points to (the link is kept).
Result<std::string> checkOutputPath(const std::string& destination, bool overwrite);

// For commands that write outputs and start no processes (export, merge, import, predict): on
// SIGINT, SIGTERM or SIGHUP, removes the private folders of the outputs being written and exits
// 128+signal (130 for Ctrl-C), instead of leaving them behind (core::onStopSignal). Once.
void removeOutputsOnSignal();

// A folder the command created for its outputs (predict --out-dir): removed on a signal that
// leaves none of its outputs, if it is empty then. Registered under the signal thread's lock.
// Returns false (errno set) when it cannot be created.
bool createOutputFolder(const std::string& path);

class OutputFile {
public:
    // Checks the destination (not an input, then checkOutputPath) and creates the private folder
    // beside the file it will replace (beside a symbolic link's target).
    static Result<OutputFile> create(const std::string& destination, bool overwrite,
                                     const std::vector<std::string>& inputs = {});
    OutputFile(OutputFile&& other) noexcept;
    OutputFile& operator=(OutputFile&&) = delete;
    OutputFile(const OutputFile&) = delete;
    ~OutputFile(); // without a successful commit(): removes the private folder and its contents

    // Where to write (inside the private folder; its file name is the destination's).
    const std::string& path() const { return m_temp; }
    const std::string& destination() const { return m_destination; }

    // Syncs the written file and moves it to the destination atomically: over an existing file
    // only with `overwrite`, else refused if one appeared meanwhile. Stale -wal/-shm/-journal
    // files of an old destination are removed first (SQLite would otherwise apply an old
    // write-ahead log to the new file). Then removes the private folder.
    Status commit();

    // Commits every output in one decision: all are checked and synced first, then moved into
    // place under the lock the signal thread takes, so a signal lands before every move (nothing
    // is left, 128+signal) or after the last (all are whole, exit 0). A move that fails midway
    // takes back the ones already made (they are removed; nothing of a replaced file comes back,
    // so callers check every destination before writing).
    static Status commitAll(const std::vector<OutputFile*>& outputs);

    // `message` with the private path replaced by the destination's (errors of the writer name
    // the file it wrote; the user knows the destination).
    Error explain(const Error& error) const;

private:
    OutputFile() = default;
    Status prepareCommit();
    int moveIntoPlace(); // under the signal thread's lock: 0 or an errno
    Status explainMoveError(int err) const;
    void finishCommit();
    std::string m_folder;
    std::string m_temp;
    std::string m_destination;
    std::string m_target; // where the output goes: the destination, or the file its symlink points to
    bool m_overwrite = false;
    bool m_committed = false;
};

} // namespace lockstep::core
