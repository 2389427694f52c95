// Store throughput: writes a trace of N rows (default 10M) shaped like a training trace
// (per kernel: 3 accesses; one allocation per 2 kernels; a few copies and markers), then
// reads it back by streaming every table and by loading it into columns.
// Usage: bench_store [ROWS] [PATH]      prints rows/s and bytes per row.
//        bench_store run [EVENTS] [KERNELS] [PATH]: stores a simulated run of EVENTS events
// (default 3,900,000, 5% of them out of time order, as the simulator's come) and KERNELS kernel
// times (default 1,400,000) into a small trace, twice (the second beside the first), as
// `mhc simulate` of a 10 M-row trace does: thread CPU and wall seconds, rows/s; then reads the
// first back (load_run, as the viewer opens a run).
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/bench/args.hpp"
#include "mhc/bench/load.hpp"
#include "mhc/trace/store.hpp"

using namespace mhc::trace;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Process CPU time (user + system): on a loaded machine wall time measures the neighbours,
// CPU time measures us. Both are printed.
static double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// A run shaped like the simulator's: events by time with one in twenty placed a little early
// (an eviction decided before the stall it served is written), kernel times in kernel order.
static Run synthetic_run(int64_t events, int64_t kernels) {
    Run run;
    run.name = "lru@60%/pcie4";
    run.metrics["peak_bytes"] = 1;
    run.events.reserve(static_cast<size_t>(events));
    for (int64_t i = 0; i < events; ++i) {
        const int64_t start = i * 50 - (i % 20 == 0 ? 120 : 0);
        run.events.push_back({static_cast<EventKind>(i % 3), start, start + 400, 1 + i % 100000, 1 + i / 3, 4096 * (1 + i % 64)});
    }
    run.kernel_times.reserve(static_cast<size_t>(kernels));
    for (int64_t kernel = 1; kernel <= kernels; ++kernel)
        run.kernel_times.push_back({kernel, kernel * 140, kernel * 140 + 100});
    for (int64_t sample = 0; sample < 1000; ++sample) run.memory.push_back({sample * 1000, sample << 20, 0});
    return run;
}

static int store_runs_bench(const mhc::bench::Args& args) {
    args.at_most(4);
    const int64_t events = args.count(1, "EVENTS", 3900000, 0, int64_t{1} << 32);
    const int64_t kernels = args.count(2, "KERNELS", 1400000, 0, int64_t{1} << 32);
    const std::string path = args.text(3, "/tmp/mhc-bench-store-run.db");
    {
        Writer writer(path);
        writer.set_meta("source", "bench_store run");
        writer.add(Allocation{1, 0, 0x1000, 4096, 0, kNoTime, 7, Category::Param, kNoString});
        writer.finish();
    }
    const Run run = synthetic_run(events, kernels);
    const double rows = static_cast<double>(events + kernels + static_cast<int64_t>(run.memory.size()));
    std::printf("store a run: %lld events, %lld kernel times, %zu memory samples (load average %s)\n",
                static_cast<long long>(events), static_cast<long long>(kernels), run.memory.size(),
                mhc::bench::loadavg().c_str());
    int64_t first = 0;
    for (const char* which : {"first run", "second run"}) {
        const auto t0 = Clock::now();
        const double c0 = mhc::bench::thread_cpu_seconds();
        const int64_t id = add_run(path, run);
        const double cpu = mhc::bench::thread_cpu_seconds() - c0, wall = seconds_since(t0);
        std::printf("store %-10s  cpu %6.3f s %5.2f M rows/s   wall %6.3f s %5.2f M rows/s\n", which, cpu, rows / cpu / 1e6,
                    wall, rows / wall / 1e6);
        if (first == 0) first = id;
    }
    const auto t0 = Clock::now();
    const double c0 = mhc::bench::thread_cpu_seconds();
    const Run back = load_run(path, first);
    const double cpu = mhc::bench::thread_cpu_seconds() - c0, wall = seconds_since(t0);
    const double back_rows = static_cast<double>(back.events.size() + back.kernel_times.size() + back.memory.size());
    std::printf("read first run    cpu %6.3f s %5.2f M rows/s   wall %6.3f s %5.2f M rows/s\n", cpu, back_rows / cpu / 1e6,
                wall, back_rows / wall / 1e6);
    if (back.events.size() != run.events.size()) {
        std::fprintf(stderr, "read %zu events back, stored %zu\n", back.events.size(), run.events.size());
        return 1;
    }
    if (!std::getenv("MHC_BENCH_KEEP")) std::filesystem::remove(path);
    return 0;
}

