// `mhc help [COMMAND|TOPIC]`: a command's --help, or a topic: the explanations too long for an
// option's line (the size grammar, the policies, links, exit statuses). docs/cli.md quotes each
// topic as this command prints it (scripts/doc-figures keeps them equal).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "command.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/help_format.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/link.hpp"

namespace mhc::cli {
namespace {

// "  term      definition wrapped under itself".
std::string entry(const std::string& term, const std::string& text, int width, int col = 16) {
    std::string head = "  " + term;
    if (static_cast<int>(head.size()) + 1 > col) return head + "\n" + wrap(text, width, col, col);
    head.resize(static_cast<size_t>(col), ' ');
    return head + wrap(text, width, col, col).substr(static_cast<size_t>(col));
}

std::string sizes(int w) {
    return wrap("Sizes, shares and bandwidths are written the same way in every command and in the Python "
                "package (mhc_torch.parse_size), durations in every command:", w) +
           "\n" +
           entry("size", "A number, then a unit: 40GiB, 40 GiB, 1.5GB, 512MiB, 64k. No sign, no exponent.", w) +
           entry("binary units", "K, KiB, M, MiB, G, GiB, T, TiB: powers of 1024 (G = GiB = 2^30 bytes).", w) +
           entry("decimal units", "kB, MB, GB, TB: powers of 1000 (GB = 10^9 bytes). B is one byte.", w) +
           entry("case, spaces", "Case does not matter: 80g = 80G = 80GiB, 80gb = 80GB = 80,000,000,000 "
                                 "bytes (74.51 GiB). Spaces may stand around the unit.", w) +
           entry("no unit", "A number alone is refused: 500 could mean 500 bytes, 500 GiB or 500%; write the "
                            "unit (the message suggests values the option accepts).", w) +
           entry("rounding", "To the nearest byte, halves up: 0.3KiB = 307 B, 2.5B = 3 B.", w) +
           entry("share", "A number and %: 70%, 70 %. --capacity takes a share of the baseline peak, the "
                          "unlimited run's under the allocator model (reserved bytes with caching: mhc help "
                          "allocators; at most 100%), --budget a share of the recorded time.", w) +
           entry("bandwidth", "A size per second: 25GB/s, 25 GB/s, 12.5GiB/s (\"/s\" may be left out).", w) +
           entry("duration", "A number and a unit: 6us, 2.5 ms, 50s, 30min, 24h (ns, us, ms, s, min, h; m alone "
                             "is refused: minutes or milliseconds?). A number alone is refused, except where an "
                             "option's help says what it counts (validate --time-limit 50: seconds).", w);
}

std::string registry(const std::vector<sim::PolicyInfo>& v, const std::string& intro, int w) {
    std::string out = wrap(intro, w) + "\n";
    for (const auto& policy : v)
        out += entry(policy.name, policy.help + (policy.source.empty() ? "." : ".\nSource: " + policy.source + "."), w);
    return out;
}

std::string links(int w) {
    std::string out = wrap("--link takes a preset or a link profile JSON file (written by mhc calibrate; format in "
                           "docs/simulator.md). Each direction has a bandwidth and a latency per transfer; a "
                           "transfer started while the other direction is busy runs at the duplex factor of "
                           "its bandwidth.", w) + "\n";
    for (const auto& l : sim::link_presets()) {
        char figures[160];
        std::snprintf(figures, sizeof figures, "H2D %.0f GB/s, D2H %.0f GB/s, %.0f us per transfer, duplex %.2f. ",
                      l.h2d.bandwidth_Bps / 1e9, l.d2h.bandwidth_Bps / 1e9, l.h2d.latency_s * 1e6, l.duplex_factor);
        out += entry(l.name, figures + std::string("\nSource: ") + l.source + ".", w);
    }
    return out;
}

std::string exit_status(int w) {
    return wrap("Every mhc command exits with one of:", w) + "\n" + entry("0", "done", w) +
           entry("1", "internal error (an invariant violated, out of host memory)", w) +
           entry("2", "bad input: a bad option or value, a missing or unreadable file; one line on stderr", w) +
           entry("3", "the simulation or replay ran out of GPU memory (the result is printed)", w) +
           entry("4", "the result was printed but could not be stored (rerun with --no-store or --runs-db FILE)", w) +
           entry("5", "mhc record: the program ran but no trace was written", w) + "\n" +
           wrap("mhc record otherwise exits with its program's status (128+N when it died of signal N). An "
                "interrupted command (Ctrl-C) exits 130 and leaves no partial file. A command whose standard output's "
                "reader went away (mhc sweep T.db | head -1) exits 141 after its work and its store, saying nothing.", w);
}

struct Topic {
    const char* name;
    const char* summary;
    std::string (*text)(int width);
};

const Topic kTopics[] = {
    {"sizes", "how sizes, shares, bandwidths and durations are written (40GiB, 70%, 25GB/s, 50ms)", sizes},
    {"policies", "the eviction policies (--policy, --policies)",
     [](int w) { return registry(sim::eviction_policies(), "Eviction policies choose which resident allocation "
                                                           "leaves the GPU when room is needed:", w); }},
    {"prefetch", "the prefetch policies (--prefetch, --prefetchers)",
     [](int w) { return registry(sim::prefetch_policies(), "Prefetch policies bring evicted allocations back "
                                                           "before a kernel needs them:", w); }},
    {"allocators", "the allocator models (--allocator)",
     [](int w) { return registry(sim::allocator_models(), "Allocator models decide how much memory the live "
                                                          "allocations take:", w); }},
    {"links", "the link presets and profiles (--link, --links)", links},
    {"exit-status", "what each exit status means", exit_status},
};

std::string overview(const CLI::App& top, int w) {
    std::string out = wrap("mhc help COMMAND prints a command's options (as mhc COMMAND --help does); mhc help "
                           "TOPIC explains what is too long for an option's line.", w) + "\nCommands:\n";
    for (const CLI::App* sub : top.get_subcommands({}))
        if (!sub->get_group().empty()) out += entry(sub->get_name(), sub->get_description(), w);   // hidden: ""
    out += "\nTopics:\n";
    for (const auto& t : kTopics) out += entry(t.name, t.summary, w);
    return out;
}

std::function<int()> setup(CLI::App& app) {
    auto what = std::make_shared<std::string>();
    auto inner = std::make_shared<std::string>();
    app.add_option("subject", *what, "A command or a topic (sizes, policies, prefetch, allocators, links, exit-status)");
    app.add_option("command", *inner, "A command's own command (mhc help kernels sinkhorn)");
    return [what, inner, &app]() -> int {
        const int w = help_width();
        const CLI::App& top = *app.get_parent();
        if (what->empty()) {
            std::fputs(overview(top, w).c_str(), stdout);
            return kExitOk;
        }
        for (const auto& t : kTopics)
            if (*what == t.name) {
                if (!inner->empty())
                    throw Error("help: " + *what + " is a topic, with no commands: '" + *inner + "' (mhc help " +
                                *what + ")");
                std::fputs(t.text(w).c_str(), stdout);
                return kExitOk;
            }
        std::vector<std::string> names;
        for (const CLI::App* sub : top.get_subcommands({})) {
            if (sub->get_name() == *what) {
                if (inner->empty()) {
                    std::fputs(sub->help(top.get_name()).c_str(), stdout);
                    return kExitOk;
                }
                // `mhc help kernels sinkhorn`, as `mhc kernels sinkhorn --help` (it was "unexpected argument").
                std::vector<std::string> own;
                for (const CLI::App* command : sub->get_subcommands({})) {
                    if (command->get_name() == *inner) {
                        std::fputs(command->help(top.get_name() + " " + sub->get_name()).c_str(), stdout);
                        return kExitOk;
                    }
                    own.push_back(command->get_name());
                }
                throw Error("help: '" + *inner + "' is not a command of " + *what +
                            (own.empty() ? ", which has none" : did_you_mean(*inner, own)) + " (mhc help " + *what +
                            ")");
            }
            if (!sub->get_group().empty()) names.push_back(sub->get_name());
        }
        for (const auto& t : kTopics) names.push_back(t.name);
        const std::string elsewhere = done_elsewhere(*what);
        throw Error("help: '" + *what + "' is neither a command nor a topic" +
                    (elsewhere.empty() ? did_you_mean(*what, names) + " (mhc help lists them)" : elsewhere));
    };
}

}  // namespace

std::string done_elsewhere(const std::string& word) {
    struct Elsewhere {
        std::vector<std::string> words;
        const char* where;
    };
    static const std::vector<Elsewhere> kElsewhere = {
        {{"view", "viewer", "show", "browse", "gui", "open"}, "the viewer is a program of its own: mhc-view TRACE"},
        {{"capture"}, "a PyTorch step is captured by mhc-torch capture (docs/torch.md), then read by mhc advise"},
        {{"replay"}, "a simulated plan is replayed by mhc validate"},
        {{"run"}, "a run is simulated by mhc simulate, and replayed by mhc validate"},
        {{"version"}, "the version is mhc --version"},
        {{"summary", "summarize", "stats", "inspect"}, "a trace's summary is mhc info TRACE"},
        {{"convert"}, "mhc import reads other formats into a trace, mhc export writes a trace out"},
        {{"recommend", "plan", "suggest"}, "the settings to turn on are mhc advise's"},
        {{"lint", "verify"}, "a trace is checked by mhc check (a setting, by mhc advise --verify)"},
        {{"profile"}, "a CUDA program is recorded by mhc record"},
    };
    for (const Elsewhere& entry : kElsewhere)
        if (std::find(entry.words.begin(), entry.words.end(), word) != entry.words.end())
            return std::string("; ") + entry.where;
    return "";
}

namespace {

Registration reg{Command{"help", "Help on a command or a topic: sizes, policies, prefetch, allocators, links, "
                                 "exit-status", setup}};

}  // namespace
}  // namespace mhc::cli
