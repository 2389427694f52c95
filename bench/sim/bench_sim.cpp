// Prints the simulator's speed (docs/sim-results.md): trace rows per second on one core for
// lru/belady with none/lookahead at 1, 4 and 16 million rows (traces built in memory),
// loading a trace from SQLite vs simulating it, and a 100-run sweep on 1 vs 2 threads.
// Usage: bench_sim [max_million_rows=16] [tmp_dir=/tmp] | sweep [reps] | recompute [reps]
//        | one POLICY PREFETCH [million_rows=4] [reps=5] [early|no-early]
//        | end-to-end TRACE RUNS_DB [ALLOCATOR=ideal]
//        | allocators TRACE [reps=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/bench/args.hpp"
#include "mhc/bench/load.hpp"
#include "mhc/sim/sweep.hpp"
#include "mhc/sim/synthetic.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

using namespace mhc;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

static void write_trace(const trace::TraceData& t, const std::string& path) {
    std::filesystem::remove(path);
    trace::Writer w(path);
    for (const auto& s : t.strings) w.intern(s);
    const auto& a = t.allocations;
    for (size_t i = 0; i < a.size(); ++i) {
        trace::Allocation x;
        x.id = a.id[i]; x.bytes = a.bytes[i]; x.t_alloc = a.t_alloc[i]; x.t_free = a.t_free[i];
        x.category = a.category[i];
        w.add(x);
    }
    const auto& k = t.kernels;
    for (size_t i = 0; i < k.size(); ++i) {
        trace::Kernel x;
        x.id = k.id[i]; x.stream = k.stream[i]; x.name = k.name[i]; x.t_start = k.t_start[i];
        x.t_end = k.t_end[i]; x.step = k.step[i];
        w.add(x);
        for (int64_t j = k.access_begin[i]; j < k.access_begin[i + 1]; ++j)
            w.add(trace::Access{k.id[i], a.id[t.accesses.allocation[j]], t.accesses.mode[j]});
    }
    w.finish();
}

using mhc::bench::loadavg;
static double thread_cpu() { return mhc::bench::thread_cpu_seconds(); }

