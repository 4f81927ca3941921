// `lockstep run` and `lockstep sweep`: the command lines in front of the launcher.
// The training flags are declared here too (not only in `lockstep worker`) so that --help lists
// them and a typo is refused before any process starts; they are passed to every worker
// verbatim, and only when given, so the worker's defaults stay the one source of truth.
#include "commands.h"
#include "launcher.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/report.h"
#include "lockstep/core/run_db.h"
#include "lockstep/rt/worker.h" // torch-free: the worker's options and their defaults

#include <CLI/CLI.hpp>

#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

extern char** environ;

namespace lockstep::app {
namespace {

namespace fs = std::filesystem;

// "RANK:N" with a non-negative rank and a non-negative number.
CLI::Validator rankColon(const std::string& what)
{
    return CLI::Validator(
        [what](std::string& value) -> std::string {
            const size_t colon = value.find(':');
            if (colon == std::string::npos || colon == 0 || colon + 1 == value.size())
                return "expected RANK:" + what + ", e.g. 1:" + (what == "MS" ? "30" : "5");
            try {
                size_t used = 0;
                const long rank = std::stol(value.substr(0, colon), &used);
                if (used != colon || rank < 0)
                    return "RANK must be a non-negative integer";
                const std::string rest = value.substr(colon + 1);
                const double n = std::stod(rest, &used);
                if (used != rest.size() || n < 0 || !std::isfinite(n))
                    return what + " must be a non-negative number";
            } catch (const std::exception&) {
                return "expected RANK:" + what;
            }
            return {};
        },
        ""); // the option's type name already reads RANK:MS / RANK:STEP
}

// An integer >= minimum (CLI::PositiveNumber would let "2.5" through to the worker).
CLI::Validator integerAtLeast(long minimum)
{
    return CLI::Validator(
        [minimum](std::string& value) -> std::string {
            try {
                size_t used = 0;
                const long n = std::stol(value, &used);
                if (used == value.size() && n >= minimum)
                    return {};
            } catch (const std::exception&) {
            }
            return "expected an integer >= " + std::to_string(minimum) + ", got '" + value + "'";
        },
        minimum > 0 ? "POSITIVE" : "NONNEGATIVE");
}

// Training flags shared by run and sweep. Each is stored as the text the user typed and
// forwarded only if given.
struct TrainingFlags {
    struct Flag {
        std::string name;
        std::string value;
        CLI::Option* option = nullptr;
        bool isSwitch = false;
        bool switchValue = false;
    };
    std::vector<std::unique_ptr<Flag>> flags;

