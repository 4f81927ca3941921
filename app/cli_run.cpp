// `lockstep run` and `lockstep sweep`: the command lines in front of the job library's launcher.
// The training flags come from the job library's table (cli_flags.h), so --help lists them and
// every value is checked, with the worker's own rules, before any process starts; they reach
// every rank as lockstep-worker arguments.
#include "cli_flags.h"
#include "commands.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/output_file.h"
#include "lockstep/core/report.h"
#include "lockstep/core/run_files.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/whatif.h"
#include "lockstep/job/flags.h"
#include "lockstep/job/launcher.h"
#include "lockstep/job/process.h"
#include "lockstep/job/progress.h"

#include <CLI/CLI.hpp>

#include <spawn.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace lockstep::app {
namespace {

namespace fs = std::filesystem;

// Launcher flags, shared by run and sweep.
struct LauncherFlags {
    bool force = false;
    bool keepShards = false;
    double hangTimeoutS = 60;
    double graceS = 3;
    std::string progress = "auto";
    bool verbose = false;
    std::string runName;
    std::vector<std::string> extra;
};

void addLauncherFlags(CLI::App* app, LauncherFlags& l, bool withRunName)
{
    const std::string group = "Launcher";
    app->add_flag("--force", l.force, "replace existing run files")->group(group);
    app->add_flag("--keep-shards", l.keepShards, "keep the per-rank shards and worker logs (in a folder next to the run file)")
        ->group(group);
    // A day: a step that makes no progress for longer is not a step.
    app->add_option("--hang-timeout-s", l.hangTimeoutS,
                    "stop the job when no rank reports progress for this long (0 = never)")
        ->check(numberCheck(0, 86400))
        ->default_str("60")
        ->group(group);
    // An hour: ranks that outlive their failed peer that long are not going to stop by themselves.
    app->add_option("--grace-s", l.graceS, "after a rank fails, seconds the others get to exit on their own before SIGTERM")
        ->check(numberCheck(0, 3600))
        ->default_str("3")
        ->group(group);
    addProgressOption(app, l.progress)->group(group);
    app->add_flag("-v,--verbose", l.verbose, "copy the workers' own messages to stderr, prefixed by rank")->group(group);
    if (withRunName)
        app->add_option("--run-name", l.runName, "name shown in the app (default: the run file's stem)")->group(group);
    app->add_option("worker-args", l.extra, "after --: more arguments passed to every worker unchanged")->group(group);
}

std::string joinCommand(const std::string& head, const std::vector<std::string>& args)
{
    std::string out = head;
    for (const auto& a : args) {
        out += ' ';
        const bool plain = !a.empty() && a.find_first_of(" \t\"'\\$`") == std::string::npos;
        out += plain ? a : "'" + a + "'";
    }
    return out;
}

// --open: starts lockstep-ui (next to this executable) on the run file, detached, with an
// argv list; the CLI does not wait for it.
void openInUi(const std::string& runFile)
{
    auto ui = job::siblingExecutable("lockstep-ui");
    if (!ui) {
        std::fprintf(stderr, "lockstep run: --open: lockstep-ui is not next to this executable (built without the UI?)\n");
        return;
    }
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) {
        std::fprintf(stderr, "lockstep run: --open: no display; open it on a desktop with: %s %s\n", ui->c_str(),
                     runFile.c_str());
        return;
    }
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID); // not killed with this terminal's job
    std::string prog = *ui;
    std::string file = runFile;
    char* argv[] = {prog.data(), file.data(), nullptr};
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, prog.c_str(), nullptr, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        std::fprintf(stderr, "lockstep run: --open: cannot start %s: %s\n", prog.c_str(), std::strerror(rc));
    else
        std::fprintf(stderr, "lockstep run: opened %s in lockstep-ui\n", runFile.c_str());
}

struct RunCommand {
    bool open = false;
    int nproc = 1;
    int hosts = 0;     // --hosts: emulated hosts (0: none)
    job::NetShape net; // --net-*: their links
    std::string out;
    std::unique_ptr<TrainingFlags> training;
    LauncherFlags launcher;
};

struct SweepCommand {
    std::vector<int> nprocs;
    std::vector<double> bucketMbs{job::TrainingOptions{}.bucketMb};
    std::string outDir;
    std::unique_ptr<TrainingFlags> training;
    LauncherFlags launcher;
};