// 100 runs on 1 and on 2 threads, `reps` times alternating. Wall time alone says little on
// a loaded machine, so each run's thread CPU time is summed too: if the CPU seconds per run
// stay the same with 2 threads, the runs do not slow each other (no lock, no false sharing,
// no bandwidth limit) and any shortfall of the wall-time speedup is the machine's load.
static void bench_sweep(int reps) {
    std::printf("\n== sweep of 100 runs (200k-row trace) ==\n");
    auto t = sim::synthetic::training(5, 200'000, 16, 1);
    auto p = sim::prepare(t);
    std::vector<sim::Config> configs;
    const char* evs[] = {"lru", "largest", "belady", "dtr", "cost_aware"};
    const char* pfs[] = {"none", "lookahead:8", "periodic", "capuchin", "forecast"};
    for (int i = 0; i < 100; ++i) {
        sim::Config c;
        c.eviction = evs[i % 5];
        c.prefetch = pfs[(i / 5) % 5];
        c.capacity.fraction = 0.5 + 0.1 * (i / 25);
        c.check_invariants = false;
        c.record_events = false;
        configs.push_back(c);
    }
    for (int rep = 0; rep < reps; ++rep) {
        double wall[3] = {0, 0, 0}, cpu[3] = {0, 0, 0};
        for (int jobs : {1, 2}) {
            std::vector<double> cpu_of(configs.size());
            auto t0 = Clock::now();
            sim::parallel_for_each(configs.size(), jobs, [&](size_t i) {
                double c0 = thread_cpu();
                auto r = sim::simulate(*p, configs[i]);
                cpu_of[i] = thread_cpu() - c0;
            });
            wall[jobs] = since(t0);
            for (double c : cpu_of) cpu[jobs] += c;
            std::printf("%d thread(s): wall %.2f s, CPU %.2f s (sum over runs), load average %s\n", jobs,
                        wall[jobs], cpu[jobs], loadavg().c_str());
        }
        std::printf("speedup %.2fx (wall), CPU per run 2 threads / 1 thread %.2f\n", wall[1] / wall[2],
                    cpu[2] / cpu[1]);
    }
}

// The recompute policies alone (dtr, cost_aware x the five prefetchers x 50/60/70/80%), one
// thread, on the 200k-row training trace and on a 1M-row one: CPU seconds per policy (the
// cost of recursive recomputation, docs/simulator.md rule 2). Best of `reps`.
static void bench_recompute(int reps) {
    std::printf("\n== dtr / cost_aware sweeps (20 runs each, one thread) ==\n");
    for (int64_t rows : {200'000, 1'000'000}) {
        auto t = sim::synthetic::training(5, rows, 16, 1);
        auto p = sim::prepare(t);
        for (const char* ev : {"dtr", "cost_aware"}) {
            double best = 1e300;
            int64_t drops = 0, recs = 0;
            const char* pfs[] = {"none", "lookahead:8", "periodic", "capuchin", "forecast"};
            double best_pf[5] = {1e300, 1e300, 1e300, 1e300, 1e300};   // the same runs, by prefetcher
            for (int rep = 0; rep < reps; ++rep) {
                double cpu = 0;
                drops = recs = 0;
                for (int k = 0; k < 5; ++k) {
                    const char* pf = pfs[k];
                    const double cpu_before = cpu;
                    for (double f : {0.5, 0.6, 0.7, 0.8}) {
                        sim::Config c;
                        c.eviction = ev;
                        c.prefetch = pf;
                        c.capacity.fraction = f;
                        c.check_invariants = false;
                        c.record_events = false;
                        double c0 = thread_cpu();
                        auto r = sim::simulate(*p, c);
                        cpu += thread_cpu() - c0;
                        drops += r.drop_count;
                        recs += r.recompute_count;
                    }
                    best_pf[k] = std::min(best_pf[k], cpu - cpu_before);
                }
                best = std::min(best, cpu);
            }
            std::printf("%8lld rows %-11s CPU %.3f s (best of %d), %lld drops, %lld recomputations, load %s\n",
                        static_cast<long long>(rows), ev, best, reps, static_cast<long long>(drops),
                        static_cast<long long>(recs), loadavg().c_str());
            for (int k = 0; k < 5; ++k)
                std::printf("%8lld rows %-11s   %-12s CPU %.3f s (best of %d)\n", static_cast<long long>(rows), ev, pfs[k],
                            best_pf[k], reps);
        }
    }
}


// What `mhc simulate FILE --capacity 60%` spends, phase by phase (thread CPU and wall seconds):
// load_trace, prepare (from the file's cache where this code has one, which it writes when it
// had none), simulate (lru, 60%, the
// command's defaults: events recorded, invariants as built), and storing the run into `runs_db`
// (a runs database, so that the trace stays as it is between rounds; removed first).
static void bench_end_to_end(const std::string& file, const std::string& runs_db, const std::string& allocator) {
    auto phase = [](const char* what, auto&& fn) {
        double c0 = thread_cpu();
        auto t0 = Clock::now();
        fn();
        std::printf("  %-9s cpu %6.3f s  wall %6.3f s\n", what, thread_cpu() - c0, since(t0));
    };
    double c0 = thread_cpu();
    auto t0 = Clock::now();
    trace::TraceData t;
    std::shared_ptr<const sim::Prepared> p;
    sim::Result r;
    std::printf("end to end on %s, %s allocator (load average %s)\n", file.c_str(), allocator.c_str(), loadavg().c_str());
    phase("load", [&] { t = trace::load_trace(file); });
    phase("prepare", [&] {
#if __has_include("mhc/trace/cache.hpp")
        p = sim::prepare_cached(t);
        sim::keep_prepared(*p, 0);   // writes the cache when it was not read from it
#else
        p = sim::prepare(t);
#endif
    });
    phase("simulate", [&] {
        sim::Config c;
        c.capacity.fraction = 0.6;
        c.allocator = allocator;
        r = sim::simulate(*p, c);
    });
    std::filesystem::remove(runs_db);
    const size_t events = r.events.size();
    phase("store", [&] {   // as `mhc simulate` stores it
        std::vector<trace::Run> runs;
        runs.push_back(sim::take_run(r));   // as the command does: moved, not copied
        trace::add_runs(file, runs, runs_db, t.fingerprint);
    });
    std::printf("  %-9s cpu %6.3f s  wall %6.3f s  (%lld trace rows, %lld simulated rows, %zu events)\n", "total",
                thread_cpu() - c0, since(t0), static_cast<long long>(t.rows()), static_cast<long long>(r.rows),
                events);
}

// What the allocator model costs: the simulation of `file` (prepared once; lru, 60%, events
// recorded and invariants as built, the command's defaults) with the ideal and the caching
// allocator, best thread CPU seconds of `reps`.
static void bench_allocators(const std::string& file, int reps) {
    const auto loaded = trace::load_trace(file);
    const auto prepared = sim::prepare(loaded);
    for (const char* allocator : {"ideal", "caching"}) {
        double best = 1e300;
        sim::Result result;
        for (int rep = 0; rep < reps; ++rep) {
            sim::Config config;
            config.capacity.fraction = 0.6;
            config.allocator = allocator;
            const double c0 = thread_cpu();
            result = sim::simulate(*prepared, config);
            best = std::min(best, thread_cpu() - c0);
        }
        std::printf("%lld rows lru+none %-7s: simulate CPU %.3f s (best of %d), peak %lld, %zu events, load %s\n",
                    static_cast<long long>(result.rows), allocator, best, reps, static_cast<long long>(result.simulated_peak),
                    result.events.size(), loadavg().c_str());
    }
}

// One configuration on the training trace of the main table (`millions` of rows, 4: 4.7 M), `reps`
// times: the loop to run under `perf record` (best CPU seconds and rows/s printed). Without early
// swap-out (`early` false, as `mhc simulate --no-early`): what a prefetcher costs besides it.
static void bench_one(const std::string& ev, const std::string& pf, int millions, int reps, bool early) {
    const auto trace = sim::synthetic::training(42, static_cast<int64_t>(millions) * 1'000'000, 32, 2);
    const auto prepared = sim::prepare(trace);
    double best = 1e300;
    sim::Result result;
    for (int rep = 0; rep < reps; ++rep) {
        sim::Config config;
        config.eviction = ev;
        config.prefetch = pf;
        config.capacity.fraction = 0.6;
        config.check_invariants = false;
        config.record_events = false;
        config.early_swap_out = early;
        double c0 = thread_cpu();
        result = sim::simulate(*prepared, config);
        best = std::min(best, thread_cpu() - c0);
    }
    std::printf("%lld rows %s+%s%s: CPU %.3f s = %.3g rows/s (best of %d), loss %.1f%%, load %s\n",
                static_cast<long long>(result.rows), ev.c_str(), pf.c_str(), early ? "" : " (no early swap-out)", best, result.rows / best, reps,
                result.throughput_loss * 100, loadavg().c_str());
}

// The simulator's speed on the training traces of the main table (1, 4 and 16 million rows, up
// to `max_m`): lru/belady with none/lookahead, wall and thread CPU time.
static void bench_simulate(int max_m) {
    std::printf("== simulate, one core, capacity 60%% of the peak, pcie4 ==\n");
    std::printf("%8s %10s %10s %-20s %10s %12s %8s\n", "rows", "build s", "prepare s", "config", "sim s", "rows/s", "loss");
    for (int m : {1, 4, 16}) {
        if (m > max_m) break;
        auto t0 = Clock::now();
        auto t = sim::synthetic::training(42, static_cast<int64_t>(m) * 1'000'000, 32, 2);
        double build = since(t0);
        t0 = Clock::now();
        auto p = sim::prepare(t);
        double prep = since(t0);
        for (std::string ev : {"lru", "belady"})
            for (std::string pf : {"none", "lookahead:8"}) {
                sim::Config c;
                c.eviction = ev;
                c.prefetch = pf;
                c.capacity.fraction = 0.6;
                c.check_invariants = false;
                c.record_events = false;   // a stored run's timeline is written separately
                // thread CPU time as well as wall time: on a shared machine the wall time
                // measures the load more than the simulator
                double c0 = thread_cpu();
                auto r = sim::simulate(*p, c);
                double cpu = thread_cpu() - c0;
                std::printf("%8lld %10.2f %10.2f %-20s %10.3f %12.3g %7.1f%%  CPU %.3f s = %.3g rows/s\n",
                            static_cast<long long>(r.rows), build, prep, (ev + "+" + pf).c_str(), r.seconds,
                            r.rows / r.seconds, r.throughput_loss * 100, cpu, r.rows / cpu);
            }
        sim::Config c;
        c.eviction = "belady";
        c.capacity.fraction = 0.6;
        c.check_invariants = false;
        auto r = sim::simulate(*p, c);
        std::printf("%8s %10s %10s %-20s %10.3f %12.3g   (with events: %lld)\n", "", "", "", "belady+none+events",
                    r.seconds, r.rows / r.seconds, static_cast<long long>(r.events.size()));
    }
}

// Loading a trace from SQLite against simulating it (4 million rows, fewer when `max_m` is).
static void bench_load(int max_m, const std::string& tmp) {
    std::printf("\n== load from SQLite vs simulate (4M rows) ==\n");
    auto generated = sim::synthetic::training(7, std::min(max_m, 4) * 1'000'000LL, 32, 2);
    std::string path = tmp + "/mhc-bench-sim.db";
    auto t0 = Clock::now();
    write_trace(generated, path);
    double wr = since(t0);
    t0 = Clock::now();
    auto loaded = trace::load_trace(path);
    double load = since(t0);
    t0 = Clock::now();
    auto prepared = sim::prepare(loaded);
    double prep = since(t0);
    sim::Config config;
    config.eviction = "lru";
    config.capacity.fraction = 0.6;
    config.check_invariants = false;
    config.record_events = false;
    auto result = sim::simulate(*prepared, config);
    std::printf("rows %lld: write %.2f s, load %.2f s, prepare %.2f s (incl. checks), simulate lru %.2f s\n",
                static_cast<long long>(loaded.rows()), wr, load, prep, result.seconds);
    std::filesystem::remove(path);
}

static int run(int argc, char** argv) {
    const bench::Args args(argc, argv,
                           "[MAX_MILLION_ROWS] [TMP_DIR] | sweep [REPS] | recompute [REPS] | end-to-end TRACE RUNS_DB [ALLOCATOR]"
                           " | one POLICY PREFETCH [MILLION_ROWS] [REPS] [early|no-early] | allocators TRACE [REPS]");
    if (args.has(0) && args.word(0) == "one") {
        args.at_most(6);
        if (args.size() < 3) args.refuse("one needs a policy and a prefetcher");
        const std::string early = args.text(5, "early");
        if (early != "early" && early != "no-early") args.refuse("the last word of one is early or no-early, not " + early);
        bench_one(args.word(1), args.word(2), static_cast<int>(args.count(3, "MILLION_ROWS", 4, 1, 1000)),
                  static_cast<int>(args.count(4, "REPS", 5, 1, 1000)), early == "early");
        return 0;
    }
    if (args.has(0) && args.word(0) == "end-to-end") {
        args.at_most(4);
        if (args.size() < 3) args.refuse("end-to-end needs a trace and a runs database to write");
        const std::string allocator = args.text(3, "ideal");
        sim::parse_allocator(allocator);   // refuses an unknown name before the trace is read
        bench_end_to_end(args.word(1), args.word(2), allocator);
        return 0;
    }
    if (args.has(0) && args.word(0) == "allocators") {
        args.at_most(3);
        if (args.size() < 2) args.refuse("allocators needs a trace");
        bench_allocators(args.word(1), static_cast<int>(args.count(2, "REPS", 3, 1, 1000)));
        return 0;
    }
    args.at_most(2);
    if (args.has(0) && args.word(0) == "recompute") {
        bench_recompute(static_cast<int>(args.count(1, "REPS", 3, 1, 1000)));
        return 0;
    }
    if (args.has(0) && args.word(0) == "sweep") {
        bench_sweep(static_cast<int>(args.count(1, "REPS", 3, 1, 1000)));
        return 0;
    }
    int max_m = static_cast<int>(args.count(0, "MAX_MILLION_ROWS", 16, 1, 1000));
    std::string tmp = args.text(1, "/tmp");
    bench_simulate(max_m);
    bench_load(max_m, tmp);
    bench_sweep(3);
    return 0;
}

int main(int argc, char** argv) {
    return bench::guarded("bench_sim", [&] { return run(argc, argv); });
}
