// `lockstep report RUN [--json]`, `lockstep export RUN --chrome OUT.json [--force]`,
// `lockstep merge SHARD... --out RUN.db [--force]`, `lockstep index RUN...`: the core's run database, analyses and
// export on the command line. Errors go to stderr and set a non-zero exit status. Every output
// is written whole or not at all and is never one of the inputs (core/output_file.h).
#include "cli_flags.h"
#include "commands.h"

#include "lockstep/core/chrome_export.h"
#include "lockstep/core/kernels.h"
#include "lockstep/core/output_file.h"
#include "lockstep/core/report.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/run_diff.h"
#include "lockstep/core/summary_store.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

namespace lockstep::app {

namespace {

struct CoreArgs {
    std::string run;
    bool json = false;
    bool kernels = false;
    std::string chromeOut;
    bool exportForce = false;
    std::vector<std::string> shards;
    std::string mergeOut;
    bool force = false;
    std::string diffA;
    std::string diffB;
    size_t diffTop = 10;
};

// Says why on stderr; the exit status follows from the error's code (exitStatusFor).
int report(const core::Error& error) { return reportError("lockstep", error); }

// Runs with at least this many spans that report analyses on the spot get a hint on stderr.
constexpr int64_t kIndexHintSpans = 1'000'000;

int runReport(const CoreArgs& a)
{
    // The stored summary's parts the report prints (summary_store.h); the kernel table reads spans.
    auto loaded = core::loadAnalyzedRun(a.run, core::AnalyzedRunOptions{
                                                   .parts = a.json ? unsigned{core::kSummaryAll} : unsigned{core::kSummaryRun},
                                                   .spans = a.kernels});
    if (!loaded)
        return report(loaded.error());
    const core::Run* run = &loaded->run;
    const core::RunAnalysis& analysis = loaded->analysis;
    // Analysed now, and big enough that it took a while: say how the next report is instant.
    if (!loaded->stored && analysis.summary.spans >= kIndexHintSpans)
        std::cerr << "note: " << core::escapeControl(a.run) << " was analysed now (" << loaded->whyComputed
                  << "); `lockstep index` stores its analysis in it and makes the next report instant\n";
    if (!a.kernels) {
        if (a.json)
            core::writeReportJson(std::cout, *run, analysis);
        else
            std::cout << core::reportText(*run, analysis);
    } else if (a.json) {
        // The report's object with one more key: "kernels", every row of the kernel table.
        std::string json = core::reportJson(*run, analysis);
        if (json.empty() || json.back() != '}')
            return report(core::Error{"the report's JSON is not an object"});
        json.pop_back();
        std::cout << json << ",\"kernels\":" << core::kernelTableJson(core::kernelTable(*run, analysis)) << '}';
    } else {
        std::cout << core::reportText(*run, analysis) << '\n' << core::kernelTableText(core::kernelTable(*run, analysis));
    }
    if (a.json)
        std::cout << '\n';
    std::cout.flush();
    return std::cout ? 0 : report(core::Error{"writing the report failed"});
}

int runIndex(const CoreArgs& a)
{
    for (const std::string& path : a.shards) {
        if (auto s = core::storeSummaries(path); !s)
            return report(s.error());
        std::cerr << "stored the summaries of " << path << '\n';
    }
    return 0;
}

int runDiff(const CoreArgs& a)
{
    auto first = core::loadRun(a.diffA);
    if (!first)
        return report(first.error());
    auto second = core::loadRun(a.diffB);
    if (!second)
        return report(second.error());
    const core::RunDiff diff = core::diffRuns(*first, *second, core::DiffOptions{.topSpans = a.diffTop});
    std::cout << (a.json ? core::diffJson(diff) + "\n" : core::diffText(diff));
    std::cout.flush();
    return std::cout ? 0 : report(core::Error{"writing the diff failed"});
}

int runExport(const CoreArgs& a)
{
    // Before the output's temporary folder exists: a signal from then on removes it.
    core::removeOutputsOnSignal();
    // Refused before the (possibly long) load: an output that would replace the run or another file.
    auto output = core::OutputFile::create(a.chromeOut, a.exportForce, {a.run});
    if (!output)
        return report(output.error());
    auto run = core::loadRun(a.run);
    if (!run)
        return report(run.error());
    if (auto s = core::exportChromeTrace(*run, output->path()); !s)
        return report(output->explain(s.error()));
    if (auto s = output->commit(); !s)
        return report(s.error());
    std::cerr << "wrote " << a.chromeOut << " (" << run->spans.size() << " spans, "
              << run->instants.size() << " instants)\n";
    return 0;
}

int runMerge(const CoreArgs& a)
{
    core::removeOutputsOnSignal();
    core::MergeOptions options;
    options.overwrite = a.force;
    auto stats = core::mergeRunFiles(a.shards, a.mergeOut, options);
    if (!stats)
        return report(stats.error());
    std::cerr << "merged " << a.shards.size() << " shard(s) into " << a.mergeOut << ": " << stats->ranks
              << " ranks, " << stats->steps << " steps, " << stats->spans << " spans, "
              << stats->instants << " instants\n";
    return 0;
}

} // namespace

void registerCoreCommands(CLI::App& app)
{
    auto args = std::make_shared<CoreArgs>();

    CLI::App* report = app.add_subcommand("report", "Summarize a run: step time, overlap, exposed "
                                                    "communication, stragglers, buckets");
    report->add_option("RUN", args->run, "run database (.db)")->required();
    report->add_flag("--json", args->json,
                     "print the full report as JSON: run summary, per rank, per (rank, step), per step "
                     "straggler and per (step, bucket); schema in docs/report-json.md (schema_version " + std::to_string(core::kReportSchemaVersion) + ")");
    report->add_flag("--kernels", args->kernels,
                     "also list the device kernels by name, largest total first: count, time per step, mean, share of "
                     "the step, category (with --json: a \"kernels\" array of every one)");
    report->callback([args] { exitStatus() = runReport(*args); });
    report->footer(kExitStatusHelp);

    CLI::App* index = app.add_subcommand(
        "index", "Compute and store a run's summaries (its analysis and each lane's overview), which report and "
                 "the app read instead of every span; merge, import and record store them already. For a run "
                 "written by an older build or changed since");
    index->add_option("RUN", args->shards, "run databases (.db), changed in place")->required();
    index->callback([args] { exitStatus() = runIndex(*args); });
    index->footer(kExitStatusHelp);

    CLI::App* exp = app.add_subcommand("export", "Export a run to Chrome trace-event JSON "
                                                 "(Perfetto, chrome://tracing)");
    exp->add_option("RUN", args->run, "run database (.db)")->required();
    exp->add_option("--chrome", args->chromeOut, "output JSON file")->required();
    exp->add_flag("--force,-f", args->exportForce, "replace the output if it exists");
    exp->callback([args] { exitStatus() = runExport(*args); });
    exp->footer(kExitStatusHelp);

    CLI::App* diff = app.add_subcommand("diff", "What changed from run A to run B: the configuration fields that "
                                                "differ, the parts of the step that moved beyond noise, the spans "
                                                "whose time changed most");
    diff->add_option("A", args->diffA, "the baseline run database (.db)")->required();
    diff->add_option("B", args->diffB, "the run to compare with it")->required();
    diff->add_flag("--json", args->json, "print the diff as JSON (schema lockstep.diff/1, docs/report-json.md)");
    diff->add_option("--top", args->diffTop, "spans listed in each list")->check(CLI::Range(1, 1000))->capture_default_str();
    diff->callback([args] { exitStatus() = runDiff(*args); });
    diff->footer(kExitStatusHelp);

    CLI::App* merge = app.add_subcommand("merge", "Merge rank shards into one run database");
    merge->add_option("SHARD", args->shards, "shard run databases")->required();
    merge->add_option("--out,-o", args->mergeOut, "merged run database")->required();
    merge->add_flag("--force,-f", args->force, "replace the output if it exists (only once the merge succeeded)");
    merge->callback([args] { exitStatus() = runMerge(*args); });
    merge->footer(kExitStatusHelp);
}

} // namespace lockstep::app