    Flag& add(CLI::App* app, const std::string& name, const std::string& help, const std::string& typeName = "INT")
    {
        auto flag = std::make_unique<Flag>();
        flag->name = name;
        flag->option = app->add_option(name, flag->value, help)->group("Training (passed to every worker)")->type_name(typeName);
        flags.push_back(std::move(flag));
        return *flags.back();
    }
    Flag& addSwitch(CLI::App* app, const std::string& name, const std::string& help)
    {
        auto flag = std::make_unique<Flag>();
        flag->name = name;
        flag->isSwitch = true;
        flag->option = app->add_flag(name, flag->switchValue, help)->group("Training (passed to every worker)");
        flags.push_back(std::move(flag));
        return *flags.back();
    }
    const Flag* find(const std::string& name) const
    {
        for (const auto& f : flags)
            if (f->name == name)
                return f.get();
        return nullptr;
    }
    bool given(const std::string& name) const
    {
        const Flag* f = find(name);
        return f && f->option->count() > 0;
    }
    std::string value(const std::string& name, const std::string& fallback = {}) const
    {
        const Flag* f = find(name);
        return f && f->option->count() > 0 ? f->value : fallback;
    }
    std::vector<std::string> args(const std::vector<std::string>& skip = {}) const
    {
        std::vector<std::string> out;
        for (const auto& f : flags) {
            if (f->option->count() == 0 || std::find(skip.begin(), skip.end(), f->name) != skip.end())
                continue;
            out.push_back(f->name);
            if (!f->isSwitch)
                out.push_back(f->value);
        }
        return out;
    }
};

void addTrainingFlags(CLI::App* app, TrainingFlags& t, bool withBucketMb)
{
    t.add(app, "--model", "model: mlp (L x [Linear(W,W), ReLU], Linear(W,10)), transformer (small decoder), convnet (small ResNet)", "NAME")
        .option->check(CLI::IsMember({"mlp", "transformer", "convnet"}));
    t.add(app, "--layers", "layers of the model").option->check(integerAtLeast(1));
    t.add(app, "--width", "width of the model (hidden size)").option->check(integerAtLeast(1));
    t.add(app, "--heads", "attention heads (transformer)").option->check(integerAtLeast(1));
    t.add(app, "--seq", "sequence length (transformer)").option->check(integerAtLeast(1));
    t.add(app, "--batch", "samples per rank per step").option->check(integerAtLeast(1));
    t.add(app, "--steps", "training steps (default " + std::to_string(rt::WorkerOptions {}.steps) + ")").option->check(integerAtLeast(1));
    t.add(app, "--warmup", "steps left out of the run-level numbers (default 3)").option->check(integerAtLeast(0));
    if (withBucketMb)
        t.add(app, "--bucket-mb", "gradient bucket cap in MiB (default 25)", "NUM").option->check(CLI::PositiveNumber);
    t.add(app, "--first-bucket-mb", "cap of the first bucket in MiB (default 1)", "NUM").option->check(CLI::PositiveNumber);
    t.add(app, "--compress", "gradient compression on the wire: none, fp16, bf16", "NAME")
        .option->check(CLI::IsMember({"none", "fp16", "bf16"}));
    t.add(app, "--accumulate", "micro-batches per step; gradients are synchronized on the last one only")
        .option->check(integerAtLeast(1));
    t.add(app, "--optimizer", "sgd (with momentum) or adamw", "NAME").option->check(CLI::IsMember({"sgd", "adamw"}));
    t.add(app, "--lr", "learning rate", "NUM").option->check(CLI::PositiveNumber);
    t.add(app, "--seed", "seed of the model, the data and the shuffling").option->check(integerAtLeast(0));
    t.add(app, "--dataset-size", "synthetic samples per epoch").option->check(integerAtLeast(1));
    t.add(app, "--threads", "intra-op threads per worker (0 = cores / local ranks)").option->check(integerAtLeast(0));
    t.add(app, "--timeout-s", "collective timeout in seconds: a rank waiting longer on a peer fails (default 30)", "NUM")
        .option->check(CLI::PositiveNumber);
    t.add(app, "--straggler", "fault injection: RANK:MS of extra compute on one rank every step", "RANK:MS")
        .option->check(rankColon("MS"));
    t.add(app, "--link-gbps", "emulate a link of this speed (Gbit/s): communication is slowed to match", "NUM")
        .option->check(CLI::PositiveNumber);
    t.add(app, "--crash", "fault injection: RANK:STEP, that rank dies at that step", "RANK:STEP").option->check(rankColon("STEP"));
    t.addSwitch(app, "--no-record", "train without recording (to measure the recorder's cost)");
    t.add(app, "--check-every", "compare a hash of the parameters across ranks every N steps (replica drift)")
        .option->check(integerAtLeast(0));
    t.add(app, "--backend", "collective backend: gloo (CPU) or nccl (GPU builds)", "NAME").option->check(CLI::IsMember({"gloo", "nccl"}));
    t.add(app, "--device", "cpu or cuda", "NAME").option->check(CLI::IsMember({"cpu", "cuda"}));
}

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
    app->add_flag("--force", l.force, "overwrite existing run files");
    app->add_flag("--keep-shards", l.keepShards, "keep the per-rank shards and worker logs (in a folder next to the run file)");
    app->add_option("--hang-timeout-s", l.hangTimeoutS,
                    "stop the job when no rank reports progress for this long (default 60; 0 = never)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--grace-s", l.graceS,
                    "after a rank fails, seconds the others get to exit on their own before SIGTERM (default 3)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--progress", l.progress, "progress on stderr: auto (a bar on a terminal, else a line per step), bar, plain, none")
        ->check(CLI::IsMember({"auto", "bar", "plain", "none"}));
    app->add_flag("-v,--verbose", l.verbose, "copy the workers' own messages (stderr) to stderr, prefixed by rank");
    if (withRunName)
        app->add_option("--run-name", l.runName, "name shown in the app (default: the run file's stem)");
    app->add_option("worker-args", l.extra, "after --: more arguments passed to every worker unchanged");
}

ProgressStyle progressStyle(const std::string& s)
{
    if (s == "bar")
        return ProgressStyle::Bar;
    if (s == "plain")
        return ProgressStyle::Plain;
    if (s == "none")
        return ProgressStyle::None;
    return ProgressStyle::Auto;
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

// "25" for 25, "0.5" for 0.5: the bucket cap as it appears in file names and tables.
std::string mbText(double mb)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", mb);
    return buf;
}

// --open: starts lockstep-ui (next to this executable) on the run file, detached, with an
// argv list; the CLI does not wait for it.
void openInUi(const std::string& runFile)
{
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const fs::path ui = n > 0 ? fs::path(std::string(self, size_t(n))).parent_path() / "lockstep-ui" : fs::path();
    if (ui.empty() || access(ui.c_str(), X_OK) != 0) {
        std::fprintf(stderr, "lockstep run: --open: lockstep-ui is not next to this executable (built without the UI?)\n");
        return;
    }
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) {
        std::fprintf(stderr, "lockstep run: --open: no display; open it on a desktop with: %s %s\n", ui.c_str(),
                     runFile.c_str());
        return;
    }
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID); // not killed with this terminal's job
    std::string prog = ui.string();
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
    std::string out;
    TrainingFlags training;
    LauncherFlags launcher;
};

