#pragma once
// Events -> trace rows. One thread feeds a Translator in the order events were produced:
// callback events (allocations, frees, launches) as they happen, activity records when
// CUPTI hands over a buffer, which is later than the callbacks of the same operations.
// Kernels, accesses, copies and markers are written as they come; allocation rows are held
// until finish() so that their lifetimes can be settled (see docs/recording.md):
//  - an activity record of an allocation a driver callback already reported is merged
//    into it (same address, time inside its lifetime) instead of duplicated;
//  - a stream-ordered free (cuMemFreeAsync) returns on the host before the kernels that
//    use the memory have run, so t_free is extended to the end of the last kernel found
//    to access the allocation, and a later allocation at the same address starts no
//    earlier than that.
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "mhc/record/events.hpp"
#include "mhc/record/params.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::record {

struct TranslatorOptions {
    int64_t origin = -1;            // raw timestamp of t = 0; -1: the first event's time
    bool accesses = true;           // match launches to kernels and write accesses
    uint64_t match_slack_ns = 1000;   // tolerance when matching activity to callbacks
    // Write the `segments` table (docs/trace-format.md "segments"): each device allocation that is
    // neither from a stream-ordered pool nor a module's static memory (cuMemMap'd ones as
    // expandable: under PyTorch's caching allocator, recorded without --torch, the driver sees
    // only its segments), and the memory each stream-ordered pool holds, as CUPTI reports its
    // size (recorded with --torch: cudaMallocAsync's pool).
    bool segments = true;
    // The job identity of the recorded process (record::job_identity), written into meta beside
    // time_origin_ns, its place on the clock the job's processes share.
    std::map<std::string, std::string> job;
};

struct TranslatorStats {
    int64_t allocations = 0, allocations_driver = 0, allocations_activity = 0,
            allocations_vmm = 0;
    int64_t activity_merged = 0;        // activity allocations merged into a callback one
    int64_t activity_by_correlation = 0;   // activity records (allocations, releases) matched by id
    int64_t host_allocations = 0;       // pinned/pageable memory records, not GPU memory
    int64_t zero_size = 0;
    int64_t implicit_frees = 0;         // a new allocation at a live address
    int64_t frees_unmatched = 0;        // free of an address not known to be live
    int64_t lifetimes_extended = 0;     // t_free moved to the end of an accessing kernel
    int64_t allocs_delayed = 0;         // t_alloc moved after the previous holder's free
    int64_t lifetimes_emptied = 0;      // delayed to or past its own free: no time left on the GPU
    int64_t lifetime_conflicts = 0;     // an access before the allocation could start
    int64_t kernels = 0, kernels_without_time = 0;
    int64_t launches = 0, launches_with_hits = 0, launches_unmatched = 0;
    int64_t accesses = 0;
    int64_t copies = 0, markers = 0, syncs = 0, marker_ends_unmatched = 0,
            markers_left_open = 0;
    int64_t overhead_records = 0, overhead_ns = 0;
    int64_t pools_created = 0, pools_destroyed = 0, pools_trimmed = 0, pool_max_bytes = 0;
    int64_t pool_samples = 0;            // pool sizes read from memory records
    int64_t pool_utilized_max_bytes = 0; // the largest utilizedSize reported (bytes allocated from a pool)
    int64_t pool_samples_skipped = 0;    // sizes below what the pool was said to hold (utilized, the allocation)
    int64_t pool_records_by_device = 0;  // pool records of an address no memory record named, put to the device's pool
    int64_t pool_segments = 0;           // segments rows of pools' reserved memory
    int64_t pools_moved = 0;             // pools whose rows would have met other segments above their base: laid out above all
    int64_t static_allocations = 0;      // module static memory (DEVICE_STATIC / MANAGED_STATIC)
    int64_t allocs_stream_started = 0;   // pool allocation started when its stream reached it, not at the call
    int64_t frees_stream_ordered = 0;    // stream-ordered free moved to when its stream reached it
    int64_t times_clamped = 0;          // records earlier than the origin
    int64_t last_time = 0;              // latest time seen, relative to the origin
};

class Translator {
public:
    explicit Translator(trace::Writer& writer, const TranslatorOptions& options = {});

