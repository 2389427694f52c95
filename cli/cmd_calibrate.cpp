// `mhc calibrate`: measures the host<->device link through the swap engine (H2D and D2H
// bandwidth and latency by chunk size, one direction and both at once) and writes the link
// profile the simulator loads.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/replay/host_memory.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/text_table.hpp"
#include "mhc/common/units.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/swap.hpp"
#include "mhc/sim/link.hpp"

namespace mhc::cli {
namespace {

namespace k = mhc::kernels;
using Clock = std::chrono::steady_clock;

struct Args {
    std::string backend, output, name, path = "copy-engine", max_chunk = "64MiB";
    int repeat = 0, rounds = 5;
    bool quick = false, force = false, json = false;
    bool path_given = false, rounds_given = false;   // --path, --rounds given (not their defaults)
};

struct Rates {
    double h2d = 0, d2h = 0;
};

// Moves `count` transfers of `bytes` in each requested direction, all queued at once (a
// direction's transfers run back to back on its stream); returns per-direction rates
// measured from the first start to the last end of that direction.
Rates measure(k::SwapEngine& e, size_t bytes, int count, bool h2d, bool d2h) {
    const size_t slots = std::max<size_t>(1, e.config().host_bytes / bytes);
    std::vector<uint64_t> ids;
    auto t0 = Clock::now();
    for (int i = 0; i < count; ++i) {
        const size_t off = (static_cast<size_t>(i) % slots) * bytes;
        if (h2d) ids.push_back(e.submit(k::SwapDir::HostToDevice, off, off, bytes));
        if (d2h) ids.push_back(e.submit(k::SwapDir::DeviceToHost, off, off, bytes));
    }
    double end[2] = {0, 0};
    for (uint64_t id : ids) {
        k::SwapResult r = e.wait(id);
        int d = r.dir == k::SwapDir::HostToDevice ? 0 : 1;
        end[d] = std::max(end[d], std::chrono::duration<double>(Clock::now() - t0).count());
    }
    Rates out;
    const double total = static_cast<double>(bytes) * count;
    // A clock too coarse for the transfer gives no rate rather than an infinite one.
    if (h2d && end[0] > 0) out.h2d = total / end[0];
    if (d2h && end[1] > 0) out.d2h = total / end[1];
    return out;
}

// Median and spread of repeated measurements: one run of a shared host (or a GPU with other
// work on it) can be off by a factor, the median of several is not.
struct Stat {
    double median = 0, lo = 0, hi = 0;
};
Stat stat(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return {};
    return {v[v.size() / 2], v.front(), v.back()};
}

// The rates of `rounds` repetitions of each measurement, interleaved so that a slow moment
// of the machine touches all three kinds alike; medians per kind.
struct ChunkRates {
    Stat h2d, d2h, both_h2d, both_d2h;
};
ChunkRates measure_rounds(k::SwapEngine& e, size_t bytes, int count, int rounds) {
    std::vector<double> h, d, bh, bd;
    for (int r = 0; r < rounds; ++r) {
        h.push_back(measure(e, bytes, count, true, false).h2d);
        d.push_back(measure(e, bytes, count, false, true).d2h);
        Rates b = measure(e, bytes, count, true, true);
        bh.push_back(b.h2d);
        bd.push_back(b.d2h);
    }
    return {stat(h), stat(d), stat(bh), stat(bd)};
}

// Seconds of one isolated small transfer, submit to completion: median and the 10th-90th
// percentile spread (a descheduled thread shows as a long tail, not as the figure).
Stat latency(k::SwapEngine& e, k::SwapDir dir, size_t bytes, int reps) {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        auto t0 = Clock::now();
        e.wait(e.submit(dir, 0, 0, bytes));
        t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]};
}

// A profile is a measurement that took minutes on a particular machine: never replaced
// silently, nor found unwritable after the measuring. Checked before measuring, so a refusal
// costs nothing.
void check_before_measuring(const Args& args) {
    mhc::refuse_special_file(args.output);   // /dev/null, a FIFO: never replaced, even with --force
    if (!args.force && std::filesystem::exists(args.output))
        throw Error(mhc::already_exists(args.output));
    const std::string dir = std::filesystem::path(args.output).has_parent_path()
                                ? std::filesystem::path(args.output).parent_path().string()
                                : std::string(".");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        throw Error(args.output + ": cannot write into " + dir + ": " +
                    (errno == ENOENT    ? "no such directory"
                     : errno == ENOTDIR ? "not a directory"
                                        : std::strerror(errno)));
    // The name goes into the runs' names a profile is used for (lru+none@80%/NAME): one line.
    if (const std::string hidden = hidden_character(args.name); !hidden.empty())
        throw Error(refused_value("--name", args.name,
                                  "holds a control character or one not shown (" + hidden +
                                      ": a newline, a tab, an escape, a bidirectional override); a profile's name is "
                                      "one line shown as it is"));
    // --quick measures at most 3 rounds: more, given, were not measured.
    if (args.quick && args.rounds_given && args.rounds > 3)
        throw Error("--rounds " + std::to_string(args.rounds) +
                    " and --quick: --quick measures at most 3 rounds; give one");
}