static int run(int argc, char** argv) {
    const mhc::bench::Args args(argc, argv, "[ROWS] [PATH] | run [EVENTS] [KERNELS] [PATH]");
    if (args.has(0) && args.word(0) == "run") return store_runs_bench(args);
    args.at_most(2);
    int64_t target = args.count(0, "ROWS", 10'000'000, 1, int64_t(1) << 40);
    std::string path = args.text(1, "/tmp/mhc-bench-store.db");

    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    int64_t rows = 0;
    {
        Writer w(path);
        w.set_meta("source", "bench_store");
        int64_t names[16];
        for (int i = 0; i < 16; ++i) names[i] = w.intern("kernel_" + std::to_string(i));
        int64_t t = 0, kid = 0, aid = 0, cid = 0, mid = 0;
        uint64_t rng = 42;
        auto next = [&] { rng = rng * 6364136223846793005ULL + 1442695040888963407ULL; return rng >> 33; };
        while (w.rows_written() < target) {
            // One allocation every other kernel, freed 64 kernels later (time in ns).
            if (kid % 2 == 0) {
                ++aid;
                w.add(Allocation{aid, 0, static_cast<int64_t>(0x7f0000000000 + aid * 4096),
                                 static_cast<int64_t>(512 + next() % (1 << 20)), t, t + 640000, 7,
                                 static_cast<Category>(aid % 7), 0});
            }
            ++kid;
            Kernel k{};
            k.id = kid; k.stream = 7; k.name = names[kid % 16]; k.t_start = t; k.t_end = t + 8000;
            k.step = static_cast<int32_t>(kid / 100000); k.grid[0] = 1024; k.block[0] = 256;
            k.correlation = kid;
            w.add(k);
            for (int j = 0; j < 3; ++j)
                w.add(Access{kid, std::max<int64_t>(1, aid - j), j == 0 ? AccessMode::Write : AccessMode::Read});
            if (kid % 50 == 0) w.add(Copy{++cid, 0, 8, CopyKind::H2D, 1 << 20, t, t + 40000});
            if (kid % 100000 == 0) w.add(Marker{++mid, names[0], t - 1000000000, t, MarkerKind::Step, static_cast<int32_t>(mid)});
            t += 10000;
        }
        rows = w.rows_written();
        w.finish();
    }
    double write_s = seconds_since(t0), write_cpu = cpu_seconds() - c0;
    auto bytes = std::filesystem::file_size(path);

    t0 = Clock::now();
    c0 = cpu_seconds();
    int64_t streamed = 0, checksum = 0, stored = 0;
    {
        Reader r(path);
        stored = r.counts().total();
        r.for_each([&](const Allocation& a) { ++streamed; checksum += a.bytes; });
        r.for_each([&](const Kernel& k) { ++streamed; checksum += k.t_end; });
        r.for_each([&](const Access& a) { ++streamed; checksum += a.allocation; });
        r.for_each([&](const Copy& c) { ++streamed; checksum += c.bytes; });
        r.for_each([&](const Marker& m) { ++streamed; checksum += m.t_end; });
        streamed += static_cast<int64_t>(r.strings().size()) - 1;
    }
    double stream_s = seconds_since(t0), stream_cpu = cpu_seconds() - c0;

    t0 = Clock::now();
    c0 = cpu_seconds();
    TraceData data = load_trace(path);
    double load_s = seconds_since(t0), load_cpu = cpu_seconds() - c0;

    std::printf("rows                 %lld (%zu allocations, %zu kernels, %zu accesses, %zu copies)\n",
                static_cast<long long>(rows), data.allocations.size(), data.kernels.size(),
                data.accesses.size(), data.copies.size());
    std::printf("                     wall                 cpu (user+sys)\n");
    std::printf("write                %6.2f s %5.2f M rows/s  %6.2f s %5.2f M rows/s  (incl. indexes, rename)\n",
                write_s, rows / write_s / 1e6, write_cpu, rows / write_cpu / 1e6);
    std::printf("read (stream)        %6.2f s %5.2f M rows/s  %6.2f s %5.2f M rows/s\n", stream_s,
                streamed / stream_s / 1e6, stream_cpu, streamed / stream_cpu / 1e6);
    std::printf("read (load columns)  %6.2f s %5.2f M rows/s  %6.2f s %5.2f M rows/s\n", load_s,
                data.rows() / load_s / 1e6, load_cpu, data.rows() / load_cpu / 1e6);
    std::printf("file                 %.1f MB  %.1f bytes/row\n", bytes / 1e6, double(bytes) / rows);
    std::printf("checksum             %lld\n", static_cast<long long>(checksum));
    if (!std::getenv("MHC_BENCH_KEEP")) std::filesystem::remove(path);
    // Rows written minus the repeated (kernel, allocation) accesses the store merged.
    if (streamed != stored) {
        std::fprintf(stderr, "streamed %lld rows, the file holds %lld\n", static_cast<long long>(streamed),
                     static_cast<long long>(stored));
        return 1;
    }
    return 0;
}

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_store", [&] { return run(argc, argv); });
}