// The worker arguments after `--`, checked before anything starts with the table's rules (the same
// as lockstep-worker's): known flags with valid values, none the launcher sets for each rank
// (--out-dir, --run-name, --quiet) and none given before `--` as well. Returns the training
// options with them applied, for the checks between flags and the progress display.
core::Result<job::TrainingOptions> withWorkerArgs(const TrainingFlags& given, const std::vector<std::string>& extra,
                                                  std::vector<std::string_view> commandOwns = {})
{
    job::TrainingOptions o = given.options();
    std::vector<std::string_view> seen;
    for (size_t i = 0; i < extra.size(); ++i) {
        std::string_view arg = extra[i];
        std::string_view name = arg;
        std::optional<std::string_view> inlineValue;
        if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
            name = arg.substr(0, eq);
            inlineValue = arg.substr(eq + 1);
        }
        const job::Flag* flag = arg.starts_with("--") ? job::findFlag(name) : nullptr;
        if (!flag)
            return core::fail(core::ErrorCode::Usage, "after --: '" + std::string(arg) + "' is not a worker flag (see lockstep worker --help)");
        if (flag->scope == job::FlagScope::Worker && flag->name != "--dump-params")
            return core::fail(core::ErrorCode::Usage, "after --: " + std::string(flag->name)
                              + " is set by the launcher for every rank; leave it out"
                              + (flag->name == "--run-name" ? " (use --run-name before --)" : ""));
        if (std::find(commandOwns.begin(), commandOwns.end(), flag->name) != commandOwns.end())
            return core::fail(core::ErrorCode::Usage, "after --: " + std::string(flag->name) + " is this command's own flag; give it before --");
        if (given.given(flag->name) || std::find(seen.begin(), seen.end(), flag->name) != seen.end())
            return core::fail(core::ErrorCode::Usage, std::string(flag->name) + " given twice (before and after --, or twice after --)");
        seen.push_back(flag->name);
        std::string_view value = "true";
        if (flag->type != job::FlagType::Switch) {
            if (inlineValue)
                value = *inlineValue;
            else if (i + 1 < extra.size())
                value = extra[++i];
            else
                return core::fail(core::ErrorCode::Usage, "after --: " + std::string(flag->name) + " needs a value");
        } else if (inlineValue) {
            return core::fail(core::ErrorCode::Usage, "after --: " + std::string(flag->name) + " takes no value");
        }
        if (auto s = job::setFlag(o, *flag, value); !s)
            return std::unexpected(s.error());
    }
    return o;
}

// What this build's lockstep-worker cannot do, known before it starts (it would fail at setup,
// after the launch, with exit 1): a worker linked to a CPU-only LibTorch trains on the CPU only.
// (A GPU build's worker says itself, at setup, when no GPU is visible.)
core::Status checkWorkerCanRun(const job::TrainingOptions& o)
{
#ifdef LOCKSTEP_WORKER_CUDA
    (void)o;
#else
    if (o.device != "cpu")
        return core::fail(core::ErrorCode::Usage, "--device " + o.device + ": lockstep-worker trains on the CPU only in this build "
                          "(scripts/gpu_build.sh builds one for GPUs)");
#endif
    return {};
}

// The launch of one run: the worker (lockstep-worker beside this executable) with the options
// as arguments. ErrorCode::NotStarted (exit 2) when the worker is missing.
core::Result<job::LaunchOptions> launchOptions(const job::TrainingOptions& training, int nproc, const std::string& out,
                                               const LauncherFlags& l)
{
    auto worker = job::siblingExecutable("lockstep-worker");
    if (!worker)
        return core::fail(worker.error(), worker.error().message + "; this build has no training runtime (LOCKSTEP_BUILD_RUNTIME=OFF?)");
    job::LaunchOptions o;
    o.nproc = nproc;
    o.out = out;
    o.force = l.force;
    o.keepShards = l.keepShards;
    o.hangTimeoutS = l.hangTimeoutS;
    o.graceS = l.graceS;
    o.progress = progressStyle(l.progress);
    o.echoWorkerOutput = l.verbose;
    o.stepsPlanned = training.steps;
    std::vector<std::string> args = job::toArguments(training);
    args.insert(args.end(), l.extra.begin(), l.extra.end());
    o.worker.argv = {*worker};
    o.worker.argv.insert(o.worker.argv.end(), args.begin(), args.end());
    o.commandLine = joinCommand("lockstep run --nproc " + std::to_string(nproc) + " --out " + out, args);
    if (auto s = job::checkLaunchOptions(o); !s)
        return std::unexpected(s.error());
    return o;
}