struct SweepCommand {
    std::vector<int> nprocs;
    std::vector<double> bucketMbs{25.0};
    std::string outDir;
    TrainingFlags training;
    LauncherFlags launcher;
};

LaunchOptions baseOptions(const TrainingFlags& t, const LauncherFlags& l)
{
    LaunchOptions o;
    o.force = l.force;
    o.keepShards = l.keepShards;
    o.hangTimeoutS = l.hangTimeoutS;
    o.graceS = l.graceS;
    o.progress = progressStyle(l.progress);
    o.echoWorkerOutput = l.verbose;
    o.stepsPlanned = t.given("--steps") ? std::stoi(t.value("--steps")) : rt::WorkerOptions {}.steps;
    return o;
}

// Loads a run file and summarizes it; a missing or unreadable file becomes an error.
core::Result<core::RunSummary> summarizeFile(const std::string& path)
{
    auto run = core::loadRun(path);
    if (!run)
        return std::unexpected(run.error());
    return core::summarize(*run);
}

int runMain(const RunCommand& cmd)
{
    LaunchOptions o = baseOptions(cmd.training, cmd.launcher);
    o.nproc = cmd.nproc;
    o.out = cmd.out;
    o.runName = cmd.launcher.runName;
    o.workerArgs = cmd.training.args();
    o.workerArgs.insert(o.workerArgs.end(), cmd.launcher.extra.begin(), cmd.launcher.extra.end());
    o.commandLine = joinCommand("lockstep run --nproc " + std::to_string(cmd.nproc) + " --out " + cmd.out, o.workerArgs);

    auto result = launchRun(o);
    if (!result) {
        std::fprintf(stderr, "lockstep run: %s\n", result.error().message.c_str());
        return 2;
    }
    const std::string outPath = fs::absolute(cmd.out).string();
    if (result->haveRunFile) {
        std::printf("run file: %s\n", outPath.c_str());
        if (auto summary = summarizeFile(outPath))
            std::fputs(core::summaryText(*summary).c_str(), stdout);
        else
            std::fprintf(stderr, "lockstep run: cannot summarize %s: %s\n", outPath.c_str(),
                         summary.error().message.c_str());
    }
    std::printf("wall time: %.1f s\n", result->wallS);
    std::fflush(stdout);
    if (cmd.open && result->haveRunFile)
        openInUi(outPath);
    if (!result->success) {
        std::fprintf(stderr, "lockstep run: run FAILED: %s\n", result->cause.c_str());
        std::fprintf(stderr, "lockstep run: all ranks stopped %.1f s after the first failure\n", result->stopS);
        if (result->haveRunFile)
            std::fprintf(stderr, "lockstep run: completed steps are kept in %s (marked failed)\n", outPath.c_str());
        return result->interrupted ? 130 : 1;
    }
    return 0;
}

