#include "mhc/replay/validate.hpp"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <unordered_map>
#include <sys/mman.h>
#include <sys/resource.h>
#include <cerrno>

#include <nlohmann/json.hpp>

#include "mhc/common/error.hpp"
#include "mhc/replay/arena.hpp"
#include "mhc/replay/pages.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/runs.hpp"

namespace mhc::replay {

sim::LinkModel scaled_link(const sim::LinkModel& link, double scale) {
    sim::LinkModel l = link;
    for (sim::Direction* d : {&l.h2d, &l.d2h}) {
        d->bandwidth_Bps *= scale;
        d->latency_s /= scale;
    }
    if (scale != 1.0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " x%g", scale);
        l.name += buf;
    }
    return l;
}

sim::LinkModel link_at_chunk(const sim::LinkModel& link, int64_t chunk) {
    const auto& rows = link.by_chunk;
    if (rows.empty() || chunk <= 0) return link;
    sim::LinkModel l = link;
    // Interpolate in log(chunk size) between the measured rows around `chunk`; beyond the
    // ends, the end row.
    auto at = [&](double sim::LinkModel::Chunk::*rate) {
        if (chunk <= rows.front().bytes) return rows.front().*rate;
        for (size_t i = 1; i < rows.size(); ++i)
            if (chunk <= rows[i].bytes) {
                const double x0 = std::log(static_cast<double>(rows[i - 1].bytes));
                const double x1 = std::log(static_cast<double>(rows[i].bytes));
                const double w = (std::log(static_cast<double>(chunk)) - x0) / (x1 - x0);
                return rows[i - 1].*rate + w * (rows[i].*rate - rows[i - 1].*rate);
            }
        return rows.back().*rate;
    };
    const double h = at(&sim::LinkModel::Chunk::h2d_Bps), d = at(&sim::LinkModel::Chunk::d2h_Bps);
    if (h > 0) l.h2d.bandwidth_Bps = h;
    if (d > 0) l.d2h.bandwidth_Bps = d;
    l.name += " @" + format_bytes(chunk) + " chunks";
    return l;
}

int64_t makespan_spread(std::vector<int64_t> v) {
    if (v.size() < 2) return 0;
    std::sort(v.begin(), v.end());
    const size_t drop = v.size() >= 5 ? 1 : 0;
    return v[v.size() - 1 - drop] - v[drop];
}

Divergence first_divergence(const trace::TraceData& t, const std::vector<trace::RunKernelTime>& predicted,
                            const std::vector<trace::RunKernelTime>& measured, int64_t threshold_ns) {
    Divergence d;
    d.threshold_ns = threshold_ns;
    std::unordered_map<int64_t, int64_t> measured_start;
    measured_start.reserve(measured.size());
    for (const trace::RunKernelTime& m : measured) measured_start[m.kernel] = m.t_start;
    std::vector<const trace::RunKernelTime*> by_start;
    by_start.reserve(predicted.size());
    for (const trace::RunKernelTime& p : predicted) by_start.push_back(&p);
    std::stable_sort(by_start.begin(), by_start.end(), [](auto* a, auto* b) { return a->t_start < b->t_start; });
    for (const trace::RunKernelTime* p : by_start) {
        auto m = measured_start.find(p->kernel);
        if (m == measured_start.end() || std::llabs(m->second - p->t_start) <= threshold_ns) continue;
        d.found = true;
        d.kernel = p->kernel;
        const int64_t k = t.kernel_at(p->kernel);
        if (k >= 0) d.name = t.str(t.kernels.name[static_cast<size_t>(k)]);
        d.predicted_ns = p->t_start;
        d.measured_ns = m->second;
        break;
    }
    return d;
}

double estimated_replay_seconds(const std::vector<sim::Result>& predictions, double time_scale, int repeat) {
    double seconds = 0;
    for (size_t i = 0; i < predictions.size(); ++i) {
        const int reps = i == 0 && repeat >= 2 ? 2 * repeat - 1 : std::max(repeat, 1);
        seconds += reps * 1e-9 * static_cast<double>(predictions[i].simulated_makespan) * time_scale;
    }
    return seconds;
}

bool Report::ok() const {
    auto good = [](const Row& r) { return r.measured.status != "failed" && r.measured.mismatches == 0; };
    if (!good(baseline)) return false;
    for (const Row& r : rows)
        if (!good(r)) return false;
    return true;
}

