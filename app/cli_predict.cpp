// `lockstep predict RUN.db --bucket-mb 1,4,25,100 [--first-bucket-mb X] [--nproc 2,4,8]
// [--link-gbps X] [--compress fp16] [--compute-scale X] [--json] [--out-dir DIR]` and `lockstep advise RUN.db`: the
// what-if model of core (whatif.h) on the command line. Needs only core: starts in milliseconds.
#include "cli_flags.h"
#include "commands.h"

#include "lockstep/core/output_file.h"
#include "lockstep/core/report.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/run_files.h"
#include "lockstep/core/whatif.h"
#include "lockstep/core/whatif_settings.h"
#include "lockstep/job/flags.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

namespace lockstep::app {

namespace {

struct WhatIfArgs {
    std::string run;
    std::vector<double> bucketMb;
    std::vector<double> firstBucketMb;
    std::vector<int> nproc;
    std::vector<double> linkGbps;
    std::vector<std::string> compress;
    std::vector<double> computeScale;
    bool json = false;
    std::string outDir;
    bool force = false;
    std::string measureDir; // advise --measure DIR
    int measureSteps = 12;  // steady steps of each measurement run
};

// The largest world size predicted (core's settings table says why).
constexpr int kMaxPredictRanks = static_cast<int>(core::kWorldSizeSetting.max);

int fail(const std::string& message)
{
    // Names and paths inside come from files and arguments: never a raw control character.
    std::cerr << "lockstep: " << core::escapeControl(message) << '\n';
    return 1;
}

// MiB to bytes exactly as the runtime converts --bucket-mb, so a cap means the same layout here.
int64_t mibToBytes(double mb) { return std::max<int64_t>(1, static_cast<int64_t>(mb * 1024 * 1024)); }

std::string number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

core::Result<core::WhatIfModel> loadModel(const std::string& path)
{
    auto run = core::loadRun(path);
    if (!run)
        return std::unexpected(run.error());
    auto model = core::WhatIfModel::build(*run);
    if (!model)
        return core::fail(path + ": " + model.error().message);
    return model;
}

// The grid of configurations: every combination of the lists; a list not given is the recorded value.
std::vector<core::WhatIfConfig> configurations(const WhatIfArgs& a, const core::WhatIfConfig& recorded)
{
    const auto orRecorded = [](const auto& list, auto value) {
        using T = decltype(value);
        std::vector<T> out;
        for (const auto& v : list)
            out.push_back(static_cast<T>(v));
        if (out.empty())
            out.push_back(value);
        return out;
    };
    std::vector<int64_t> caps, firsts;
    for (double mb : a.bucketMb)
        caps.push_back(mibToBytes(mb));
    for (double mb : a.firstBucketMb)
        firsts.push_back(mibToBytes(mb));
    if (caps.empty())
        caps.push_back(recorded.bucketCapBytes);
    if (firsts.empty())
        firsts.push_back(recorded.firstBucketCapBytes);
    const auto worlds = orRecorded(a.nproc, recorded.worldSize);
    const auto links = orRecorded(a.linkGbps, recorded.linkGbps);
    const auto compress = orRecorded(a.compress, recorded.compress);
    const auto scales = orRecorded(a.computeScale, 1.0);
    std::vector<core::WhatIfConfig> out;
    for (double k : scales)
        for (int32_t n : worlds)
            for (double link : links)
                for (const std::string& c : compress)
                    for (int64_t first : firsts)
                        for (int64_t cap : caps)
                            out.push_back(core::WhatIfConfig{cap, first, n, link, c, k});
    return out;
}

std::string outFileName(const std::string& runPath, const core::WhatIfConfig& c)
{
    std::string name = std::filesystem::path(runPath).stem().string() + ".predict-b"
        + number(static_cast<double>(c.bucketCapBytes) / (1 << 20)) + "-f"
        + number(static_cast<double>(c.firstBucketCapBytes) / (1 << 20)) + "-n" + std::to_string(c.worldSize);
    if (c.linkGbps > 0)
        name += "-l" + number(c.linkGbps);
    if (c.compress != "none")
        name += "-" + c.compress;
    if (c.computeScale != 1.0)
        name += "-c" + number(c.computeScale);
    return name + ".db";
}

int runPredict(const WhatIfArgs& a)
{
    auto model = loadModel(a.run);
    if (!model)
        return fail(model.error().message);
    const std::vector<core::WhatIfConfig> grid = configurations(a, model->recorded());
    // Every output is checked before the first is written, and all are moved into place in one
    // decision at the end (OutputFile::commitAll): a signal or a failure leaves none of them.
    core::removeOutputsOnSignal();
    if (!a.outDir.empty()) {
        std::error_code ec;
        // The missing folders of the path, created (and removed again on a signal) outermost first.
        std::vector<std::filesystem::path> missing;
        for (std::filesystem::path p = std::filesystem::absolute(a.outDir, ec).lexically_normal();
             !p.empty() && !std::filesystem::exists(std::filesystem::symlink_status(p, ec)); p = p.parent_path()) {
            missing.push_back(p);
            if (p == p.parent_path())
                break;
        }
        for (auto it = missing.rbegin(); it != missing.rend(); ++it)
            if (!core::createOutputFolder(it->string()))
                return fail("cannot create " + it->string() + ": " + std::strerror(errno));
        if (!std::filesystem::is_directory(a.outDir, ec))
            return fail(a.outDir + " is not a folder");
        for (const core::WhatIfConfig& c : grid)
            if (auto t = core::checkOutputPath((std::filesystem::path(a.outDir) / outFileName(a.run, c)).string(), a.force);
                !t)
                return fail(t.error().message);
    }
    std::vector<core::Prediction> predictions;
    std::vector<core::OutputFile> outputs;
    outputs.reserve(grid.size());
    for (const core::WhatIfConfig& c : grid) {
        auto p = model->predict(c, core::PredictOptions{.keepTimeline = !a.outDir.empty()});
        if (!p)
            return fail(describe(c) + ": " + p.error().message);
        if (!a.outDir.empty()) {
            const std::string path = (std::filesystem::path(a.outDir) / outFileName(a.run, c)).string();
            auto out = core::OutputFile::create(path, a.force, {a.run});
            if (!out)
                return fail(out.error().message);
            if (auto s = core::writeRun(p->run, out->path()); !s)
                return fail(out->explain(s.error()).message);
            outputs.push_back(std::move(*out));
            p->run = core::Run{};
        }
        predictions.push_back(std::move(*p));
    }
    if (!outputs.empty()) {
        std::vector<core::OutputFile*> all;
        for (core::OutputFile& o : outputs)
            all.push_back(&o);
        if (auto s = core::OutputFile::commitAll(all); !s)
            return fail(s.error().message);
        for (const core::OutputFile& o : outputs)
            std::cerr << "wrote " << o.destination() << '\n';
    }
    std::cout << (a.json ? core::predictionsJson(*model, predictions) + "\n" : core::predictionsText(*model, predictions));
    std::cout.flush();
    return std::cout ? 0 : fail("writing the predictions failed");
}

// Median over steady steps of the step time averaged over ranks, and the run's noise (ms, %).
struct Measured {
    double stepMs = 0;
    double noisePct = 0;
};
core::Result<Measured> measuredStep(const std::string& path)
{
    auto run = core::loadRun(path);
    if (!run)
        return std::unexpected(run.error());
    auto s = core::summarizeFile(path);
    if (!s)
        return std::unexpected(s.error());
    return Measured{s->summary.stepTimeMs, core::stepNoisePct(*run)};
}

// `advise --measure DIR`: the measurement the advice names, run for real: one short run at the
// recorded caps and one at the candidate's, back to back (a pair: load that drifts over minutes
// hits both alike), with the recording's other training options, through `lockstep run`'s launch
// path. A difference within the two runs' own step-to-step noise is no difference.
int measure(const WhatIfArgs& a, const core::Advice& advice)
{
    auto run = core::loadRun(a.run);
    if (!run)
        return fail(run.error().message);
    auto options = job::optionsFromConfig(run->config);
    if (!options)
        return fail("--measure: " + a.run + ": " + options.error().message);
    if (advice.candidate == advice.current) {
        std::cout << "\nNothing to measure: every candidate gives the recorded bucket layout.\n";
        return 0;
    }
    std::error_code ec;
    std::filesystem::create_directories(a.measureDir, ec);
    if (!std::filesystem::is_directory(a.measureDir, ec))
        return fail("--measure: cannot create the folder " + a.measureDir);
    options->warmup = std::min(options->warmup, 4);
    options->steps = options->warmup + a.measureSteps;
    const std::string stem = std::filesystem::path(a.run).stem().string();
    struct Point {
        const char* what;
        core::WhatIfConfig config;
        std::string path;
        Measured m;
    };
    Point points[2] = {{"recorded caps", advice.current, "", {}}, {"candidate", advice.candidate, "", {}}};
    for (Point& pt : points) {
        job::TrainingOptions o = *options;
        o.bucketMb = static_cast<double>(pt.config.bucketCapBytes) / (1 << 20);
        o.firstBucketMb = static_cast<double>(pt.config.firstBucketCapBytes) / (1 << 20);
        pt.path = (std::filesystem::path(a.measureDir) / (stem + ".measure-b" + number(o.bucketMb) + "-f"
                                                          + number(o.firstBucketMb) + ".db"))
                      .string();
        std::cerr << "lockstep advise: measuring " << describe(pt.config) << " (" << o.steps << " steps) into "
                  << pt.path << '\n';
        if (const int rc = launchRecordedRun(o, pt.config.worldSize, pt.path, a.force, "lockstep advise"); rc != 0)
            return rc;
        auto m = measuredStep(pt.path);
        if (!m)
            return fail(m.error().message);
        pt.m = *m;
    }
    const double rec = points[0].m.stepMs, cand = points[1].m.stepMs;
    const double diffPct = rec > 0 ? (cand - rec) / rec * 100 : 0;
    const double noise = std::hypot(points[0].m.noisePct, points[1].m.noisePct);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "\nMeasured (%d steady steps each, back to back)\n  recorded caps  %s: %.1f ms (noise %.1f%%)\n"
                  "  candidate      %s: %.1f ms (noise %.1f%%)\n",
                  a.measureSteps, describe(points[0].config).c_str(), rec, points[0].m.noisePct,
                  describe(points[1].config).c_str(), cand, points[1].m.noisePct);
    std::cout << buf;
    std::snprintf(buf, sizeof buf, "%+.1f%%", diffPct);
    std::string verdict = std::fabs(diffPct) <= noise
        ? std::string("no difference these runs can see: ") + buf + " is within their noise (" + number(std::round(noise * 10) / 10) + "%)"
        : diffPct < 0 ? std::string("the candidate measured faster: ") + buf + ", beyond the runs' noise ("
                + number(std::round(noise * 10) / 10) + "%)"
                      : std::string("the candidate measured slower: ") + buf + ", beyond the runs' noise ("
                + number(std::round(noise * 10) / 10) + "%)";
    std::cout << "  " << verdict << "\n  (one pair of runs; this machine's runs of one configuration can differ by more)\n";
    std::cout.flush();
    return std::cout ? 0 : fail("writing the measurement failed");
}

int runAdvise(const WhatIfArgs& a)
{
    auto model = loadModel(a.run);
    if (!model)
        return fail(model.error().message);
    core::AdviseOptions o;
    for (double mb : a.bucketMb)
        o.bucketCaps.push_back(mibToBytes(mb));
    for (double mb : a.firstBucketMb)
        o.firstBucketCaps.push_back(mibToBytes(mb));
    auto advice = core::advise(*model, o);
    if (!advice)
        return fail(a.run + ": " + advice.error().message);
    std::cout << (a.json ? core::adviceJson(*advice) + "\n" : core::adviceText(*advice));
    std::cout.flush();
    if (!std::cout)
        return fail("writing the advice failed");
    return a.measureDir.empty() ? 0 : measure(a, *advice);
}

} // namespace