int sweepMain(const SweepCommand& cmd)
{
    std::error_code ec;
    fs::create_directories(cmd.outDir, ec);
    if (ec || !fs::is_directory(cmd.outDir)) {
        std::fprintf(stderr, "lockstep sweep: cannot create the folder %s: %s\n", cmd.outDir.c_str(),
                     ec ? ec.message().c_str() : "not a folder");
        return 2;
    }
    const std::string model = cmd.training.value("--model", "mlp");
    std::vector<core::RunSummary> summaries;
    struct Point {
        int nproc;
        double mb;
        std::string file;
        bool ok;
        std::string cause;
    };
    std::vector<Point> points;
    bool interrupted = false;
    for (int n : cmd.nprocs) {
        for (double mb : cmd.bucketMbs) {
            if (interrupted)
                break;
            const std::string name = model + "-n" + std::to_string(n) + "-b" + mbText(mb);
            const std::string file = (fs::path(cmd.outDir) / (name + ".db")).string();
            LaunchOptions o = baseOptions(cmd.training, cmd.launcher);
            o.nproc = n;
            o.out = file;
            o.runName = name;
            o.workerArgs = {"--model", model, "--bucket-mb", mbText(mb)};
            const auto rest = cmd.training.args({"--model"});
            o.workerArgs.insert(o.workerArgs.end(), rest.begin(), rest.end());
            o.workerArgs.insert(o.workerArgs.end(), cmd.launcher.extra.begin(), cmd.launcher.extra.end());
            o.commandLine = joinCommand("lockstep run --nproc " + std::to_string(n) + " --out " + file, o.workerArgs);
            std::fprintf(stderr, "lockstep sweep: %s (%d ranks, bucket cap %s MiB)\n", name.c_str(), n, mbText(mb).c_str());
            auto result = launchRun(o);
            Point p {n, mb, file, false, {}};
            if (!result) {
                p.cause = result.error().message;
            } else {
                p.ok = result->success;
                p.cause = result->cause;
                interrupted = result->interrupted;
            }
            core::RunSummary s;
            // Only a file this point wrote: an old one left in place (no --force) is not its result.
            if (auto loaded = result && result->haveRunFile ? summarizeFile(file)
                                                            : core::Result<core::RunSummary>(core::fail("no run file"));
                loaded) {
                s = *loaded;
            } else {
                s.name = name;
                s.model = model;
                s.worldSize = n;
                s.bucketCapBytes = int64_t(std::llround(mb * 1024 * 1024));
                s.status = core::RunStatus::Failed;
                s.failureCause = p.cause;
                s.overlapRatio = std::nan("");
            }
            if (s.name.empty())
                s.name = name;
            if (!p.ok) {
                s.status = core::RunStatus::Failed;
                if (s.failureCause.empty())
                    s.failureCause = p.cause;
                std::fprintf(stderr, "lockstep sweep: %s FAILED: %s\n", name.c_str(), p.cause.c_str());
            }
            summaries.push_back(s);
            points.push_back(p);
        }
    }

    std::fputs(core::summaryTable(summaries).c_str(), stdout);
    int failed = 0;
    for (const auto& p : points)
        if (!p.ok)
            ++failed;
    if (failed > 0) {
        std::printf("\nfailed points (%d of %zu):\n", failed, points.size());
        for (const auto& p : points)
            if (!p.ok)
                std::printf("  n=%d bucket=%s MiB: %s\n", p.nproc, mbText(p.mb).c_str(), p.cause.c_str());
    }
    // Weak scaling (the per-rank batch is the same at every point), one series per bucket cap.
    bool header = false;
    for (double mb : cmd.bucketMbs) {
        std::vector<core::RunSummary> series;
        for (size_t i = 0; i < points.size(); ++i)
            if (points[i].ok && points[i].mb == mb)
                series.push_back(summaries[i]);
        if (series.size() < 2)
            continue;
        if (!header) {
            std::printf("\nweak scaling efficiency (same per-rank batch; N0 = smallest world size):\n");
            header = true;
        }
        std::printf("  bucket %s MiB:", mbText(mb).c_str());
        for (const auto& pt : core::scalingEfficiency(series, core::ScalingMode::Weak))
            std::printf("  N=%d %.0f samples/s E=%.2f", pt.worldSize, pt.throughput, pt.efficiency);
        std::printf("\n");
    }
    std::printf("\nrun files in %s\n", fs::absolute(cmd.outDir).c_str());
    std::fflush(stdout);
    if (interrupted)
        return 130;
    return failed > 0 ? 1 : 0;
}

} // namespace

