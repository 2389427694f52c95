#pragma once
// The details pane, as Perfetto's: what the user clicked (a kernel on the timeline, an allocation
// in the memory view) with everything the file knows about it, read on demand through the trace's
// Reader (one kernel, its accesses, one allocation) and the selected run's events. The structured
// details are computed here; `*_pane` turns them into the lines and table the front-end paints.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mhc/trace/model.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

// One allocation a kernel accesses, and what the selected run's policy did to it around the
// kernel: its events from the end of the allocation's previous access to this kernel's start
// (`before`: how it got here, e.g. evicted then swapped back in), and from this kernel's end to
// the allocation's next access (`after`), both on the run's clock.
struct OperandDetail {
    int64_t allocation = 0;
    int64_t index = -1;   // in ViewTrace::allocations; -1: an id the table lacks
    trace::AccessMode mode = trace::AccessMode::Read;
    int64_t bytes = 0;
    trace::Category category = trace::Category::Other;
    std::string label;
    std::vector<trace::RunEvent> before, after;
};

struct KernelDetails {
    bool found = false;
    TimeText times;          // how the trace's times read (event numbers when its timing is order only)
    trace::Kernel kernel;    // as recorded (times, launch geometry)
    std::string name;
    KernelFamily family = KernelFamily::Other;
    // The selected run: whether the kernel ran in it, and when on its clock.
    bool has_run = false, reached = false;
    int64_t run_start = 0, run_end = 0;
    int64_t stall_ns = 0;    // the run's stalls of this kernel (waiting for operands to arrive)
    std::vector<OperandDetail> operands;
};
KernelDetails kernel_details(const ViewTrace& t, const ViewRun* run, int64_t kernel_id);
// The kernel's times in the run: its item in the run's lane of its stream; false when the run
// stopped before it. A run stored without its timeline keeps the recorded times.
bool kernel_in_run(const ViewRun& run, const trace::Kernel& kernel, int64_t& start, int64_t& end);

struct AccessRow {
    int64_t kernel = 0;
    std::string name;
    trace::AccessMode mode = trace::AccessMode::Read;
    int64_t t_start = 0, t_end = 0;   // recorded
    int64_t run_start = -1;           // on the selected run's clock; -1 without a run
};

struct AllocationDetails {
    bool found = false;
    TimeText times;                 // as KernelDetails::times
    trace::Allocation allocation;   // as recorded (address, stream, ...)
    std::string label;              // the source frame of a PyTorch snapshot
    int64_t t_end = 0;              // the free, or the end of the trace
    int64_t access_count = 0;
    int64_t reads = 0, writes = 0;  // read-write counts in both
    std::vector<AccessRow> accesses;   // the first `max_rows` by time
    bool has_run = false;
    std::vector<trace::RunEvent> events;   // the selected run's events on it, by time
};
AllocationDetails allocation_details(const ViewTrace& t, const ViewRun* run, int64_t allocation_id,
                                     size_t max_rows = 200);

// What the front-end paints: a title, label/value lines, and one table.
struct DetailsPane {
    std::string title;
    std::vector<std::pair<std::string, std::string>> fields;
    std::vector<std::string> columns;
    std::vector<std::vector<std::string>> rows;
    std::string empty_table;   // said instead of the table when it has no rows
};
DetailsPane kernel_pane(const KernelDetails& d, const ViewRun* run);
// The pane as text, for the clipboard ("copy", Ctrl+C): the title, a "field: value" line each, then
// the table with its header, cells separated by tabs (a spreadsheet takes it as columns).
std::string details_text(const DetailsPane& pane);
DetailsPane allocation_pane(const AllocationDetails& d, const ViewRun* run);

// "swapped out 40.0 us of 64.00 MiB, 1.20 ms before; swapped in 50.0 us of 64.00 MiB, up to the
// start": the events with their durations, bytes and distance to `t` (the kernel's start for
// events before it, its end for events after it).
// `times`: the run's (an order-only trace's run says where an event lies by op, "at op #808 + 1 ns",
// and its length in link time); nullptr: recorded times.
std::string describe_events(const std::vector<trace::RunEvent>& events, int64_t at, bool before,
                            const RunTimes* times = nullptr);

}  // namespace mhc::viewer