namespace {

trace::Run replay_run(const Row& row, const sim::Config& c, const Options& o, int64_t base_makespan) {
    const Measured& m = row.measured;
    const sim::Result& p = row.predicted;
    trace::Run run;
    run.kind = "replayed";
    run.name = row.name + "/" + to_string(o.backend);
    run.status = m.status;
    run.config = sim::to_map(c);
    run.config["backend"] = to_string(o.backend);
    run.config["time_scale"] = std::to_string(o.time_scale);
    if (!m.failure.empty()) run.config["failure"] = m.failure;
    if (m.oom) run.config["oom_where"] = m.oom_where;
    auto& x = run.metrics;
    x["capacity_bytes"] = static_cast<double>(m.capacity);
    x["measured_peak_bytes"] = static_cast<double>(m.peak);
    x["predicted_peak_bytes"] = static_cast<double>(p.simulated_peak);
    x["arena_high_water_bytes"] = static_cast<double>(m.high_water);
    x["page_map_seconds"] = m.map_seconds;
    x["peak_error"] = row.peak_error;
    x["measured_makespan_ns"] = static_cast<double>(m.makespan_ns);
    x["measured_baseline_makespan_ns"] = static_cast<double>(base_makespan);
    x["predicted_makespan_ns"] = static_cast<double>(p.simulated_makespan);
    x["measured_throughput_loss"] = row.measured_loss;
    x["predicted_throughput_loss"] = p.throughput_loss;
    x["loss_error_pp"] = row.loss_error_pp;
    x["stall_ns"] = static_cast<double>(m.stall_ns);
    x["stalls"] = static_cast<double>(m.stalls);
    x["swap_in_bytes"] = static_cast<double>(m.swap_in_bytes);
    x["swap_ins"] = static_cast<double>(m.swap_ins);
    x["swap_out_bytes"] = static_cast<double>(m.swap_out_bytes);
    x["swap_outs"] = static_cast<double>(m.swap_outs);
    x["clean_evictions"] = static_cast<double>(m.evict_clean);
    x["drops"] = static_cast<double>(m.drops);
    x["recomputations"] = static_cast<double>(m.recomputes);
    x["checksums"] = static_cast<double>(m.checksums);
    x["checksum_mismatches"] = static_cast<double>(m.mismatches);
    x["diverged_allocations"] = static_cast<double>(m.diverged_allocations);
    x["kernel_overruns"] = static_cast<double>(m.overruns);
    x["kernel_overrun_ns"] = static_cast<double>(m.overrun_ns);
    x["sinkhorn_kernels"] = static_cast<double>(m.sinkhorn_kernels);
    x["late_transfers"] = static_cast<double>(m.late_transfers);
    x["late_ns"] = static_cast<double>(m.late_ns);
    x["link_h2d_Bps"] = m.link_h2d_Bps;
    x["link_d2h_Bps"] = m.link_d2h_Bps;
    x["replay_seconds"] = m.seconds;
    x["kernels_reached"] = static_cast<double>(m.kernel_times.size());   // every kernel it ran is in run_kernels
    if (m.oom) {
        x["oom"] = 1;
        x["oom_bytes_short"] = static_cast<double>(m.oom_short);
        x["oom_fragmentation"] = m.oom_fragmentation ? 1 : 0;
    }
    run.events = m.events;
    run.kernel_times = m.kernel_times;
    run.memory = m.memory;
    return run;
}

}  // namespace

namespace {

// Busy and total jiffies of all CPUs (/proc/stat), and this process's CPU seconds.
struct CpuSample {
    double busy = -1, total = -1, self_s = 0;
    std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};
CpuSample cpu_sample() {
    CpuSample c;
    if (FILE* f = std::fopen("/proc/stat", "r")) {
        unsigned long long v[10] = {};
        if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                        &v[6], &v[7], &v[8], &v[9]) >= 4) {
            double total = 0;
            for (int i = 0; i < 8; ++i) total += static_cast<double>(v[i]);   // guest time is in user already
            c.total = total;
            c.busy = total - static_cast<double>(v[3]) - static_cast<double>(v[4]);   // minus idle, iowait
        }
        std::fclose(f);
    }
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        c.self_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    return c;
}
double load_average() {
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

}  // namespace

// The other processes' measured share of the CPUs during the run decides; the load average
// (a 1-minute decay that still counts work which ended before the run, and counts the
// validation's own threads) only when /proc/stat could not be read.
bool Load::loaded() const {
    if (others_share >= 0) return others_share > 0.25;
    return cores > 0 && before > 0.5 * cores;
}

std::string Load::text() const {
    char b[256];
    if (others_share >= 0)
        std::snprintf(b, sizeof b, "load average %.2f before, %.2f after, %d cores; other processes used %.0f%% of the CPUs meanwhile",
                      before, after, cores, 100 * others_share);
    else
        std::snprintf(b, sizeof b, "load average %.2f before, %.2f after, %d cores", before, after, cores);
    return b;
}

namespace {
// "; diverged first at kernel 81 (name): started 4.10 ms predicted, 5.02 ms measured (+0.92 ms,
// more than the replays' spread of 0.31 ms)", or nothing.
std::string diverged_first(const Row& x) {
    const Divergence& d = x.divergence;
    if (!d.found) return "; no kernel started further from its predicted time than that spread";
    char b[512];
    std::snprintf(b, sizeof b, "; diverged first at kernel %lld (%.80s): started %s predicted, %s measured (%s%s, more than %s)",
                  static_cast<long long>(d.kernel), d.name.c_str(), format_ns(d.predicted_ns).c_str(),
                  format_ns(d.measured_ns).c_str(), d.measured_ns >= d.predicted_ns ? "+" : "-",
                  format_ns(std::llabs(d.measured_ns - d.predicted_ns)).c_str(), format_ns(d.threshold_ns).c_str());
    return b;
}
}  // namespace

