// The training flags table (see flags.h) and its checks.
#include "lockstep/job/flags.h"

#include "lockstep/core/fields.h"
#include "lockstep/core/whatif_settings.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <type_traits>

namespace lockstep::job {

namespace {

// What a user typed, shortened for a message (a 300-character value must not flood stderr).
std::string echo(std::string_view text)
{
    constexpr size_t kMax = 40;
    return text.size() <= kMax ? std::string(text) : std::string(text.substr(0, kMax)) + "...";
}

// --- table builders: one per type, binding a flag to TrainingOptions members --------------------

struct Names {
    std::string_view name, label, group, valueName, help;
};

Flag base(const Names& n, FlagType type)
{
    Flag f;
    f.name = n.name;
    f.label = n.label;
    f.group = n.group;
    f.valueName = n.valueName;
    f.help = n.help;
    f.type = type;
    return f;
}

template <auto Member>
Flag integer(const Names& n, int64_t lo, int64_t hi, Recorded rec, std::string_view key = {})
{
    Flag f = base(n, FlagType::Integer);
    f.intMin = lo;
    f.intMax = hi;
    f.recorded = rec;
    f.configKey = key;
    f.store = [](TrainingOptions& o, const FlagValue& v) {
        using T = std::remove_reference_t<decltype(o.*Member)>;
        o.*Member = static_cast<T>(v.integer);
    };
    f.text = [](const TrainingOptions& o) { return std::to_string(o.*Member); };
    return f;
}

template <auto Member>
Flag number(const Names& n, double lo, double hi, bool minOpen, std::string_view unit, Recorded rec,
            std::string_view key = {})
{
    Flag f = base(n, FlagType::Number);
    f.min = lo;
    f.max = hi;
    f.minOpen = minOpen;
    f.unit = unit;
    f.recorded = rec;
    f.configKey = key;
    f.store = [](TrainingOptions& o, const FlagValue& v) { o.*Member = v.number; };
    f.text = [](const TrainingOptions& o) { return formatNumber(o.*Member); };
    return f;
}

template <auto Member>
Flag choice(const Names& n, std::span<const std::string_view> choices, Recorded rec, std::string_view key = {})
{
    Flag f = base(n, FlagType::Choice);
    f.choices = choices;
    f.recorded = rec;
    f.configKey = key;
    f.store = [](TrainingOptions& o, const FlagValue& v) { o.*Member = v.text; };
    f.text = [](const TrainingOptions& o) { return o.*Member; };
    return f;
}

template <auto Member>
Flag text(const Names& n)
{
    Flag f = base(n, FlagType::Text);
    f.scope = FlagScope::Worker;
    f.store = [](TrainingOptions& o, const FlagValue& v) { o.*Member = v.text; };
    f.text = [](const TrainingOptions& o) { return o.*Member; };
    return f;
}

// RANK:VALUE into two members; the rank member < 0 means "not injected".
template <auto RankMember, auto ValueMember>
Flag rankValue(const Names& n, double lo, double hi, bool valueInteger, std::string_view unit, std::string_view key)
{
    Flag f = base(n, FlagType::RankValue);
    f.min = lo;
    f.max = hi;
    f.intMin = static_cast<int64_t>(lo);
    f.intMax = static_cast<int64_t>(hi);
    f.valueInteger = valueInteger;
    f.unit = unit;
    f.recorded = Recorded::Extra;
    f.configKey = key;
    f.store = [](TrainingOptions& o, const FlagValue& v) {
        using T = std::remove_reference_t<decltype(o.*ValueMember)>;
        o.*RankMember = v.rank;
        if constexpr (std::is_integral_v<T>)
            o.*ValueMember = static_cast<T>(v.integer);
        else
            o.*ValueMember = v.number;
    };
    f.text = [](const TrainingOptions& o) -> std::string {
        if (o.*RankMember < 0)
            return {};
        using T = std::remove_reference_t<decltype(o.*ValueMember)>;
        if constexpr (std::is_integral_v<T>)
            return std::to_string(o.*RankMember) + ":" + std::to_string(o.*ValueMember);
        else
            return std::to_string(o.*RankMember) + ":" + formatNumber(o.*ValueMember);
    };
    return f;
}

// A switch that turns `Member` to `onValue` when given.
template <auto Member, bool OnValue>
Flag toggle(const Names& n, FlagScope scope)
{
    Flag f = base(n, FlagType::Switch);
    f.scope = scope;
    f.store = [](TrainingOptions& o, const FlagValue& v) { o.*Member = v.on ? OnValue : !OnValue; };
    f.text = [](const TrainingOptions& o) { return o.*Member == OnValue ? std::string("true") : std::string(); };
    return f;
}

constexpr std::array<std::string_view, 3> kModels{"mlp", "transformer", "convnet"};
constexpr std::array<std::string_view, 3> kCompress{"none", "fp16", "bf16"};
constexpr std::array<std::string_view, 2> kOptimizers{"sgd", "adamw"};
constexpr std::array<std::string_view, 2> kBackends{"gloo", "nccl"};
constexpr std::array<std::string_view, 2> kDevices{"cpu", "cuda"};

// Limits and why:
//  - steps, warmup, check period: 10 million steps is days of training at 10 ms a step; step
//    numbers stay far inside int32 (the run database's step column) even times --accumulate.
//  - layers 1024, width 65536, heads 256, seq 65536: beyond them a model does not fit a machine
//    this runtime targets; the cap keeps sizes inside int32 products in the models.
//  - batch 2^24 samples, --accumulate 1024: per-step sample counts stay exact in int64.
//  - bucket caps and the emulated link: core's what-if settings table (whatif_settings.h).
//  - --lr up to 1000, --timeout-s up to a day, straggler delays up to 10 minutes, emulated links
//    up to 10 Tbit/s: anything larger is a typo, and would be recorded but not meaningfully applied.
constexpr int64_t kMaxSteps = 10'000'000;

std::vector<Flag> makeTable()
{
    using O = TrainingOptions;
    std::vector<Flag> t;
    constexpr std::string_view kModel = "Model", kSchedule = "Data and schedule", kGrad = "Gradients",
                               kGroup = "Process group", kFaults = "Fault injection and checks",
                               kOutput = "Worker output";
    t.push_back(choice<&O::model>({"--model", "Model", kModel, "NAME",
                                   "model: mlp (L x [Linear(W,W), ReLU], Linear(W,10)), transformer (small decoder), "
                                   "convnet (small ResNet)"},
                                  kModels, Recorded::Column));
    t.push_back(integer<&O::layers>({"--layers", "Layers", kModel, "INT", "layers (mlp) or blocks (transformer, convnet)"},
                                    1, 1024, Recorded::ModelArgs));
    t.push_back(integer<&O::width>({"--width", "Width", kModel, "INT", "hidden width (mlp, transformer) or channels (convnet)"},
                                   1, 65536, Recorded::ModelArgs));
    t.push_back(integer<&O::heads>({"--heads", "Heads", kModel, "INT", "attention heads (transformer; must divide --width)"},
                                   1, 256, Recorded::ModelArgs));
    t.push_back(integer<&O::seq>({"--seq", "Sequence", kModel, "INT", "sequence length (transformer)"}, 1, 65536,
                                 Recorded::ModelArgs));
    t.push_back(integer<&O::batch>({"--batch", "Batch per rank", kSchedule, "INT", "samples per rank per micro-batch"}, 1,
                                   int64_t{1} << 24, Recorded::Extra, "micro_batch"));
    t.push_back(integer<&O::steps>({"--steps", "Steps", kSchedule, "INT", "training steps"}, 1, kMaxSteps, Recorded::Column));
    t.push_back(integer<&O::warmup>({"--warmup", "Warm-up steps", kSchedule, "INT",
                                     "steps left out of the run-level numbers"},
                                    0, kMaxSteps, Recorded::Column));
    t.push_back(integer<&O::accumulate>({"--accumulate", "Accumulate", kSchedule, "INT",
                                         "micro-batches per step; gradients are synchronized on the last one only"},
                                        1, 1024, Recorded::Column));
    t.push_back(integer<&O::datasetSize>({"--dataset-size", "Dataset size", kSchedule, "INT",
                                          "synthetic samples per epoch (at least one global batch)"},
                                         1, int64_t{1} << 40, Recorded::Extra, "dataset_size"));
    t.push_back(integer<&O::seed>({"--seed", "Seed", kSchedule, "INT", "seed of the model, the data and the shuffling"}, 0,
                                  std::numeric_limits<int64_t>::max(), Recorded::Extra, "seed"));
    // The what-if knobs' ranges come from core's one table (whatif_settings.h), shared with
    // `lockstep predict` and the app's What-if page.
    t.push_back(number<&O::bucketMb>({"--bucket-mb", "Bucket cap", kGrad, "MIB", "gradient bucket cap in MiB"},
                                     core::kBucketCapSetting.min, core::kBucketCapSetting.max, false,
                                     "MiB", Recorded::Column));
    t.push_back(number<&O::firstBucketMb>({"--first-bucket-mb", "First bucket cap", kGrad, "MIB",
                                           "cap of the first bucket in MiB (the last layers' gradients)"},
                                          core::kFirstBucketCapSetting.min, core::kFirstBucketCapSetting.max, false,
                                          "MiB", Recorded::Column));
    t.push_back(choice<&O::compress>({"--compress", "Compression", kGrad, "NAME",
                                      "gradient compression on the wire: none, fp16, bf16"},
                                     kCompress, Recorded::Column));
    t.push_back(choice<&O::optimizer>({"--optimizer", "Optimizer", kGrad, "NAME", "sgd (momentum 0.9) or adamw"},
                                      kOptimizers, Recorded::Column));
    t.push_back(number<&O::lr>({"--lr", "Learning rate", kGrad, "NUM", "learning rate"}, 0, 1000, true, "",
                               Recorded::Extra, "lr"));
    t.push_back(choice<&O::backend>({"--backend", "Backend", kGroup, "NAME", "collective backend: gloo (CPU) or nccl (GPU builds)"},
                                    kBackends, Recorded::Column));
    t.push_back(choice<&O::device>({"--device", "Device", kGroup, "NAME", "cpu or cuda (GPU builds)"}, kDevices,
                                   Recorded::Column));
    t.push_back(integer<&O::threads>({"--threads", "Threads", kGroup, "INT",
                                      "intra-op threads per rank (0 = cores / local ranks)"},
                                     0, 1024, Recorded::Extra, "threads"));
    t.push_back(number<&O::timeoutS>({"--timeout-s", "Collective timeout", kGroup, "SECONDS",
                                      "collective and rendezvous timeout in seconds: a rank waiting longer on a peer fails"},
                                     0, 86400, true, "s", Recorded::Extra, "timeout_s"));
    t.push_back(rankValue<&O::stragglerRank, &O::stragglerMs>(
        {"--straggler", "Straggler", kFaults, "RANK:MS", "extra compute of MS milliseconds (CPU time) on one rank, every step"}, 0,
        600'000, false, "ms", "straggler"));
    t.push_back(number<&O::linkGbps>({"--link-gbps", "Link speed", kFaults, "GBPS",
                                      "emulate a link of this speed in Gbit/s (default: not emulated): communication is slowed to match"},
                                     0, core::kLinkSetting.max, true, "Gbit/s", Recorded::Column));
    t.push_back(rankValue<&O::crashRank, &O::crashStep>(
        {"--crash", "Crash", kFaults, "RANK:STEP", "that rank dies (exit status 3) at the start of STEP (from 0)"}, 0,
        kMaxSteps - 1, true, "", "crash"));
    t.push_back(integer<&O::checkEvery>({"--check-every", "Replica check", kFaults, "STEPS",
                                         "compare a hash of the parameters across ranks every N steps (0 = off)"},
                                        0, kMaxSteps, Recorded::Extra, "check_every"));
    t.push_back(toggle<&O::record, false>({"--no-record", "No recording", kFaults, "",
                                           "train without recording (to measure the recorder's cost)"},
                                          FlagScope::Training));
    t.push_back(text<&O::outDir>({"--out-dir", "Shard folder", kOutput, "DIR",
                                  "folder of this rank's shard rank-<r>.db (default: $LOCKSTEP_SHARD_DIR, else the "
                                  "current folder)"}));
    t.push_back(text<&O::runName>({"--run-name", "Run name", kOutput, "NAME",
                                   "name of the run (default: $LOCKSTEP_RUN_NAME)"}));
    t.push_back(text<&O::dumpParams>({"--dump-params", "Dump parameters", kOutput, "FILE",
                                      "write the final parameters as raw float32 ({rank} expands)"}));
    t.push_back(toggle<&O::quiet, true>({"--quiet", "Quiet", kOutput, "", "no per-step progress lines"},
                                        FlagScope::Worker));
    t.push_back(toggle<&O::force, true>({"--force", "Replace shard", kOutput, "",
                                         "replace an existing shard rank-<r>.db in the shard folder"},
                                        FlagScope::Worker));
    return t;
}

// Emulated hosts (netns.h). Ranges: 64 hosts x 8 ranks is already more processes than a
// workstation schedules sensibly; 400 Gbit/s is the fastest NIC, 1 Mbit/s the slowest link worth
// shaping (htb's accuracy); a 10 s one-way delay is beyond any real link.
constexpr NetFlag kNetFlags[] = {
    {"--hosts", "N",
     "emulate N hosts on this machine (network namespaces linked by a bridge; --nproc ranks on each; needs root)", 1,
     64, false, true},
    {"--net-gbps", "GBPS", "rate of every emulated host's link, each direction, in Gbit/s (tc htb; default: not limited)",
     0.001, 400, false, false},
    {"--net-delay-us", "US", "one-way delay added to every packet between emulated hosts, in microseconds (tc netem)", 0,
     10'000'000, true, false},
    {"--net-jitter-us", "US", "+- this many microseconds of random variation of --net-delay-us (tc netem)", 0, 10'000'000,
     true, false},
    {"--net-loss-pct", "PCT", "percent of the packets between emulated hosts dropped (tc netem; TCP resends them)", 0, 100,
     true, false},
};

const std::vector<Flag>& table()
{
    static const std::vector<Flag> t = makeTable();
    return t;
}

// "--layers: " (nothing for an unnamed value: the caller names it).
std::string prefix(std::string_view flag) { return flag.empty() ? std::string() : std::string(flag) + ": "; }

std::string outOfRange(std::string_view flag, std::string_view text, const std::string& range)
{
    return prefix(flag) + echo(text) + " is out of range (" + range + ")";
}

// A bound for a message: 600000, not 6e+05; 1e+20 only when it is that large.
std::string human(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.12g", v);
    return buf;
}

} // namespace

std::string formatNumber(double value) { return core::shortestNumberText(value); }

core::Result<int64_t> parseInteger(std::string_view flag, std::string_view text, int64_t min, int64_t max)
{
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range)
        return core::fail(core::ErrorCode::Usage, outOfRange(flag, text, std::to_string(min) + " to " + std::to_string(max)));
    if (ec != std::errc() || p != text.data() + text.size())
        return core::fail(core::ErrorCode::Usage, prefix(flag) + "expected a whole number, got '" + echo(text) + "'");
    if (v < min || v > max)
        return core::fail(core::ErrorCode::Usage, outOfRange(flag, text, std::to_string(min) + " to " + std::to_string(max)));
    return v;
}

core::Result<double> parseNumber(std::string_view flag, std::string_view text, double min, double max, bool minOpen)
{
    double v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    const std::string range = (minOpen ? "more than " : "") + human(min) + " to " + human(max);
    if (ec == std::errc::result_out_of_range)
        return core::fail(core::ErrorCode::Usage, outOfRange(flag, text, range));
    if (ec != std::errc() || p != text.data() + text.size())
        return core::fail(core::ErrorCode::Usage, prefix(flag) + "expected a number, got '" + echo(text) + "'");
    if (!std::isfinite(v))
        return core::fail(core::ErrorCode::Usage, prefix(flag) + "expected a finite number, got '" + echo(text) + "'");
    if (v < min || v > max || (minOpen && v == min))
        return core::fail(core::ErrorCode::Usage, outOfRange(flag, text, range));
    return v;
}

std::span<const Flag> trainingFlags() { return table(); }

const Flag* findFlag(std::string_view name)
{
    for (const Flag& f : table())
        if (f.name == name)
            return &f;
    return nullptr;
}

core::Result<FlagValue> parseFlagValue(const Flag& flag, std::string_view text)
{
    FlagValue v;
    switch (flag.type) {
    case FlagType::Integer: {
        auto n = parseInteger(flag.name, text, flag.intMin, flag.intMax);
        if (!n)
            return std::unexpected(n.error());
        v.integer = *n;
        return v;
    }
    case FlagType::Number: {
        auto n = parseNumber(flag.name, text, flag.min, flag.max, flag.minOpen);
        if (!n)
            return std::unexpected(n.error());
        v.number = *n;
        return v;
    }
    case FlagType::Choice: {
        std::string list;
        for (std::string_view c : flag.choices) {
            if (c == text) {
                v.text = std::string(text);
                return v;
            }
            list += (list.empty() ? "" : ", ") + std::string(c);
        }
        return core::fail(core::ErrorCode::Usage, std::string(flag.name) + ": '" + echo(text) + "' is not one of " + list);
    }
    case FlagType::Text:
        if (text.find('\0') != std::string_view::npos)
            return core::fail(core::ErrorCode::Usage, std::string(flag.name) + ": contains a NUL character");
        v.text = std::string(text);
        return v;
    case FlagType::RankValue: {
        const size_t colon = text.find(':');
        const std::string want = std::string(flag.name) + ": expected " + std::string(flag.valueName) + ", e.g. 1:"
            + (flag.valueInteger ? "5" : "30");
        if (colon == std::string_view::npos)
            return core::fail(core::ErrorCode::Usage, want + ", got '" + echo(text) + "'");
        // 65535: far above any world size a launcher starts, and an int on every platform.
        auto rank = parseInteger(std::string(flag.name) + " RANK", text.substr(0, colon), 0, 65535);
        if (!rank)
            return core::fail(core::ErrorCode::Usage, want + ", got '" + echo(text) + "'");
        v.rank = static_cast<int>(*rank);
        const std::string_view rest = text.substr(colon + 1);
        const std::string what = std::string(flag.name) + " " + std::string(flag.valueName.substr(flag.valueName.find(':') + 1));
        if (flag.valueInteger) {
            auto n = parseInteger(what, rest, flag.intMin, flag.intMax);
            if (!n)
                return std::unexpected(n.error());
            v.integer = *n;
        } else {
            auto n = parseNumber(what, rest, flag.min, flag.max, flag.minOpen);
            if (!n)
                return std::unexpected(n.error());
            v.number = *n;
        }
        return v;
    }
    case FlagType::Switch:
        if (text.empty() || text == "true" || text == "1") {
            v.on = true;
            return v;
        }
        if (text == "false" || text == "0")
            return v;
        return core::fail(core::ErrorCode::Usage, std::string(flag.name) + " takes no value, got '" + echo(text) + "'");
    }
    return core::fail(core::ErrorCode::Usage, std::string(flag.name) + ": unknown flag type");
}

core::Status setFlag(TrainingOptions& options, const Flag& flag, std::string_view text)
{
    auto v = parseFlagValue(flag, text);
    if (!v)
        return std::unexpected(v.error());
    flag.store(options, *v);
    return {};
}

core::Status checkOptions(const TrainingOptions& o, int worldSize)
{
    // A link slower than 1 Mbit/s is no link to emulate (1e-300 was accepted and silently not
    // emulated; 1e-9 hung): the same floor as `lockstep predict --link-gbps`.
    if (o.linkGbps > 0 && o.linkGbps < kMinLinkGbps)
        return core::fail(core::ErrorCode::Usage, "--link-gbps " + formatNumber(o.linkGbps) + ": below " + formatNumber(kMinLinkGbps)
                          + " Gbit/s (1 Mbit/s), the slowest link emulated (0 = not emulated)");
    if (o.model == "transformer" && o.width % o.heads != 0)
        return core::fail(core::ErrorCode::Usage, "--width " + std::to_string(o.width) + " must be a multiple of --heads "
                          + std::to_string(o.heads) + " for the transformer");
    if (o.crashRank >= 0 && o.crashStep >= o.steps)
        return core::fail(core::ErrorCode::Usage, "--crash " + std::to_string(o.crashRank) + ":" + std::to_string(o.crashStep)
                          + ": step " + std::to_string(o.crashStep) + " is past the last step (" + std::to_string(o.steps - 1)
                          + "; steps count from 0)");
    if (o.checkEvery > o.steps)
        return core::fail(core::ErrorCode::Usage, "--check-every " + std::to_string(o.checkEvery) + " is longer than the run (--steps "
                          + std::to_string(o.steps) + "): the check would never run");
    if (o.backend == "nccl" && o.device != "cuda")
        return core::fail(core::ErrorCode::Usage, "--backend nccl needs --device cuda");
    if (worldSize > 0) {
        if (o.stragglerRank >= worldSize)
            return core::fail(core::ErrorCode::Usage, "--straggler: rank " + std::to_string(o.stragglerRank) + " does not exist in a world of "
                              + std::to_string(worldSize) + " (ranks 0 to " + std::to_string(worldSize - 1) + ")");
        if (o.crashRank >= worldSize)
            return core::fail(core::ErrorCode::Usage, "--crash: rank " + std::to_string(o.crashRank) + " does not exist in a world of "
                              + std::to_string(worldSize) + " (ranks 0 to " + std::to_string(worldSize - 1) + ")");
        const int64_t global = int64_t{worldSize} * o.batch;
        if (o.datasetSize < global)
            return core::fail(core::ErrorCode::Usage, "--dataset-size " + std::to_string(o.datasetSize) + " is smaller than one global batch ("
                              + std::to_string(worldSize) + " ranks x " + std::to_string(o.batch) + " = "
                              + std::to_string(global) + " samples)");
    }
    return {};
}

std::vector<std::string> toArguments(const TrainingOptions& options, bool withWorkerFlags)
{
    const TrainingOptions defaults;
    std::vector<std::string> out;
    for (const Flag& f : table()) {
        if (f.scope == FlagScope::Worker && !withWorkerFlags)
            continue;
        const std::string value = f.text(options);
        if (value == f.text(defaults))
            continue;
        if (f.type == FlagType::Switch) {
            if (!value.empty())
                out.emplace_back(f.name);
            continue;
        }
        out.emplace_back(f.name);
        out.push_back(value);
    }
    return out;
}

void recordOptions(const TrainingOptions& options, core::RunConfig& config)
{
    for (const Flag& f : table()) {
        if (f.recorded != Recorded::Extra)
            continue;
        const std::string value = f.text(options);
        if (!value.empty())
            config.extra[std::string(f.configKey)] = value;
    }
}

namespace {

// The bucket caps are recorded in bytes (what the reducer used), the flags are in MiB.
std::string mibText(int64_t bytes) { return formatNumber(static_cast<double>(bytes) / (1 << 20)); }

// Where each Recorded::Column flag lives in RunConfig (the recorder fills these columns,
// trainer_torch.cpp); "" = not recorded, nullopt = no reader. Every Column flag of the table has
// its reader here (optionsFromConfig fails loudly for one that does not; the tests read every
// flag back).
std::optional<std::string> columnText(std::string_view flag, const core::RunConfig& c)
{
    if (flag == "--model")
        return c.model;
    if (flag == "--steps")
        return c.stepsPlanned > 0 ? std::to_string(c.stepsPlanned) : std::string();
    if (flag == "--warmup")
        return std::to_string(c.warmupSteps);
    if (flag == "--accumulate")
        return std::to_string(c.accumulate);
    if (flag == "--bucket-mb")
        return mibText(c.bucketCapBytes);
    if (flag == "--first-bucket-mb")
        return mibText(c.firstBucketCapBytes);
    if (flag == "--compress")
        return c.compress;
    if (flag == "--optimizer")
        return c.optimizer;
    if (flag == "--backend")
        return c.backend;
    if (flag == "--device")
        return c.device;
    if (flag == "--link-gbps")
        return c.linkGbps > 0 ? formatNumber(c.linkGbps) : std::string();
    return std::nullopt;
}

// The model's argument string: "layers=4 width=256", "layers=2 channels=16 image=3x16x16" (the
// convnet calls its width channels), "... heads=4 seq=32 vocab=256".
std::string modelArg(std::string_view flag, const std::string& args)
{
    const std::string_view key = flag.substr(2);
    std::string_view rest = args;
    while (!rest.empty()) {
        const size_t space = rest.find(' ');
        const std::string_view token = rest.substr(0, space);
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
        const size_t eq = token.find('=');
        if (eq == std::string_view::npos)
            continue;
        const std::string_view name = token.substr(0, eq);
        if (name == key || (key == "width" && name == "channels"))
            return std::string(token.substr(eq + 1));
    }
    return {};
}

} // namespace

core::Result<TrainingOptions> optionsFromConfig(const core::RunConfig& config)
{
    if (config.source != "lockstep")
        return core::fail("recorded by " + (config.source.empty() ? std::string("an unknown source") : "'" + config.source + "'")
                          + ", not by Lockstep's runtime: its training options cannot be launched again");
    TrainingOptions o;
    for (const Flag& f : table()) {
        if (f.scope != FlagScope::Training)
            continue;
        std::string value;
        switch (f.recorded) {
        case Recorded::Column: {
            const auto column = columnText(f.name, config);
            if (!column)
                return core::fail(std::string(f.name) + ": no reader for this recorded column");
            value = *column;
            break;
        }
        case Recorded::ModelArgs:
            value = modelArg(f.name, config.modelArgs);
            break;
        case Recorded::Extra: {
            // The runtime records the thread count it resolved under "threads" and the count
            // asked for (0 = automatic) under "threads_requested": a re-run asks what was asked,
            // so that it stays comparable at another world size.
            auto it = f.name == "--threads" ? config.extra.find("threads_requested") : config.extra.end();
            if (it == config.extra.end())
                it = config.extra.find(std::string(f.configKey));
            if (it != config.extra.end())
                value = it->second;
            break;
        }
        case Recorded::No:
            break;
        }
        if (value.empty())
            continue;
        if (auto s = setFlag(o, f, value); !s)
            return core::fail(s.error(), "the recorded " + s.error().message);
    }
    return o;
}

std::span<const NetFlag> netFlags() { return kNetFlags; }

const NetFlag& netFlag(std::string_view name)
{
    for (const NetFlag& f : kNetFlags)
        if (f.name == name)
            return f;
    std::abort();
}

} // namespace lockstep::job
