// The control thread of a replay (replay.hpp says what it does; docs/validation.md why).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/replay/arena.hpp"
#include "mhc/replay/replay.hpp"
#include "sinkhorn_job.hpp"
#include "worker.hpp"

namespace mhc::replay {

Backend parse_backend(const std::string& s) {
    if (s == "host") return Backend::Host;
    if (s == "cuda") return Backend::Cuda;
    throw Error("unknown backend '" + s + "' (host|cuda)");
}
const char* to_string(Backend b) { return b == Backend::Host ? "host" : "cuda"; }

namespace {

using detail::Clock;
using kernels::SwapDir;

using enum sim::Residency;   // one residency vocabulary with the simulator

class Executor {
public:
    Executor(const trace::TraceData& t, const Plan& p, const Options& o) : trace_data(t), plan(p), options(o) {}
    Measured run();

private:
    // run(), in its phases
    void setup();
    std::unique_ptr<kernels::SwapEngine> make_engine(bool paced);
    void begin_window();
    void execute(const Action& x, size_t i);
    void drain();
    void finish();
    struct Pending {
        uint64_t id;
        int32_t alloc;
    };
    // arena
    bool place(int32_t a, size_t action);
    void release_device(int32_t a);
    void fill_pattern(int32_t a);
    void release_host(int32_t a);
    // transfers
    void submit(int32_t a, SwapDir dir);
    void poll();
    void wait_one(SwapDir dir);
    void wait_for(int32_t a);
    void measured_wait(int32_t a, int32_t k);
    void complete(const kernels::SwapResult& r, int32_t a);
    // actions
    void kernel_start(const Action& x, size_t i);
    void kernel_end(const Action& x);
    void recompute(const Action& x, size_t i);
    detail::Job kernel_job(int32_t k);
    void fail(const std::string& why);
    void sample();
    int64_t trace_ns(Clock::time_point t) const {
        return origin_ + static_cast<int64_t>(std::chrono::duration<double, std::nano>(t - t0).count() / options.time_scale);
    }
    Clock::time_point target(int64_t recorded) const {
        return t0 + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double, std::nano>(static_cast<double>(recorded - origin_) *
                                                                 options.time_scale)) + lag;
    }
    // Mapping and unmapping pages (building page tables for a new segment) is the replay
    // machine's cost of standing in for cudaMalloc, which the recorded gaps already contain:
    // the replay clock stops while it runs, so it is neither lag nor makespan.
    void pause_clock(Clock::time_point since) {
        auto d = Clock::now() - since;
        t0 += d;
        const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
        paused_ns += ns;
        // A GPU's copies run on while the clock stands still (the host's paced ones wait it out).
        if (device == kernels::Device::Cuda && (!q[0].empty() || !q[1].empty())) measured.paused_with_copies_ns += ns;
    }
    void note_lag(int64_t recorded) {
        if (fast_ || recorded < origin_) return;   // before the window: not on its clock
        auto late = Clock::now() - (target(recorded) - lag);
        if (late > lag) lag = late;
    }
    unsigned char* dev(int32_t a) const { return static_cast<unsigned char*>(eng->device_arena()) + dev_off[a]; }
    int32_t worker_of_kernel(int32_t k) const { return std::max(plan.stream_of[static_cast<size_t>(k)], 0); }