// host or cuda (auto: cuda when a GPU is present). The host backend's memcpy has one path:
// --path names a GPU's way of copying (refused with --backend host, a warning under auto).
std::string choose_backend(const Args& args, std::vector<std::string>& warnings) {
    std::string backend = args.backend;
    const bool chosen = !backend.empty() && backend != "auto";
    if (!chosen) backend = k::cuda_device_count() > 0 ? "cuda" : "host";
    if (backend == "host" && args.path_given) {
        if (chosen)
            throw Error("--path and --backend host: the host backend copies one way, the path is a GPU's; give one");
        warnings.push_back("--path " + printable(args.path) +
                           " has no effect: no GPU here, the host backend copies one way");
    }
    return backend;
}

// A device and a host buffer of `arena` bytes each (both in host memory on the host backend,
// the host one pinned): refused before anything is allocated when they take more than half
// of this machine's memory, rather than ending "out of host memory" (or killed by the kernel
// under a container's smaller memory cgroup limit, which counts as the machine's memory).
void refuse_arena_past_half_memory(const Args& args, size_t arena) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    double memory = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
    std::string whose = "this machine's memory";
    if (const int64_t limit = mhc::replay::available_host_memory().cgroup_limit;
        limit > 0 && (memory <= 0 || static_cast<double>(limit) < memory)) {
        memory = static_cast<double>(limit);
        whose = "this process's memory cgroup limit";
    }
    if (memory > 0 && 2.0 * static_cast<double>(arena) > memory / 2) {
        size_t most = 4096;
        while (static_cast<double>(most * 4 * 4) <= memory / 2) most *= 4;   // 2 buffers of 2 chunks within half
        throw Error(refused_value("--max-chunk", args.max_chunk,
                                  "its buffers (" + format_bytes(static_cast<int64_t>(2 * arena)) +
                                      ") take more than half of " + whose + " (" +
                                      format_bytes(static_cast<int64_t>(memory)) + "); give at most " +
                                      format_bytes(static_cast<int64_t>(most))));
    }
}

// The rate table, one row per chunk size, and what the profile takes from it.
struct RateTable {
    std::vector<sim::LinkModel::Chunk> by_chunk;
    nlohmann::json rows = nlohmann::json::array();   // --json: each chunk size's medians and spreads
    ChunkRates best_h2d, best_d2h;       // the chunk sizes with the fastest one-way medians
    std::vector<double> duplex_ratios;   // both directions at once over one, per chunk size
};

// --json: a rate's median, minimum and maximum in bytes per second, named as the profile's by_chunk
// rows name the median (h2d_Bps; h2d_min_Bps, h2d_max_Bps beside it).
void put_stat(nlohmann::json& row, const std::string& way, const Stat& st) {
    row[way + "_Bps"] = st.median;
    row[way + "_min_Bps"] = st.lo;
    row[way + "_max_Bps"] = st.hi;
}

// The rates' table (mhc::TextTable, as mhc's other tables): a median in GB/s and its [min-max]
// spread for each direction alone and both at once, headed over two lines, a row a chunk size. The
// columns are as wide as their widest usual cells, so that each row, printed as soon as it is
// measured (a full calibration takes minutes), lines up with the header printed before it.
TextTable rate_table() {
    std::vector<TableColumn> columns{{{"chunk"}, false, true, 10}};
    const std::pair<const char*, const char*> cells[] = {
        {"alone", "h2d"}, {"alone", "d2h"}, {"both", "h2d"}, {"both", "d2h"}};
    for (const auto& [when, way] : cells) {
        columns.push_back({{when, way}, false, false, 6});
        columns.push_back({{"[min-max]"}, true, false, 13});
    }
    return TextTable(std::move(columns));
}

// A table's lines after its heading's two (a row printed alone).
std::string rows_of(const TextTable& table) {
    const std::string text = table.render(0);
    return text.substr(text.find('\n', text.find('\n') + 1) + 1);
}

