// `lockstep record`: profile the user's own, unchanged PyTorch DDP script. The job launcher of
// `lockstep run` (lockstep::job) starts N local ranks of `python -m lockstep.record SCRIPT
// ARGS` with the environment torchrun gives its workers; the Python recorder (python/lockstep)
// attaches to every DistributedDataParallel the script builds and writes the rank's shard into
// the launcher's shard folder, reporting steps by the launcher's progress protocol on stdout.
// The launcher shows progress, stops every rank when one dies, and merges the shards.
//
// Which Python: --python, else $LOCKSTEP_PYTHON, else the interpreter the lockstep package was
// built for (CMake's LOCKSTEP_PYTHON). Which package: $LOCKSTEP_PYTHONPATH, else the one built or
// installed next to this executable.
#include "cli_flags.h"
#include "commands.h"

#include "lockstep/core/report.h"
#include "lockstep/core/run_files.h"
#include "lockstep/job/flags.h"
#include "lockstep/job/launcher.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::app {
namespace {

namespace fs = std::filesystem;

struct RecordCommand {
    int nproc = 1;
    std::string out;
    std::string python;
    std::string runName;
    int warmup = 3;
    bool force = false;
    bool keepShards = false;
    bool quiet = false;
    double hangTimeoutS = 600;
    double startupTimeoutS = 600;
    double graceS = 3;
    std::string progress = "auto";
    std::vector<std::string> script; // the script and its arguments
};

fs::path selfDir()
{
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? fs::path(std::string(buf, size_t(n))).parent_path() : fs::path();
}

// The folder that holds the `lockstep` Python package: build tree (build/app/lockstep ->
// build/python) or install tree (bin/lockstep -> lib/lockstep/python).
std::string packageDir()
{
    if (const char* env = std::getenv("LOCKSTEP_PYTHONPATH"); env && *env)
        return env;
    const fs::path self = selfDir();
    for (const fs::path& dir : {self / ".." / "python", self / ".." / "lib" / "lockstep" / "python"}) {
        std::error_code ec;
        if (fs::exists(dir / "lockstep" / "__init__.py", ec))
            return fs::weakly_canonical(dir, ec).string();
    }
    return {};
}

// The bootstrap of every rank (python -c): the entry `python -c` puts first on sys.path is the
// working folder; it goes before anything is imported (site's own imports come before it is
// added), and the lockstep package comes from the folder given as the first argument.
constexpr const char* kRecordBootstrap =
    "import sys\n"
    "if sys.path and sys.path[0] in ('', '.'):\n"
    "    del sys.path[0]\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "import lockstep.record\n"
    "sys.exit(lockstep.record.main())\n";

// The user's PYTHONPATH without its empty or relative entries (they name the working folder).
std::string absolutePythonPath()
{
    const char* old = std::getenv("PYTHONPATH");
    std::string out;
    std::string_view rest = old ? old : "";
    while (!rest.empty()) {
        const size_t colon = rest.find(':');
        const std::string_view entry = rest.substr(0, colon);
        if (entry.starts_with('/'))
            out += (out.empty() ? "" : ":") + std::string(entry);
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
    return out;
}

std::string defaultPython()
{
    if (const char* env = std::getenv("LOCKSTEP_PYTHON"); env && *env)
        return env;
    return LOCKSTEP_DEFAULT_PYTHON;
}

// The script's exit status is ours: that of the rank whose failure is the run's cause (the
// others usually die of its death), 128 + the signal when interrupted (130 SIGINT, 143 SIGTERM,
// 129 SIGHUP, as every command), 1 when the job hung (the watchdog's SIGTERM is not the
// script's status), when that rank exited cleanly but the job still failed (nothing recorded) or
// no rank is to blame.
int exitStatusOf(const job::LaunchResult& r)
{
    if (r.success)
        return 0;
    if (r.interrupted)
        return 128 + r.signal;
    if (r.hung)
        return 1;
    if (r.failedRank >= 0 && static_cast<size_t>(r.failedRank) < r.exitCodes.size() && r.exitCodes[r.failedRank] != 0)
        return r.exitCodes[r.failedRank];
    return 1;
}

int recordMain(const RecordCommand& cmd)
{
    const char* me = "lockstep record";
    const std::string& script = cmd.script.front();
    std::error_code ec;
    if (!fs::is_regular_file(script, ec))
        return reportError(me, core::Error{"no such script: " + script, core::ErrorCode::Usage});
    const std::string python = cmd.python.empty() ? defaultPython() : cmd.python;
    if (access(python.c_str(), X_OK) != 0)
        return reportError(me, core::Error{"the Python interpreter " + python + " cannot be run; pass --python PATH (one with torch)",
                                           core::ErrorCode::NotStarted});
    const std::string pkg = packageDir();
    if (pkg.empty())
        return reportError(me, core::Error{"the lockstep Python package is not next to this executable (built with "
                                           "-DLOCKSTEP_BUILD_PYTHON=OFF?); set LOCKSTEP_PYTHONPATH to its folder",
                                           core::ErrorCode::NotStarted});

    job::LaunchOptions o;
    o.nproc = cmd.nproc;
    o.out = cmd.out.empty() ? fs::path(script).stem().string() + ".db" : cmd.out;
    o.force = cmd.force;
    o.keepShards = cmd.keepShards;
    o.runName = cmd.runName.empty() ? fs::path(script).stem().string() : cmd.runName;
    o.hangTimeoutS = cmd.hangTimeoutS;
    o.startupTimeoutS = cmd.startupTimeoutS;
    o.graceS = cmd.graceS;
    o.progress = progressStyle(cmd.progress);
    o.echoWorkerOutput = !cmd.quiet;
    o.messagePrefix = me;
    o.noStepCause = "no step was recorded: the script built no torch DistributedDataParallel, or ended before "
                    "its first step";
    o.blockSignalsAtEnd = true;
    // The shard folder and run name come from the launcher's environment (LOCKSTEP_SHARD_DIR,
    // LOCKSTEP_RUN_NAME), which python -m lockstep.record reads.
    // Nothing from the working folder runs: not `python -m lockstep.record`, which puts the working
    // folder first on sys.path (a lockstep/ or torch/ there would be imported by every rank), but a
    // bootstrap that drops that entry before the first import and takes the package from `pkg`
    // only. The script then gets sys.path[0] = its own folder, as `python script.py` gives it.
    o.worker.argv = {python, "-c", kRecordBootstrap, pkg, "--warmup", std::to_string(cmd.warmup), "--"};
    o.worker.argv.insert(o.worker.argv.end(), cmd.script.begin(), cmd.script.end());
    o.worker.env = {"PYTHONPATH=" + absolutePythonPath(), "LOCKSTEP_PROGRESS_FD=1",
                    // The script's own prints reach the launcher line by line, as they happen.
                    "PYTHONUNBUFFERED=1"};
    // A local job: gloo's connections on the loopback interface only (unless chosen already).
    if (!std::getenv("GLOO_SOCKET_IFNAME"))
        o.worker.env.push_back("GLOO_SOCKET_IFNAME=lo");
    std::string commandLine = "lockstep record --nproc " + std::to_string(cmd.nproc) + " --out " + o.out + " --";
    for (const auto& a : cmd.script)
        commandLine += " " + a;
    o.commandLine = commandLine;
    // The run file never replaces the script or a file among its arguments.
    o.inputs = cmd.script;
    if (auto s = job::checkLaunchOptions(o); !s)
        return reportError(me, s.error());

    auto result = job::launchRun(o);
    if (!result)
        return reportError(me, result.error());
    const std::string outPath = fs::absolute(o.out).string();
    if (result->haveRunFile && result->merge.ranks > 0) {
        std::printf("run file: %s\n", outPath.c_str());
        if (auto summary = core::summarizeFile(outPath))
            std::fputs(core::summaryText(summary->summary).c_str(), stdout);
    }
    std::printf("wall time: %.1f s\n", result->wallS);
    std::fflush(stdout);
    if (!result->success) {
        std::fprintf(stderr, "%s: FAILED: %s\n", me, core::escapeControl(result->cause).c_str());
        if (result->haveRunFile && result->merge.ranks > 0)
            std::fprintf(stderr, "%s: completed steps are kept in %s (marked failed)\n", me, outPath.c_str());
    }
    return exitStatusOf(*result);
}

} // namespace

void registerRecordCommand(CLI::App& app)
{
    auto cmd = std::make_shared<RecordCommand>();
    CLI::App* rec = app.add_subcommand("record", "Profile your own PyTorch DDP script: N local ranks, every "
                                                 "DistributedDataParallel recorded, one run file");
    rec->footer(
        "Runs SCRIPT ARGS as N local ranks with the environment torchrun sets (RANK, WORLD_SIZE,\n"
        "LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT; gloo on the loopback interface), attaches\n"
        "Lockstep's recorder to every torch.nn.parallel.DistributedDataParallel the script builds (no\n"
        "code change), shows progress and the script's output (prefixed by rank), and merges the\n"
        "ranks' shards into RUN.db, written whole. A crashing rank stops the job as in `lockstep run`;\n"
        "completed steps are kept, marked failed.\n"
        "Exit status: 0 success; the script's own when a rank failed; 1 when the job failed otherwise\n"
        "(nothing recorded: the script built no DistributedDataParallel or ended before its first step;\n"
        "a hung rank, named); 2 usage error or a job that could not start; 128 + the signal when\n"
        "interrupted: 130 SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP (the run file keeps the completed\n"
        "steps, marked failed; a signal before the ranks start leaves nothing).\n"
        "\n"
        "Examples:\n"
        "  lockstep record --nproc 2 -- train.py --lr 0.1\n"
        "  lockstep record --nproc 4 --out runs/bert.db --python ~/venv/bin/python -- train.py\n"
        "Under torchrun instead: torchrun --nproc_per_node N -m lockstep.record --out-dir DIR train.py,\n"
        "then lockstep merge DIR/rank-*.db --out run.db (PYTHONPATH: the lockstep package).");
    rec->add_option("--nproc", cmd->nproc, "number of local ranks")->required()->check(integerCheck(1, job::kMaxLocalRanks));
    rec->add_option("--out", cmd->out, "the run file to write (default: SCRIPT's name .db in this folder)");
    rec->add_option("--python", cmd->python,
                    "Python interpreter with torch (default: $LOCKSTEP_PYTHON, else " LOCKSTEP_DEFAULT_PYTHON ")");
    rec->add_option("--run-name", cmd->runName, "name shown in the app (default: SCRIPT's name)");
    rec->add_option("--warmup", cmd->warmup, "steps left out of the run-level numbers (default 3)")
        ->check(integerCheck(0, 1'000'000));
    rec->add_flag("--force", cmd->force, "overwrite the run file if it exists");
    rec->add_flag("--keep-shards", cmd->keepShards, "keep the per-rank shards and logs (next to the run file)");
    rec->add_flag("-q,--quiet", cmd->quiet, "do not show the script's output (it is kept in the rank logs)");
    rec->add_option("--hang-timeout-s", cmd->hangTimeoutS,
                    "stop the job when no rank reports a step for this long (default 600; 0 = never). A hung "
                    "job exits 1 and names the rank that hung")
        ->check(numberCheck(0, 1e9));
    rec->add_option("--startup-timeout-s", cmd->startupTimeoutS,
                    "how long the script may prepare before any rank's first step, when longer than "
                    "--hang-timeout-s (default 600: importing a framework and loading data take minutes)")
        ->check(numberCheck(0, 1e9));
    rec->add_option("--grace-s", cmd->graceS,
                    "after a rank fails, seconds the others get to exit on their own (default 3)")
        ->check(numberCheck(0, 3600));
    addProgressOption(rec, cmd->progress);
    rec->add_option("script", cmd->script, "after --: SCRIPT and its arguments")->required();
    rec->callback([cmd] { exitStatus() = recordMain(*cmd); });
}

} // namespace lockstep::app
