// Whole-or-absent outputs (see output_file.h).
#include "lockstep/core/output_file.h"
#include "lockstep/core/stop_signal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

namespace lockstep::core {

namespace fs = std::filesystem;

namespace {

void syncPath(const std::string& path, int flags)
{
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

// The private folders of the outputs being written, for the signal thread (removeOutputsOnSignal).
std::mutex& tempFoldersMutex()
{
    static std::mutex m;
    return m;
}

// A private folder and whether its output has already been moved into place (the folder then
// holds at most side files, and a signal removes it without calling the output unfinished).
struct TempFolder {
    std::string path;
    bool committed = false;
};

// Whether an output of this process has been moved into place (under tempFoldersMutex).
bool g_anyCommitted = false;

std::vector<TempFolder>& tempFolders()
{
    static std::vector<TempFolder> folders;
    return folders;
}

// Folders created for outputs (createOutputFolder), and whether an output was moved into them.
struct OutputFolder {
    std::string path;
    bool committed = false;
};

std::vector<OutputFolder>& outputFolders()
{
    static std::vector<OutputFolder> folders;
    return folders;
}

// Creates the private folder from `tmpl` (mkdtemp) and registers it in one step under the lock
// the signal thread holds to the end: a signal between the two would leave an unregistered
// folder behind (seen under load: the test's shell signals as soon as the folder appears).
bool createTempFolder(std::string& tmpl)
{
    std::lock_guard lock(tempFoldersMutex());
    if (!::mkdtemp(tmpl.data()))
        return false;
    tempFolders().push_back({tmpl});
    return true;
}

// Removes a private folder that the main thread may still be writing into: first renamed to a
// name nobody writes to (a file SQLite creates by path afterwards, e.g. its journal, then fails
// instead of landing in a folder being removed), then removed, again if something raced in.
void removeFolder(const std::string& folder)
{
    std::error_code ec;
    const std::string gone = folder + "-removed";
    const std::string& victim = ::rename(folder.c_str(), gone.c_str()) == 0 ? gone : folder;
    for (int attempt = 0; attempt < 100 && fs::exists(victim, ec); ++attempt)
        fs::remove_all(victim, ec);
}

void unregisterTempFolder(const std::string& folder)
{
    std::lock_guard lock(tempFoldersMutex());
    std::erase_if(tempFolders(), [&](const TempFolder& f) { return f.path == folder; });
}

} // namespace

void removeOutputsOnSignal()
{
    static std::once_flag once;
    std::call_once(once, [] {
        onStopSignal([](int) {
            // Kept to the exit: no output is created or committed after this point.
            tempFoldersMutex().lock();
            bool unfinished = false;
            for (const TempFolder& folder : tempFolders()) {
                removeFolder(folder.path);
                unfinished = unfinished || !folder.committed;
            }
            for (auto it = outputFolders().rbegin(); it != outputFolders().rend(); ++it)
                if (const OutputFolder& folder = *it; !folder.committed)
                    ::rmdir(folder.path.c_str()); // only if empty: nothing of the user's goes
            const char msg[] = "lockstep: interrupted; the unfinished output was removed\n";
            if (unfinished)
                (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
            else if (g_anyCommitted)
                setStopExitStatus(0); // every output was already whole: the command succeeded
        });
    });
}

bool createOutputFolder(const std::string& path)
{
    std::lock_guard lock(tempFoldersMutex());
    if (::mkdir(path.c_str(), 0777) != 0)
        return false;
    outputFolders().push_back({path});
    return true;
}

Status refuseOutputIsInput(const std::string& out, const std::vector<std::string>& inputs)
{
    for (const std::string& in : inputs) {
        std::error_code ec;
        if (fs::equivalent(out, in, ec) && !ec)
            return fail(out + " is also an input (" + in + "); write the output to another file");
    }
    return {};
}

Result<std::string> checkOutputPath(const std::string& destination, bool overwrite)
{
    if (destination.empty())
        return fail("no output file given");
    if (destination == "-")
        return fail("'-' (standard output) is not supported here; give a file name");
    std::error_code ec;
    fs::path target(destination);
    const fs::file_status link = fs::symlink_status(target, ec);
    if (fs::is_symlink(link)) {
        // A link to a regular file: the file it points to is replaced, the link stays.
        const fs::path resolved = fs::canonical(target, ec);
        if (ec)
            return fail(destination + " is a symbolic link to a missing file; give a file name");
        target = resolved;
    }
    const fs::file_status st = fs::status(target, ec);
    if (fs::is_directory(st))
        return fail(destination + " is a folder; give a file name");
    if (fs::exists(st) && !fs::is_regular_file(st))
        return fail(destination + " is not a regular file (a device, pipe or socket); write to a file");
    if (fs::exists(st) && !overwrite)
        return fail(destination + " already exists; pass --force to replace it");
    const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
    if (!fs::is_directory(parent, ec))
        return fail("the folder of " + destination + " does not exist");
    return target.string();
}

Result<OutputFile> OutputFile::create(const std::string& destination, bool overwrite, const std::vector<std::string>& inputs)
{
    if (destination.empty())
        return fail("no output file given");
    if (auto s = refuseOutputIsInput(destination, inputs); !s)
        return std::unexpected(s.error());
    auto target = checkOutputPath(destination, overwrite);
    if (!target)
        return std::unexpected(target.error());
    const fs::path dest(*target);
    const fs::path parent = dest.has_parent_path() ? dest.parent_path() : fs::path(".");
    std::string tmpl = (parent / ("." + dest.filename().string() + ".tmp-XXXXXX")).string();
    if (!createTempFolder(tmpl)) {
        const int err = errno;
        return fail(err == ENOSPC || err == EDQUOT ? ErrorCode::DiskFull : ErrorCode::Failed,
                    "cannot write into " + parent.string() + ": " + std::strerror(err));
    }
    OutputFile out;
    out.m_folder = tmpl;
    out.m_temp = (fs::path(tmpl) / dest.filename()).string();
    out.m_destination = destination;
    out.m_target = *target;
    out.m_overwrite = overwrite;
    return out;
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : m_folder(std::move(other.m_folder))
    , m_temp(std::move(other.m_temp))
    , m_destination(std::move(other.m_destination))
    , m_target(std::move(other.m_target))
    , m_overwrite(other.m_overwrite)
    , m_committed(other.m_committed)
{
    other.m_folder.clear();
}

OutputFile::~OutputFile()
{
    if (!m_folder.empty()) {
        std::error_code ec;
        fs::remove_all(m_folder, ec);
        unregisterTempFolder(m_folder);
    }
}

Status OutputFile::prepareCommit()
{
    std::error_code ec;
    if (!fs::is_regular_file(m_temp, ec))
        return fail("nothing was written to " + m_destination);
    // A run database must stand alone: its writer folded the log in (RunWriter::close), or it failed.
    if (fs::exists(m_temp + "-wal", ec) && fs::file_size(m_temp + "-wal", ec) > 0)
        return fail(m_destination + " was not finished: its write-ahead log was not folded into it");
    syncPath(m_temp, O_RDONLY);
    // An old destination's side files would be taken for the new file's: gone before it arrives.
    // The destination is checked again: something that is not a regular file may have appeared.
    if (auto target = checkOutputPath(m_destination, true); !target)
        return std::unexpected(target.error());
    else if (*target != m_target)
        return fail(m_destination + " changed while it was being written; nothing was replaced");
    for (const char* suffix : {"-wal", "-shm", "-journal"})
        fs::remove(m_target + suffix, ec);
    return {};
}

int OutputFile::moveIntoPlace()
{
    int rc = ::renameat2(AT_FDCWD, m_temp.c_str(), AT_FDCWD, m_target.c_str(), m_overwrite ? 0 : RENAME_NOREPLACE);
    if (rc != 0 && errno == EINVAL && !m_overwrite) {
        // A filesystem without RENAME_NOREPLACE: link() refuses an existing name just as atomically.
        rc = ::link(m_temp.c_str(), m_target.c_str());
        if (rc == 0)
            ::unlink(m_temp.c_str());
    }
    if (rc != 0)
        return errno;
    g_anyCommitted = true;
    for (TempFolder& f : tempFolders())
        if (f.path == m_folder)
            f.committed = true;
    for (OutputFolder& f : outputFolders())
        f.committed = true;
    return 0;
}

Status OutputFile::explainMoveError(int err) const
{
    if (err == EEXIST)
        return fail(m_destination + " appeared while it was being written; pass --force to replace it");
    return fail("cannot move the output to " + m_destination + ": " + std::strerror(err));
}

void OutputFile::finishCommit()
{
    const fs::path parent = fs::path(m_target).has_parent_path() ? fs::path(m_target).parent_path() : fs::path(".");
    syncPath(parent.string(), O_RDONLY | O_DIRECTORY);
    m_committed = true;
    std::error_code ec;
    fs::remove_all(m_folder, ec);
    unregisterTempFolder(m_folder);
    m_folder.clear();
}

Status OutputFile::commit()
{
    if (m_committed)
        return {};
    if (auto s = prepareCommit(); !s)
        return s;
    // Under the lock the signal thread takes before removing the private folders: a signal lands
    // either before the move (the output is removed and the process exits 128+signal) or after it
    // (the output is whole and the command exits 0).
    std::unique_lock lock(tempFoldersMutex());
    const int err = moveIntoPlace();
    lock.unlock();
    if (err != 0)
        return explainMoveError(err);
    finishCommit();
    return {};
}

Status OutputFile::commitAll(const std::vector<OutputFile*>& outputs)
{
    for (OutputFile* o : outputs)
        if (!o->m_committed)
            if (auto s = o->prepareCommit(); !s)
                return s;
    std::unique_lock lock(tempFoldersMutex());
    std::vector<OutputFile*> moved;
    for (OutputFile* o : outputs) {
        if (o->m_committed)
            continue;
        if (const int err = o->moveIntoPlace(); err != 0) {
            // Take back the ones moved: all or none.
            for (OutputFile* m : moved) {
                ::unlink(m->m_target.c_str());
                for (TempFolder& f : tempFolders())
                    if (f.path == m->m_folder)
                        f.committed = false;
            }
            if (!moved.empty())
                for (OutputFolder& f : outputFolders())
                    f.committed = false;
            return o->explainMoveError(err);
        }
        moved.push_back(o);
    }
    lock.unlock();
    for (OutputFile* o : moved)
        o->finishCommit();
    return {};
}

Error OutputFile::explain(const Error& error) const
{
    std::string m = error.message;
    if (!m_temp.empty())
        for (size_t pos; (pos = m.find(m_temp)) != std::string::npos;)
            m.replace(pos, m_temp.size(), m_destination);
    return Error{m, error.code};
}

} // namespace lockstep::core