int runMain(const RunCommand& cmd)
{
    const job::TrainingOptions training = cmd.training->options();
    auto all = withWorkerArgs(*cmd.training, cmd.launcher.extra);
    if (!all)
        return reportError("lockstep run", all.error());
    const int world = cmd.hosts > 0 ? cmd.hosts * cmd.nproc : cmd.nproc;
    if (auto s = job::checkOptions(*all, world); !s)
        return reportError("lockstep run", s.error());
    if (auto s = checkWorkerCanRun(*all); !s)
        return reportError("lockstep run", s.error());
    auto o = launchOptions(training, cmd.nproc, cmd.out, cmd.launcher);
    if (o) {
        o->stepsPlanned = all->steps;
        o->hosts = cmd.hosts;
        o->net = cmd.net;
        if (cmd.hosts > 0) {
            // The run's command line says where it ran.
            std::string net = " --hosts " + std::to_string(cmd.hosts);
            for (const auto& [flag, value] : {std::pair{"--net-gbps", cmd.net.gbps}, std::pair{"--net-delay-us", cmd.net.delayUs},
                                              std::pair{"--net-jitter-us", cmd.net.jitterUs},
                                              std::pair{"--net-loss-pct", cmd.net.lossPct}})
                if (value > 0)
                    net += std::string(" ") + flag + " " + job::formatNumber(value);
            o->commandLine.insert(std::string("lockstep run").size(), net);
        }
        // Refused before anything starts: no capability, no iproute2, a bad shape.
        if (auto s = job::checkLaunchOptions(*o); !s)
            o = std::unexpected(s.error());
    }
    if (!o)
        return reportError("lockstep run", o.error());
    o->runName = cmd.launcher.runName;
    o->noStepCause = "no rank reported a step";
    o->blockSignalsAtEnd = true;
    auto result = job::launchRun(*o);
    if (!result)
        return reportError("lockstep run", result.error());
    const std::string outPath = fs::absolute(cmd.out).string();
    if (result->haveRunFile) {
        std::printf("run file: %s\n", outPath.c_str());
        if (auto summary = core::summarizeFile(outPath))
            std::fputs(core::summaryText(summary->summary).c_str(), stdout);
        else
            std::fprintf(stderr, "lockstep run: cannot summarize %s: %s\n", outPath.c_str(), core::escapeControl(summary.error().message).c_str());
    }
    std::printf("wall time: %.1f s\n", result->wallS);
    std::fflush(stdout);
    if (cmd.open && result->haveRunFile)
        openInUi(outPath);
    if (!result->success) {
        std::fprintf(stderr, "lockstep run: run FAILED: %s\n", core::escapeControl(result->cause).c_str());
        std::fprintf(stderr, "lockstep run: all ranks stopped %.1f s after the first failure\n", result->stopS);
        if (result->haveRunFile)
            std::fprintf(stderr, "lockstep run: completed steps are kept in %s (marked failed)\n", outPath.c_str());
        return result->interrupted ? 128 + result->signal : 1;
    }
    return 0;
}

