// `mhc calibrate`: measures the host<->device link through the swap engine (H2D and D2H
// bandwidth and latency by chunk size, one direction and both at once) and writes the link
// profile the simulator loads.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/swap.hpp"

namespace mhc::cli {
namespace {

namespace k = mhc::kernels;
using Clock = std::chrono::steady_clock;

struct Args {
    std::string backend, output, name, path = "copy-engine", max_chunk = "64MiB";
    int repeat = 0;
    bool quick = false;
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
    if (h2d) out.h2d = total / end[0];
    if (d2h) out.d2h = total / end[1];
    return out;
}

// Mean seconds of one isolated small transfer, submit to completion.
double latency(k::SwapEngine& e, k::SwapDir dir, size_t bytes, int reps) {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        auto t0 = Clock::now();
        e.wait(e.submit(dir, 0, 0, bytes));
        t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];  // median: robust to a descheduled thread
}

int run(const Args& a) {
    k::Device dev;
    std::string backend = a.backend;
    if (backend.empty()) backend = k::cuda_device_count() > 0 ? "cuda" : "host";
    if (backend == "host") dev = k::Device::Cpu;
    else if (backend == "cuda") dev = k::Device::Cuda;
    else throw Error("--backend: unknown backend '" + backend + "' (host or cuda)");
    k::require_device(dev);
    k::SwapPath path;
    if (a.path == "copy-engine") path = k::SwapPath::CopyEngine;
    else if (a.path == "zero-copy") path = k::SwapPath::ZeroCopy;
    else throw Error("--path: unknown path '" + a.path + "' (copy-engine or zero-copy)");
    const int64_t max_chunk = parse_bytes(a.max_chunk);
    if (max_chunk < 4096) throw Error("--max-chunk must be at least 4KiB");

    std::vector<size_t> sizes;
    for (size_t s = 4096; s <= static_cast<size_t>(max_chunk); s *= 4) sizes.push_back(s);
    const size_t arena = std::max<size_t>(sizes.back() * 2, 16 << 20);
    const double budget = a.quick ? 16e6 : 256e6;  // bytes moved per measurement

    auto make = [&](k::SwapPath p) {
        k::SwapConfig c;
        c.device_bytes = c.host_bytes = arena;
        c.verify = false;  // measuring the link, not the checksum
        c.path = p;
        c.chunk_bytes = sizes.back();
        return k::make_swap_engine(dev, c);
    };
    auto engine = make(path);
    nlohmann::json by_chunk = nlohmann::json::array();
    std::printf("%-10s %12s %12s %14s %14s\n", "chunk", "h2d", "d2h", "both: h2d", "both: d2h");
    Rates best_one, best_both;
    for (size_t s : sizes) {
        int count = a.repeat > 0 ? a.repeat : static_cast<int>(std::clamp(budget / s, 4.0, 4096.0));
        measure(*engine, s, std::min(count, 4), true, true);  // warm-up
        Rates h = measure(*engine, s, count, true, false);
        Rates d = measure(*engine, s, count, false, true);
        Rates b = measure(*engine, s, count, true, true);
        std::printf("%-10s %12s %12s %14s %14s\n", format_bytes(static_cast<int64_t>(s)).c_str(),
                    format_rate(h.h2d).c_str(), format_rate(d.d2h).c_str(), format_rate(b.h2d).c_str(),
                    format_rate(b.d2h).c_str());
        by_chunk.push_back({{"bytes", s}, {"h2d_Bps", h.h2d}, {"d2h_Bps", d.d2h},
                            {"both_h2d_Bps", b.h2d}, {"both_d2h_Bps", b.d2h}});
        if (h.h2d > best_one.h2d) { best_one.h2d = h.h2d; best_both.h2d = b.h2d; }
        if (d.d2h > best_one.d2h) { best_one.d2h = d.d2h; best_both.d2h = b.d2h; }
    }
    // Latency: the fixed cost of a transfer = time of a tiny one minus its bytes at full rate.
    const size_t small = 4096;
    const int reps = a.quick ? 50 : 200;
    double lat_h2d = std::max(0.0, latency(*engine, k::SwapDir::HostToDevice, small, reps) - small / best_one.h2d);
    double lat_d2h = std::max(0.0, latency(*engine, k::SwapDir::DeviceToHost, small, reps) - small / best_one.d2h);
    const double duplex = 0.5 * (best_both.h2d / best_one.h2d + best_both.d2h / best_one.d2h);

    if (dev == k::Device::Cuda) {  // copy engines vs zero-copy, for the record
        auto other = make(path == k::SwapPath::CopyEngine ? k::SwapPath::ZeroCopy : k::SwapPath::CopyEngine);
        const size_t s = sizes.back();
        int count = std::max(4, static_cast<int>(budget / s));
        Rates o = measure(*other, s, count, true, false), od = measure(*other, s, count, false, true);
        std::printf("%s at %s: h2d %s, d2h %s\n", k::to_string(other->config().path),
                    format_bytes(static_cast<int64_t>(s)).c_str(), format_rate(o.h2d).c_str(),
                    format_rate(od.d2h).c_str());
    }

    std::string source = "mhc calibrate --backend " + backend + " --path " + a.path + " --max-chunk " + a.max_chunk;
    if (a.quick) source += " --quick";
    std::string name = a.name;
    if (name.empty())
        name = dev == k::Device::Cuda ? k::cuda_device_name() + " (" + a.path + ")" : "host memcpy (" + engine->name() + ")";
    nlohmann::json j = {
        {"name", name},
        {"h2d", {{"bandwidth_Bps", best_one.h2d}, {"latency_s", lat_h2d}}},
        {"d2h", {{"bandwidth_Bps", best_one.d2h}, {"latency_s", lat_d2h}}},
        {"copy_engines", dev == k::Device::Cuda ? k::cuda_copy_engines() : 2},
        {"duplex_factor", duplex},
        {"source", source},
        {"by_chunk", by_chunk}};
    const std::string text = j.dump(2) + "\n";
    mhc::write_file_atomically(a.output, text, mhc::IfExists::Replace);
    std::printf("h2d %s, latency %.2f us; d2h %s, latency %.2f us; duplex factor %.2f -> %s\n",
                format_rate(best_one.h2d).c_str(), lat_h2d * 1e6, format_rate(best_one.d2h).c_str(),
                lat_d2h * 1e6, duplex, a.output.c_str());
    return kExitOk;
}

Registration reg{Command{
    "calibrate", "Measure host<->device transfers and write a link profile (JSON)",
    [](CLI::App& sub) -> std::function<int()> {
        auto args = std::make_shared<Args>();
        sub.add_option("--backend", args->backend, "host or cuda (default: cuda when a GPU is present)");
        sub.add_option("-o,--output", args->output, "Link profile to write")->required();
        sub.add_option("--name", args->name, "Name recorded in the profile");
        sub.add_option("--path", args->path, "copy-engine or zero-copy (cuda)")->capture_default_str();
        sub.add_option("--max-chunk", args->max_chunk, "Largest chunk size measured")->capture_default_str();
        sub.add_option("--repeat", args->repeat, "Transfers per measurement (default: by size)");
        sub.add_flag("--quick", args->quick, "Fewer bytes per measurement");
        return [args]() { return run(*args); };
    }}};

}  // namespace
}  // namespace mhc::cli
