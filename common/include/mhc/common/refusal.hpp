#pragma once
// The one wording of a refused option value, in every command and in mhc-view (docs/cli.md,
// "Messages and exit statuses"): "--capacity: '500': <why>", `why` saying what is wrong and what
// the option accepts. `option` is the name as the user typed it (CLI11's validators say it so, and
// mhc::command_line::as_typed puts back an other name given, `--eviction` for `--policy`).
#include <string>
#include <string_view>

namespace mhc {

std::string refused_value(std::string_view option, std::string_view value, std::string_view why);
// A value parser's refusal ("'500': a size needs a unit: ...", the form parse_size and the others
// throw) said of `option`: "--chunk: '500': a size needs a unit: ...".
std::string of_option(std::string_view option, std::string_view refusal);

}  // namespace mhc