std::string verdict(const Row& x, double target, const Load& load) {
    const auto& p = x.predicted;
    const auto& m = x.measured;
    char b[1024];
    std::string v;
    if (m.status == "failed" || m.mismatches) {
        v = "FAILED: " + (m.failure.empty() ? std::string("checksum mismatch") : m.failure);
    } else if (p.oom.happened || m.oom) {
        if (p.oom.happened && m.oom) v = "agrees: out of memory, predicted and measured";
        else v = std::string("not validated: out of memory ") + (p.oom.happened ? "predicted only" : "measured only");
    } else {
        const double e = std::fabs(x.loss_error_pp);
        if (x.spread_pp < 0)
            std::snprintf(b, sizeof b, "%s: error %+.2f pp %s target %.1f pp (one replay: its noise is unknown; --repeat 3 measures it)",
                          e <= target ? "within target, unconfirmed" : "not validated", x.loss_error_pp, e <= target ? "<=" : ">", target);
        else if (e > target && e > kMissFactor * x.spread_pp)
            std::snprintf(b, sizeof b, "missed: error %+.2f pp, beyond the %.1f pp target and %.1f x the %.2f pp the %zu replays spread%s",
                          x.loss_error_pp, target, x.spread_pp > 0 ? e / x.spread_pp : INFINITY, x.spread_pp,
                          x.makespans.size(), diverged_first(x).c_str());
        else if (x.spread_pp > target)
            std::snprintf(b, sizeof b, "inconclusive: the %zu replays spread %.2f pp, more than the %.1f pp target (error %+.2f pp)",
                          x.makespans.size(), x.spread_pp, target, x.loss_error_pp);
        else
            std::snprintf(b, sizeof b, "%s: error %+.2f pp %s target %.1f pp (%zu replays spread %.2f pp)%s",
                          e <= target ? "validated" : "not validated", x.loss_error_pp, e <= target ? "<=" : ">", target,
                          x.makespans.size(), x.spread_pp, e <= target ? "" : diverged_first(x).c_str());
        v = b;
    }
    // Paced copies the host could not keep up with ran slower than the link predicted with.
    if (m.late_transfers > 0 && m.makespan_ns > 0 && m.late_ns * 100 > m.makespan_ns) {
        std::snprintf(b, sizeof b, "; the host fell behind the emulated link (%lld transfers late by %s in all: "
                                   "a slower --link or a larger --time-scale keeps the pace)",
                      static_cast<long long>(m.late_transfers), format_ns(m.late_ns).c_str());
        v += b;
    }
    if (load.loaded()) v += "; the machine was loaded (" + load.text() + ")";
    return v;
}

namespace {

// "3.2 h", "14 min", "42 s".
std::string human_seconds(double s) {
    char b[64];
    if (s >= 3600) std::snprintf(b, sizeof b, "%.1f h", s / 3600);
    else if (s >= 60) std::snprintf(b, sizeof b, "%.0f min", s / 60);
    else std::snprintf(b, sizeof b, "%.0f s", s);
    return b;
}

// A backend that does not emulate the link runs its copies with their own latency: a link that
// claims much more would be predicted and never measured.
void refuse_unhonoured_latency(const ValidateSpec& spec) {
    const sim::LinkModel& l = spec.base.link;
    const double latency = std::max(l.h2d.latency_s, l.d2h.latency_s);
    if (spec.link_measured_here || latency <= kMaxNativeLatencyS) return;
    const bool cuda = spec.replay.backend == Backend::Cuda;
    throw Error("link " + l.name + ": a per-transfer latency of " + format_ns(static_cast<int64_t>(latency * 1e9)) +
                " would be predicted but not measured: the " +
                (cuda ? std::string("cuda backend's copies have the GPU link's own latency")
                      : std::string("unpaced host replay's copies have the host's own latency (the paced replay, "
                                    "without --unpaced, emulates it)")) +
                "; at most " + format_ns(static_cast<int64_t>(kMaxNativeLatencyS * 1e9)) + " is taken as the link's own");
}

// Refuses replays estimated to run past spec.max_replay_seconds, and says so in one line when
// they will take long.
void check_replay_duration(const std::string& path, const ValidateSpec& spec, const std::vector<sim::Result>& predicted,
                           double seconds) {
    size_t slowest = 0;
    for (size_t i = 1; i < predicted.size(); ++i)
        if (predicted[i].simulated_makespan > predicted[slowest].simulated_makespan) slowest = i;
    char why[512];
    const int reps = std::max(spec.repeat, 1);
    std::snprintf(why, sizeof why, "%zu configurations, %d replay%s each%s, at time scale x%g; the slowest, %s, is predicted at %s",
                  predicted.size(), reps, reps == 1 ? "" : "s", reps >= 2 ? (" (the baseline " + std::to_string(2 * reps - 1) + ")").c_str() : "",
                  spec.replay.time_scale,
                  slowest == 0 ? "the baseline" : sim::run_name(predicted[slowest].config).c_str(),
                  format_ns(predicted[slowest].simulated_makespan).c_str());
    if (spec.max_replay_seconds > 0 && seconds > spec.max_replay_seconds)
        throw Error(path + ": the replays would take at least " + human_seconds(seconds) + " (" + why + "), more than the " +
                    human_seconds(spec.max_replay_seconds) + " allowed: a faster --link, a smaller --time-scale or fewer "
                    "--capacity values, or a larger --max-replay-minutes");
    if (seconds > kLongReplaySeconds && spec.warn)
        spec.warn("the replays will take at least " + human_seconds(seconds) + " (" + why + ")");
}

}  // namespace

