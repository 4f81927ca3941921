// Whole-or-absent outputs (see output_file.h).
#include "lockstep/core/output_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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

} // namespace

Status refuseOutputIsInput(const std::string& out, const std::vector<std::string>& inputs)
{
    for (const std::string& in : inputs) {
        std::error_code ec;
        if (fs::equivalent(out, in, ec) && !ec)
            return fail(out + " is also an input (" + in + "); write the output to another file");
    }
    return {};
}

Result<OutputFile> OutputFile::create(const std::string& destination, bool overwrite, const std::vector<std::string>& inputs)
{
    if (destination.empty())
        return fail("no output file given");
    if (auto s = refuseOutputIsInput(destination, inputs); !s)
        return std::unexpected(s.error());
    std::error_code ec;
    const fs::path dest(destination);
    if (fs::is_directory(dest, ec))
        return fail(destination + " is a folder; give a file name");
    if (fs::exists(fs::symlink_status(dest, ec)) && !overwrite)
        return fail(destination + " already exists; pass --force to replace it");
    const fs::path parent = dest.has_parent_path() ? dest.parent_path() : fs::path(".");
    if (!fs::is_directory(parent, ec))
        return fail("the folder of " + destination + " does not exist");
    std::string tmpl = (parent / ("." + dest.filename().string() + ".tmp-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data()))
        return fail("cannot write into " + parent.string() + ": " + std::strerror(errno));
    OutputFile out;
    out.m_folder = tmpl;
    out.m_temp = (fs::path(tmpl) / dest.filename()).string();
    out.m_destination = destination;
    out.m_overwrite = overwrite;
    return out;
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : m_folder(std::move(other.m_folder))
    , m_temp(std::move(other.m_temp))
    , m_destination(std::move(other.m_destination))
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
    }
}

Status OutputFile::commit()
{
    if (m_committed)
        return {};
    std::error_code ec;
    if (!fs::is_regular_file(m_temp, ec))
        return fail("nothing was written to " + m_destination);
    // A run database must stand alone: its writer folded the log in (RunWriter::close), or it failed.
    if (fs::exists(m_temp + "-wal", ec) && fs::file_size(m_temp + "-wal", ec) > 0)
        return fail(m_destination + " was not finished: its write-ahead log was not folded into it");
    syncPath(m_temp, O_RDONLY);
    // An old destination's side files would be taken for the new file's: gone before it arrives.
    for (const char* suffix : {"-wal", "-shm", "-journal"})
        fs::remove(m_destination + suffix, ec);
    int rc = ::renameat2(AT_FDCWD, m_temp.c_str(), AT_FDCWD, m_destination.c_str(), m_overwrite ? 0 : RENAME_NOREPLACE);
    if (rc != 0 && errno == EINVAL && !m_overwrite) {
        // A filesystem without RENAME_NOREPLACE: link() refuses an existing name just as atomically.
        rc = ::link(m_temp.c_str(), m_destination.c_str());
        if (rc == 0)
            ::unlink(m_temp.c_str());
    }
    if (rc != 0) {
        const int err = errno;
        if (err == EEXIST)
            return fail(m_destination + " appeared while it was being written; pass --force to replace it");
        return fail("cannot move the output to " + m_destination + ": " + std::strerror(err));
    }
    const fs::path parent = fs::path(m_destination).has_parent_path() ? fs::path(m_destination).parent_path() : fs::path(".");
    syncPath(parent.string(), O_RDONLY | O_DIRECTORY);
    m_committed = true;
    fs::remove_all(m_folder, ec);
    m_folder.clear();
    return {};
}

Error OutputFile::explain(const Error& error) const
{
    std::string m = error.message;
    if (!m_temp.empty())
        for (size_t pos; (pos = m.find(m_temp)) != std::string::npos;)
            m.replace(pos, m_temp.size(), m_destination);
    return Error{m};
}

} // namespace lockstep::core