// Weak scaling (the per-rank batch is the same at every point), one series per bucket cap, with
// what the app's Charts page says about it (charts_page.cpp): an efficiency above 100 % is a slow
// baseline far more often than superlinear scaling. The baseline is the smallest world size's
// run. At one rank the cap changes nothing (there is no communication), so the 1-rank runs of
// every cap are one job: their throughputs are pooled into one baseline for every series, and
// flagged when they disagree by more than their own step-to-step noise (the machine's speed
// moved between them, and every efficiency inherits it).
template <typename Ok, typename File>
void printWeakScaling(const std::vector<double>& caps, const std::vector<core::RunSummary>& summaries, Ok ok, File file)
{
    int n0 = 0;
    for (size_t i = 0; i < summaries.size(); ++i)
        if (ok(i) && (n0 == 0 || summaries[i].worldSize < n0))
            n0 = summaries[i].worldSize;
    std::vector<size_t> base;
    for (size_t i = 0; i < summaries.size(); ++i)
        if (ok(i) && summaries[i].worldSize == n0 && summaries[i].throughput > 0)
            base.push_back(i);
    double pooled = 0;
    const bool pool = n0 == 1 && base.size() >= 2;
    std::string poolText;
    if (pool) {
        size_t lo = base.front(), hi = base.front();
        for (size_t i : base) {
            pooled += summaries[i].throughput / static_cast<double>(base.size());
            lo = summaries[i].throughput < summaries[lo].throughput ? i : lo;
            hi = summaries[i].throughput > summaries[hi].throughput ? i : hi;
        }
        const auto noise = [&](size_t i) {
            auto run = core::loadRun(file(i));
            const double n = run ? core::stepNoisePct(*run) : std::nan("");
            return std::isfinite(n) ? n : 0.0;
        };
        const double spread = (summaries[hi].throughput - summaries[lo].throughput) / pooled * 100;
        const double allowed = std::hypot(noise(lo), noise(hi));
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "  baseline: the 1-rank runs of every cap are one job (no communication at one rank), pooled: "
                      "%.0f samples/s over %zu runs\n",
                      pooled, base.size());
        poolText = buf;
        if (spread > allowed) {
            std::snprintf(buf, sizeof buf,
                          "  FLAG: those 1-rank runs disagree by %.1f%% (%.0f to %.0f samples/s), beyond their "
                          "step-to-step noise (%.1f%%): the machine ran at different speeds; every efficiency below "
                          "inherits it\n",
                          spread, summaries[lo].throughput, summaries[hi].throughput, allowed);
            poolText += buf;
        }
    }
    bool header = false;
    std::vector<std::string> superlinear;
    for (double mb : caps) {
        std::vector<size_t> series;
        for (size_t i = 0; i < summaries.size(); ++i)
            if (ok(i) && std::fabs(static_cast<double>(summaries[i].config.bucketCapBytes) - mb * 1024 * 1024) < 1.0)
                series.push_back(i);
        if (series.size() < 2)
            continue;
        if (!header) {
            std::printf("\nweak scaling efficiency (same per-rank batch; N0 = smallest world size, %d):\n%s", n0,
                        poolText.c_str());
            header = true;
        }
        double own = 0;
        int ownCount = 0;
        for (size_t i : series)
            if (summaries[i].worldSize == n0)
                own += summaries[i].throughput, ++ownCount;
        const double thr0 = pool ? pooled : ownCount > 0 ? own / ownCount : std::nan("");
        std::printf("  bucket %s MiB:", job::formatNumber(mb).c_str());
        for (size_t i : series) {
            const core::RunSummary& r = summaries[i];
            const double e = thr0 > 0 ? r.throughput * n0 / (static_cast<double>(r.worldSize) * thr0) : std::nan("");
            std::printf("  N=%d %.0f samples/s E=%.2f", r.worldSize, r.throughput, e);
            if (std::isfinite(e) && e > 1.1 && r.worldSize != n0) // a baseline run is not scaling
                superlinear.push_back(std::to_string(static_cast<int>(std::lround(e * 100))) + " % at "
                                      + std::to_string(r.worldSize) + " ranks, " + job::formatNumber(mb) + " MiB");
        }
        std::printf("\n");
    }
    if (!superlinear.empty()) {
        std::string list;
        for (const std::string& s : superlinear)
            list += (list.empty() ? "" : ", ") + s;
        std::printf("  efficiency above 100 %% (%s): check the smallest world size's run — a slow baseline inflates "
                    "every efficiency\n",
                    list.c_str());
    }
}

// A sweep point's name: "<model>-n<ranks>-b<cap MiB>", its run file's stem.
std::string sweepPointName(const job::TrainingOptions& t, int n, double mb)
{
    return t.model + "-n" + std::to_string(n) + "-b" + job::formatNumber(mb);
}

// Every point is checked before the first one starts: a typo must not cost the points before it.
core::Status checkSweepPoints(const SweepCommand& cmd, const job::TrainingOptions& all)
{
    std::vector<std::string> names;
    for (int n : cmd.nprocs) {
        for (double mb : cmd.bucketMbs) {
            job::TrainingOptions t = all;
            t.bucketMb = mb;
            if (auto s = job::checkOptions(t, n); !s)
                return core::fail(core::Error{s.error().message + " (--nproc " + std::to_string(n) + ")", s.error().code});
            if (auto s = checkWorkerCanRun(t); !s)
                return core::fail(s.error());
            // The same point twice would write one run file twice; an existing run file (without
            // --force) or one that cannot be replaced is found now, not after the points before it.
            const std::string name = sweepPointName(t, n, mb);
            if (std::find(names.begin(), names.end(), name) != names.end())
                return core::fail(core::Error{"the point --nproc " + std::to_string(n) + " --bucket-mb "
                                                  + job::formatNumber(mb) + " is given twice",
                                              core::ErrorCode::Usage});
            names.push_back(name);
            std::error_code ec;
            if (fs::is_directory(cmd.outDir, ec))
                // A point whose run file is refused cannot start: the sweep does not start.
                if (auto p = core::checkOutputPath((fs::path(cmd.outDir) / (name + ".db")).string(), cmd.launcher.force); !p)
                    return core::fail(core::Error{p.error().message, core::ErrorCode::NotStarted});
        }
    }
    return {};
}