RateTable measure_rate_table(k::SwapEngine& engine, const std::vector<size_t>& sizes, const Args& args, int rounds,
                             double budget) {
    // Every rate in one unit (GB/s, 2 decimals: a 4 KiB chunk's 0.56 and a large one's 17.90 read
    // side by side), so that the table fits 100 columns; the unit and the spread said once above it.
    if (!args.json) {
        std::printf("transfer rate in GB/s by chunk size: median of %d rounds [min-max]; a direction alone, both "
                    "at once\n%s",
                    rounds, rate_table().render(0).c_str());
        std::fflush(stdout);
    }
    auto median = [](const Stat& st) {
        char text[32];
        std::snprintf(text, sizeof text, "%.2f", st.median / 1e9);
        return std::string(text);
    };
    auto spread = [](const Stat& st) {
        char text[64];
        std::snprintf(text, sizeof text, "[%.2f-%.2f]", st.lo / 1e9, st.hi / 1e9);
        return std::string(text);
    };
    RateTable table;
    for (size_t s : sizes) {
        int count = args.repeat > 0 ? args.repeat : static_cast<int>(std::clamp(budget / s, 4.0, 4096.0));
        measure(engine, s, std::min(count, 4), true, true);   // warm-up
        ChunkRates rates = measure_rounds(engine, s, count, rounds);
        nlohmann::json row = {{"bytes", s}};
        put_stat(row, "h2d", rates.h2d);
        put_stat(row, "d2h", rates.d2h);
        put_stat(row, "both_h2d", rates.both_h2d);
        put_stat(row, "both_d2h", rates.both_d2h);
        table.rows.push_back(std::move(row));
        if (!args.json) {
            TextTable row = rate_table();
            row.add_row({format_bytes(static_cast<int64_t>(s)), median(rates.h2d), spread(rates.h2d),
                         median(rates.d2h), spread(rates.d2h), median(rates.both_h2d), spread(rates.both_h2d),
                         median(rates.both_d2h), spread(rates.both_d2h)});
            std::printf("%s", rows_of(row).c_str());
            std::fflush(stdout);
        }
        table.by_chunk.push_back({static_cast<int64_t>(s), rates.h2d.median, rates.d2h.median, rates.both_h2d.median,
                                  rates.both_d2h.median});
        if (rates.h2d.median > table.best_h2d.h2d.median) table.best_h2d = rates;
        if (rates.d2h.median > table.best_d2h.d2h.median) table.best_d2h = rates;
        if (rates.h2d.median > 0 && rates.d2h.median > 0)
            table.duplex_ratios.push_back(
                0.5 * (rates.both_h2d.median / rates.h2d.median + rates.both_d2h.median / rates.d2h.median));
    }
    if (!(table.best_h2d.h2d.median > 0) || !(table.best_d2h.d2h.median > 0))
        throw Error("calibrate: no transfer took measurable time (the clock is too coarse for these sizes); "
                    "raise --max-chunk or --repeat", Error::Kind::Internal);
    return table;
}

// Latency: the fixed cost of a transfer = time of a tiny one minus its bytes at full rate.
// Printed; returns seconds, h2d and d2h.
std::pair<double, double> measure_latency(k::SwapEngine& engine, const Rates& best_one, const Args& args,
                                          nlohmann::json& report) {
    const size_t small = 4096;
    const int reps = args.quick ? 50 : 200;
    Stat lh = latency(engine, k::SwapDir::HostToDevice, small, reps);
    Stat ld = latency(engine, k::SwapDir::DeviceToHost, small, reps);
    auto fixed = [&](double t, double bw) { return std::max(0.0, t - small / bw) * 1e6; };   // us
    double lat_h2d = fixed(lh.median, best_one.h2d) * 1e-6;
    double lat_d2h = fixed(ld.median, best_one.d2h) * 1e-6;
    // --json: in seconds, as the profile holds them.
    report["latency"] = {{"transfers", reps},
                         {"h2d", {{"median_s", lat_h2d}, {"p10_s", fixed(lh.lo, best_one.h2d) * 1e-6},
                                  {"p90_s", fixed(lh.hi, best_one.h2d) * 1e-6}}},
                         {"d2h", {{"median_s", lat_d2h}, {"p10_s", fixed(ld.lo, best_one.d2h) * 1e-6},
                                  {"p90_s", fixed(ld.hi, best_one.d2h) * 1e-6}}}};
    if (!args.json)
        std::printf("latency in us (4 KiB, median of %d [p10-p90]): h2d %.2f [%.2f-%.2f], d2h %.2f [%.2f-%.2f]\n",
                    reps, lat_h2d * 1e6, fixed(lh.lo, best_one.h2d), fixed(lh.hi, best_one.h2d), lat_d2h * 1e6,
                    fixed(ld.lo, best_one.d2h), fixed(ld.hi, best_one.d2h));
    return {lat_h2d, lat_d2h};
}