    const trace::TraceData& trace_data;
    const Plan& plan;
    const Options& options;
    Measured measured;
    kernels::Device device = kernels::Device::Cpu;
    std::unique_ptr<PageMapper> vm;        // outlives the engine and the arena that use it
    PageMapper* pm = nullptr;              // vm, or the shared one of Options::mapper
    std::unique_ptr<kernels::SwapEngine> eng;
    Clock::time_point eng_epoch, t0;
    // A window (Plan::window_begin): fast_ while the actions before it run, at once and unpaced;
    // times are measured from origin_ (the window's recorded start, else the plan's).
    bool fast_ = false;
    int64_t origin_ = 0;
    std::vector<uint8_t> before_window_;   // per kernel index: started before the window
    std::vector<uint64_t> jobs_pushed_;    // per worker
    std::unique_ptr<unsigned char[]> own_host_;   // a window's host arena, when none is shared
    Clock::duration lag{0};
    // How long the clock stood still mapping pages (ns): the page-mapping time reported, and
    // what the threads that wait on the replay's clock add to their deadlines.
    std::atomic<int64_t> paused_ns{0};
    std::unique_ptr<Arena> arena;
    std::unique_ptr<FreeList> host;
    std::vector<std::unique_ptr<detail::Worker>> workers;
    std::vector<detail::JobTimes> times;   // per kernel index, then per recompute
    std::vector<int64_t> job_of;           // per kernel index: worker job number, -1
    std::vector<sim::Residency> state;
    std::vector<uint8_t> freed_in_flight, cancelled, host_valid;
    std::vector<int64_t> dev_off, host_off, sum, version;
    std::vector<uint64_t> xfer;            // per allocation: its transfer in flight
    std::deque<Pending> q[2];              // per direction, in submission order
    std::unordered_map<uint64_t, Clock::time_point> submitted;
    std::vector<std::pair<int64_t, int64_t>> mem;   // (trace ns, bytes in use)
    int64_t recomputes = 0;
    bool stopped = false;
    double busy_s[2] = {0, 0};
    int64_t busy_bytes[2] = {0, 0};
};

void Executor::fail(const std::string& why) {
    if (measured.failure.empty()) measured.failure = why;
    measured.status = trace::RunStatus::Failed;
}

void Executor::sample() {
    if (!fast_) mem.emplace_back(trace_ns(Clock::now()), arena->in_use());
}

// Places `a`, waiting for transfers in flight whose completion releases memory, as the
// simulator's make_room waits for swap-outs. OOM when nothing is left to wait for.
bool Executor::place(int32_t a, size_t action) {
    const int64_t bytes = trace_data.allocations.bytes[a];
    for (;;) {
        poll();
        auto m0 = Clock::now();
        int64_t off = arena->allocate(a, bytes, trace_data.allocations.stream[a], plan.pool(a));
        pause_clock(m0);
        if (off >= 0) {
            dev_off[a] = off;
            measured.peak = std::max(measured.peak, arena->in_use());
            sample();
            return true;
        }
        if (!q[1].empty()) { wait_one(SwapDir::DeviceToHost); continue; }
        if (!q[0].empty()) { wait_one(SwapDir::HostToDevice); continue; }
        measured.oom = true;
        measured.status = trace::RunStatus::Oom;
        measured.oom_allocation = a;
        measured.oom_fragmentation = arena->last_failure_fragmentation();
        measured.oom_bytes = arena->rounded(bytes);
        measured.oom_largest_free = arena->largest_free();
        measured.oom_short = std::max<int64_t>(arena->in_use() + measured.oom_bytes - plan.capacity, 0);
        const Action& x = plan.actions[action];
        int32_t k = -1;
        if (x.op != Op::Alloc)   // a swap-in or recompute for the next kernel
            for (size_t j = action; j < plan.actions.size(); ++j)
                if (plan.actions[j].op == Op::KernelStart) { k = plan.actions[j].kernel; break; }
        measured.oom_kernel = k;
        measured.oom_where = k >= 0 ? "kernel " + std::to_string(trace_data.kernels.id[k]) + " needs allocation " +
                                          std::to_string(trace_data.allocations.id[a])
                             : "allocation " + std::to_string(trace_data.allocations.id[a]);
        stopped = true;
        return false;
    }
}

// A fresh allocation gets its own pattern (detail::for_each_stamp), so that even a buffer no
// kernel writes before it is swapped out is told apart from stale or zeroed memory.
void Executor::fill_pattern(int32_t a) {
    if (device != kernels::Device::Cpu) return;   // CUDA: the stand-ins' writes are the pattern
    unsigned char* p = dev(a);
    const size_t bytes = static_cast<size_t>(trace_data.allocations.bytes[a]);
    const uint64_t seed = static_cast<uint64_t>(trace_data.allocations.id[a]) * 1000003u;
    detail::for_each_stamp(bytes, [&](size_t o, size_t i) {
        uint64_t v = detail::stamp(seed, i);
        std::memcpy(p + o, &v, 8);
    });
}

void Executor::release_device(int32_t a) {
    if (dev_off[a] < 0) return;
    auto m0 = Clock::now();
    arena->free(a);
    pause_clock(m0);
    dev_off[a] = -1;
    sample();
}

void Executor::release_host(int32_t a) {
    if (host_off[a] < 0) return;
    host->free(host_off[a]);
    host_off[a] = -1;
    host_valid[a] = 0;
}

void Executor::submit(int32_t a, SwapDir dir) {
    const int64_t bytes = trace_data.allocations.bytes[a];
    if (dir == SwapDir::DeviceToHost) {
        host_off[a] = host->allocate(bytes);
        if (host_off[a] < 0) {
            fail("the host arena (" + format_bytes(host->size()) + ") has no room for allocation " +
                 std::to_string(trace_data.allocations.id[a]));
            stopped = true;
            return;
        }
    }
    uint64_t id = eng->submit(dir, static_cast<size_t>(host_off[a]), static_cast<size_t>(dev_off[a]), static_cast<size_t>(bytes));
    xfer[a] = id;
    q[dir == SwapDir::HostToDevice ? 0 : 1].push_back({id, a});
    state[a] = dir == SwapDir::HostToDevice ? InH2D : InD2H;
    if (dir == SwapDir::HostToDevice) { ++measured.swap_ins; measured.swap_in_bytes += bytes; }
    else { ++measured.swap_outs; measured.swap_out_bytes += bytes; }
}

void Executor::poll() {
    for (int d = 0; d < 2; ++d)
        while (!q[d].empty() && eng->done(q[d].front().id)) {
            Pending p = q[d].front();
            q[d].pop_front();
            complete(eng->wait(p.id), p.alloc);
        }
}

void Executor::wait_one(SwapDir dir) {
    auto& dq = q[dir == SwapDir::HostToDevice ? 0 : 1];
    Pending p = dq.front();
    dq.pop_front();
    complete(eng->wait(p.id), p.alloc);
}

// Waits, as measured delay (a stall of kernel `k`, or of no kernel when -1), until the
// transfer in flight of `a` has completed.
void Executor::measured_wait(int32_t a, int32_t k) {
    if (state[a] != InH2D && state[a] != InD2H && !(freed_in_flight[a] && dev_off[a] >= 0)) return;
    auto t_ready = Clock::now();
    wait_for(a);
    auto w = Clock::now() - t_ready;
    if (w > Clock::duration(0) && !fast_) {
        ++measured.stalls;
        measured.stall_ns += static_cast<int64_t>(std::chrono::duration<double, std::nano>(w).count() / options.time_scale);
        measured.events.push_back({trace::EventKind::Stall, trace_ns(t_ready), trace_ns(Clock::now()),
                            trace_data.allocations.id[a], k >= 0 ? trace_data.kernels.id[k] : 0, 0});
    }
}

// Waits until the transfer in flight of `a` (if any) has completed.
void Executor::wait_for(int32_t a) {
    while (state[a] == InH2D || state[a] == InD2H || (freed_in_flight[a] && dev_off[a] >= 0)) {
        SwapDir d = state[a] == InH2D ? SwapDir::HostToDevice : SwapDir::DeviceToHost;
        auto& dq = q[d == SwapDir::HostToDevice ? 0 : 1];
        if (dq.empty()) break;
        wait_one(d);
    }
}

void Executor::complete(const kernels::SwapResult& r, int32_t a) {
    const bool h2d = r.dir == SwapDir::HostToDevice;
    if (r.verified) ++measured.checksums;   // round_trip: compared at the swap-in, below
    if (!r.ok) {
        ++measured.mismatches;
        fail(std::string(h2d ? "swap-in" : "swap-out") + " of allocation " + std::to_string(trace_data.allocations.id[a]) +
             ": checksum mismatch (the copy was damaged or incomplete)");
    }
    if (r.late_s > 0) {
        ++measured.late_transfers;
        measured.late_ns += static_cast<int64_t>(r.late_s * 1e9 / options.time_scale);
    }
    if (!fast_) {   // the window's transfers: their times and the link they achieved
        double dur = r.end_s - r.start_s;
        busy_s[h2d ? 0 : 1] += dur;
        busy_bytes[h2d ? 0 : 1] += static_cast<int64_t>(r.bytes);
        auto to_ns = [&](double seconds) {
            return trace_ns(eng_epoch + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
        };
        measured.events.push_back({h2d ? trace::EventKind::SwapIn : trace::EventKind::SwapOut, to_ns(r.start_s), to_ns(r.end_s),
                                   trace_data.allocations.id[a], 0, static_cast<int64_t>(r.bytes)});
    }
    if (!h2d) {
        sum[a] = static_cast<int64_t>(r.round_trip ? r.source_sum : r.dest_sum);   // what must come back
        if (state[a] == Freed || freed_in_flight[a]) {
            release_device(a);
            release_host(a);
            state[a] = Freed;
        } else if (cancelled[a]) {   // a kernel needed it again: it never left
            cancelled[a] = 0;
            release_host(a);
            state[a] = Gpu;
        } else {
            // The copy is done; the block stays placed until the plan's Release action, at the
            // point where the simulator released it, so the caching model sees the simulator's
            // sequence of calls (releasing at real completion diverged from it and ran out).
            host_valid[a] = 1;
            state[a] = Host;
        }
    } else {
        ++measured.checksums;   // end to end: what came back is what went out
        const bool differs = r.round_trip ? static_cast<int64_t>(r.dest_sum) != sum[a]
                                          : r.verified && (static_cast<int64_t>(r.source_sum) != sum[a] ||
                                                           static_cast<int64_t>(r.dest_sum) != sum[a]);
        if (differs) {
            ++measured.mismatches;
            fail("allocation " + std::to_string(trace_data.allocations.id[a]) +
                 " came back different from what was swapped out (stale or lost data)");
        }
        if (state[a] == Freed || freed_in_flight[a]) {
            release_device(a);
            release_host(a);
            state[a] = Freed;
        } else {
            state[a] = Gpu;
        }
    }
    freed_in_flight[a] = 0;
}

detail::Job Executor::kernel_job(int32_t k) {
    const auto& K = trace_data.kernels;
    const auto& A = trace_data.allocations;
    detail::Job j;
    j.slot = k;
    // Before the window a kernel only writes its outputs' patterns (what a swap carries).
    j.seconds = fast_ ? 0 : static_cast<double>(K.t_end[k] - K.t_start[k]) * 1e-9 * options.time_scale;
    struct Op_ { int32_t a; bool r, w; };
    std::vector<Op_> ops;
    for (int64_t x = K.access_begin[k]; x < K.access_begin[k + 1]; ++x) {
        int32_t a = trace_data.accesses.allocation[x];
        if (A.device[a] != plan.device || dev_off[a] < 0) continue;
        auto m = trace_data.accesses.mode[x];
        ops.push_back({a, m != trace::AccessMode::Write, m != trace::AccessMode::Read});
    }
    for (const auto& o : ops) {
        detail::Range rg{dev(o.a), static_cast<size_t>(A.bytes[o.a])};
        if (o.r) j.reads.push_back(rg);
        if (o.w) {
            j.writes.push_back(rg);
            j.seeds.push_back(static_cast<uint64_t>(A.id[o.a]) * 1000003u + static_cast<uint64_t>(++version[o.a]));
        }
    }
    if (options.real_sinkhorn && !fast_) {   // the real kernel instead of a timed stand-in, when recognised
        std::vector<detail::KernelOperand> kops;
        for (const auto& o : ops) kops.push_back({dev(o.a), A.bytes[o.a], o.r, o.w});
        detail::recognise_sinkhorn(trace_data.str(K.name[k]), std::move(kops), j.sk);
        if (j.sk.on) ++measured.sinkhorn_kernels;
    }
    return j;
}

void Executor::kernel_start(const Action& x, size_t i) {
    const int32_t k = x.kernel;
    const auto& K = trace_data.kernels;
    auto t_ready = Clock::now();
    bool waited = false;
    for (int64_t j = K.access_begin[k]; j < K.access_begin[k + 1]; ++j) {
        int32_t a = trace_data.accesses.allocation[j];
        if (trace_data.allocations.device[a] != plan.device) continue;
        bool writes = trace_data.accesses.mode[j] != trace::AccessMode::Read;
        if (state[a] == Host && dev_off[a] >= 0) state[a] = Gpu;   // never left: the eviction is cancelled
        if (state[a] == Host) {   // released already: bring it back (not in the plan)
            ++measured.unplanned_swap_ins;
            if (!place(a, i)) return;
            submit(a, SwapDir::HostToDevice);
        }
        if (state[a] == InH2D) { wait_for(a); waited = true; }
        if (state[a] == InD2H) {
            cancelled[a] = 1;   // the simulator cancels: the data never left the GPU
            if (writes) { wait_for(a); waited = true; }   // but a copy may not read what a kernel writes
        }
        if (writes && host_valid[a] && state[a] == Gpu) release_host(a);   // the host copy is stale now
    }
    if (waited && !fast_) {
        auto w = Clock::now() - t_ready;
        if (w > Clock::duration(0)) {
            ++measured.stalls;
            measured.stall_ns += static_cast<int64_t>(std::chrono::duration<double, std::nano>(w).count() / options.time_scale);
            measured.events.push_back({trace::EventKind::Stall, trace_ns(t_ready), trace_ns(Clock::now()), 0, K.id[k], 0});
        }
    }
    note_lag(x.recorded);
    detail::Job job = kernel_job(k);
    before_window_[static_cast<size_t>(k)] = fast_ ? 1 : 0;
    const auto worker = static_cast<size_t>(worker_of_kernel(k));
    job_of[static_cast<size_t>(k)] = static_cast<int64_t>(workers[worker]->push(std::move(job)));
    jobs_pushed_[worker] = static_cast<uint64_t>(job_of[static_cast<size_t>(k)]) + 1;
}

void Executor::kernel_end(const Action& x) {
    int64_t n = job_of[static_cast<size_t>(x.kernel)];
    if (n < 0) return;
    workers[static_cast<size_t>(worker_of_kernel(x.kernel))]->wait(static_cast<uint64_t>(n));
    note_lag(x.recorded);
}

// Reruns the producer of a dropped allocation on the stream of the kernel that needs it, so
// that kernel starts after it.
void Executor::recompute(const Action& x, size_t i) {
    const int32_t a = x.alloc;
    if (!place(a, i)) return;
    state[a] = Gpu;
    int32_t needer = -1;
    for (size_t j = i + 1; j < plan.actions.size(); ++j)
        if (plan.actions[j].op == Op::KernelStart) { needer = plan.actions[j].kernel; break; }
    detail::Job job;
    job.slot = static_cast<int32_t>(trace_data.kernels.size()) + static_cast<int32_t>(recomputes++);
    int32_t w = x.kernel;
    job.seconds = w >= 0 && !fast_ ? static_cast<double>(trace_data.kernels.t_end[w] - trace_data.kernels.t_start[w]) * 1e-9 *
                               options.time_scale : 0;
    job.writes.push_back({dev(a), static_cast<size_t>(trace_data.allocations.bytes[a])});
    job.seeds.push_back(static_cast<uint64_t>(trace_data.allocations.id[a]) * 1000003u + static_cast<uint64_t>(++version[a]));
    const auto on = static_cast<size_t>(needer >= 0 ? worker_of_kernel(needer) : 0);
    jobs_pushed_[on] = workers[on]->push(std::move(job)) + 1;
    ++measured.recomputes;
}

Measured Executor::run() {
    auto wall0 = Clock::now();
    // Timed actions sleep until just before their time: wake-ups must not be batched late.
    struct Slack {
        long previous = kernels::precise_timer_slack();
        ~Slack() { kernels::restore_timer_slack(previous); }
    } slack;
    setup();
    t0 = Clock::now();
    try {
        for (size_t i = 0; i < plan.actions.size() && !stopped; ++i) {
            if (options.cancel && options.cancel(i)) throw Cancelled();
            if (options.progress && (i & 255) == 0) options.progress(i, plan.actions.size());
            if (fast_ && i == plan.window_begin) begin_window();
            const Action& x = plan.actions[i];
            poll();
            if (timed(x.op) && !fast_) {
                auto when = target(x.recorded);
                auto now = Clock::now();
                if (when - now > std::chrono::microseconds(200)) std::this_thread::sleep_until(when - std::chrono::microseconds(150));
                while (Clock::now() < when) {}
            }
            execute(x, i);
        }
        drain();
    } catch (...) {
        for (auto& w : workers) w->stop();
        eng->drain();
        throw;
    }
    finish();
    measured.seconds = std::chrono::duration<double>(Clock::now() - wall0).count();
    measured.map_seconds = 1e-9 * static_cast<double>(paused_ns.load());
    return measured;
}

// The arenas (device: exactly the run's capacity; host: what the simulator held at once), the
// swap engine and one worker per recorded stream.
void Executor::setup() {
    const auto& A = trace_data.allocations;
    const size_t na = A.size(), nk = trace_data.kernels.size();
    device = options.backend == Backend::Cuda ? kernels::Device::Cuda : kernels::Device::Cpu;
    if (device == kernels::Device::Cuda) kernels::require_device(kernels::Device::Cuda);
    if (!(options.time_scale > 0)) throw Error("time scale must be positive");

    // The arena: exactly the run's capacity; an unlimited run gets its peak plus room for
    // placement (its high water mark is reported).
    const int64_t cap = replay_capacity(plan.capacity, plan.predicted_peak, plan.allocator);
    measured.capacity = cap;
    // Device memory: a pool of the capacity in 2 MiB pages, segments mapped into a large
    // virtual range (pages.hpp); the swap engine copies to and from that range.
    const int64_t pages = Arena::pool_pages(cap), va = Arena::default_va(cap);
    // A pool whose pages alias others serves only a replay that reads nothing back (no swaps).
    if (options.mapper && options.mapper->pool_pages() >= pages && options.mapper->va_bytes() >= va &&
        options.mapper->mapped_pages() == 0 && (!has_swaps(plan) || options.mapper->distinct_pages() >= pages)) {
        pm = options.mapper;
    } else {
        vm = device == kernels::Device::Cuda ? make_cuda_mapper(pages, va) : make_host_mapper(pages, va);
        pm = vm.get();
    }
    // The caching model with the simulator's settings: the trace's recorded ones under the
    // run's --allocator-conf (sim::allocator_settings_for, as the engine does).
    arena = std::make_unique<Arena>(plan.allocator, cap, pm,
                                    plan.allocator == "caching"
                                        ? sim::allocator_settings_for(trace_data, plan.allocator_conf)
                                        : sim::AllocatorSettings{});
    arena->give_pools_back(plan.pool_given_back_at);
    // Host arena: what the simulator held on the host at once, with room for placement (it
    // is a first-fit free list, so it fragments), never more than all the bytes swapped out.
    const int64_t host_need = host_arena_bytes(trace_data, plan);
    host = std::make_unique<FreeList>(host_need, 16);
    measured.host_arena_bytes = host->size();

    // A window: the actions before it run unpaced (their copies as fast as the host goes), so
    // the host arena must outlive that engine (begin_window makes the paced one).
    fast_ = plan.window_begin > 0;
    origin_ = fast_ ? plan.window_t : plan.t_begin;
    if (fast_ && device == kernels::Device::Cpu &&
        !(options.host_memory && options.host_memory_bytes >= static_cast<size_t>(host->size())))
        own_host_ = std::make_unique_for_overwrite<unsigned char[]>(static_cast<size_t>(host->size()));
    eng = make_engine(!fast_);
    eng_epoch = Clock::now();
    if (options.fault != kernels::SwapEngine::Fault::None) eng->inject_fault(options.fault_dir, options.fault);

    size_t nrec = 0;   // sized once: workers write into it while the control thread runs
    for (const Action& x : plan.actions) nrec += x.op == Op::Recompute;
    times.resize(nk + nrec);
    job_of.assign(nk, -1);
    before_window_.assign(nk, 0);
    state.assign(na, NotYet);
    freed_in_flight.assign(na, 0);
    cancelled.assign(na, 0);
    host_valid.assign(na, 0);
    dev_off.assign(na, -1);
    host_off.assign(na, -1);
    sum.assign(na, 0);
    version.assign(na, 0);
    xfer.assign(na, 0);
    for (int32_t s = 0; s < std::max(plan.streams, 1); ++s) {
        try {
            workers.push_back(std::make_unique<detail::Worker>(device, options.sinkhorn_threads, &times, &paused_ns));
        } catch (const std::system_error& e) {   // a limit on threads (ulimit -u, a container's): not a bug
            throw Error("cannot start the replay's thread for stream " + std::to_string(s + 1) + " of " +
                        std::to_string(plan.streams) + ": " + e.code().message() +
                        " (a limit on this user's processes and threads: ulimit -u)");
        }
    }
    jobs_pushed_.assign(workers.size(), 0);
}

// The swap engine on the pool's range and the host arena; paced (host backend) to the emulated link.
std::unique_ptr<kernels::SwapEngine> Executor::make_engine(bool paced) {
    kernels::SwapConfig sc;
    sc.device_bytes = static_cast<size_t>(pm->va_bytes());
    sc.device_memory = pm->base();
    sc.host_bytes = static_cast<size_t>(host->size());
    if (own_host_) sc.host_memory = own_host_.get();
    else if (options.host_memory && options.host_memory_bytes >= sc.host_bytes)
        sc.host_memory = options.host_memory;   // CUDA: pinned by the caller, once for every replay
    sc.chunk_bytes = options.chunk_bytes;
    sc.verify = true;
    // The GPU hashes both ends of the round trip itself; the host's hash of its end held each
    // swap-in up for as long as the copy (kernels/swap.hpp).
    sc.verify_on_device_only = device == kernels::Device::Cuda;
    sc.threads_per_direction = options.copy_threads;
    if (device == kernels::Device::Cpu) {
        sc.paused_ns = &paused_ns;
        if (paced) {
            sc.pace_h2d_Bps = options.pace_h2d_Bps;
            sc.pace_d2h_Bps = options.pace_d2h_Bps;
            sc.pace_duplex = options.pace_duplex;
            sc.pace_h2d_latency_s = options.pace_h2d_latency_s;
            sc.pace_d2h_latency_s = options.pace_d2h_latency_s;
        }
    }
    return kernels::make_swap_engine(device, sc);
}

// The window begins: every kernel and transfer before it finishes (as the prediction had them
// finished: validate checks that it did), the host's copies are paced from here on, and the
// clock starts at the window's recorded start with no lag. Peak and traffic keep counting.
void Executor::begin_window() {
    for (size_t w = 0; w < workers.size(); ++w)
        if (jobs_pushed_[w] > 0) workers[w]->wait(jobs_pushed_[w] - 1);
    while (!q[0].empty()) wait_one(SwapDir::HostToDevice);
    while (!q[1].empty()) wait_one(SwapDir::DeviceToHost);
    const bool paced = options.pace_h2d_Bps > 0 || options.pace_d2h_Bps > 0;
    if (device == kernels::Device::Cpu && paced) {
        eng->drain();
        eng = make_engine(true);
        eng_epoch = Clock::now();
    }
    fast_ = false;
    t0 = Clock::now();
    lag = Clock::duration(0);
    sample();
}

// One action of the plan, at its time (timed actions) or as soon as it comes.
void Executor::execute(const Action& x, size_t i) {
    const int32_t a = x.alloc;
    switch (x.op) {
        case Op::Alloc:
            arena->pools_due(x.recorded);   // private pools the recording gave back before it (the simulator's rule)
            if (place(a, i)) {
                state[a] = Gpu;
                fill_pattern(a);
            }
            note_lag(x.recorded);
            break;
        case Op::Free:
            arena->pools_due(x.recorded);
            // The simulator frees the block here even with a copy of it in flight; the
            // range is reusable only once the copy lands, so wait for it (measured) and
            // give the allocator model the free at the simulator's point.
            if (state[a] == InH2D || state[a] == InD2H) {
                freed_in_flight[a] = 1;
                measured_wait(a, -1);
            }
            if (state[a] != Freed) {
                release_device(a);
                release_host(a);
                state[a] = Freed;
            }
            note_lag(x.recorded);
            break;
        case Op::KernelStart: kernel_start(x, i); break;
        case Op::KernelEnd: kernel_end(x); break;
        case Op::SwapOut:
            if (state[a] == InD2H || state[a] == InH2D) wait_for(a);   // a cancelled swap-out still copying
            if (state[a] == Gpu) submit(a, SwapDir::DeviceToHost);
            break;
        case Op::SwapIn:
            if (state[a] == InD2H) wait_for(a);   // the host copy must have landed
            if (state[a] != Host) break;
            if (dev_off[a] >= 0) { state[a] = Gpu; break; }   // still there: nothing to copy
            if (place(a, i)) submit(a, SwapDir::HostToDevice);
            break;
        case Op::EvictClean:
            if (state[a] == InH2D || state[a] == InD2H) wait_for(a);
            if (state[a] == Gpu) {
                release_device(a);
                state[a] = Host;
                ++measured.evict_clean;
            }
            break;
        case Op::Drop:
            if (state[a] == InH2D || state[a] == InD2H) wait_for(a);
            if (state[a] == Gpu) {
                release_device(a);
                release_host(a);
                state[a] = Dropped;
                ++measured.drops;
            }
            break;
        case Op::Recompute:
            if (state[a] == Dropped) recompute(x, i);
            break;
        case Op::FailedAlloc:
            // The model is in the state the simulator's was, so the call fails the same
            // way and gives back the same cached segments. Should it fit after all
            // (the runs have diverged), the block goes straight back.
            if (dev_off[a] < 0 && plan.allocator == "caching") {
                auto m0 = Clock::now();
                if (arena->allocate(a, trace_data.allocations.bytes[a], trace_data.allocations.stream[a], plan.pool(a)) >= 0) {
                    arena->free(a);
                    ++measured.diverged_allocations;
                }
                pause_clock(m0);
            }
            break;
        case Op::Release:   // where the simulator's copy completed: wait for the real one
            if (state[a] == InD2H) measured_wait(a, -1);
            if (state[a] == Host) release_device(a);
            break;
    }
}

// Every kernel and every transfer in flight (their checksums count).
void Executor::drain() {
    for (auto& w : workers) w->stop();
    for (auto& r : eng->drain()) {
        int32_t a = -1;
        for (int d = 0; d < 2; ++d)
            for (auto it = q[d].begin(); it != q[d].end(); ++it)
                if (it->id == r.id) { a = it->alloc; q[d].erase(it); break; }
        if (a >= 0) complete(r, a);
    }
}

// Makespan, lag, kernel times, overruns, link rates and the memory timeline.
void Executor::finish() {
    const size_t nk = trace_data.kernels.size();
    auto t_last = t0 + lag;
    // A kernel's times on the clock as it stood then: pauses after a time do not move it.
    const int64_t paused_end = paused_ns.load();
    auto at = [&](Clock::time_point tp, int64_t paused_then) {
        return trace_ns(tp + std::chrono::nanoseconds(paused_end - paused_then));
    };
    for (size_t k = 0; k < nk; ++k)
        if (job_of[k] >= 0 && !before_window_[k]) {
            t_last = std::max(t_last, times[k].end);
            measured.kernel_times.push_back({trace_data.kernels.id[k], at(times[k].start, times[k].paused_start),
                                             at(times[k].end, times[k].paused_end)});
            double took = std::chrono::duration<double, std::nano>(times[k].end - times[k].start).count() / options.time_scale;
            if (times[k].overrun) {
                ++measured.overruns;
                measured.overrun_ns += std::max<int64_t>(
                    static_cast<int64_t>(took) - (trace_data.kernels.t_end[k] - trace_data.kernels.t_start[k]), 0);
            }
        }
    // The run ends at the end of the recorded span, shifted by the lag, or at the last kernel.
    auto span_end = target(plan.t_end);
    if (!measured.oom) t_last = std::max(t_last, span_end);
    measured.makespan_ns = trace_ns(t_last) - origin_;
    measured.lag_ns = static_cast<int64_t>(std::chrono::duration<double, std::nano>(lag).count() / options.time_scale);
    measured.high_water = arena->high_water();
    measured.host_arena_high_water = host->high_water();
    measured.peak = std::max(measured.peak, arena->peak());
    if (measured.oom && !plan.oom) fail("OOM in replay at " + measured.oom_where + " where the simulator had none");
    // The caching arena makes the model's own segment calls in 2 MiB pages: its pages in use peak
    // at the model's reserved peak, to the byte. A replay whose arena peaked elsewhere did not
    // place what the model placed (a segment mapped twice, a free lost): failed, where the
    // figure was printed beside the prediction and never judged.
    if (plan.allocator == "caching" && !measured.oom && !plan.oom && !stopped && measured.peak != plan.predicted_peak)
        fail("the arena's pages in use peaked at " + format_bytes(measured.peak) + " (" + std::to_string(measured.peak) +
             " bytes), the caching model's reserved peak is " + format_bytes(plan.predicted_peak) + " (" +
             std::to_string(plan.predicted_peak) + " bytes)");
    for (int d = 0; d < 2; ++d)
        if (busy_s[d] > 0) (d ? measured.link_d2h_Bps : measured.link_h2d_Bps) = static_cast<double>(busy_bytes[d]) / busy_s[d];
    // Memory timeline: at most 4096 buckets of the measured span, each keeping its peak.
    if (!mem.empty()) {
        const int64_t lo = mem.front().first, hi = std::max(mem.back().first, lo + 1);
        const int64_t nb = 4096;
        std::vector<trace::RunMemorySample> b(static_cast<size_t>(nb), {0, -1, 0});
        for (auto [tn, bytes] : mem) {
            auto& s = b[static_cast<size_t>(std::clamp<int64_t>((tn - lo) * nb / (hi - lo + 1), 0, nb - 1))];
            if (bytes > s.device_bytes) s = {tn, bytes, 0};
        }
        for (auto& s : b)
            if (s.device_bytes >= 0) measured.memory.push_back(s);
    }
    std::sort(measured.events.begin(), measured.events.end(), [](const auto& x, const auto& y) { return x.t_start < y.t_start; });
}

}  // namespace

namespace {
// Room beyond what the model predicts, for a pool or host arena of `bytes`: an eighth, between
// 4 MiB and 64 MiB. A fixed 64 MiB made a tiny trace's validation several times its memory (a
// 40 MiB peak took 214 MB of RSS, half of it these margins).
int64_t margin(int64_t bytes) { return std::clamp<int64_t>(bytes / 8, int64_t{4} << 20, int64_t{64} << 20); }
}   // namespace

int64_t replay_capacity(int64_t capacity, int64_t predicted_peak, const std::string& allocator) {
    if (capacity < sim::kUnlimited) return capacity;
    // The caching arena takes exactly the model's segments, so the predicted (reserved) peak
    // fits; the ideal one places blocks itself and fragments.
    return predicted_peak + predicted_peak / (allocator == "caching" ? 64 : 8) + margin(predicted_peak);
}

int64_t host_arena_bytes(const trace::TraceData& trace_data, const Plan& plan) {
    int64_t swapped_out = 0;
    for (const Action& x : plan.actions)
        if (x.op == Op::SwapOut) swapped_out += trace_data.allocations.bytes[x.alloc];
    const int64_t need = std::min<int64_t>(swapped_out, plan.predicted_host_peak + plan.predicted_host_peak / 2);
    return need + margin(need);
}

int64_t host_arena_populated_bytes(const trace::TraceData& trace_data, const Plan& plan) {
    return std::min<int64_t>(host_arena_bytes(trace_data, plan),
                             plan.predicted_host_peak + margin(plan.predicted_host_peak));
}

Measured replay(const trace::TraceData& trace, const Plan& plan, const Options& options) {
    Executor e(trace, plan, options);
    return e.run();
}

}  // namespace mhc::replay
