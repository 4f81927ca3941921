// The flag table on CLI11 (see cli_flags.h).
#include "cli_flags.h"

#include "lockstep/core/report.h"

#include <cstdio>

namespace lockstep::app {

namespace {

// CLI11 prefixes a validator's message with the option's name; the job library's messages
// already start with it.
std::string withoutName(std::string message)
{
    const size_t colon = message.find(": ");
    if (colon != std::string::npos && message.starts_with("--"))
        message.erase(0, colon + 2);
    return message;
}

CLI::Validator check(std::function<std::string(const std::string&)> fn, std::string description)
{
    return CLI::Validator([fn](std::string& value) { return fn(value); }, std::move(description));
}

} // namespace

int reportError(std::string_view command, const core::Error& error)
{
    std::fprintf(stderr, "%.*s: %s\n", int(command.size()), command.data(), core::escapeControl(error.message).c_str());
    return exitStatusFor(error.code);
}

CLI::Validator integerCheck(int64_t min, int64_t max)
{
    return check(
        [min, max](const std::string& v) {
            auto r = job::parseInteger("", v, min, max);
            return r ? std::string() : withoutName(r.error().message);
        },
        "");
}

CLI::Validator numberCheck(double min, double max, bool minOpen)
{
    return check(
        [min, max, minOpen](const std::string& v) {
            auto r = job::parseNumber("", v, min, max, minOpen);
            return r ? std::string() : withoutName(r.error().message);
        },
        "");
}

CLI::Option* addProgressOption(CLI::App* cmd, std::string& value)
{
    return cmd
        ->add_option("--progress", value,
                     "progress on stderr: auto (a bar on a terminal, else a line per step), bar, plain, protocol "
                     "(machine-readable LOCKSTEP lines, for the app), none")
        ->check(CLI::IsMember({"auto", "bar", "plain", "protocol", "none"}))
        ->default_str("auto");
}

job::ProgressStyle progressStyle(const std::string& value)
{
    if (value == "bar")
        return job::ProgressStyle::Bar;
    if (value == "plain")
        return job::ProgressStyle::Plain;
    if (value == "protocol")
        return job::ProgressStyle::Protocol;
    if (value == "none")
        return job::ProgressStyle::None;
    return job::ProgressStyle::Auto;
}

TrainingFlags::TrainingFlags(CLI::App* cmd, bool withWorkerFlags, std::vector<std::string_view> skip)
{
    const job::TrainingOptions defaults;
    for (const job::Flag& flag : job::trainingFlags()) {
        if (flag.scope == job::FlagScope::Worker && !withWorkerFlags)
            continue;
        if (std::find(skip.begin(), skip.end(), flag.name) != skip.end())
            continue;
        auto e = std::make_unique<Entry>();
        e->flag = &flag;
        const std::string help(flag.help); // names the choices and units itself (test_job checks)
        const std::string group = std::string(flag.group);
        if (flag.type == job::FlagType::Switch) {
            e->option = cmd->add_flag(std::string(flag.name), e->on, help)->group(group);
        } else {
            const job::Flag* f = &flag;
            e->option = cmd->add_option(std::string(flag.name), e->value, help)
                            ->group(group)
                            ->type_name(std::string(flag.valueName))
                            ->check(check(
                                [f](const std::string& v) {
                                    auto r = job::parseFlagValue(*f, v);
                                    return r ? std::string() : withoutName(r.error().message);
                                },
                                ""));
            // Shown as NAME=default when the default is a value of the flag (not an "off" state
            // such as --link-gbps' 0, which the help explains).
            const std::string def = flag.text(defaults);
            if (!def.empty() && job::parseFlagValue(flag, def))
                e->option->default_str(def);
        }
        m_entries.push_back(std::move(e));
    }
}

job::TrainingOptions TrainingFlags::options() const
{
    job::TrainingOptions o;
    for (const auto& e : m_entries) {
        if (e->option->count() == 0)
            continue;
        // Checked by the validator during parsing: cannot fail here.
        (void)job::setFlag(o, *e->flag, e->flag->type == job::FlagType::Switch ? std::string_view(e->on ? "true" : "false")
                                                                               : std::string_view(e->value));
    }
    return o;
}

bool TrainingFlags::given(std::string_view name) const
{
    for (const auto& e : m_entries)
        if (e->flag->name == name)
            return e->option->count() > 0;
    return false;
}

} // namespace lockstep::app