// One point of a sweep as it ran.
struct SweepPoint {
    int nproc;
    double mb;
    std::string file;
    bool ok;
    std::string cause;
};

// What one point's launch said.
struct PointOutcome {
    SweepPoint point;
    bool wrote = false; // the point wrote its run file
    bool interrupted = false;
    int signal = 0;
};

// Runs one point: a line on stderr, then the job.
PointOutcome runSweepPoint(const SweepCommand& cmd, const job::TrainingOptions& t, int n, double mb,
                           const std::string& name, int index, int total)
{
    const std::string file = (fs::path(cmd.outDir) / (name + ".db")).string();
    if (cmd.launcher.progress == "protocol")
        std::fprintf(stderr, "%s\n", job::pointLine(index, total, fs::absolute(file).string()).c_str());
    else
        std::fprintf(stderr, "lockstep sweep: %s (%d ranks, bucket cap %s MiB)\n", name.c_str(), n,
                     job::formatNumber(mb).c_str());
    PointOutcome out{SweepPoint{n, mb, file, false, {}}};
    SweepPoint& p = out.point;
    auto o = launchOptions(t, n, file, cmd.launcher);
    if (!o) {
        p.cause = o.error().message;
    } else {
        o->runName = name;
        o->messagePrefix = "lockstep sweep";
        auto result = job::launchRun(*o);
        if (!result) {
            p.cause = result.error().message;
        } else {
            p.ok = result->success;
            p.cause = result->cause;
            out.interrupted = result->interrupted;
            out.signal = result->signal;
            out.wrote = result->haveRunFile;
        }
    }
    return out;
}

// The point's row of the table: its run file's summary, or a failed row that says why.
core::RunSummary sweepPointSummary(const PointOutcome& out, const job::TrainingOptions& t, const std::string& name)
{
    const SweepPoint& p = out.point;
    core::RunSummary s;
    // Only a file this point wrote: an old one left in place (no --force) is not its result.
    if (auto loaded = out.wrote ? core::summarizeFile(p.file) : core::Result<core::FileSummary>(core::fail("no run file"));
        loaded) {
        s = loaded->summary;
    } else {
        s.config.name = name;
        s.config.model = t.model;
        s.worldSize = p.nproc;
        s.config.bucketCapBytes = int64_t(std::llround(p.mb * 1024 * 1024));
        s.config.status = core::RunStatus::Failed;
        s.config.failureCause = p.cause;
        s.overlapRatio = std::nan("");
    }
    if (s.config.name.empty())
        s.config.name = name;
    if (!p.ok) {
        s.config.status = core::RunStatus::Failed;
        if (s.config.failureCause.empty())
            s.config.failureCause = p.cause;
        std::fprintf(stderr, "lockstep sweep: %s FAILED: %s\n", name.c_str(), p.cause.c_str());
    }
    return s;
}

// The failed points and why; returns how many failed.
int printFailedPoints(const std::vector<SweepPoint>& points)
{
    int failed = 0;
    for (const auto& p : points)
        if (!p.ok)
            ++failed;
    if (failed > 0) {
        std::printf("\nfailed points (%d of %zu):\n", failed, points.size());
        for (const auto& p : points)
            if (!p.ok)
                std::printf("  n=%d bucket=%s MiB: %s\n", p.nproc, job::formatNumber(p.mb).c_str(), p.cause.c_str());
    }
    return failed;
}