Report validate(const std::string& path, const ValidateSpec& spec,
                const std::function<void(const std::string&)>& note) {
    Report rep;
    rep.trace = path;
    rep.target_pp = spec.target_pp;
    rep.repeat = std::max(spec.repeat, 1);
    rep.time_scale = spec.replay.time_scale;
    rep.link_origin = spec.link_origin;
    rep.time_scale_origin = spec.time_scale_origin;
    rep.load.cores = static_cast<int>(std::thread::hardware_concurrency());
    rep.paced = spec.pace && spec.replay.backend == Backend::Host;
    rep.load.before = load_average();
    const CpuSample cpu0 = cpu_sample();
    trace::TraceData t = trace::load_trace(path);
    auto prepared = sim::prepare_kept(t, spec.base.device);   // kept before validate stores anything
    sim::Config base = spec.base;
    // Replay copies in chunks of spec.replay.chunk_bytes: a calibrated profile's rate for that
    // chunk size is the rate to predict with, not its best one.
    base.link = scaled_link(link_at_chunk(spec.base.link, static_cast<int64_t>(spec.replay.chunk_bytes)),
                            spec.replay.time_scale);
    // Replay runs NCCL and memcpy kernels as stand-ins, which do not load the link: the
    // prediction of a replay must not take bandwidth away for them (a prediction of the real
    // training run does, with the profile's shares).
    base.link.nccl_share = 0;
    base.link.memcpy_share = 0;
    base.record_events = true;
    rep.link = base.link;
    Options replay_options = spec.replay;
    if (spec.pace && spec.replay.backend == Backend::Host) {
        const sim::LinkModel real = link_at_chunk(spec.base.link, static_cast<int64_t>(spec.replay.chunk_bytes));
        replay_options.pace_h2d_Bps = real.h2d.bandwidth_Bps;
        replay_options.pace_d2h_Bps = real.d2h.bandwidth_Bps;
        replay_options.pace_duplex = real.copy_engines >= 2 ? real.duplex_factor : 1.0;
        replay_options.pace_h2d_latency_s = real.h2d.latency_s;
        replay_options.pace_d2h_latency_s = real.d2h.latency_s;
    } else {
        refuse_unhonoured_latency(spec);
    }
    // What each configuration is predicted to do on the recorded trace: the replays' duration is
    // estimated from it before any replay, and it is the prediction of every configuration
    // predicted on the recorded clock (the baseline; all of them with --recorded-timing).
    std::vector<sim::Result> on_recorded;
    for (size_t i = 0; i <= spec.capacities.size(); ++i) {
        sim::Config c = base;
        c.capacity = i == 0 ? sim::Capacity{} : spec.capacities[i - 1];
        on_recorded.push_back(sim::simulate(*prepared, c));
    }
    rep.estimated_seconds = estimated_replay_seconds(on_recorded, spec.replay.time_scale, spec.repeat);
    check_replay_duration(path, spec, on_recorded, rep.estimated_seconds);

    // Storing: each replayed run is begun ("incomplete") before its replay, so that an
    // interruption leaves exactly that behind; everything else is stored after every replay
    // (and after spec.before_store). A store that fails stops storing, never the validation.
    auto store_failed = [&](const std::exception& e) {
        if (rep.store_error.empty()) rep.store_error = e.what();
    };
    const int n_configs = 1 + static_cast<int>(spec.capacities.size());
    int config_no = 0;

    // The limited runs are predicted and replayed on `timed`: the recorded trace, or (after the
    // baseline, with spec.retime) the trace on the baseline replay's clock.
    const trace::TraceData* timed = &t;
    trace::TraceData retimed;
    std::unique_ptr<PageMapper> pool;
    // The host arena: anonymous memory faulted in by the kernel at mmap (MAP_POPULATE: 1.6 s
    // for 4 GiB on the 2-core VM, where new[] + memset took 3.0 s), not in a timed transfer.
    struct Unmap {
        size_t bytes = 0;
        void operator()(unsigned char* p) const { ::munmap(p, bytes); }
    };
    std::unique_ptr<unsigned char[], Unmap> host_mem;
    size_t host_mem_bytes = 0;
    // MHC_VALIDATE_POOL_PER_REPLAY=1: the old way (a pool per replay), for the "before" figure
    // of bench/replay/validate_speed.sh.
    const char* per_replay = std::getenv("MHC_VALIDATE_POOL_PER_REPLAY");
    const bool shared_pool = !(per_replay && per_replay[0] == '1');
    auto one = [&](const sim::Capacity& cap, const Row* baseline, Row& row) {
        ++config_no;
        sim::Config c = base;
        c.capacity = cap;
        if (note) note("configuration " + std::to_string(config_no) + "/" + std::to_string(n_configs) + ": simulating");
        row.predicted = timed == &t ? on_recorded[static_cast<size_t>(config_no - 1)] : sim::simulate(*prepared, c);
        if (!row.predicted.invariant_violation.empty())
            throw Error(path + ": the simulator failed an invariant: " + row.predicted.invariant_violation, Error::Kind::Internal);
        row.name = sim::run_name(c);
        // Predicted on `timed`, replayed on the recorded trace (on_clock_of says why).
        Plan plan = make_plan(*timed, row.predicted);
        if (timed != &t) plan = on_clock_of(std::move(plan), t);
        // One page pool for every configuration: allocated and populated once (the baseline's,
        // the largest), mapped and unmapped by each replay.
        const int64_t cap_bytes = replay_capacity(plan.capacity, plan.predicted_peak, plan.allocator);
        if (shared_pool && (!pool || pool->pool_pages() < Arena::pool_pages(cap_bytes) || pool->va_bytes() < Arena::default_va(cap_bytes))) {
            pool.reset();
            const auto t_pool = std::chrono::steady_clock::now();
            pool = spec.replay.backend == Backend::Cuda
                       ? make_cuda_mapper(Arena::pool_pages(cap_bytes), Arena::default_va(cap_bytes))
                       : make_host_mapper(Arena::pool_pages(cap_bytes), Arena::default_va(cap_bytes));
            rep.pool_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_pool).count();
        }
        Options ro = replay_options;
        ro.mapper = pool.get();
        // The host arena likewise (host backend): allocated and zeroed once, grown when needed.
        const size_t host_bytes = static_cast<size_t>(host_arena_bytes(*timed, plan));
        if (shared_pool && spec.replay.backend == Backend::Host && host_bytes > host_mem_bytes) {
            host_mem.reset();
            const auto t_pool = std::chrono::steady_clock::now();
            void* m = ::mmap(nullptr, host_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
            if (m == MAP_FAILED)
                throw Error("the replay's host arena: mmap of " + format_bytes(static_cast<int64_t>(host_bytes)) + ": " +
                            std::strerror(errno));
            host_mem = std::unique_ptr<unsigned char[], Unmap>(static_cast<unsigned char*>(m), Unmap{host_bytes});
            host_mem_bytes = host_bytes;
            rep.pool_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_pool).count();
        }
        ro.host_memory = host_mem.get();
        ro.host_memory_bytes = host_mem_bytes;
        int64_t id = 0;
        if (spec.store && rep.store_error.empty()) {
            try {
                id = trace::begin_run(path, "replayed", row.name + "/" + to_string(spec.replay.backend), spec.runs_db,
                                     t.fingerprint);
            } catch (const std::exception& e) {
                store_failed(e);
            }
        }
        // Repeats: the run with the median makespan stands for the configuration (a failing
        // or mismatching one instead, so that no failure is averaged away).
        std::vector<Measured> runs;
        // The baseline's noise is in every loss, multiplied by 1 + loss (4-7 at the losses of
        // transfer-bound slices), and its replay is the cheapest: it gets 2N - 1 repeats.
        const int reps = baseline || spec.repeat < 2 ? std::max(spec.repeat, 1) : 2 * spec.repeat - 1;
        for (int i = 0; i < reps; ++i) {
            if (note)
                note("configuration " + std::to_string(config_no) + "/" + std::to_string(n_configs) + ": replaying " + row.name +
                     (reps > 1 ? " (" + std::to_string(i + 1) + "/" + std::to_string(reps) + ")" : ""));
            runs.push_back(replay(t, plan, ro));
            const Measured& m = runs.back();
            if (m.status == "failed" || m.mismatches) break;
        }
        for (const Measured& m : runs) row.makespans.push_back(m.makespan_ns);
        std::sort(runs.begin(), runs.end(), [](const Measured& a, const Measured& b) {
            const bool fa = a.status == "failed" || a.mismatches, fb = b.status == "failed" || b.mismatches;
            return fa != fb ? fa : a.makespan_ns < b.makespan_ns;
        });
        const bool any_failed = runs.front().status == "failed" || runs.front().mismatches;
        row.measured = std::move(runs[any_failed ? 0 : (runs.size() - 1) / 2]);
        const int64_t bm = baseline && baseline->measured.makespan_ns > 0 ? baseline->measured.makespan_ns : row.measured.makespan_ns;
        row.measured_loss = bm > 0 ? static_cast<double>(row.measured.makespan_ns) / static_cast<double>(bm) - 1.0 : 0;
        row.loss_error_pp = 100.0 * (row.measured_loss - row.predicted.throughput_loss);
        row.peak_error = row.predicted.simulated_peak > 0
                             ? static_cast<double>(row.measured.peak - row.predicted.simulated_peak) / static_cast<double>(row.predicted.simulated_peak)
                             : 0;
        // The spread of the loss: this configuration's replays, and the baseline's (the
        // denominator), each relative to the baseline's median.
        if (bm > 0 && row.makespans.size() > 1) {
            row.spread_pp = 100.0 * static_cast<double>(makespan_spread(row.makespans)) / static_cast<double>(bm);
            if (baseline && baseline->makespans.size() > 1)
                row.spread_pp += 100.0 * (1.0 + row.measured_loss) * static_cast<double>(makespan_spread(baseline->makespans)) /
                                 static_cast<double>(bm);
        }
        // Where the measured timeline first left the predicted one by more than the noise.
        if (baseline && bm > 0) {
            const double band_pp = row.spread_pp >= 0 ? row.spread_pp : spec.target_pp;
            row.divergence = first_divergence(*timed, row.predicted.kernel_times, row.measured.kernel_times,
                                              static_cast<int64_t>(band_pp / 100.0 * static_cast<double>(bm)));
        }
        if (row.measured.diverged_allocations > 0 && row.measured.failure.empty())
            row.measured.failure = std::to_string(row.measured.diverged_allocations) +
                                   " allocations fitted where the simulator's had failed (the allocator models diverged)";
        if (plan.oom && row.measured.oom && row.measured.oom_allocation != plan.oom_allocation)
            row.measured.failure = "OOM at another allocation than the simulator's";
        // Runs predicted on the retimed trace say so: their times are the baseline replay's.
        const char* timing = timed == &t ? "recorded" : "baseline replay";
        row.sim_record = sim::to_run(row.predicted);
        row.sim_record.config["timing"] = timing;
        row.replay_record = replay_run(row, c, spec.replay, bm);
        row.replay_record.config["timing"] = timing;
        row.replay_run = id;
    };
    one(sim::Capacity{}, nullptr, rep.baseline);
    if (spec.retime && rep.baseline.measured.status == "complete" && !spec.capacities.empty()) {
        retimed = retime(t, rep.baseline.measured, &rep.retime);
        timed = &retimed;
        prepared = sim::prepare(retimed, spec.base.device);
        rep.retimed = true;
    }
    for (const sim::Capacity& cap : spec.capacities) {
        rep.rows.emplace_back();
        one(cap, &rep.baseline, rep.rows.back());
    }

    const CpuSample cpu1 = cpu_sample();
    rep.load.after = load_average();
    if (cpu0.total >= 0 && cpu1.total > cpu0.total && rep.load.cores > 0) {
        // Jiffies to seconds by the wall time they span: total jiffies = wall x cores x HZ.
        const double wall = std::chrono::duration<double>(cpu1.at - cpu0.at).count();
        const double hz = (cpu1.total - cpu0.total) / (wall * rep.load.cores);
        if (hz > 0 && wall > 0) {
            const double busy_s = (cpu1.busy - cpu0.busy) / hz, self_s = cpu1.self_s - cpu0.self_s;
            rep.load.others_share = std::clamp((busy_s - self_s) / (wall * rep.load.cores), 0.0, 1.0);
        }
    }
    rep.baseline.verdict = "baseline";
    for (Row& x : rep.rows) x.verdict = verdict(x, spec.target_pp, rep.load);
    if (spec.before_store) spec.before_store(rep);
    if (spec.store) {
        auto store_row = [&](Row& row) {
            if (!rep.store_error.empty()) return;
            try {
                row.sim_run = trace::add_run(path, row.sim_record, spec.runs_db, t.fingerprint);
                row.replay_record.base_run = row.sim_run;
                if (row.replay_run > 0) trace::finish_run(path, row.replay_run, row.replay_record, spec.runs_db, t.fingerprint);
                else row.replay_run = trace::add_run(path, row.replay_record, spec.runs_db, t.fingerprint);
            } catch (const std::exception& e) {
                store_failed(e);
            }
        };
        store_row(rep.baseline);
        for (Row& x : rep.rows) store_row(x);
        rep.stored = rep.store_error.empty();
    }
    return rep;
}

