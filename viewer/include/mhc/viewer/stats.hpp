#pragma once
// Tables of the statistics view: computed once per trace, sorted and filtered per request.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

// Case-insensitive substring test; an empty needle matches everything.
bool contains_ci(std::string_view hay, std::string_view needle);

enum class KernelSort { Name, Count, Total, Mean, Max };
// Indices into t.kernel_stats whose names match `filter`, sorted by `by`.
std::vector<uint32_t> kernel_table(const ViewTrace& t, std::string_view filter, KernelSort by, bool ascending);

enum class AllocSort { Label, Bytes, Category, Lifetime, Alloc };
// At most `limit` allocation indices whose labels match `filter`, sorted by `by`.
std::vector<uint32_t> allocation_table(const ViewTrace& t, std::string_view filter, AllocSort by,
                                       bool ascending, size_t limit);

// What is live at the recorded peak of the memory views' device (t.live's first maximum, at
// peak_time): the allocations with t_alloc <= time < t_free, largest first (ties by id). Their
// bytes add up to the peak, as the curve counts an allocation from its t_alloc up to its t_free.
struct PeakLive {
    int64_t time = 0;
    double bytes = 0;             // the curve's peak
    std::vector<uint32_t> rows;   // allocation indices
};
PeakLive live_at_peak(const ViewTrace& view);
// The same at any time `at`.
std::vector<uint32_t> live_at(const AllocationTable& allocations, int64_t at);

struct CategoryStat {
    trace::Category category = trace::Category::Other;
    int64_t count = 0, bytes = 0, largest = 0;
    double peak_live = 0;   // peak of this category's live bytes
};
std::vector<CategoryStat> category_stats(const ViewTrace& t);

struct StepStat {
    int32_t step = 0;
    int64_t t0 = 0, t1 = 0;
    double peak = 0;   // peak live bytes during the step
};
std::vector<StepStat> step_stats(const ViewTrace& t);
enum class StepSort { Step, Start, Time, Peak };
// Sorts the step table by `by` (stable: equal keys keep their order).
void sort_steps(std::vector<StepStat>& steps, StepSort by, bool ascending);

// The window header's counts: "942 kernels, 1583 allocations, 4 copies, 2 runs", a count of one
// in the singular ("1 run", "1 copy": the header read "1 runs"), ops for an execution trace's
// kernels, and `on` after the allocations (" on GPU 0" when several devices have memory).
std::string header_counts(const ViewTrace& view, size_t runs, bool ops, const std::string& on);

// What a view shows instead of an empty table or plot: why it is empty, in the trace's terms (a
// memory snapshot has no kernels, a timeline-only trace no allocations, a search matched
// nothing); "" when `rows` > 0. Categories and the memory views read as Allocations.
enum class StatsTable { Kernels, Allocations, Steps };
// Why a trace has no allocations, as its importer wrote it in meta `allocations` ("none (why)"):
// the part in brackets, "" when it gave none.
std::string no_allocations_reason(const ViewTrace& view);
std::string empty_table_text(const ViewTrace& view, StatsTable table, size_t rows, std::string_view search = {});

}  // namespace mhc::viewer
