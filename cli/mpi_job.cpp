// MPI transport for sweeps and coupled runs (mpi_job.hpp). Compiled with or without MPI:
// MHC_HAVE_MPI is set by CMake when MHC_WITH_MPI found OpenMPI.
#include "mpi_job.hpp"

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "mhc/common/error.hpp"

#ifdef MHC_HAVE_MPI
#include <mpi.h>
#endif

namespace mhc::cli::mpi {

namespace {
int g_size = 1, g_rank = 0;

// ---- packing ------------------------------------------------------------------------------

struct Out {
    std::string b;
    template <class T>
    void raw(const T& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        b.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    void i(int64_t v) { raw(v); }
    void d(double v) { raw(v); }
    void s(const std::string& v) {
        i(static_cast<int64_t>(v.size()));
        b.append(v);
    }
};

struct In {
    const std::string& b;
    size_t p = 0;
    template <class T>
    T raw() {
        if (p + sizeof(T) > b.size()) throw std::runtime_error("mpi: truncated result message");
        T v;
        std::memcpy(&v, b.data() + p, sizeof v);
        p += sizeof v;
        return v;
    }
    int64_t i() { return raw<int64_t>(); }
    double d() { return raw<double>(); }
    std::string s() {
        int64_t n = i();
        if (n < 0 || p + size_t(n) > b.size()) throw std::runtime_error("mpi: truncated result message");
        std::string v = b.substr(p, size_t(n));
        p += size_t(n);
        return v;
    }
};

void put(Out& o, const sim::Direction& d) { o.d(d.bandwidth_Bps); o.d(d.latency_s); }
sim::Direction get_dir(In& in) { sim::Direction d; d.bandwidth_Bps = in.d(); d.latency_s = in.d(); return d; }

void put(Out& o, const sim::Config& c) {
    o.i(c.capacity.bytes); o.d(c.capacity.fraction);
    o.d(c.cpu_buffer_ratio);
    o.s(c.eviction); o.s(c.prefetch); o.s(c.allocator);
    o.i(c.early_swap_out);
    o.s(c.link.name); put(o, c.link.h2d); put(o, c.link.d2h);
    o.i(c.link.copy_engines); o.d(c.link.duplex_factor); o.d(c.link.nccl_share); o.d(c.link.memcpy_share);
    o.s(c.link.source); o.d(c.link.measured_load_average);
    o.i(static_cast<int64_t>(c.link.by_chunk.size()));
    for (const auto& k : c.link.by_chunk) {
        o.i(k.bytes); o.d(k.h2d_Bps); o.d(k.d2h_Bps); o.d(k.both_h2d_Bps); o.d(k.both_d2h_Bps);
    }
    o.i(static_cast<int64_t>(c.link.notes.size()));
    for (const auto& n : c.link.notes) o.s(n);
    o.s(c.allocator_conf);
    o.d(c.max_swap_ops_per_sec);
    o.i(c.device);
    o.i(c.check_invariants); o.i(c.record_events);
    o.i(c.memory_samples);
    // cancel: a pointer into the sender's process, never sent (the result's is null).
}

sim::Config get_config(In& in) {
    sim::Config c;
    c.capacity.bytes = in.i(); c.capacity.fraction = in.d();
    c.cpu_buffer_ratio = in.d();
    c.eviction = in.s(); c.prefetch = in.s(); c.allocator = in.s();
    c.early_swap_out = in.i() != 0;
    c.link.name = in.s(); c.link.h2d = get_dir(in); c.link.d2h = get_dir(in);
    c.link.copy_engines = static_cast<int>(in.i()); c.link.duplex_factor = in.d(); c.link.nccl_share = in.d();
    c.link.memcpy_share = in.d();
    c.link.source = in.s(); c.link.measured_load_average = in.d();
    c.link.by_chunk.resize(size_t(in.i()));
    for (auto& k : c.link.by_chunk) {
        k.bytes = in.i(); k.h2d_Bps = in.d(); k.d2h_Bps = in.d(); k.both_h2d_Bps = in.d(); k.both_d2h_Bps = in.d();
    }
    c.link.notes.resize(size_t(in.i()));
    for (auto& n : c.link.notes) n = in.s();
    c.allocator_conf = in.s();
    c.max_swap_ops_per_sec = in.d();
    c.device = static_cast<int32_t>(in.i());
    c.check_invariants = in.i() != 0; c.record_events = in.i() != 0;
    c.memory_samples = static_cast<int>(in.i());
    c.cancel = nullptr;
    return c;
}

void put(Out& o, const sim::EventOrigin& e) { o.i(int64_t(e.what)); o.i(e.after_launch); o.i(e.index); }
sim::EventOrigin get_origin(In& in) {
    sim::EventOrigin e;
    e.what = static_cast<sim::Recorded>(in.i());
    e.after_launch = in.i() != 0;
    e.index = static_cast<int32_t>(in.i());
    return e;
}

// The sizes the packing below was written for (x86-64, libstdc++). A new field changes them:
// pack it in put/get here, then update the figure.
#if defined(__x86_64__) && defined(__GLIBCXX__)
static_assert(sizeof(sim::Result) == 984, "sim::Result changed: pack the new field in cli/mpi_job.cpp");
static_assert(sizeof(sim::Oom) == 144, "sim::Oom changed: pack the new field in cli/mpi_job.cpp");
static_assert(sizeof(sim::Config) == 376, "sim::Config changed: pack the new field in cli/mpi_job.cpp");
static_assert(sizeof(sim::LinkModel) == 184, "sim::LinkModel changed: pack the new field in cli/mpi_job.cpp");
static_assert(sizeof(sim::LinkModel::Chunk) == 40, "LinkModel::Chunk changed: pack the new field in cli/mpi_job.cpp");
static_assert(sizeof(sim::PlanLog::Release) == 20, "PlanLog::Release changed: pack it in cli/mpi_job.cpp");
static_assert(sizeof(trace::RunEvent) == 48, "trace::RunEvent changed: pack it in cli/mpi_job.cpp");
#endif

}  // namespace

std::string pack(const sim::Result& r) {
    Out o;
    put(o, r.config);
    o.i(r.device); o.i(r.capacity); o.i(r.host_capacity); o.i(r.baseline_peak); o.i(r.simulated_peak);
    o.d(r.peak_reduction); o.i(r.baseline_makespan); o.i(r.simulated_makespan); o.d(r.throughput_loss);
    o.i(r.stall_time); o.i(r.stall_count); o.i(r.swap_in_bytes); o.i(r.swap_in_count);
    o.i(r.swap_out_bytes); o.i(r.swap_out_count); o.i(r.evict_clean_count); o.i(r.prefetch_count);
    o.i(r.drop_count); o.i(r.recompute_count); o.i(r.recompute_time);
    o.i(r.recompute_depth_max); o.i(r.recompute_inputs_assumed); o.i(r.host_peak);
    const sim::Oom& m = r.oom;
    o.i(m.happened); o.s(m.where); o.s(m.why); o.i(m.time); o.i(m.recorded); o.i(m.allocation); o.i(m.kernel);
    o.i(m.bytes_needed); o.i(m.bytes_short); o.i(m.bytes_pinned); o.i(m.fragmentation); o.i(m.largest_free_block);
    o.d(r.forecast_error); o.d(r.forecast_peak_error); o.d(r.forecast_horizon_error);
    o.i(r.forecast_horizon_steps); o.i(r.forecast_evictions); o.i(r.early_evictions);
    o.i(r.coupled_wait_time); o.i(r.coupled_wait_count);
    o.i(r.kernels_reached); o.i(r.last_kernel);
    o.i(r.assumed_accesses);
    o.i(static_cast<int64_t>(r.warnings.size()));
    for (const auto& w : r.warnings) o.s(w);
    o.s(r.invariant_violation);
    o.i(r.rows); o.d(r.seconds);
    o.i(static_cast<int64_t>(r.events.size()));
    for (const auto& e : r.events) { o.i(int64_t(e.kind)); o.i(e.t_start); o.i(e.t_end); o.i(e.allocation); o.i(e.kernel); o.i(e.bytes); }
    o.i(static_cast<int64_t>(r.plan_log.origins.size()));
    for (const auto& e : r.plan_log.origins) put(o, e);
    o.i(static_cast<int64_t>(r.plan_log.releases.size()));
    for (const auto& e : r.plan_log.releases) { o.i(e.alloc); o.i(e.before); put(o, e.origin); o.i(e.failed_allocation); }
    o.i(static_cast<int64_t>(r.kernel_times.size()));
    for (const auto& k : r.kernel_times) { o.i(k.kernel); o.i(k.t_start); o.i(k.t_end); }
    o.i(static_cast<int64_t>(r.memory.size()));
    for (const auto& k : r.memory) { o.i(k.t); o.i(k.device_bytes); o.i(k.host_bytes); }
    return o.b;
}

sim::Result unpack(const std::string& bytes) {
    In in{bytes};
    sim::Result r;
    r.config = get_config(in);
    r.device = static_cast<int32_t>(in.i()); r.capacity = in.i(); r.host_capacity = in.i();
    r.baseline_peak = in.i(); r.simulated_peak = in.i();
    r.peak_reduction = in.d(); r.baseline_makespan = in.i(); r.simulated_makespan = in.i(); r.throughput_loss = in.d();
    r.stall_time = in.i(); r.stall_count = in.i(); r.swap_in_bytes = in.i(); r.swap_in_count = in.i();
    r.swap_out_bytes = in.i(); r.swap_out_count = in.i(); r.evict_clean_count = in.i(); r.prefetch_count = in.i();
    r.drop_count = in.i(); r.recompute_count = in.i(); r.recompute_time = in.i();
    r.recompute_depth_max = in.i(); r.recompute_inputs_assumed = in.i(); r.host_peak = in.i();
    sim::Oom& m = r.oom;
    m.happened = in.i() != 0; m.where = in.s(); m.why = in.s(); m.time = in.i(); m.recorded = in.i();
    m.allocation = in.i(); m.kernel = in.i();
    m.bytes_needed = in.i(); m.bytes_short = in.i(); m.bytes_pinned = in.i(); m.fragmentation = in.i() != 0;
    m.largest_free_block = in.i();
    r.forecast_error = in.d(); r.forecast_peak_error = in.d(); r.forecast_horizon_error = in.d();
    r.forecast_horizon_steps = in.i(); r.forecast_evictions = in.i(); r.early_evictions = in.i();
    r.coupled_wait_time = in.i(); r.coupled_wait_count = in.i();
    r.kernels_reached = in.i(); r.last_kernel = in.i();
    r.assumed_accesses = in.i() != 0;
    r.warnings.resize(size_t(in.i()));
    for (auto& w : r.warnings) w = in.s();
    r.invariant_violation = in.s();
    r.rows = in.i(); r.seconds = in.d();
    r.events.resize(size_t(in.i()));
    for (auto& e : r.events) {
        e.kind = static_cast<trace::EventKind>(in.i()); e.t_start = in.i(); e.t_end = in.i();
        e.allocation = in.i(); e.kernel = in.i(); e.bytes = in.i();
    }
    r.plan_log.origins.resize(size_t(in.i()));
    for (auto& e : r.plan_log.origins) e = get_origin(in);
    r.plan_log.releases.resize(size_t(in.i()));
    for (auto& e : r.plan_log.releases) {
        e.alloc = static_cast<int32_t>(in.i()); e.before = static_cast<int32_t>(in.i());
        e.origin = get_origin(in); e.failed_allocation = in.i() != 0;
    }
    r.kernel_times.resize(size_t(in.i()));
    for (auto& k : r.kernel_times) { k.kernel = in.i(); k.t_start = in.i(); k.t_end = in.i(); }
    r.memory.resize(size_t(in.i()));
    for (auto& k : r.memory) { k.t = in.i(); k.device_bytes = in.i(); k.host_bytes = in.i(); }
    if (in.p != bytes.size()) throw std::runtime_error("mpi: result message longer than its fields");
    return r;
}

#ifdef MHC_HAVE_MPI

namespace {
constexpr int kTagData = 1;
bool g_init = false;

// Waiting politely: OpenMPI's blocking calls poll at 100% of a core, which on a machine with
// fewer free cores than processes takes the CPU from the process that is still computing.
// These test, then sleep 100 us.
void wait(MPI_Request& req) {
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

void send(const void* data, int count, MPI_Datatype type, int to, int tag) {
    MPI_Request req;
    MPI_Isend(data, count, type, to, tag, MPI_COMM_WORLD, &req);
    wait(req);
}

void recv(void* data, int count, MPI_Datatype type, int from, int tag) {
    MPI_Request req;
    MPI_Irecv(data, count, type, from, tag, MPI_COMM_WORLD, &req);
    wait(req);
}

void send_bytes(const std::string& b, int to, int tag) {
    int64_t n = static_cast<int64_t>(b.size());
    send(&n, 1, MPI_INT64_T, to, tag);
    // In pieces below 2^31 bytes (MPI counts are int).
    for (int64_t off = 0; off < n;) {
        int part = static_cast<int>(std::min<int64_t>(n - off, int64_t{1} << 30));
        send(b.data() + off, part, MPI_BYTE, to, tag);
        off += part;
    }
}

std::string recv_bytes(int from, int tag) {
    int64_t n = 0;
    recv(&n, 1, MPI_INT64_T, from, tag);
    std::string b(size_t(n), '\0');
    for (int64_t off = 0; off < n;) {
        int part = static_cast<int>(std::min<int64_t>(n - off, int64_t{1} << 30));
        recv(b.data() + off, part, MPI_BYTE, from, tag);
        off += part;
    }
    return b;
}
}  // namespace

void init(int* argc, char*** argv) {
    // Only under a launcher: a plain `mhc` never starts MPI (no daemon, no network probing).
    if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE") && !std::getenv("PMIX_RANK")) return;
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    g_init = true;
}

void finalize() {
    // Every process got here through agree() (main), so MPI_Finalize's own synchronisation
    // is short.
    if (g_init) MPI_Finalize();
    g_init = false;
}

Outcome agree(const Outcome& mine) {
    if (!g_init || g_size == 1) return mine;
    // The lowest-numbered process that failed, then its code and message from it.
    int64_t candidate = mine.code != 0 ? g_rank : g_size, first = g_size;
    MPI_Request req;
    MPI_Iallreduce(&candidate, &first, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD, &req);
    wait(req);
    if (first == g_size) return {};
    const int from = static_cast<int>(first);
    const std::string text = mine.message.substr(0, 4096);
    int64_t head[2] = {mine.code, static_cast<int64_t>(text.size())};
    MPI_Ibcast(head, 2, MPI_INT64_T, from, MPI_COMM_WORLD, &req);
    wait(req);
    Outcome agreed{static_cast<int>(head[0]), g_rank == from ? text : std::string(size_t(head[1]), '\0')};
    if (head[1] > 0) {
        MPI_Ibcast(agreed.message.data(), static_cast<int>(head[1]), MPI_CHAR, from, MPI_COMM_WORLD, &req);
        wait(req);
    }
    return agreed;
}

namespace {
bool g_parallel = false;
}  // namespace

void enter_parallel() {
    if (!g_init || g_size == 1) return;
    Outcome o = agree({});
    if (o.code != 0) throw AgreedFailure{o};
    g_parallel = true;
}

void leave_parallel() { g_parallel = false; }
bool in_parallel() { return g_parallel; }

void abort_job(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);   // MPI_Abort does not return; in case it does
}

bool enabled() { return true; }

sim::CoupledResult simulate_coupled(const std::vector<sim::RankTrace>& ranks, const sim::JobPlan& plan,
                                    const sim::Config& c) {
    enter_parallel();
    auto t0 = std::chrono::steady_clock::now();
    const int P = g_size, me = g_rank;
    const int n = static_cast<int>(ranks.size());
    auto owner = [P](int r) { return r % P; };
    std::vector<int> local;
    for (int r = 0; r < n; ++r)
        if (owner(r) == me) local.push_back(r);
    // Which processes need each (rank, event)'s arrival: the owners of the ranks that wait for it.
    std::vector<std::vector<std::vector<int>>> readers(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) readers[size_t(r)].resize(plan.events[size_t(r)].size());
    for (int r = 0; r < n; ++r)
        for (const auto& ws : plan.waits[size_t(r)])
            for (const sim::CrossWait& w : ws) {
                auto& v = readers[size_t(w.rank)][size_t(w.event)];
                if (owner(r) != owner(w.rank) && std::find(v.begin(), v.end(), owner(r)) == v.end())
                    v.push_back(owner(r));
            }
    // Messages: {kind, rank, event, delay}; kind 0 arrival, 1 halted, 2 this process is done.
    // One tag, so that MPI's per-sender order keeps arrivals before their sender's "done".
    sim::Exchange x;
    x.publish = [&](int32_t r, int32_t g, int64_t d) {
        int64_t m[4] = {0, r, g, d};
        for (int p : readers[size_t(r)][size_t(g)]) send(m, 4, MPI_INT64_T, p, kTagData);
    };
    x.halted = [&](int32_t r) {
        int64_t m[4] = {1, r, 0, 0};
        for (int p = 0; p < P; ++p)
            if (p != me) send(m, 4, MPI_INT64_T, p, kTagData);
    };
    int done_from = 0;
    auto receive_one = [&](const std::function<void(int32_t, int32_t, int64_t)>& set_arrival,
                           const std::function<void(int32_t)>& set_halted) {
        int64_t m[4];
        recv(m, 4, MPI_INT64_T, MPI_ANY_SOURCE, kTagData);
        if (m[0] == 0) set_arrival(static_cast<int32_t>(m[1]), static_cast<int32_t>(m[2]), m[3]);
        else if (m[0] == 1) set_halted(static_cast<int32_t>(m[1]));
        else ++done_from;
    };
    x.remote = [&](const std::function<void(int32_t, int32_t, int64_t)>& set_arrival,
                   const std::function<void(int32_t)>& set_halted) {
        if (done_from == P - 1) return false;   // everyone else finished: nothing more can come
        receive_one(set_arrival, set_halted);
        return true;
    };
    sim::DriveStats stats;
    std::vector<sim::Result> results = sim::drive(plan, ranks, std::vector<sim::Config>(ranks.size(), c), local, x, &stats);
    const int64_t pauses = stats.pauses;
    // Done: tell the others, then drain what they still send until each said it is done, so
    // that no message is left unreceived.
    {
        int64_t m[4] = {2, 0, 0, 0};
        for (int p = 0; p < P; ++p)
            if (p != me) send(m, 4, MPI_INT64_T, p, kTagData);
        auto ignore_a = [](int32_t, int32_t, int64_t) {};
        auto note_h = [&](int32_t r) { stats.halted[size_t(r)] = 1; };   // for the report
        while (done_from < P - 1) receive_one(ignore_a, note_h);
    }
    // Gather every rank's result on rank 0.
    int64_t total_pauses = 0;
    {
        MPI_Request req;
        MPI_Ireduce(&pauses, &total_pauses, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD, &req);
        wait(req);
    }
    if (me != 0) {
        for (int r : local) send_bytes(pack(results[size_t(r)]), 0, kTagData + 1);
        leave_parallel();
        sim::CoupledResult partial;
        partial.ranks = std::move(results);
        return partial;
    }
    for (int r = 0; r < n; ++r)
        if (owner(r) != 0) results[size_t(r)] = unpack(recv_bytes(owner(r), kTagData + 1));
    leave_parallel();
    sim::CoupledResult out = sim::summarize(plan, ranks, std::move(results), stats.halted);
    out.pauses = total_pauses;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

namespace {
MPI_Win g_win = MPI_WIN_NULL;
int64_t* g_counter = nullptr;
std::vector<size_t> g_order, g_ran;   // claim order (bisections first); tasks run here
}  // namespace

void begin_claims(size_t grid, size_t combos) {
    enter_parallel();
    g_order.clear();
    g_ran.clear();
    for (size_t i = 0; i < combos; ++i) g_order.push_back(grid + i);
    for (size_t i = 0; i < grid; ++i) g_order.push_back(i);
    MPI_Win_allocate(g_rank == 0 ? sizeof(int64_t) : 0, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &g_counter, &g_win);
    if (g_rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, g_win);
        *g_counter = 0;
        MPI_Win_unlock(0, g_win);
    }
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    wait(req);
}

size_t claim() {
    const int64_t one = 1;
    int64_t k = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, g_win);
    MPI_Fetch_and_op(&one, &k, MPI_INT64_T, 0, 0, MPI_SUM, g_win);
    MPI_Win_unlock(0, g_win);
    if (k < 0 || size_t(k) >= g_order.size()) return SIZE_MAX;
    g_ran.push_back(g_order[size_t(k)]);
    return g_order[size_t(k)];
}

void end_claims() {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    wait(req);
    MPI_Win_free(&g_win);
}

void gather_sweep(sim::SweepResult& s) {
    const size_t grid = s.grid.size();
    if (g_rank != 0) {
        int64_t count = static_cast<int64_t>(g_ran.size());
        send(&count, 1, MPI_INT64_T, 0, kTagData + 2);
        for (size_t i : g_ran) {
            Out o;
            o.i(static_cast<int64_t>(i));
            if (i < grid) {
                o.s(pack(s.grid[i]));
            } else {
                const sim::BisectAnswer& a = s.answers[i - grid];
                o.s(a.policy); o.s(a.prefetch); o.s(a.link); o.i(a.found); o.d(a.fraction);
                o.s(pack(a.result));
            }
            send_bytes(o.b, 0, kTagData + 2);
        }
        leave_parallel();
        return;
    }
    for (int p = 1; p < g_size; ++p) {
        int64_t count = 0;
        recv(&count, 1, MPI_INT64_T, p, kTagData + 2);
        for (int64_t k = 0; k < count; ++k) {
            std::string b = recv_bytes(p, kTagData + 2);
            In in{b};
            size_t i = static_cast<size_t>(in.i());
            if (i < grid) {
                s.grid[i] = unpack(in.s());
            } else {
                sim::BisectAnswer& a = s.answers[i - grid];
                a.policy = in.s(); a.prefetch = in.s(); a.link = in.s(); a.found = in.i() != 0; a.fraction = in.d();
                a.result = unpack(in.s());
            }
        }
    }
    leave_parallel();
}

#else  // no MPI in this build: one process

void init(int*, char***) {}
void finalize() {}
bool enabled() { return false; }
Outcome agree(const Outcome& mine) { return mine; }
void enter_parallel() {}
void leave_parallel() {}
bool in_parallel() { return false; }
void abort_job(int code) { std::_Exit(code); }
sim::CoupledResult simulate_coupled(const std::vector<sim::RankTrace>& ranks, const sim::JobPlan& plan,
                                    const sim::Config& c) {
    return sim::simulate_coupled(ranks, plan, c);
}
void begin_claims(size_t, size_t) {}
size_t claim() { return SIZE_MAX; }
void end_claims() {}
void gather_sweep(sim::SweepResult&) {}

#endif

int size() { return g_size; }
int rank() { return g_rank; }

}  // namespace mhc::cli::mpi