int sweepMain(const SweepCommand& cmd)
{
    const job::TrainingOptions base = cmd.training->options();
    auto all = withWorkerArgs(*cmd.training, cmd.launcher.extra, {"--bucket-mb"});
    if (!all)
        return reportError("lockstep sweep", all.error());
    if (auto s = checkSweepPoints(cmd, *all); !s)
        return reportError("lockstep sweep", s.error());
    std::error_code ec;
    fs::create_directories(cmd.outDir, ec);
    if (ec || !fs::is_directory(cmd.outDir))
        return reportError("lockstep sweep", core::Error{"cannot create the folder " + cmd.outDir + ": "
                                                             + (ec ? ec.message() : std::string("not a folder")),
                                                         core::ErrorCode::NotStarted});
    std::vector<core::RunSummary> summaries;
    std::vector<SweepPoint> points;
    bool interrupted = false;
    int interruptSignal = 0;
    const int total = int(cmd.nprocs.size() * cmd.bucketMbs.size());
    for (int n : cmd.nprocs) {
        for (double mb : cmd.bucketMbs) {
            if (interrupted)
                break;
            job::TrainingOptions t = base;
            t.bucketMb = mb;
            const std::string name = sweepPointName(t, n, mb);
            const PointOutcome out = runSweepPoint(cmd, t, n, mb, name, int(points.size()), total);
            interrupted = out.interrupted;
            interruptSignal = out.signal;
            summaries.push_back(sweepPointSummary(out, t, name));
            points.push_back(out.point);
        }
    }

    std::fputs(core::summaryTable(summaries).c_str(), stdout);
    const int failed = printFailedPoints(points);
    printWeakScaling(cmd.bucketMbs, summaries, [&](size_t i) { return points[i].ok; },
                     [&](size_t i) { return points[i].file; });
    std::printf("\nrun files in %s\n", fs::absolute(cmd.outDir).c_str());
    std::fflush(stdout);
    if (interrupted)
        return 128 + interruptSignal;
    return failed > 0 ? 1 : 0;
}

} // namespace

int launchRecordedRun(const job::TrainingOptions& training, int nproc, const std::string& out, bool force,
                      const char* messagePrefix)
{
    if (auto s = job::checkOptions(training, nproc); !s) {
        std::fprintf(stderr, "%s: %s\n", messagePrefix, core::escapeControl(s.error().message).c_str());
        return 2;
    }
    if (auto s = checkWorkerCanRun(training); !s) {
        std::fprintf(stderr, "%s: %s\n", messagePrefix, core::escapeControl(s.error().message).c_str());
        return 2;
    }
    LauncherFlags l;
    l.force = force;
    auto o = launchOptions(training, nproc, out, l);
    if (!o) {
        std::fprintf(stderr, "%s: %s\n", messagePrefix, core::escapeControl(o.error().message).c_str());
        return 2;
    }
    o->noStepCause = "no rank reported a step";
    o->messagePrefix = messagePrefix;
    auto result = job::launchRun(*o);
    if (!result) {
        std::fprintf(stderr, "%s: %s\n", messagePrefix, core::escapeControl(result.error().message).c_str());
        return 2;
    }
    if (!result->success) {
        std::fprintf(stderr, "%s: run FAILED: %s\n", messagePrefix, core::escapeControl(result->cause).c_str());
        return result->interrupted ? 128 + result->signal : 1;
    }
    return 0;
}

