#pragma once
// The checks the front-ends (mhc, mhc-view) make of the words of a command line, before CLI11 parses
// them (the words) and after (the options CLI11 filled): one place for every command and program,
// so that a new option follows the same rules (docs/cli.md, "Messages and exit statuses"). Each
// returns the one line to print, or "" when nothing is wrong; a "(PROGRAM COMMAND --help)" hint
// names the top app's name (mhc, mhc-view).
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace mhc::command_line {

// CLI11's "<option>: File does not exist: <path>" as "<path>: no such file".
std::string path_first(const std::string& msg);
// "kernels sinkhorn" for a command's own command; "" for the top level.
std::string command_path(const CLI::App* sub);
// CLI11's other messages ("At Most 1 required", ranges printed to 309 digits) in our words.
std::string in_our_words(const std::string& msg);
// A refusal that names an option by its first name ("--policy: 'lur': ...", as CLI11 names it)
// names it as the user typed it (`--eviction lur`, `-j x`): docs/cli.md, "Messages".
std::string as_typed(const std::string& msg, const CLI::App& app, const std::vector<std::string>& words);
// The first word `sub` (or the top level) did not expect: an unknown option, with the nearest.
std::string unexpected(const CLI::App& app, const CLI::App* sub);
// A command with commands of its own given none, or an unknown one.
std::string missing_command(const CLI::App& sub, const std::vector<std::string>& words);

// CLI11's "trace is required" and "--output is required" with the command they belong to and its
// help: "info: the TRACE argument is required (mhc info --help)". Other messages as they are.
std::string required_in_context(const std::string& msg, const CLI::App& chosen, const std::vector<std::string>& words);

// After parsing:
std::string empty_value(const CLI::App* sub);   // an option or argument given ''
std::string contrary_flags(const CLI::App* sub, const std::vector<std::string>& words);   // --zero1 --no-zero1
std::string repeated_flag(const CLI::App& app, const CLI::App* sub, const std::vector<std::string>& words);
// A file option given "-": mhc writes whole files (renamed into place), never a stream, and reads
// a trace, a runs database or a tensor by seeking in it; only `import FILE` reads standard input.
std::string dash_file(const CLI::App* sub);

// Before parsing: a flag given a value (`--json=2`).
std::string flag_with_value(const CLI::App& where, const std::vector<std::string>& words);
// Before parsing: a short option given '=' and a value (`-o=g.db`): CLI11 took '=g.db' as the value
// (generate wrote a file named '=g.db').
std::string short_with_equals(const CLI::App& where, const std::vector<std::string>& words);
// CLI11's "--top: 1 required INT:POSITIVE missing" as "info: --top needs a value: none was given", or,
// given as `--top=`, as an empty value is said.
std::string missing_value(const std::string& msg, const CLI::App& chosen, const std::vector<std::string>& words);
// The number grammar (docs/cli.md, "Numbers") on every option of `app` and its commands.
void apply_number_grammar(CLI::App& app);

}   // namespace mhc::command_line
