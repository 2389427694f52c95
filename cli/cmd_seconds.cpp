// mhc seconds DURATION: a duration read by the rule every mhc option follows (mhc::parse_seconds),
// printed in seconds, for scripts that take durations: libexec/gpu-check's --budget reads its
// value through it, so that `--budget 9min` means what `validate --time-limit 9min` does. Out of
// `mhc --help` (it serves scripts, not users); docs/cli.md, "Numbers".
#include <cstdio>
#include <string>

#include "command.hpp"
#include "mhc/common/units.hpp"

namespace {

// Seconds as a plain decimal (no exponent, trailing zeros dropped): 540, 0.5, 0.000001.
std::string plain(double seconds) {
    char digits[64];
    std::snprintf(digits, sizeof digits, "%.9f", seconds);
    std::string text = digits;
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.') text.pop_back();
    return text;
}

mhc::cli::Registration reg{mhc::cli::Command{
    "seconds", "Print a duration (90s, 9min, 2.5 ms) in seconds, read as every option reads one",
    [](CLI::App& app) -> std::function<int()> {
        auto text = std::make_shared<std::string>();
        auto bare = std::make_shared<std::string>();
        app.add_option("duration", *text, "A duration: a number and a unit (ns, us, ms, s, min, h)")
            ->type_name("DURATION")
            ->required();
        app.add_option("--bare-unit", *bare, "The unit of a number given without one (by default it is refused)")
            ->check(mhc::cli::one_of({"ns", "us", "ms", "s", "min", "h"}))
            ->type_name("UNIT");
        return [text, bare]() {
            // Named as the command's ("seconds: '9m': ..."): gpu-check says it as its --budget's.
            const double seconds = mhc::cli::option_value("seconds", [&] { return mhc::parse_seconds(*text, *bare); });
            if (seconds > 1e9) throw mhc::Error("seconds: '" + *text + "': at most 1e9 s (31 years)");
            std::printf("%s\n", plain(seconds).c_str());
            return mhc::cli::kExitOk;
        };
    },
    true}};

}  // namespace
