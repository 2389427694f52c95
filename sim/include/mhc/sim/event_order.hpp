#pragma once
// The order in which the simulator processes a device's recorded events (docs/simulator.md,
// Inputs), and the vocabulary that ties a run's decisions to those events. One definition,
// used by the engine's main loop and by replay's plan (replay/src/plan.cpp), so that both
// walk the recorded events in exactly the same order.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "mhc/trace/columns.hpp"

namespace mhc::sim {

// Where an allocation is, in the simulator and in a replay of its plan.
enum class Residency : uint8_t { NotYet, Gpu, Host, InH2D, InD2H, Dropped, Freed };

// The kind of a recorded event.
enum class Recorded : uint8_t { Allocation, Free, KernelStart, KernelEnd };

// The recorded event being processed when a decision was taken: `index` is the dense
// allocation row (Allocation, Free) or kernel row (KernelStart, KernelEnd) of the TraceData;
// after_launch: decided after the kernel started (its prefetch round).
struct EventOrigin {
    Recorded what = Recorded::Allocation;
    bool after_launch = false;
    int32_t index = -1;
    bool operator==(const EventOrigin& o) const { return what == o.what && index == o.index; }
};

// The four recorded streams of one device, each sorted: kernels by (t_start, row) — the
// position is the kernel's `seq` —, kernel ends by (t_end, seq), allocations by
// (t_alloc, row), frees by (t_free, row) (allocations without a free have none, and one
// freed at the instant it was made is freed by the cursor right after its allocation).
struct EventStreams {
    std::vector<int32_t> korder;        // seq -> kernel row
    std::vector<int64_t> kstart, kend;  // recorded times by seq
    std::vector<int32_t> kend_order;    // seqs by (t_end, seq)
    std::vector<int32_t> alloc_order, free_order;
};
EventStreams event_streams(const trace::TraceData& t, int32_t device);

// One recorded event: its kind, recorded time, row and (kernels) seq.
struct RecordedEvent {
    Recorded what = Recorded::Allocation;
    int64_t time = 0;
    int32_t row = -1;   // allocation or kernel row
    int32_t seq = -1;   // kernels: position in start order
};

// Merges the four streams: at one recorded instant kernel ends, then frees, then
// allocations, then kernel starts; a zero-length kernel's end comes right after its start,
// and an allocation freed at the instant it was made is freed right after it is made (the
// order of trace::MemoryEvent, docs/trace-format.md "Events at one instant").
class EventCursor {
public:
    EventCursor(const EventStreams& s, const trace::TraceData& t)
        : S(s), t_alloc(t.allocations.t_alloc.data()), t_free(t.allocations.t_free.data()),
          na(s.alloc_order.size()), nf(s.free_order.size()), nk(s.korder.size()) {
        load_end();
        load_free();
        load_alloc();
        load_start();
    }
    // The next event, or false at the end.
    bool next(RecordedEvent& e) {
        if (pending_free >= 0) {   // the allocation just made lives only at this instant
            e.what = Recorded::Free;
            e.row = pending_free;
            e.time = t_free[pending_free];
            e.seq = -1;
            pending_free = -1;
            return true;
        }
        const int64_t m = std::min(std::min(te, tf), std::min(ta, ts));
        if (m == INT64_MAX) return false;
        e.time = m;
        e.seq = -1;
        if (te == m && end_seq < static_cast<int32_t>(ik)) {   // its start was processed
            e.what = Recorded::KernelEnd;
            e.seq = end_seq;
            e.row = S.korder[static_cast<size_t>(end_seq)];
            ++ie;
            load_end();
        } else if (tf == m) {
            e.what = Recorded::Free;
            e.row = S.free_order[iff++];
            load_free();
        } else if (ta == m) {
            e.what = Recorded::Allocation;
            e.row = S.alloc_order[ia++];
            load_alloc();
            if (t_free[e.row] == t_alloc[e.row]) pending_free = e.row;
        } else {
            e.what = Recorded::KernelStart;
            e.seq = static_cast<int32_t>(ik++);
            e.row = S.korder[e.seq];
            load_start();
        }
        return true;
    }

private:
    // The time at the head of each stream (INT64_MAX when it is exhausted), read once per
    // event taken from that stream rather than for all four streams at every event.
    void load_end() {
        end_seq = ie < nk ? S.kend_order[ie] : -1;
        te = ie < nk ? S.kend[static_cast<size_t>(end_seq)] : INT64_MAX;
    }
    void load_free() { tf = iff < nf ? t_free[S.free_order[iff]] : INT64_MAX; }
    void load_alloc() { ta = ia < na ? t_alloc[S.alloc_order[ia]] : INT64_MAX; }
    void load_start() { ts = ik < nk ? S.kstart[ik] : INT64_MAX; }

    const EventStreams& S;
    const int64_t* t_alloc;
    const int64_t* t_free;
    size_t na, nf, nk;
    size_t ia = 0, iff = 0, ik = 0, ie = 0;
    int64_t te = INT64_MAX, tf = INT64_MAX, ta = INT64_MAX, ts = INT64_MAX;
    int32_t end_seq = -1;
    int32_t pending_free = -1;
};

// What replay needs of a run to rebuild its plan (replay::make_plan): for each timeline event
// (parallel to Result::events) the recorded event that decided it, and the allocator calls
// that are not events, in the simulator's order: swap-outs whose completion gave their device
// block back, and (failed_allocation) allocations of the caching model that failed but
// released its cached free segments on the way. before: how many events existed then.
struct PlanLog {
    struct Release {
        int32_t alloc = -1;
        int32_t before = 0;
        EventOrigin origin;
        bool failed_allocation = false;
    };
    std::vector<EventOrigin> origins;
    std::vector<Release> releases;
};

}  // namespace mhc::sim