namespace {
// The rates the replay's transfers achieved (bytes per second of real time, while busy).
std::string link_seen(const Measured& m) {
    if (m.link_h2d_Bps <= 0 && m.link_d2h_Bps <= 0) return "";
    std::string s = "; transfers ran at H2D " + format_rate(m.link_h2d_Bps) + ", D2H " + format_rate(m.link_d2h_Bps) + " (real time)";
    if (m.late_transfers > 0) s += ", " + std::to_string(m.late_transfers) + " late by " + format_ns(m.late_ns);
    return s;
}
}  // namespace

// With repeats: how far the replays of one configuration were apart.
static std::string spread(const Row& x) {
    if (x.makespans.size() < 2) return "";
    auto [lo, hi] = std::minmax_element(x.makespans.begin(), x.makespans.end());
    return "; " + std::to_string(x.makespans.size()) + " replays, makespan " + format_ns(*lo) + " .. " +
           format_ns(*hi) + " (median shown)";
}

std::string to_text(const Report& r) {
    std::string out;
    char buf[1024];
    std::snprintf(buf, sizeof buf, "link (as the scaled replay sees it): %s, H2D %s, D2H %s, duplex factor %.2f\n", r.link.name.c_str(),
                  format_rate(r.link.h2d.bandwidth_Bps).c_str(), format_rate(r.link.d2h.bandwidth_Bps).c_str(), r.link.duplex_factor);
    out += buf;
    if (!r.link_origin.empty()) out += "  obtained: " + r.link_origin + "\n";
    if (!r.link.source.empty()) out += "  source: " + r.link.source + "\n";
    if (r.paced) out += "  the host replay's copies are paced to this link (an emulated link; --unpaced: as fast as they go)\n";
    std::snprintf(buf, sizeof buf, "time scale x%g%s%s\n", r.time_scale, r.time_scale_origin.empty() ? "" : ": ",
                  r.time_scale_origin.c_str());
    out += buf;
    // The configuration column fits the longest name (a calibrated link's name can be long).
    int width = 34;
    width = std::max(width, static_cast<int>(r.baseline.name.size()));
    for (const auto& x : r.rows) width = std::max(width, static_cast<int>(x.name.size()));
    std::snprintf(buf, sizeof buf, "%-*s %10s %10s %7s | %8s %8s %7s | %10s %10s | %10s %10s | %6s %s\n", width, "configuration",
                  "peak pred", "peak meas", "err", "loss pred", "meas", "err pp", "in pred", "in meas", "out pred",
                  "out meas", "checks", "status");
    out += buf;
    auto line = [&](const Row& x) {
        const auto& p = x.predicted;
        const auto& m = x.measured;
        // A run that ran out of memory has no throughput to lose.
        char lp[16], lm[16], le[16];
        std::snprintf(lp, sizeof lp, p.oom.happened ? "oom" : "%.2f%%", 100 * p.throughput_loss);
        std::snprintf(lm, sizeof lm, m.oom ? "oom" : "%.2f%%", 100 * x.measured_loss);
        std::snprintf(le, sizeof le, p.oom.happened || m.oom ? "-" : "%+.2f", x.loss_error_pp);
        std::snprintf(buf, sizeof buf,
                      "%-*s %10s %10s %6.2f%% | %8s %8s %7s | %10s %10s | %10s %10s | %6lld %s%s%s\n",
                      width, x.name.c_str(), format_bytes(p.simulated_peak).c_str(), format_bytes(m.peak).c_str(),
                      100 * x.peak_error, lp, lm, le,
                      format_bytes(p.swap_in_bytes).c_str(), format_bytes(m.swap_in_bytes).c_str(),
                      format_bytes(p.swap_out_bytes).c_str(), format_bytes(m.swap_out_bytes).c_str(),
                      static_cast<long long>(m.checksums), m.status.c_str(),
                      m.mismatches ? " CHECKSUM MISMATCH" : "", m.failure.empty() ? "" : (": " + m.failure).c_str());
        out += buf;
        if (p.oom.happened || m.oom) {
            std::snprintf(buf, sizeof buf, "    OOM predicted: %s | measured: %s%s\n",
                          p.oom.happened ? p.oom.where.c_str() : "none", m.oom ? m.oom_where.c_str() : "none",
                          m.oom_fragmentation ? " (fragmentation)" : "");
            out += buf;
        }
        std::snprintf(buf, sizeof buf,
                      "    peak reduction pred %.1f%%; makespan pred %s meas %s; stalls pred %lld (%s) meas %lld (%s); "
                      "overruns %lld (%s); sinkhorn %lld; arena high water %s; page mapping %.2f s (clock paused)%s%s\n",
                      100 * p.peak_reduction, format_ns(p.simulated_makespan).c_str(), format_ns(m.makespan_ns).c_str(),
                      static_cast<long long>(p.stall_count), format_ns(p.stall_time).c_str(),
                      static_cast<long long>(m.stalls), format_ns(m.stall_ns).c_str(), static_cast<long long>(m.overruns),
                      format_ns(m.overrun_ns).c_str(), static_cast<long long>(m.sinkhorn_kernels),
                      format_bytes(m.high_water).c_str(), m.map_seconds, link_seen(m).c_str(), spread(x).c_str());
        out += buf;
    };
    line(r.baseline);
    if (r.retimed) {
        std::snprintf(buf, sizeof buf,
                      "  limited runs predicted on the baseline replay's clock: span %s recorded -> %s measured "
                      "(%lld kernels retimed; --recorded-timing predicts on the recorded one)\n",
                      format_ns(r.retime.span_before_ns).c_str(), format_ns(r.retime.span_after_ns).c_str(),
                      static_cast<long long>(r.retime.kernels_moved));
        out += buf;
    }
    for (const Row& x : r.rows) line(x);
    out += "machine: " + r.load.text() + (r.load.loaded() ? " -- LOADED: measured times include other work\n" : "\n");
    for (const Row& x : r.rows) out += "verdict " + x.name + ": " + x.verdict + "\n";
    return out;
}