void registerRunCommands(CLI::App& app)
{
    auto runCmd = std::make_shared<RunCommand>();
    CLI::App* run = app.add_subcommand("run", "Record a data-parallel training run with N local ranks into one run file");
    run->footer(std::string(
                    "Starts N lockstep-worker processes (beside this executable) that rendezvous through a file in\n"
                    "the run's private shard folder (no network socket; their gloo connections bind 127.0.0.1),\n"
                    "shows step, loss and step time while they train, and merges their shards into RUN.db.\n"
                    "If a rank dies, fails, runs out of disk or the job hangs, every rank is stopped within\n"
                    "seconds, the run file keeps every completed step and is marked failed with the cause.\n"
                    "Ctrl-C does the same (cause \"interrupted\"). The run file is written whole or not at all, and\n"
                    "no shard folder is left: a signal before the ranks start leaves nothing (128+signal); during\n"
                    "training, the run file keeps the completed steps, marked failed (128+signal); once the ranks\n"
                    "have ended, the merge finishes and the status is the run's.\n"
                    "\n"
                    "--hosts N emulates N hosts on this machine (root only): N network namespaces, each with its own\n"
                    "address (10.77.0.1, ...) and host name (host0, ...), linked through a bridge; --nproc ranks on\n"
                    "each, talking over loopback on a host and over the links between hosts, which --net-gbps,\n"
                    "--net-delay-us, --net-jitter-us and --net-loss-pct shape with tc. Everything is gone when the\n"
                    "run ends, however it ends (the namespaces are held by the launcher and its workers only).\n"
                    "\n"
                    "Examples:\n"
                    "  lockstep run --nproc 2 --out runs/mlp.db --model mlp --layers 8 --width 1024 --steps 20\n"
                    "  lockstep run --nproc 4 --out runs/slow.db --bucket-mb 5 --link-gbps 1 --straggler 2:30\n"
                    "  lockstep run --nproc 2 --out runs/demo.db --steps 12 --open   # then look at it in lockstep-ui\n"
                    "  sudo lockstep run --hosts 2 --nproc 2 --net-gbps 1 --out runs/2x2.db   # 2 emulated hosts, 1 Gbit/s\n"
                    "  lockstep report runs/mlp.db\n\n")
                + kExitStatusHelp);
    run->add_option("--nproc", runCmd->nproc, "number of local ranks (worker processes; per host with --hosts)")
        ->required()
        ->check(integerCheck(1, job::kMaxLocalRanks));
    run->add_option("--out", runCmd->out, "the run file to write (RUN.db)")->required();
    run->add_flag("--open", runCmd->open, "open the run file in lockstep-ui when the run ends");
    addLauncherFlags(run, runCmd->launcher, true);
    for (const job::NetFlag& f : job::netFlags()) {
        const std::string name(f.name);
        const CLI::Validator check = f.integer ? integerCheck(int64_t(f.min), int64_t(f.max)) : numberCheck(f.min, f.max, f.minOpen);
        CLI::Option* opt = nullptr;
        if (f.name == "--hosts")
            opt = run->add_option(name, runCmd->hosts, std::string(f.help));
        else
            opt = run->add_option(name, f.name == "--net-gbps"      ? runCmd->net.gbps
                                            : f.name == "--net-delay-us" ? runCmd->net.delayUs
                                            : f.name == "--net-jitter-us" ? runCmd->net.jitterUs
                                                                          : runCmd->net.lossPct,
                                  std::string(f.help));
        opt->type_name(std::string(f.valueName))->check(check)->group("Emulated hosts");
    }
    runCmd->training = std::make_unique<TrainingFlags>(run, false);
    run->callback([runCmd] { exitStatus() = runMain(*runCmd); });

    auto sweepCmd = std::make_shared<SweepCommand>();
    CLI::App* sweep = app.add_subcommand("sweep", "Record one run per (world size, bucket cap) and compare them in a table");
    sweep->footer(std::string(
                      "Runs `lockstep run` for every pair of --nproc and --bucket-mb values, writing\n"
                      "DIR/<model>-n<N>-b<MB>.db each, then prints one table row per run (step time, overlap,\n"
                      "exposed communication, throughput) and the weak-scaling efficiency of each bucket cap.\n"
                      "Every point is checked before the first starts. A failed point is marked in the table and\n"
                      "the sweep goes on; the exit status is 1 if any point failed.\n"
                      "\n"
                      "Example:\n"
                      "  lockstep sweep --nproc 1,2,4 --bucket-mb 1,5,25 --out-dir runs/sweep --model mlp --steps 20\n\n")
                  + kExitStatusHelp);
    sweep->add_option("--nproc", sweepCmd->nprocs, "world sizes, comma separated (e.g. 1,2,4)")
        ->required()
        ->delimiter(',')
        ->check(integerCheck(1, job::kMaxLocalRanks));
    const job::Flag* bucket = job::findFlag("--bucket-mb");
    sweep->add_option("--bucket-mb", sweepCmd->bucketMbs, "bucket caps in MiB, comma separated (e.g. 1,5,25)")
        ->delimiter(',')
        ->check(numberCheck(bucket->min, bucket->max, bucket->minOpen))
        ->default_str(bucket->text(job::TrainingOptions{}));
    sweep->add_option("--out-dir", sweepCmd->outDir, "folder for the run files (created if missing)")->required();
    addLauncherFlags(sweep, sweepCmd->launcher, false);
    sweepCmd->training = std::make_unique<TrainingFlags>(sweep, false, std::vector<std::string_view>{"--bucket-mb"});
    sweep->callback([sweepCmd] { exitStatus() = sweepMain(*sweepCmd); });
}

} // namespace lockstep::app