void registerRunCommands(CLI::App& app)
{
    auto runCmd = std::make_shared<RunCommand>();
    CLI::App* run = app.add_subcommand("run", "Record a data-parallel training run with N local ranks into one run file");
    run->footer(
        "Starts N `lockstep worker` processes (this executable) that rendezvous on 127.0.0.1 at a free\n"
        "port, shows step, loss and step time while they train, and merges their shards into RUN.db.\n"
        "If a rank dies, fails or the job hangs, every rank is stopped within seconds, the run file\n"
        "keeps every completed step and is marked failed with the cause. Ctrl-C does the same\n"
        "(cause \"interrupted\"). Exit status: 0 success, 1 run failed, 2 could not start, 130 interrupted.\n"
        "\n"
        "Examples:\n"
        "  lockstep run --nproc 2 --out runs/mlp.db --model mlp --layers 8 --width 1024 --steps 20\n"
        "  lockstep run --nproc 4 --out runs/slow.db --bucket-mb 5 --link-gbps 1 --straggler 2:30\n"
        "  lockstep run --nproc 2 --out runs/demo.db --steps 12 --open   # then look at it in lockstep-ui\n"
        "  lockstep report runs/mlp.db");
    run->add_option("--nproc", runCmd->nproc, "number of local ranks (worker processes)")
        ->required()
        ->check(CLI::Range(1, 512));
    run->add_option("--out", runCmd->out, "the run file to write (RUN.db)")->required();
    run->add_flag("--open", runCmd->open, "open the run file in lockstep-ui when the run ends");
    addLauncherFlags(run, runCmd->launcher, true);
    addTrainingFlags(run, runCmd->training, true);
    run->callback([runCmd] { exitStatus() = runMain(*runCmd); });

    auto sweepCmd = std::make_shared<SweepCommand>();
    CLI::App* sweep = app.add_subcommand("sweep", "Record one run per (world size, bucket cap) and compare them in a table");
    sweep->footer(
        "Runs `lockstep run` for every pair of --nproc and --bucket-mb values, writing\n"
        "DIR/<model>-n<N>-b<MB>.db each, then prints one table row per run (step time, overlap,\n"
        "exposed communication, throughput) and the weak-scaling efficiency of each bucket cap.\n"
        "A failed point is marked in the table and the sweep goes on; the exit status is 1 if any\n"
        "point failed.\n"
        "\n"
        "Example:\n"
        "  lockstep sweep --nproc 1,2,4 --bucket-mb 1,5,25 --out-dir runs/sweep --model mlp --steps 20");
    sweep->add_option("--nproc", sweepCmd->nprocs, "world sizes, comma separated (e.g. 1,2,4)")
        ->required()
        ->delimiter(',')
        ->check(CLI::Range(1, 512));
    sweep->add_option("--bucket-mb", sweepCmd->bucketMbs, "bucket caps in MiB, comma separated (e.g. 1,5,25)")
        ->delimiter(',')
        ->check(CLI::PositiveNumber);
    sweep->add_option("--out-dir", sweepCmd->outDir, "folder for the run files (created if missing)")->required();
    addLauncherFlags(sweep, sweepCmd->launcher, false);
    addTrainingFlags(sweep, sweepCmd->training, false);
    sweep->callback([sweepCmd] { exitStatus() = sweepMain(*sweepCmd); });
}

} // namespace lockstep::app