std::string to_json(const Report& r) {
    using nlohmann::json;
    auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
    auto row = [&](const Row& x) {
        const auto& p = x.predicted;
        const auto& m = x.measured;
        json j;
        j["name"] = x.name;
        j["capacity_bytes"] = m.capacity;
        j["status"] = m.status;
        if (!m.failure.empty()) j["failure"] = m.failure;
        j["verdict"] = x.verdict;
        j["predicted"] = {{"peak_bytes", p.simulated_peak},
                          {"peak_reduction", num(p.peak_reduction)},
                          {"makespan_ns", p.simulated_makespan},
                          {"loss", num(p.throughput_loss)},
                          {"swap_in_bytes", p.swap_in_bytes},
                          {"swap_out_bytes", p.swap_out_bytes},
                          {"stalls", p.stall_count},
                          {"stall_ns", p.stall_time},
                          {"oom", p.oom.happened}};
        j["measured"] = {{"peak_bytes", m.peak},
                         {"makespan_ns", m.makespan_ns},
                         {"loss", num(x.measured_loss)},
                         {"swap_in_bytes", m.swap_in_bytes},
                         {"swap_out_bytes", m.swap_out_bytes},
                         {"swap_ins", m.swap_ins},
                         {"swap_outs", m.swap_outs},
                         {"stalls", m.stalls},
                         {"stall_ns", m.stall_ns},
                         {"checksums", m.checksums},
                         {"checksum_mismatches", m.mismatches},
                         {"kernel_overruns", m.overruns},
                         {"sinkhorn_kernels", m.sinkhorn_kernels},
                         {"late_transfers", m.late_transfers},
                         {"late_ns", m.late_ns},
                         {"link_h2d_Bps", num(m.link_h2d_Bps)},
                         {"link_d2h_Bps", num(m.link_d2h_Bps)},
                         {"replay_seconds", num(m.seconds)},
                         {"page_map_seconds", num(m.map_seconds)},
                         {"oom", m.oom}};
        j["loss_error_pp"] = (p.oom.happened || m.oom) ? json(nullptr) : num(x.loss_error_pp);
        j["peak_error"] = num(x.peak_error);
        j["repeats"] = {{"makespans_ns", x.makespans}, {"spread_pp", x.spread_pp < 0 ? json(nullptr) : num(x.spread_pp)}};
        const Divergence& d = x.divergence;
        j["first_divergence"] = d.found ? json{{"kernel", d.kernel}, {"name", d.name}, {"predicted_start_ns", d.predicted_ns},
                                               {"measured_start_ns", d.measured_ns}, {"threshold_ns", d.threshold_ns}}
                                        : json(nullptr);
        if (x.sim_run) j["sim_run"] = x.sim_run;
        if (x.replay_run) j["replay_run"] = x.replay_run;
        return j;
    };
    json j;
    j["trace"] = r.trace;
    j["link"] = {{"name", r.link.name},
                 {"h2d_Bps", num(r.link.h2d.bandwidth_Bps)},
                 {"d2h_Bps", num(r.link.d2h.bandwidth_Bps)},
                 {"h2d_latency_s", num(r.link.h2d.latency_s)},
                 {"d2h_latency_s", num(r.link.d2h.latency_s)},
                 {"duplex_factor", num(r.link.duplex_factor)},
                 {"copy_engines", r.link.copy_engines},
                 {"obtained", r.link_origin},
                 {"source", r.link.source},
                 {"notes", r.link.notes}};
    j["time_scale"] = num(r.time_scale);
    j["time_scale_origin"] = r.time_scale_origin;
    j["target_pp"] = num(r.target_pp);
    j["repeat"] = r.repeat;
    j["retimed"] = r.retimed;
    j["paced"] = r.paced;
    j["pool_seconds"] = num(r.pool_seconds);
    j["estimated_replay_seconds"] = num(r.estimated_seconds);
    j["load"] = {{"before", num(r.load.before)}, {"after", num(r.load.after)}, {"cores", r.load.cores},
                 {"others_share", r.load.others_share < 0 ? json(nullptr) : num(r.load.others_share)},
                 {"loaded", r.load.loaded()}};
    j["baseline"] = row(r.baseline);
    j["configurations"] = json::array();
    for (const Row& x : r.rows) j["configurations"].push_back(row(x));
    j["ok"] = r.ok();
    return j.dump(2);
}

}  // namespace mhc::replay
