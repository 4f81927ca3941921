// The training flags, declared once. `lockstep run`, `lockstep sweep`, `lockstep-worker` and the
// app's Launch panel are all built from this table: the name, help, default (from
// TrainingOptions' initializers), range, choices and integer-ness of every flag, and the rules
// between flags. So `lockstep run --layers 5000` is refused by the same check, with the same
// message, as `lockstep-worker --layers 5000` and the panel's spin box cannot go there at all.
//
// Validation is all here: a value is parsed and range-checked by parseFlagValue() (finite
// numbers only, whole numbers where the option is an integer, values that fit their types), the
// rules that need several flags (a rank below the world size, a crash step inside the run, a
// transformer width that splits into heads) by checkOptions(). Messages are short and human:
// "--layers: 5000 is out of range (1 to 1024)".
#pragma once

#include "lockstep/core/whatif_settings.h"

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"
#include "lockstep/job/training_options.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::job {

enum class FlagType : uint8_t {
    Integer,   // a whole number in [intMin, intMax]
    Number,    // a finite number in [min, max], or (min, max] when minOpen
    Choice,    // one of `choices`
    Text,      // free text (a path, a name)
    RankValue, // RANK:VALUE: RANK a whole number >= 0, VALUE a number in [min, max]
               // (a whole number when valueInteger)
    Switch,    // present or absent
};

enum class FlagScope : uint8_t {
    Training, // run, sweep, lockstep-worker and the Launch panel
    Worker,   // lockstep-worker only: where and how one rank writes
};

// Where a recorded run keeps the flag's value (core::RunConfig): a column of its own, the
// model's argument string (only the sizes the model uses), RunConfig::extra[configKey], or not
// at all (where the shard goes, how verbose the worker is).
enum class Recorded : uint8_t { Column, ModelArgs, Extra, No };

// A parsed value; which member is meaningful follows the flag's type.
struct FlagValue {
    int64_t integer = 0;   // Integer; RankValue's value when valueInteger
    double number = 0;     // Number; RankValue's value
    std::string text;      // Choice, Text
    int rank = -1;         // RankValue
    bool on = false;       // Switch
};

struct Flag {
    std::string_view name;      // "--layers"
    std::string_view label;     // "Layers": a form's label
    std::string_view group;     // "Model", "Gradients", ...: a form's section, --help's group
    std::string_view valueName; // "INT", "MIB", "RANK:MS": --help's placeholder
    std::string_view help;      // one sentence; the Launch panel's tooltip
    FlagType type = FlagType::Text;
    FlagScope scope = FlagScope::Training;
    int64_t intMin = 0, intMax = 0;     // Integer, and RankValue's value when valueInteger
    double min = 0, max = 0;            // Number, and RankValue's value otherwise
    bool minOpen = false;               // Number: min itself is excluded
    bool valueInteger = false;          // RankValue: VALUE is a whole number
    std::span<const std::string_view> choices; // Choice
    std::string_view unit;              // "MiB", "ms", "s", "Gbit/s" or ""
    Recorded recorded = Recorded::No;
    std::string_view configKey;         // RunConfig::extra key when recorded == Extra
    void (*store)(TrainingOptions&, const FlagValue&) = nullptr;
    // The option's value as it would be typed ("8", "0.5", "mlp", "1:30"); "" when it is off
    // (a switch not given, a fault not injected).
    std::string (*text)(const TrainingOptions&) = nullptr;
};

// Every flag, in --help order.
std::span<const Flag> trainingFlags();
const Flag* findFlag(std::string_view name);

// The largest world size a local launcher starts (--nproc).
inline constexpr int kMaxLocalRanks = 512;

// Parses `text` for `flag` and checks its range. Errors read "--layers: 5000 is out of range
// (1 to 1024)".
core::Result<FlagValue> parseFlagValue(const Flag& flag, std::string_view text);
// parseFlagValue, then stores the value into `options`.
core::Status setFlag(TrainingOptions& options, const Flag& flag, std::string_view text);

// The launcher's emulated-hosts flags (`lockstep run --hosts N`, netns.h), declared here once
// with their help and ranges. They shape the machine the ranks run on, not the training, so they
// are not training flags: never passed to a worker, never in the Launch panel's form.
struct NetFlag {
    std::string_view name;      // "--net-gbps"
    std::string_view valueName; // "GBPS"
    std::string_view help;
    double min = 0, max = 0;
    bool minOpen = false;       // min itself is excluded
    bool integer = false;
};
std::span<const NetFlag> netFlags();
const NetFlag& netFlag(std::string_view name); // one of netFlags(); aborts on an unknown name

// The slowest link --link-gbps emulates, in Gbit/s (1 Mbit/s); 0 means not emulated.
inline constexpr double kMinLinkGbps = core::kLinkSetting.min; // core/whatif_settings.h

// The rules between flags. worldSize 0 = not known yet (a worker before it reads its
// environment); the rules that need it are checked again once it is known.
core::Status checkOptions(const TrainingOptions& options, int worldSize);

// The flags of `options` that differ from TrainingOptions' defaults, as arguments
// ("--layers", "8", "--no-record", ...): what a launcher passes to every worker.
// Worker-scope flags are included only when withWorkerFlags.
std::vector<std::string> toArguments(const TrainingOptions& options, bool withWorkerFlags = false);

// Writes every Recorded::Extra option into config.extra (configKey -> text; "" for a fault not
// injected is left out). Columns and modelArgs are filled by the recorder, which knows the
// resolved values (bucket caps in bytes, the model's own argument string).
void recordOptions(const TrainingOptions& options, core::RunConfig& config);

// The inverse of recording: the training options of a run Lockstep's runtime recorded, read back
// from its columns, its model's argument string and config.extra (the flag table says where each
// flag is), so the run can be launched again (the app's What-if panel: "Run it"). Values are
// checked like typed ones. Refuses runs the runtime did not record (imported traces, `lockstep
// record` jobs, predictions): their options are not the runtime's. Flags a run does not carry
// keep their defaults.
core::Result<TrainingOptions> optionsFromConfig(const core::RunConfig& config);

// Checks for numeric flags declared elsewhere (the launcher's --nproc, --grace-s, ...), with the
// same parsing and messages as the table's.
core::Result<int64_t> parseInteger(std::string_view flag, std::string_view text, int64_t min, int64_t max);
core::Result<double> parseNumber(std::string_view flag, std::string_view text, double min, double max,
                                 bool minOpen = false);

// The shortest text that reads back as the same double ("25", "0.01", "1e-05").
std::string formatNumber(double value);

} // namespace lockstep::job
