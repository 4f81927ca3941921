// The shard folder layout (see shard_layout.h).
#include "lockstep/job/shard_layout.h"

#include "lockstep/core/run_db.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace lockstep::job {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kShardsInfix = ".shards-";

std::string shardPrefix(const fs::path& runFile) { return "." + runFile.filename().string() + std::string(kShardsInfix); }

} // namespace

core::Result<std::string> createShardFolder(const std::string& runFile)
{
    const fs::path out(runFile);
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    std::string tmpl = (parent / (shardPrefix(out) + "XXXXXX")).string();
    if (!mkdtemp(tmpl.data()))
        return core::fail("cannot create a folder for the rank shards next to " + runFile + ": " + std::strerror(errno));
    return tmpl;
}

std::string shardFile(const std::string& folder, int rank)
{
    return (fs::path(folder) / ("rank-" + std::to_string(rank) + ".db")).string();
}

std::string logFile(const std::string& folder, int rank)
{
    return (fs::path(folder) / ("rank-" + std::to_string(rank) + ".log")).string();
}

std::string rendezvousFile(const std::string& folder) { return (fs::path(folder) / "rendezvous").string(); }

std::vector<std::string> shardFilesIn(const std::string& folder)
{
    std::vector<std::pair<int, std::string>> found;
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.starts_with("rank-") || !name.ends_with(".db"))
            continue;
        const std::string_view digits(name.data() + 5, name.size() - 5 - 3);
        int rank = -1;
        const auto [p, err] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
        if (err != std::errc() || p != digits.data() + digits.size() || rank < 0)
            continue;
        std::error_code sizeEc;
        if (fs::file_size(it->path(), sizeEc) == 0 || sizeEc)
            continue; // created, not yet written: nothing to read
        found.emplace_back(rank, it->path().string());
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> out;
    for (auto& [rank, path] : found)
        out.push_back(std::move(path));
    return out;
}

RunShards runShardsIn(const std::string& folder)
{
    RunShards out;
    for (const std::string& shard : shardFilesIn(folder)) {
        // A killed rank's shard has its committed steps in its -wal (or, killed while creating
        // it, a hot journal whose rollback leaves it empty: nothing lost).
        (void)core::recoverRunFile(shard);
        std::error_code ec;
        if (fs::file_size(shard, ec) == 0)
            continue;
        // A rank killed at a bad moment may still leave a shard core cannot read: the others
        // make the run rather than lose it whole.
        if (auto valid = core::validateRunFile(shard); !valid) {
            out.leftOut.push_back({shard, valid.error().message, false});
            continue;
        }
        // A rank stopped before its configuration was written (a full disk): nothing to merge.
        if (auto reader = core::RunReader::open(shard); reader) {
            if (auto config = (*reader)->config(); config && config->model.empty()) {
                out.leftOut.push_back(
                    {shard, shard + " has no run configuration (its rank stopped before writing it)", true});
                continue;
            }
        }
        out.files.push_back(shard);
    }
    return out;
}

std::vector<std::string> shardFoldersOf(const std::string& runFile)
{
    const fs::path out(runFile);
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    const std::string prefix = shardPrefix(out);
    std::vector<std::pair<fs::file_time_type, std::string>> found;
    std::error_code ec;
    for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
        if (!it->path().filename().string().starts_with(prefix))
            continue;
        std::error_code e;
        if (!it->is_directory(e))
            continue;
        found.emplace_back(fs::last_write_time(it->path(), e), it->path().string());
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> folders;
    for (auto& [time, path] : found)
        folders.push_back(std::move(path));
    return folders;
}

std::vector<std::string> liveFilesFor(const std::string& runFile)
{
    std::error_code ec;
    if (fs::exists(runFile, ec) && core::validateRunFile(runFile))
        return {runFile};
    // Only the newest folder: an older one is a finished job's (kept with --keep-shards).
    const auto folders = shardFoldersOf(runFile);
    return folders.empty() ? std::vector<std::string>() : shardFilesIn(folders.front());
}

} // namespace lockstep::job