void registerWhatIfCommands(CLI::App& app)
{
    auto args = std::make_shared<WhatIfArgs>();
    // The ranges: core's one table of what-if settings (whatif_settings.h), the same that
    // `lockstep run`'s flags and the app's What-if page use (0 = not emulated for the link).
    const CLI::Validator bucketMib = numberCheck(core::kBucketCapSetting.min, core::kBucketCapSetting.max);
    const CLI::Validator firstBucketMib = numberCheck(core::kFirstBucketCapSetting.min, core::kFirstBucketCapSetting.max);
    const CLI::Validator computeScale = numberCheck(core::kComputeScaleSetting.min, core::kComputeScaleSetting.max);
    const CLI::Validator link = CLI::Validator(
        [](std::string& v) {
            if (auto zero = job::parseNumber("", v, 0, 0); zero)
                return std::string();
            auto r = job::parseNumber("", v, core::kLinkSetting.min, core::kLinkSetting.max);
            if (r)
                return std::string();
            std::string m = r.error().message;
            if (m.starts_with(": "))
                m.erase(0, 2);
            return m.ends_with(")") ? m.substr(0, m.size() - 1) + "; 0 = not emulated)" : m;
        },
        "");

    CLI::App* predict = app.add_subcommand(
        "predict", "Predict step time, overlap, exposed communication and throughput of other configurations "
                   "from one recorded run, without running them");
    predict->add_option("RUN", args->run, "recorded run database (.db)")->required();
    predict->add_option("--bucket-mb", args->bucketMb, "bucket caps in MiB, comma-separated (default: the recorded)")
        ->delimiter(',')
        ->check(bucketMib);
    predict->add_option("--first-bucket-mb", args->firstBucketMb,
                        "first-bucket caps in MiB, comma-separated (default: the recorded)")
        ->delimiter(',')
        ->check(firstBucketMib);
    predict->add_option("--nproc", args->nproc, "world sizes, comma-separated (default: the recorded)")
        ->delimiter(',')
        ->check(integerCheck(static_cast<int64_t>(core::kWorldSizeSetting.min), kMaxPredictRanks));
    predict->add_option("--link-gbps", args->linkGbps,
                        "emulated link speeds in Gbit/s as `lockstep run --link-gbps`, comma-separated; "
                        "0 = not emulated (default: the recorded)")
        ->delimiter(',')
        ->check(link);
    predict->add_option("--compress", args->compress, "gradient compression: none, fp16, bf16 (default: the recorded)")
        ->delimiter(',')
        ->check(CLI::IsMember({"none", "fp16", "bf16"}));
    predict->add_option("--compute-scale", args->computeScale,
                        "the training thread's work (forward, backward, optimizer, data) takes this many times "
                        "its recorded time: 0.5 = a device twice as fast; comma-separated (default 1)")
        ->delimiter(',')
        ->check(computeScale);
    predict->add_flag("--json", args->json, "print the predictions as JSON (schema lockstep.whatif/1)");
    predict->add_option("--out-dir", args->outDir,
                        "write each predicted timeline as a run file marked \"predicted\" into this folder");
    predict->add_flag("--force", args->force, "overwrite existing files in --out-dir");
    predict->footer(
        "Every combination of the lists is predicted. The model keeps the run's recorded compute (forward,\n"
        "backward with its gradient-ready instants, optimizer) and replays DDP's bucketing, launch order,\n"
        "one link fitted from the run's own all-reduces (latency + bytes / bandwidth, the ring's 2(N-1)/N\n"
        "for other world sizes) and the wait at the end of backward. Every prediction carries a 90% interval:\n"
        "the model's error on held-out real runs of the same kind of change, widened by the recording's\n"
        "step-to-step noise (docs/whatif.md, \"How sure\"). The replay of the recorded configuration is a\n"
        "consistency check only.\n\n"
        "Examples:\n"
        "  lockstep predict runs/mlp.db --bucket-mb 1,4,25,100\n"
        "  lockstep predict runs/mlp.db --nproc 2,4,8 --link-gbps 1 --out-dir runs/whatif\n"
        "  lockstep predict runs/mlp.db --compress fp16 --json\n"
        "  lockstep predict runs/mlp.db --compute-scale 0.5,0.25   # would faster compute expose the all-reduce?\n\n"
        "--out-dir writes every file or none: they are moved into place together at the end.\n"
        + std::string(kExitStatusHelp));
    predict->callback([args] { exitStatus() = runPredict(*args); });

    CLI::App* advise = app.add_subcommand(
        "advise", "Advise the bucket cap and first-bucket cap that minimize predicted step time, with the "
                  "expected gain and how sure the model is");
    advise->add_option("RUN", args->run, "recorded run database (.db)")->required();
    advise->add_option("--bucket-mb", args->bucketMb,
                       "candidate bucket caps in MiB, comma-separated (default: 0.25 to 256 MiB)")
        ->delimiter(',')
        ->check(bucketMib);
    advise->add_option("--first-bucket-mb", args->firstBucketMb,
                       "candidate first-bucket caps in MiB, comma-separated (default: 0.25 to 8 MiB)")
        ->delimiter(',')
        ->check(firstBucketMib);
    advise->add_flag("--json", args->json, "print the advice as JSON (schema lockstep.whatif/1)");
    advise->add_option("--measure", args->measureDir,
                       "then run the measurement that tells: one short run at the recorded caps and one at the "
                       "candidate's, back to back, with the recording's other options (Lockstep runs only), "
                       "run files into this folder");
    advise->add_option("--measure-steps", args->measureSteps, "steady steps of each --measure run (default 12)")
        ->check(integerCheck(2, 1000));
    advise->add_flag("--force", args->force, "with --measure: replace existing run files");
    advise->footer("A change is advised only when its predicted gain clears the prediction's interval: the\n"
                   "model's error on held-out runs of bucket-cap changes, widened by this recording's\n"
                   "step-to-step noise (docs/whatif.md, \"How sure\"). Otherwise the advice says the recording\n"
                   "cannot tell, and which measurement would; --measure runs it. The model's replay of the\n"
                   "recorded run is shown as a consistency check only.\n\n"
                   "Examples:\n"
                   "  lockstep advise runs/mlp.db\n"
                   "  lockstep advise runs/mlp.db --measure runs/measure\n\n"
                   + std::string(kExitStatusHelp));
    advise->callback([args] { exitStatus() = runAdvise(*args); });
}

} // namespace lockstep::app
