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

// What is live at a simulated run's peak (the "At the peak" tab with a run selected): the run's
// device-bytes peak (ViewRun::memory's first maximum, on the run's clock), and every allocation
// alive then on the run's clock (its recorded allocation and free mapped by RunClock), with where
// the run's policy had put it: on the device, on the host (swapped out, or evicted clean), or
// dropped (to be recomputed). Where an allocation is at time T is what its last event by T made it:
// a swap-out's bytes leave the device at its end, a swap-in's or a recomputation's are held from
// its start (the run's device bytes count in-flight reservations), an evict-clean and a drop act at
// once; an allocation without such an event is on the device. The rows' device bytes add up to the
// run's peak (the simulator counts the same). `before` and `after`: the run's last event on the row
// by the peak and its first after it (indices into ViewRun::events, -1: none).
enum class Residence : uint8_t { Device, Host, Dropped };
const char* to_string(Residence where);
struct RunPeakRow {
    uint32_t row = 0;   // allocation index
    Residence where = Residence::Device;
    int64_t t_alloc = 0, t_free = 0;   // on the run's clock (t_free kNoTime: never freed)
    int64_t before = -1, after = -1;
};
struct RunPeakLive {
    bool has_peak = false;                             // the run has a device-bytes curve
    int64_t time = 0;                                  // on the run's clock
    // The recorded start of the kernel the run started last at or before its peak (-1: none): where
    // the peak falls in the recording, which an order-only trace's texts give (its run's times are
    // not op or event numbers).
    int64_t recorded_time = -1;
    double bytes = 0;                                  // the run's device-bytes peak
    double host_bytes = 0;                             // the run's host bytes then
    int64_t on_device = 0, on_host = 0, dropped = 0;   // the rows' bytes by where
    size_t device_rows = 0, host_rows = 0, dropped_rows = 0;
    // False when the run moved allocations (its metrics count swap-outs, clean evictions or drops)
    // but was stored without its events (mhc simulate --no-events): where each row was is not known
    // (every row then reads "device").
    bool placement_known = true;
    int64_t moves = 0;              // those metrics' sum
    std::vector<RunPeakRow> rows;   // on the device first, then on the host, then dropped; largest first in each
};
RunPeakLive live_at_run_peak(const ViewTrace& view, const ViewRun& run);
// The same at any time `at` of the run's clock (`bytes`: the run's device bytes then); with
// `recorded_at` >= 0, alive by the recording's times at that instant instead (where each was: by
// the run's events up to `at`), and with `last_made` an allocation's id, of the allocations made at
// `recorded_at` only those up to it (the allocations of one instant come in id order).
RunPeakLive live_at_run_time(const ViewTrace& view, const ViewRun& run, int64_t at, int64_t recorded_at = -1,
                             int64_t last_made = 0);

// Where a run stopped out of memory (status oom): its instant (metric oom_time_ns, else its oom
// event's start), the allocation it could not place and the kernel that needed it (its oom event's),
// and every allocation alive then with where the policy had put it: alive by the recording's order
// just before that kernel (else at that allocation), since the run's clock maps what was made for the
// kernel past the OOM. The one it could not place is a row (`needed`): made then (not placed, its
// bytes not counted on the device), or swapped out before and needed back (`needed_placed`).
// `operand`: per live.rows, whether the row is an operand of that kernel (recorded accesses): pinned
// on the device while the kernel runs, which "pinned by running kernels" in the OOM line counts.
struct RunOom {
    bool found = false;                   // the run stopped out of memory
    int64_t time = 0;                     // on the run's clock
    int64_t allocation = 0, kernel = 0;   // 0: not named
    RunPeakLive live;
    std::vector<bool> operand;
    int64_t operand_bytes = 0;   // the operands' bytes on the device, the needed one's left out
    int64_t needed = -1;         // its row in live.rows (-1: not among them)
    int64_t recorded_at = -1;    // the recorded instant the rows are alive at (-1: by the run's clock)
    bool needed_placed = false;
};
RunOom live_at_run_oom(const ViewTrace& view, const ViewRun& run);

// The rows of a run's live allocations (at its peak, or at its out-of-memory instant with `oom`)
// grouped by where each was allocated: its label (a PyTorch snapshot's source frame, a generated
// trace's tensor name; the trace keeps one frame per allocation), a layer's number left out
// (live_group_name: a generated trace's "L3.attn.probs" of 12 layers is one group "L*.attn.probs"
// of 12, not 12 groups of one), their bytes summed by where the
// policy had put them. The groups holding the most bytes on the device come first, then the one
// the run could not place, then by all their bytes (then by name): at the OOM, what filled the device. 600 activations
// of one frame are one row of 600 with their sum, not 600 rows of one frame each. The allocation the run could not
// place is counted in its group's `needed_bytes`, not on the device; the kernel's operands on the device in
// `operand_bytes`. The group of a label: "L*.attn.probs" for "L3.attn.probs" (a layer's tensor, as `mhc generate` names
// them), else the label itself ("" for none).
std::string live_group_name(const std::string& label);
struct LiveGroup {
    std::string name;     // live_group_name of its labels
    int64_t label = -1;   // its first row's label: string id (ViewTrace::str), -1 for none
    size_t count = 0, device_count = 0, operands = 0;
    int64_t bytes = 0;   // every row's bytes
    int64_t on_device = 0, on_host = 0, dropped = 0, operand_bytes = 0;
    int64_t needed_bytes = 0;   // the allocation the run could not place (or bring back), in this group
    bool needed = false;
    int64_t largest = 0;        // the group's largest allocation
    std::vector<size_t> rows;   // indexes into the RunPeakLive's rows, largest first
};
std::vector<LiveGroup> group_live_by_label(const ViewTrace& view, const RunPeakLive& live, const RunOom* oom = nullptr);

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
