// The words a run's kind and status are stored and printed as (docs/trace-format.md, "Run tables").
#include <array>

#include "mhc/common/error.hpp"
#include "mhc/trace/runs.hpp"

namespace mhc::trace {
namespace {

// In the order of the enumerations.
constexpr std::array<std::string_view, 2> kKindNames = {"simulated", "replayed"};
constexpr std::array<std::string_view, 4> kStatusNames = {"complete", "oom", "incomplete", "failed"};
static_assert(static_cast<size_t>(RunKind::Replayed) + 1 == kKindNames.size());
static_assert(static_cast<size_t>(RunStatus::Failed) + 1 == kStatusNames.size());

template <class Enum, size_t N>
Enum parse(const std::array<std::string_view, N>& names, std::string_view text, const char* column,
           const std::string& file, int64_t run) {
    for (size_t i = 0; i < N; ++i)
        if (names[i] == text) return static_cast<Enum>(i);
    std::string valid;
    for (std::string_view name : names) valid += (valid.empty() ? "" : ", ") + std::string(name);
    throw Error(file + ": runs row " + std::to_string(run) + ": " + column + " '" + std::string(text) +
                "' is not one of " + valid + " [invalid-code]");
}

}  // namespace

std::string_view to_string(RunKind kind) { return kKindNames.at(static_cast<size_t>(kind)); }
std::string_view to_string(RunStatus status) { return kStatusNames.at(static_cast<size_t>(status)); }

RunKind run_kind_from(std::string_view text, const std::string& file, int64_t run) {
    return parse<RunKind>(kKindNames, text, "kind", file, run);
}

RunStatus run_status_from(std::string_view text, const std::string& file, int64_t run) {
    return parse<RunStatus>(kStatusNames, text, "status", file, run);
}

}  // namespace mhc::trace