// What the profile holds: each direction's fastest chunk's rate, the latencies and the duplex factor.
struct Measured {
    Rates best_one;
    double latency_h2d = 0, latency_d2h = 0, duplex = 0;
};

// Writes the link profile (named by --name, else by the device or the host engine) and says what it holds.
void write_profile(const Args& args, const std::string& backend, int rounds, const std::string& engine_name,
                   const Measured& measured, std::vector<sim::LinkModel::Chunk> by_chunk, nlohmann::json& report) {
    const bool cuda = backend == "cuda";
    std::string source = "mhc calibrate --backend " + backend + " --path " + args.path + " --max-chunk " +
                         args.max_chunk + " --rounds " + std::to_string(rounds);
    if (args.quick) source += " --quick";
    std::string name = args.name;
    if (name.empty())
        name = cuda ? k::cuda_device_name() + " (" + args.path + ")" : "host memcpy (" + engine_name + ")";
    sim::LinkModel link;
    link.name = name;
    link.h2d = {measured.best_one.h2d, measured.latency_h2d};
    link.d2h = {measured.best_one.d2h, measured.latency_d2h};
    link.copy_engines = cuda ? k::cuda_copy_engines() : 2;
    link.duplex_factor = measured.duplex;
    link.source = source;
    link.by_chunk = std::move(by_chunk);
    const std::vector<std::string> notes = sim::write_link_profile(args.output, link);
    const double written_duplex = std::clamp(measured.duplex, 0.05, 1.0);
    if (args.json) {   // what the profile holds, in its own units
        report["written"] = {{"path", args.output},
                             {"name", name},
                             {"h2d", {{"bandwidth_Bps", link.h2d.bandwidth_Bps}, {"latency_s", link.h2d.latency_s}}},
                             {"d2h", {{"bandwidth_Bps", link.d2h.bandwidth_Bps}, {"latency_s", link.d2h.latency_s}}},
                             {"duplex_factor", written_duplex}};
        report["notes"] = notes;
        std::cout << report.dump(1) << "\n";
        return;
    }
    for (const auto& note : notes) std::printf("note: %s\n", note.c_str());
    // What the profile holds, in the table's units: each direction's fastest chunk's rate.
    std::printf(
        "%s written: h2d %.2f GB/s + %.2f us a transfer, d2h %.2f GB/s + %.2f us a transfer\n"
        "  both directions at once: each at %.2f x its rate (duplex factor)\n",
        args.output.c_str(), measured.best_one.h2d / 1e9, measured.latency_h2d * 1e6, measured.best_one.d2h / 1e9,
        measured.latency_d2h * 1e6, written_duplex);
}

