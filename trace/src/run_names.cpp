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

std::optional<int32_t> run_device(const RunInfo& run) {
    const auto it = run.config.find("device");
    if (it == run.config.end() || it->second.empty() || it->second.size() > 8) return std::nullopt;
    int64_t device = 0;
    size_t at = it->second[0] == '-' ? 1 : 0;
    if (at == it->second.size()) return std::nullopt;
    for (; at < it->second.size(); ++at) {
        const char digit = it->second[at];
        if (digit < '0' || digit > '9') return std::nullopt;
        device = device * 10 + (digit - '0');
    }
    if (it->second[0] == '-') device = -device;
    if (device < -1) return std::nullopt;
    return static_cast<int32_t>(device);
}

std::string device_name(int32_t device) { return device < 0 ? "host" : "GPU " + std::to_string(device); }

std::string run_name_notes(const RunInfo& run, const std::string& more) {
    const std::optional<int32_t> device = run_device(run);
    std::string notes;
    if (device && *device != 0) notes = device_name(*device);
    if (!more.empty()) notes += (notes.empty() ? "" : "; ") + more;
    return notes.empty() ? notes : " (" + notes + ")";
}

std::string run_name_with_device(const RunInfo& run) { return run.name + run_name_notes(run); }

}  // namespace mhc::trace