    void on_alloc(const AllocEvent& event);
    void on_free(const FreeEvent& event);
    void on_launch(const LaunchEvent& event);
    void on_kernel(const KernelEvent& event);
    void on_copy(const CopyEvent& event);
    void on_marker(const MarkerEvent& event);
    void on_sync(const SyncEvent& event);
    void on_overhead(const OverheadEvent& event);
    void on_pool(const PoolEvent& event);
    void on_device(const DeviceEvent& event);
    // A memory record of pinned or pageable host memory: counted, not a GPU allocation.
    void on_host_memory() { ++stats_.host_allocations; }

    // Settles and writes the held allocations, closes markers still open at the latest
    // time seen, and puts the statistics into the writer's meta. Call once, before
    // Writer::finish(); no events after it.
    void finish();

    const TranslatorStats& stats() const { return stats_; }
    // Origin in raw timestamps (known after the first event when not given).
    int64_t origin() const { return origin_; }

private:
    struct Held {
        trace::Allocation row;
        int64_t t_enter = 0;
        int64_t use_start = INT64_MAX, use_end = INT64_MIN;   // accessing kernels
        AllocSource source = AllocSource::Driver;
        bool freed = false, activity_alloc = false, activity_release = false, pool = false;
        bool static_memory = false;
        int64_t t_call = 0;        // the allocation call's time (host)
        int64_t free_stream = 0;   // cuMemFreeAsync's stream, 0: none known
        bool delayed = false, emptied = false;
        uint32_t alloc_keys[2] = {0, 0}, free_keys[2] = {0, 0};   // correlation ids awaiting a record
    };
    struct Launch {
        std::vector<int64_t> ids;
        int64_t t = 0;
        uint32_t keys[2] = {0, 0};
    };
    struct Open {
        int64_t name = 0, t = 0;
        trace::MarkerKind kind = trace::MarkerKind::Range;
        int32_t index = -1;
        int64_t step_slot = -1;
    };
    struct StepRange { int64_t start, end; int32_t index; };

    int64_t rel(uint64_t timestamp);
    int64_t new_allocation(const AllocEvent& event, int64_t time);
    void free_held(Held& held, int64_t time);
    void remember(uint64_t address, int64_t id);
    void expect_record(bool release, uint32_t corr, uint32_t runtime_corr, int64_t id);
    int64_t take_record(bool release, uint32_t corr, uint64_t address, uint32_t device);
    void forget_keys(bool release, int64_t id);
    int64_t find_alloc_of(const AllocEvent& record, int64_t time);
    int64_t find_release_of(const FreeEvent& record, int64_t time);
    int32_t step_at(int64_t time) const;
    void write_marker(int64_t name, int64_t start, int64_t end, trace::MarkerKind kind,
                      int32_t index);
    void settle_allocations();
    void chain_lifetimes(const std::vector<size_t>& order);
    void place_emptied(const std::vector<size_t>& group);
    void release_launch(uint32_t slot);
    void pool_segments(std::vector<trace::Segment>& out);
    void write_segments();
    void close_open_ranges();
    void write_counts();
    int64_t stream_reached(int32_t device, int64_t stream, int64_t time) const;

    trace::Writer& w_;
    TranslatorOptions opt_;
    int64_t origin_;
    TranslatorStats stats_;

    std::vector<Held> allocs_;   // id = index + 1
    LiveMap live_;
    // Allocation ids by start address (oldest first) still waiting for an activity record of
    // their allocation or release, and the calls waiting for one by correlation id: for matching
    // activity records to callbacks.
    struct Pending {
        std::deque<int64_t> alloc, release;
    };
    std::unordered_map<uint64_t, Pending> history_;
    std::unordered_map<uint32_t, int64_t> alloc_corr_, free_corr_;
    std::unordered_map<std::string, int64_t> labels_;

    std::vector<Launch> launches_;
    std::vector<uint32_t> free_slots_;
    std::unordered_map<uint32_t, uint32_t> launch_by_corr_;
    std::vector<int64_t> scratch_;

    // What CUPTI said of the pools' sizes, in arrival order (sorted by time at the end).
    struct PoolPoint {
        int32_t device;
        uint64_t address;
        uint32_t op;
        int64_t size, t;
        size_t seq;
    };
    std::vector<PoolPoint> pool_points_;
    // Per (device, stream): the kernels whose launch the callbacks saw, as (launch time on the host,
    // end on the GPU); sorted by launch with the running maximum of ends in settle_allocations.
    std::map<std::pair<int32_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> stream_work_;

    std::unordered_map<uint32_t, Open> open_;
    std::vector<StepRange> steps_;   // sorted by start
    int32_t steps_seen_ = 0;
    bool first_device_ = true;
};

}  // namespace mhc::record