int run(const Args& args) {
    check_before_measuring(args);
    // Said once every refusal has had its turn (a warning, then a refusal, would be two lines).
    std::vector<std::string> warnings;
    const std::string backend = choose_backend(args, warnings);
    const k::Device dev = backend == "cuda" ? k::Device::Cuda : k::Device::Cpu;
    k::require_device(dev);
    const k::SwapPath path = args.path == "zero-copy" ? k::SwapPath::ZeroCopy : k::SwapPath::CopyEngine;
    const int64_t max_chunk = option_value("--max-chunk", [&] { return parse_size(args.max_chunk, 4096); });

    std::vector<size_t> sizes;
    for (size_t s = 4096; s <= static_cast<size_t>(max_chunk); s *= 4) sizes.push_back(s);
    const size_t arena = std::max<size_t>(sizes.back() * 2, 16 << 20);
    refuse_arena_past_half_memory(args, arena);
    // Chunks are 4 KiB times powers of 4: a --max-chunk between two (32MiB) was measured up to the
    // one below it (16 MiB) without a word, the profile's source naming the value given.
    if (static_cast<int64_t>(sizes.back()) != max_chunk)
        warnings.push_back("--max-chunk " + printable(args.max_chunk) +
                           ": chunks are 4 KiB times a power of 4; the largest measured is " +
                           format_bytes(static_cast<int64_t>(sizes.back())));
    for (const auto& warning : warnings) mhc::say("mhc: warning: %s\n", warning.c_str());
    const double budget = args.quick ? 16e6 : 256e6;   // bytes moved per measurement

    auto make = [&](k::SwapPath swap_path) {
        k::SwapConfig config;
        config.device_bytes = config.host_bytes = arena;
        config.verify = false;   // measuring the link, not the checksum
        config.path = swap_path;
        config.chunk_bytes = sizes.back();
        return k::make_swap_engine(dev, config);
    };
    auto engine = make(path);
    const int rounds = args.quick ? std::min(args.rounds, 3) : args.rounds;
    RateTable table = measure_rate_table(*engine, sizes, args, rounds, budget);
    Rates best_one{table.best_h2d.h2d.median, table.best_d2h.d2h.median};
    nlohmann::json report = {{"rounds", rounds}, {"by_chunk", std::move(table.rows)}};
    const auto [lat_h2d, lat_d2h] = measure_latency(*engine, best_one, args, report);
    // Duplex factor: both directions at once relative to one, the median over chunk sizes.
    // The model needs it in (0, 1]; sim::write_link_profile clamps a noisy measurement (a host
    // backend's memcpy threads share no link and can measure above 1) and notes it.
    const double duplex = stat(table.duplex_ratios).median;

    if (dev == k::Device::Cuda) {   // copy engines vs zero-copy, for the record
        auto other = make(path == k::SwapPath::CopyEngine ? k::SwapPath::ZeroCopy : k::SwapPath::CopyEngine);
        const size_t s = sizes.back();
        int count = std::max(4, static_cast<int>(budget / s));
        Rates o = measure(*other, s, count, true, false), od = measure(*other, s, count, false, true);
        report["comparison"] = {{"path", k::to_string(other->config().path)}, {"bytes", s},
                                {"h2d_Bps", o.h2d}, {"d2h_Bps", od.d2h}};
        if (!args.json)
            std::printf("%s at %s (for comparison, not in the profile): h2d %.2f GB/s, d2h %.2f GB/s\n",
                        k::to_string(other->config().path), format_bytes(static_cast<int64_t>(s)).c_str(),
                        o.h2d / 1e9, od.d2h / 1e9);
    }

    write_profile(args, backend, rounds, engine->name(), {best_one, lat_h2d, lat_d2h, duplex},
                  std::move(table.by_chunk), report);
    return kExitOk;
}

Registration reg{Command{
    "calibrate", "Measure host<->device transfers and write a link profile (JSON)",
    [](CLI::App& sub) -> std::function<int()> {
        auto args = std::make_shared<Args>();
        sub.add_option("--backend", args->backend,
                       "Where to measure: host, cuda, or auto (cuda when a GPU is present, else host)")
            ->check(one_of({"auto", "host", "cuda"}))
            ->type_name("BACKEND")
            ->default_str("auto");
        sub.add_option("-o,--output", args->output, "Link profile to write (.json)")->required()->type_name("FILE");
        sub.add_option("--name", args->name, "Name recorded in the profile");
        auto* path = sub.add_option("--path", args->path, "How cuda moves the bytes: copy-engine or zero-copy")
                         ->check(one_of({"copy-engine", "zero-copy"}))
                         ->type_name("NAME")
                         ->capture_default_str();
        sub.add_option("--max-chunk", args->max_chunk, "Largest chunk size measured, at least 4KiB")
            ->type_name("SIZE")
            ->capture_default_str();
        // At most 16 times the most chosen by size (4096): more would take hours and gigabytes.
        sub.add_option("--repeat", args->repeat, "Transfers per measurement, 0 for a number by size")
            ->check(CLI::Range(0, 65536))
            ->default_str("0");
        auto* rounds = sub.add_option("--rounds", args->rounds,
                                      "Repetitions of each measurement; the median is kept (--quick: at most 3)")
                           ->check(CLI::Range(1, 99))
                           ->capture_default_str();
        sub.add_flag("--quick", args->quick, "Fewer bytes per measurement");
        sub.add_flag("--force", args->force, "Replace an existing profile");
        sub.add_flag("--json", args->json,
                     "Print what was measured as JSON (stdout) instead of the tables: each chunk size's medians "
                     "and [min, max] in bytes per second, the latencies in seconds, what the profile holds");
        return [args, path, rounds]() {
            args->path_given = path->count() > 0;
            args->rounds_given = rounds->count() > 0;
            return run(*args);
        };
    }}};

}  // namespace
}  // namespace mhc::cli
