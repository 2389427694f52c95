// The words of a command line, checked before and after CLI11 parses them, so that every option
// of every command (and a new one) is held to the same rules (docs/cli.md, "Messages and exit
// statuses"): CLI11's messages in the words of the others, unknown options with the nearest name,
// empty values, flags given twice, with their negation or with a value, the number grammar, and
// a file option given "-". Each returns the one line to print ("" when nothing is wrong).
#include "mhc/common/command_line.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"

namespace mhc::command_line {

// CLI11 says "<option>: File does not exist: <path>"; the documented form of every input error
// is "<file>: <what is wrong>", so the path leads, in the words every command uses.
std::string path_first(const std::string& msg) {
    static const std::pair<const char*, const char*> reasons[] = {
        {"File does not exist: ", "no such file"},           {"File is actually a directory: ", "is a directory"},
        {"Directory does not exist: ", "no such directory"}, {"Directory is actually a file: ", "is not a directory"},
        {"Path does not exist: ", "no such file"},           {"Path already exists: ", "already exists"}};
    for (const auto& [reason, words] : reasons) {
        auto at = msg.find(reason);
        if (at == std::string::npos) continue;
        std::string path = msg.substr(at + std::strlen(reason));
        return words == std::string("no such file") ? mhc::no_such_file(path) : path + ": " + words;
    }
    return msg;
}

// "kernels sinkhorn" for a command's own command; "" for the top level.
std::string command_path(const CLI::App* sub) {
    std::string path;
    for (; sub && sub->get_parent(); sub = sub->get_parent()) path = sub->get_name() + (path.empty() ? "" : " " + path);
    return path;
}

namespace {
// "(mhc info --help)": the program (the name of the top of `sub`'s commands: mhc, mhc-view) and the
// command's path.
std::string help_hint(const CLI::App* sub) {
    const CLI::App* root = sub;
    while (root->get_parent()) root = root->get_parent();
    const std::string path = command_path(sub);
    return "(" + root->get_name() + (path.empty() ? "" : " " + path) + " --help)";
}
// "info: " before a command's message; "" at the top (mhc-view has no commands).
std::string where_said(const CLI::App* sub) {
    const std::string path = command_path(sub);
    return path.empty() ? "" : path + ": ";
}
}   // namespace

namespace {
// The innermost command parsed so far (`kernels sinkhorn` under `kernels`).
const CLI::App* innermost(const CLI::App* sub) {
    while (sub && !sub->get_subcommands().empty()) sub = sub->get_subcommands().front();
    return sub;
}
}   // namespace

// CLI11's "--n: At Most 1 required but received 2" in the words of the other messages.
std::string in_our_words(const std::string& msg) {
    const std::string at_most = ": At Most 1 required but received ";
    if (auto at = msg.find(at_most); at != std::string::npos)
        return msg.substr(0, at) + " given " + msg.substr(at + at_most.size()) + " times; give it once";
    // CLI11's conversion, after the grammar's check: a number past the option's type (an int).
    const std::string convert = "Could not convert: ";
    if (msg.rfind(convert, 0) == 0)
        if (auto eq = msg.find(" = ", convert.size()); eq != std::string::npos)
            return msg.substr(convert.size(), eq - convert.size()) + ": '" + msg.substr(eq + 3) +
                   "': not a number in the option's range";
    // CLI11's PositiveNumber and NonNegativeNumber are ranges up to the largest double, printed
    // whole: "--top: Value 0 not in range 0.000000 to 1797693134862315708145...(309 digits)".
    const std::string value = "Value ", range = " not in range ";
    const size_t at = msg.find(value), in = msg.find(range);
    if (at != std::string::npos && in != std::string::npos && in > at && msg.size() - in > 60) {
        const std::string given = msg.substr(at + value.size(), in - at - value.size());
        const double number = std::strtod(given.c_str(), nullptr);
        const std::string why = number < 0    ? "must not be negative"
                                : number == 0 ? "must be more than 0"
                                              : "not in the option's range";
        return msg.substr(0, at) + "'" + given + "': " + why;
    }
    // CLI11's Range checks before the grammar does: "--steps: Value 1.5 not in range 1 to 1000000"
    // said of a number that is not whole, and "0.000000 to 0.500000" of a bound.
    if (at != std::string::npos && in != std::string::npos && in > at) {
        const std::string given = msg.substr(at + value.size(), in - at - value.size());
        const std::string bounds = msg.substr(in + range.size());
        const size_t to = bounds.find(" to ");
        if (to == std::string::npos) return msg;
        const std::string low = bounds.substr(0, to), high = bounds.substr(to + 4);
        const bool whole = low.find('.') == std::string::npos && high.find('.') == std::string::npos;
        if (whole) {
            if (std::string why = mhc::whole_number_refusal(given, !low.empty() && low[0] == '-'); !why.empty())
                return msg.substr(0, at) + why;
        }
        char text[96];
        std::snprintf(text, sizeof text, "'%s': not in %.15g..%.15g", given.c_str(), std::strtod(low.c_str(), nullptr),
                      std::strtod(high.c_str(), nullptr));
        return msg.substr(0, at) + text;
    }
    return msg;
}

std::string as_typed(const std::string& msg, const CLI::App& app, const std::vector<std::string>& words) {
    const size_t colon = msg.find(": ");
    if (colon == std::string::npos || msg.rfind("--", 0) != 0) return msg;
    const std::string named = msg.substr(0, colon);
    // The options of the top level and of each command the words name.
    std::vector<const CLI::App*> apps{&app};
    for (const auto& word : words)
        for (const CLI::App* sub : apps.back()->get_subcommands({}))
            if (sub->get_name() == word) {
                apps.push_back(sub);
                break;
            }
    for (const CLI::App* where : apps)
        for (const CLI::Option* opt : where->get_options()) {
            std::vector<std::string> names;
            for (const auto& long_name : opt->get_lnames()) names.push_back("--" + long_name);
            for (const auto& short_name : opt->get_snames()) names.push_back("-" + short_name);
            if (names.size() < 2 || std::find(names.begin(), names.end(), named) == names.end()) continue;
            for (const auto& word : words) {
                if (word == "--") break;
                const std::string given = word.substr(0, word.find('='));
                if (given != named && std::find(names.begin(), names.end(), given) != names.end())
                    return given + msg.substr(colon);
            }
        }
    return msg;
}

// "simulate: unknown option --capasity; did you mean --capacity? (mhc simulate --help)" for
// the first argument `sub` (or the top level) did not expect.
std::string unexpected(const CLI::App& app, const CLI::App* sub) {
    sub = innermost(sub);
    const CLI::App& where = sub ? *sub : app;
    std::vector<std::string> extras = where.remaining();
    if (extras.empty()) extras = app.remaining();
    const std::string prefix = sub ? command_path(sub) + ": " : "";
    const std::string help = help_hint(sub ? sub : &app);
    if (extras.empty()) return prefix + "unexpected arguments " + help;
    for (const auto& extra : extras) {
        if (extra.size() < 2 || extra[0] != '-') continue;
        std::vector<std::string> names;
        for (const CLI::Option* opt : where.get_options()) {
            for (const auto& long_name : opt->get_lnames()) names.push_back("--" + long_name);
            for (const auto& short_name : opt->get_snames()) names.push_back("-" + short_name);
        }
        // An option's own name here was given after "--": an argument, not the option.
        if (std::find(names.begin(), names.end(), extra.substr(0, extra.find('='))) != names.end()) break;
        // mhc's own option after the command (`mhc info T.db -q`): its place, not a guess (-h).
        if (sub)
            for (const CLI::Option* top : app.get_options()) {
                bool own = false;
                for (const auto& long_name : top->get_lnames()) own |= extra == "--" + long_name;
                for (const auto& short_name : top->get_snames()) own |= extra == "-" + short_name;
                if (own && extra != "-h" && extra != "--help" && extra != "--version")
                    return prefix + extra + " is an option of mhc itself: give it before the command (mhc " + extra +
                           " " + command_path(sub) + " ...)";
            }
        return prefix + "unknown option " + extra + mhc::did_you_mean(extra.substr(0, extra.find('=')), names) + " " +
               help;
    }
    return prefix + "unexpected argument '" + extras.front() + "' " + help;
}
// A command with commands of its own (`mhc kernels sinkhorn`): the word after it must be one of
// them; "" when it is, else the line that says so (CLI11 would say "A subcommand is required").
std::string missing_command(const CLI::App& sub, const std::vector<std::string>& words) {
    std::vector<std::string> names;
    for (const CLI::App* inner : sub.get_subcommands({})) names.push_back(inner->get_name());
    if (names.empty()) return "";
    std::string list;
    for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
    const std::string help = " (mhc " + sub.get_name() + " --help)";
    for (const auto& word : words) {
        if (word == "-h" || word == "--help") return "";
        if (!word.empty() && word[0] == '-') continue;
        if (std::find(names.begin(), names.end(), word) != names.end()) return "";
        const std::string guess = mhc::did_you_mean(word, names);
        return sub.get_name() + ": '" + word + "' is not one of its commands" +
               (guess.empty() ? ": " + list + help : guess);
    }
    return sub.get_name() + ": a command is required: " + list + help;
}

// An option or argument given as '' is refused: no option takes an empty value (an empty
// number would be read as 0, an empty name or file as "not given").
std::string empty_value(const CLI::App* sub) {
    for (; sub; sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front()) {
        for (const CLI::Option* opt : sub->get_options()) {
            if (opt->count() == 0 || opt->get_type_size_max() == 0) continue;   // not given, or a flag
            for (const auto& value : opt->results()) {
                if (!value.empty()) continue;
                const std::string what = opt->get_lnames().empty() && opt->get_snames().empty()
                                             ? "the " + opt->get_name() + " argument is empty"
                                             : opt->get_name() + ": '': an empty value";
                return where_said(sub) + what + " " + help_hint(sub);
            }
        }
    }
    return "";
}

// A flag and its negation both given (`--zero1 --no-zero1`): CLI11 keeps the last, so the
// command would run with one of two contrary settings without a word. Read from the words
// before any `--` (CLI11 keeps only the last result of a flag). "" when none is.
std::string contrary_flags(const CLI::App* sub, const std::vector<std::string>& words) {
    std::vector<std::string> given;
    for (const auto& word : words) {
        if (word == "--") break;
        given.push_back(word.substr(0, word.find('=')));
    }
    auto has = [&](const std::string& name) {
        return std::find(given.begin(), given.end(), "--" + name) != given.end();
    };
    for (; sub; sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front()) {
        for (const CLI::Option* opt : sub->get_options()) {
            if (opt->get_fnames().empty()) continue;   // not a flag with a negation
            for (const auto& on : opt->get_lnames())
                for (const auto& off : opt->get_fnames())
                    if (on != off && has(on) && has(off))
                        return command_path(sub) + ": --" + on + " and --" + off + " both given; give one";
        }
    }
    return "";
}

// A flag given more than once (`--json --json`, `-q -q`): CLI11 takes it, where an option that
// takes a value given twice is refused ("--capacity given 2 times; give it once"); said the same
// way, naming the flag as written. The top level's flags, then the command's. "" when none is.
std::string repeated_flag(const CLI::App& app, const CLI::App* sub, const std::vector<std::string>& words) {
    std::vector<std::string> given;
    for (const auto& word : words) {
        if (word == "--") break;
        given.push_back(word.substr(0, word.find('=')));
    }
    std::vector<const CLI::App*> apps{&app};
    for (; sub; sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front()) apps.push_back(sub);
    for (const CLI::App* where : apps)
        for (const CLI::Option* opt : where->get_options()) {
            if (opt->get_expected_max() != 0 || opt->count() < 2) continue;   // an option with a value, or once
            std::string name = opt->get_name();
            for (const auto& word : given) {
                bool named = false;
                for (const auto& long_name : opt->get_lnames()) named |= word == "--" + long_name;
                for (const auto& negation : opt->get_fnames()) named |= word == "--" + negation;
                for (const auto& short_name : opt->get_snames()) named |= word == "-" + short_name;
                if (named) {
                    name = word;
                    break;
                }
            }
            return name + " given " + std::to_string(opt->count()) + " times; give it once";
        }
    return "";
}

// Calls check(app, word) for each option word given to `where`, or to the command a word before it
// names (a word naming one of its commands passes the words after it to that command), before
// any `--`; the first answer that is not "" is returned.
template <class F>
std::string first_option_word(const CLI::App& where, const std::vector<std::string>& words, F&& check) {
    const CLI::App* app = &where;
    for (const auto& word : words) {
        if (word == "--") break;
        if (word.empty() || word[0] != '-') {
            for (const CLI::App* sub : app->get_subcommands({}))
                if (sub->get_name() == word) app = sub;
            continue;
        }
        if (std::string said = check(*app, word); !said.empty()) return said;
    }
    return "";
}

// A flag given a value (`--json=2`, `--force=yes`, `--no-zero1=false`, `-q=1`): CLI11 reads the
// value as the flag's setting (0, false or no turn it off; the negation's value is inverted) or
// fails on it in the words of a conversion; no flag of mhc takes a value. Read from the words given
// to `where` (a word naming one of its commands passes the words after it to that command), before
// any `--`, before CLI11 parses them, so that every flag of every command, and a new one, is
// refused the same way: "advise: --json takes no value: '--json=2' (mhc advise --help)". "" when
// none is.
std::string flag_with_value(const CLI::App& where, const std::vector<std::string>& words) {
    return first_option_word(where, words, [](const CLI::App& app, const std::string& word) -> std::string {
        // --json=2, or -q=1 and -q1 (CLI11 reads what follows a short flag as more flags, or as its value)
        const bool long_form = word.rfind("--", 0) == 0;
        const size_t eq = long_form ? word.find('=') : word.size() > 2 ? 2 : std::string::npos;
        if (eq == std::string::npos) return "";
        const std::string name = word.substr(0, eq);
        for (const CLI::Option* opt : app.get_options()) {
            if (opt->get_expected_max() != 0) continue;   // an option with a value
            bool named = false;
            for (const auto& long_name : opt->get_lnames()) named |= name == "--" + long_name;
            for (const auto& negation : opt->get_fnames()) named |= name == "--" + negation;
            for (const auto& short_name : opt->get_snames()) named |= name == "-" + short_name;
            if (!named) continue;
            return where_said(&app) + name + " takes no value: '" + printable(word) + "' " + help_hint(&app);
        }
        return "";
    });
}

// One grammar for the numbers options take (docs/cli.md, "Numbers"), applied here to every
// option whose value is a number, so that a new option follows it too. A whole number is
// decimal digits, with a '-' first where the option takes one below 0: no '+', no spaces, no
// other base or exponent (CLI11 read 0x10 as 16, 010 as 8 and -1 as 2^64-1 for an unsigned
// option), no leading zero. Any other number is decimal too: digits with an optional fraction
// and exponent (no hexadecimal, no spaces, no '+' first); nan and inf are refused as not finite.
// Which options: CLI11's own value names for integers and floating point (INT, UINT, FLOAT), and
// the names given to such options instead (the list below).
namespace {
constexpr const char* kWholeNumberNames[] = {"INT", "UINT", "DEVICE", "ID"};
constexpr const char* kDecimalNames[] = {"FLOAT", "HOURS", "MINUTES", "SECONDS", "POINTS"};
}   // namespace

namespace {
// Moves the check just added (the last validator) before the option's other checks, after its
// transforms (`--device auto` becomes a number first): an option's range check ran first and
// said '7 ' was "not in the option's range" and an Arabic-Indic digit "must be more than 0".
void check_before_other_checks(CLI::Option& opt) {
    int count = 0;
    for (;; ++count) {
        try {
            opt.get_validator(count);
        } catch (const CLI::OptionNotFound&) { break; }
    }
    for (int i = count - 1; i > 0 && !opt.get_validator(i - 1)->get_modifying(); --i)
        std::swap(*opt.get_validator(i - 1), *opt.get_validator(i));
}
}   // namespace

void apply_number_grammar(CLI::App& app) {
    for (CLI::Option* opt : app.get_options()) {
        if (opt->get_type_size_max() == 0) continue;   // a flag
        std::string kind = opt->get_type_name();
        kind = kind.substr(0, kind.find(':'));
        const auto in = [&](const auto& names) {
            return std::find_if(std::begin(names), std::end(names), [&](const char* known) { return kind == known; }) !=
                   std::end(names);
        };
        if (in(kWholeNumberNames)) {
            const bool negative_ok = kind != "UINT";
            opt->check(CLI::Validator(
                [negative_ok](std::string& text) { return mhc::whole_number_refusal(text, negative_ok); }, ""));
        } else if (in(kDecimalNames)) {
            opt->check(CLI::Validator([](std::string& text) { return mhc::decimal_refusal(text); }, ""));
            check_before_other_checks(*opt);
            // Negative zero (-0, -0.0, -0e5) is zero: it was kept as -0 and stored so in run_config
            // (link.nccl_share -0) and meta (gen.jitter -0), a run unlike the one of 0 in its text.
            opt->transform(CLI::Validator(
                [](std::string& text) {
                    if (!text.empty() && text[0] == '-' && mhc::decimal_refusal(text).empty() &&
                        std::strtod(text.c_str(), nullptr) == 0)
                        text.erase(0, 1);
                    return std::string();
                },
                ""));
            continue;
        } else {
            continue;
        }
        check_before_other_checks(*opt);
    }
    for (CLI::App* sub : app.get_subcommands({})) apply_number_grammar(*sub);
}

std::string required_in_context(const std::string& msg, const CLI::App& chosen, const std::vector<std::string>& words) {
    const std::string tail = " is required";
    if (msg.size() <= tail.size() || msg.compare(msg.size() - tail.size(), tail.size(), tail) != 0) return msg;
    // The command whose option it is: `kernels sinkhorn` when that word was given.
    const CLI::App* sub = &chosen;
    for (const auto& word : words)
        for (const CLI::App* inner : sub->get_subcommands({}))
            if (inner->get_name() == word) sub = inner;
    const std::string name = msg.substr(0, msg.size() - tail.size());
    for (const CLI::Option* opt : sub->get_options()) {
        if (opt->get_name() != name) continue;
        const std::string path = command_path(sub);
        std::string what = name;
        if (opt->get_lnames().empty() && opt->get_snames().empty()) {   // a positional argument
            std::string upper = name;
            for (char& letter : upper) letter = static_cast<char>(std::toupper(static_cast<unsigned char>(letter)));
            what = "the " + upper + " argument";
        }
        const std::string usage = path == "record" ? ": mhc record [OPTIONS] -- COMMAND [ARGS...]" : "";
        return path + ": " + what + tail + usage + " (mhc " + path + " --help)";
    }
    return msg;
}

std::string short_with_equals(const CLI::App& where, const std::vector<std::string>& words) {
    return first_option_word(where, words, [](const CLI::App& app, const std::string& word) -> std::string {
        if (word.size() < 3 || word[1] == '-' || word[2] != '=') return "";
        for (const CLI::Option* opt : app.get_options()) {
            if (opt->get_expected_max() == 0) continue;   // a flag: flag_with_value says it
            const auto& names = opt->get_snames();
            if (std::find(names.begin(), names.end(), word.substr(1, 1)) == names.end()) continue;
            const std::string value = word.substr(3);
            return where_said(&app) + "'" + printable(word) + "': a short option takes its value after a space (" +
                   word.substr(0, 2) + " " + printable(value) + "); this would be '=" + printable(value) + "'" + " " +
                   help_hint(&app);
        }
        return "";
    });
}

std::string missing_value(const std::string& msg, const CLI::App& chosen, const std::vector<std::string>& words) {
    // "--top: 1 required INT:POSITIVE missing"
    const std::string required = ": 1 required ", missing = " missing";
    const size_t at = msg.find(required);
    if (at == std::string::npos || msg.size() < missing.size() ||
        msg.compare(msg.size() - missing.size(), missing.size(), missing) != 0)
        return msg;
    const std::string name = msg.substr(0, at);
    const CLI::App* sub = &chosen;
    for (const auto& word : words)
        for (const CLI::App* inner : sub->get_subcommands({}))
            if (inner->get_name() == word) sub = inner;
    const bool empty = std::find(words.begin(), words.end(), name + "=") != words.end();
    return where_said(sub) + name + (empty ? ": '': an empty value" : " needs a value: none was given") + " " +
           help_hint(sub);
}

// A file option given "-" (`-o -`): it was taken as a file named "-" (generate and import wrote
// one, export and calibrate refused it as existing), where many tools read standard input or
// write standard output. mhc writes whole files renamed into place, and reads traces, runs
// databases and tensors by seeking in them: refused, naming the option, with the way to name a
// file called "-". `mhc import FILE` alone reads standard input as "-" (its own argument).
std::string dash_file(const CLI::App* sub) {
    static const char* const outputs[] = {"output", "trace-out", "grad-output"};
    static const char* const inputs[] = {"input", "grad", "kineto", "library", "trace"};
    for (; sub; sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front())
        for (const CLI::Option* opt : sub->get_options()) {
            if (opt->count() == 0 || opt->get_type_size_max() == 0) continue;
            const auto& values = opt->results();
            if (std::find(values.begin(), values.end(), "-") == values.end()) continue;
            const std::string name = opt->get_lnames().empty() ? opt->get_name() : opt->get_lnames().front();
            const auto named = [&](const auto& list) {
                return std::find_if(std::begin(list), std::end(list),
                                    [&](const char* known) { return name == known; }) != std::end(list);
            };
            std::string upper = name;
            for (char& letter : upper) letter = static_cast<char>(std::toupper(static_cast<unsigned char>(letter)));
            const std::string said = opt->get_lnames().empty() ? "the " + upper + " argument '-'" : "--" + name + " -";
            const std::string where = command_path(sub) + ": " + said + ": ";
            const std::string help = "; name a file (./- for one called -) (mhc " + command_path(sub) + " --help)";
            if (named(outputs)) return where + "mhc writes whole files renamed into place, not standard output" + help;
            if (named(inputs)) return where + "it names a file to read, not standard input" + help;
            if (name == "runs-db") return where + "a runs database is a file, not standard input or output" + help;
        }
    return "";
}

}   // namespace mhc::command_line
