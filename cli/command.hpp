#pragma once
// Each `mhc` subcommand lives in its own cli/cmd_<name>.cpp and registers itself with a
// static Registration, so front-end files never collide. main.cpp builds the CLI11 app
// from the registry, runs the chosen command and maps errors to exit statuses.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/refusal.hpp"

namespace mhc::cli {

// Exit statuses shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitOom = 3;   // a simulation or replay that ran out of memory
// The result was computed and printed but could not be stored (trace read-only, locked past
// the busy timeout, disk full): rerun with --no-store or --runs-db FILE. Takes precedence over
// kExitOom; kExitInternal (an invariant violated) takes precedence over both.
inline constexpr int kExitNotStored = 4;
inline constexpr int kExitNoTrace = 5;   // `mhc record`: the command succeeded but no trace was written

struct Command {
    std::string name;
    std::string help;
    // Adds options to `sub` and returns the action to run when `sub` is chosen. The action
    // returns the exit status; it may throw mhc::Error for bad input.
    std::function<std::function<int()>(CLI::App& sub)> setup;
    // Out of `mhc --help` and the names a typo is matched against: a command for scripts.
    bool hidden = false;
};

std::vector<Command>& registry();

// A word users type for what mhc does under another name, or what another program does ("view":
// the viewer is mhc-view): "; " and where to go, or "" (cmd_help.cpp). `mhc view T.db` listed
// the commands, none of which opens the viewer.
std::string done_elsewhere(const std::string& word);
// The command lines that end a command's --help under "Examples:" (examples.cpp).
std::vector<std::string> command_examples(const std::string& name);

struct Registration {
    explicit Registration(Command c) { registry().push_back(std::move(c)); }
};

// The value of `option` read by `parse` (a unit parser: parse_size, parse_share, ...); its error
// names the option as every refusal of a value does: "--bucket: '25': a size needs a unit: ...".
template <class Parse>
auto option_value(const std::string& option, Parse&& parse) {
    try {
        return parse();
    } catch (const Error& e) {
        throw Error(of_option(option, e.what()), e.kind());
    }
}

// An option's value checked when the command line is read, by the parser that reads it later
// (sim::parse_eviction, parse_size, ...): CLI11 says its refusal as "--policy: 'lur': not an
// eviction policy; ..." (the parsers' refusals begin with the value, or the item of a list,
// quoted; one that does not is quoted here), before any work.
template <class Parse>
CLI::Validator parsed_by(Parse parse) {
    return CLI::Validator(
        [parse](std::string& text) -> std::string {
            if (text.empty()) return "";   // said as every option's empty value is (command_line::empty_value)
            try {
                parse(text);
                return "";
            } catch (const Error& e) {
                const std::string said = e.what();
                return said.rfind('\'', 0) == 0 ? said : quoted_value(text) + ": " + said;
            }
        },
        "");
}

// The same for a comma-separated list, item by item: "--policies: 'lur': not an eviction policy;
// ...". An empty item is left to split_list (sim_options.hpp), which names the list.
template <class Parse>
CLI::Validator each_parsed_by(Parse parse) {
    return parsed_by([parse](const std::string& list) {
        for (size_t at = 0; at <= list.size();) {
            const size_t comma = std::min(list.find(',', at), list.size());
            const std::string item = list.substr(at, comma - at);
            if (item.find_first_not_of(" \t") != std::string::npos) parse(item);
            at = comma + 1;
        }
    });
}

// A number option's range, said as its help says it: number_in([](double x) { return x >= 0 && x < 1
// || x == -1; }, "in [0, 1) (-1: the link's)") refuses 5 as "--nccl-share: '5': not in [0, 1) (-1:
// the link's)". Text that is no number is left to the number grammar's check.
template <class In>
CLI::Validator number_in(In in, std::string accepted) {
    return CLI::Validator(
        [in, accepted = std::move(accepted)](std::string& text) -> std::string {
            char* end = nullptr;
            const double number = std::strtod(text.c_str(), &end);
            if (end == text.c_str() || *end != '\0' || in(number)) return "";
            return quoted_value(text) + ": not " + accepted;
        },
        "");
}

// A number option's check: "nan", "inf" and numbers past a double's range (1e400) are refused
// ("--target 'nan': not a finite number"); CLI11's own checks let them through (NaN passes
// CLI::Range, inf passes CLI::PositiveNumber). Text that is not a number is left to CLI11.
inline CLI::Validator finite_number() {
    return CLI::Validator(
        [](std::string& text) {
            char* end = nullptr;
            const double number = std::strtod(text.c_str(), &end);   // 1e400 reads as inf
            const bool whole = end != text.c_str() && *end == '\0';
            return whole && !std::isfinite(number) ? quoted_value(text) + ": not a finite number" : std::string();
        },
        "");
}

// A choice among names: "--preset: 'llama-7b': use one of gpt2-small, llama2-7b, ...; did you mean
// llama2-7b?" (CLI::IsMember says "llama-7b not in {...}" and guesses nothing), as the policy and
// command names are refused.
inline CLI::Validator one_of(std::vector<std::string> names) {
    return CLI::Validator(
        [names = std::move(names)](std::string& text) {
            if (std::find(names.begin(), names.end(), text) != names.end()) return std::string();
            std::string list;
            for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
            return quoted_value(text) + ": use one of " + list + did_you_mean(text, names);
        },
        "");
}

// True when stderr is a terminal and --quiet was not given: long commands show progress.
bool show_progress();
void set_quiet(bool quiet);
// -q (--quiet) was given: notes that a wait is not a hang (a lock, a named pipe) are left out too.
bool quiet();

}  // namespace mhc::cli
