// Self-calibration of the replay's link (calibrate.hpp says why).
#include "mhc/replay/calibrate.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cctype>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "mhc/common/environment.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/standin.hpp"
#include "mhc/kernels/swap.hpp"

namespace mhc::replay {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* to_string(Competition c) {
    switch (c) {
        case Competition::None: return "none";
        case Competition::Sleeping: return "sleeping stand-ins";
        case Competition::Spinning: return "spinning stand-ins";
    }
    return "?";
}

namespace {

// The work that shares the cores with the copy threads while they are measured.
class Competitors {
public:
    Competitors(Competition c, kernels::Device device) : c_(c) {
        if (c == Competition::None) return;
        buf_.assign(4 << 20, 1);
        threads_.emplace_back([this, device] { worker(device); });
        threads_.emplace_back([this] { control(); });
    }
    ~Competitors() {
        stop_ = true;
        for (auto& t : threads_) t.join();
    }

private:
    // A replay worker: touch the operands' pages (one read per 4 KiB page, a stamp written per
    // page), then run out the kernel's duration (Standin::run_for: sleep, spin the end).
    void worker(kernels::Device device) {
        auto standin = kernels::make_standin(device == kernels::Device::Cuda ? kernels::Device::Cuda : kernels::Device::Cpu, 1);
        uint64_t acc = 0;
        while (!stop_) {
            for (size_t o = 0; o < buf_.size(); o += 4096) acc += buf_[o];
            for (size_t o = 0; o < buf_.size(); o += 8192) buf_[o] = static_cast<unsigned char>(acc);
            if (c_ == Competition::Spinning) {
                auto until = Clock::now() + std::chrono::microseconds(500);
                while (Clock::now() < until) {}
            } else {
                standin->run_for(500e-6);
            }
        }
        sink_ = acc;
    }
    // The control thread: sleeps until 150 us before each timed action, spins the rest.
    void control() {
        while (!stop_) {
            auto when = Clock::now() + std::chrono::microseconds(300);
            std::this_thread::sleep_until(when - std::chrono::microseconds(150));
            while (Clock::now() < when) {}
        }
    }
    Competition c_;
    std::vector<unsigned char> buf_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
    volatile uint64_t sink_ = 0;
};

struct Rates {
    double h2d = 0, d2h = 0;
};

// `count` transfers of `bytes` in each requested direction, queued at once; per-direction
// rate from the first start to the last end.
Rates measure(kernels::SwapEngine& e, size_t bytes, int count, bool h2d, bool d2h) {
    std::vector<uint64_t> ids;
    const size_t slots = std::max<size_t>(1, e.config().host_bytes / bytes);
    for (int i = 0; i < count; ++i) {
        const size_t off = (static_cast<size_t>(i) % slots) * bytes;
        if (h2d) ids.push_back(e.submit(kernels::SwapDir::HostToDevice, off, off, bytes));
        if (d2h) ids.push_back(e.submit(kernels::SwapDir::DeviceToHost, off, off, bytes));
    }
    double lo[2] = {1e300, 1e300}, hi[2] = {0, 0};
    for (uint64_t id : ids) {
        kernels::SwapResult r = e.wait(id);
        const int d = r.dir == kernels::SwapDir::HostToDevice ? 0 : 1;
        lo[d] = std::min(lo[d], r.start_s);
        hi[d] = std::max(hi[d], r.end_s);
    }
    const double total = static_cast<double>(bytes) * count;
    Rates out;
    if (h2d && hi[0] > lo[0]) out.h2d = total / (hi[0] - lo[0]);
    if (d2h && hi[1] > lo[1]) out.d2h = total / (hi[1] - lo[1]);
    return out;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

double load_average() {
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

std::string host_name() {
    char h[256] = {};
    if (gethostname(h, sizeof h - 1) != 0 || !h[0]) return "host";
    std::string s(h);
    for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
    return s;
}

std::string now_utc() {
    std::time_t t = std::time(nullptr);
    char b[32];
    std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return b;
}

}  // namespace

LinkCalibration measure_replay_link(const CalibrationSpec& spec) {
    const kernels::Device device = spec.backend == Backend::Cuda ? kernels::Device::Cuda : kernels::Device::Cpu;
    kernels::require_device(device);
    const size_t transfer = std::max(spec.transfer_bytes, spec.chunk_bytes);
    kernels::SwapConfig sc;
    sc.device_bytes = sc.host_bytes = std::max<size_t>(transfer * 4, 64 << 20);
    sc.chunk_bytes = spec.chunk_bytes;
    sc.verify = spec.verify;
    sc.threads_per_direction = spec.copy_threads;
    auto eng = kernels::make_swap_engine(device, sc);
    const int count = static_cast<int>(std::clamp<size_t>(spec.bytes_per_measure / transfer, 2, 1024));
    LinkCalibration out;
    out.load_average = load_average();
    std::vector<double> h, d, bh, bd;
    {
        Competitors comp(spec.competition, device);
        measure(*eng, transfer, 2, true, true);   // warm-up
        // Interleaved, so that a slow moment of the machine touches every kind alike.
        for (int r = 0; r < std::max(spec.repeats, 1); ++r) {
            h.push_back(measure(*eng, transfer, count, true, false).h2d);
            d.push_back(measure(*eng, transfer, count, false, true).d2h);
            Rates b = measure(*eng, transfer, count, true, true);
            bh.push_back(b.h2d);
            bd.push_back(b.d2h);
        }
    }
    if (!(median(h) > 0) || !(median(d) > 0))
        throw Error("self-calibration: no transfer took measurable time (clock too coarse)", Error::Kind::Internal);
    sim::LinkModel& l = out.link;
    // Short: the name is part of every run's name; what was measured is in `source`.
    const bool paced = spec.paced && spec.backend == Backend::Host;
    l.name = std::string(spec.backend == Backend::Cuda ? "cuda" : "host") + (paced ? "-paced" : "-replay");
    l.h2d.bandwidth_Bps = median(h);
    l.d2h.bandwidth_Bps = median(d);
    // A transfer's fixed cost is in the queued rate already (back-to-back transfers); the
    // replay's transfers are whole allocations, so the latency left is the submit overhead,
    // measured on small transfers.
    {
        std::vector<double> lat;
        for (int i = 0; i < 50; ++i) {
            auto t0 = Clock::now();
            eng->wait(eng->submit(kernels::SwapDir::HostToDevice, 0, 0, 4096));
            lat.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        l.h2d.latency_s = l.d2h.latency_s = std::max(0.0, median(lat) - 4096.0 / l.h2d.bandwidth_Bps);
    }
    l.copy_engines = 2;
    l.duplex_factor = 0.5 * (median(bh) / l.h2d.bandwidth_Bps + median(bd) / l.d2h.bandwidth_Bps);
    l.nccl_share = l.memcpy_share = 0;
    auto [hlo, hhi] = std::minmax_element(h.begin(), h.end());
    auto [dlo, dhi] = std::minmax_element(d.begin(), d.end());
    out.h2d_lo = *hlo;
    out.h2d_hi = *hhi;
    out.d2h_lo = *dlo;
    out.d2h_hi = *dhi;
    out.both_lo = std::min(*std::min_element(bh.begin(), bh.end()), *std::min_element(bd.begin(), bd.end()));
    out.repeats = static_cast<int>(h.size());
    char raw[640];
    std::snprintf(raw, sizeof raw,
                  "%s chunks, %d copy thread(s) per direction, %d repeats of %s in %s transfers, checksums %s, beside %s, "
                  "load average %.2f; h2d %s (%s-%s), d2h %s (%s-%s), both at once %s / %s (slowest %s)",
                  format_bytes(static_cast<int64_t>(spec.chunk_bytes)).c_str(), spec.copy_threads, out.repeats,
                  format_bytes(static_cast<int64_t>(transfer) * count).c_str(), format_bytes(static_cast<int64_t>(transfer)).c_str(),
                  spec.verify ? "on" : "off", to_string(spec.competition), out.load_average,
                  format_rate(l.h2d.bandwidth_Bps).c_str(), format_rate(out.h2d_lo).c_str(), format_rate(out.h2d_hi).c_str(),
                  format_rate(l.d2h.bandwidth_Bps).c_str(), format_rate(out.d2h_lo).c_str(), format_rate(out.d2h_hi).c_str(),
                  format_rate(median(bh)).c_str(), format_rate(median(bd)).c_str(), format_rate(out.both_lo).c_str());
    char src[1024];
    if (paced) {
        // The emulated link: a pace the copy threads keep even in the slowest repeat with
        // both directions copying (the replay's worst case), with some room to spare, so its
        // transfers take bytes / pace and not what the host happens to give them.
        const double pace = kPaceShare * out.both_lo;
        l.h2d.bandwidth_Bps = l.d2h.bandwidth_Bps = pace;
        l.duplex_factor = 1.0;
        std::snprintf(src, sizeof src, "mhc validate self-calibration at %s, paced link: %s per direction = %.2f x the slowest "
                      "both-directions rate; measured: %s", now_utc().c_str(), format_rate(pace).c_str(), kPaceShare, raw);
    } else {
        std::snprintf(src, sizeof src, "mhc validate self-calibration at %s: %s", now_utc().c_str(), raw);
    }
    l.by_chunk = {{static_cast<int64_t>(spec.chunk_bytes), l.h2d.bandwidth_Bps, l.d2h.bandwidth_Bps,
                   paced ? l.h2d.bandwidth_Bps : median(bh), paced ? l.d2h.bandwidth_Bps : median(bd)}};
    l.source = src;
    l.measured_load_average = out.load_average;
    out.origin = "measured now";
    return out;
}

std::string calibration_cache_path(const CalibrationSpec& spec) {
    // The trace cache's folder: a relative XDG_CACHE_HOME was taken (the cache written into the
    // working folder), and /tmp/mhc-UID was made 0755 and used whoever owned it (another user's
    // could plant a calibration); with none to be had, no file ("": measured, not cached).
    std::string why;
    const std::string dir = user_cache_dir(why);
    if (dir.empty()) return {};
    char name[512];
    std::snprintf(name, sizeof name, "replay-link-%s-%s-%uc-%zu-%dt%s%s%s.json", spec.backend == Backend::Cuda ? "cuda" : "host",
                  host_name().c_str(), std::thread::hardware_concurrency(), spec.chunk_bytes, spec.copy_threads,
                  spec.verify ? "" : "-noverify",
                  spec.competition == Competition::Sleeping ? "" : spec.competition == Competition::None ? "-alone" : "-spin",
                  spec.paced && spec.backend == Backend::Host ? "-paced" : "");
    return (fs::path(dir) / name).string();
}

namespace {

// The cached calibration at `path`, when it loads and is young enough; why not otherwise.
bool read_cache(const std::string& path, double max_age_s, LinkCalibration& out, std::string& why) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        why = "no cached calibration";
        return false;
    }
    const auto mtime = fs::last_write_time(path, ec);
    if (ec) {
        why = "cache unreadable";
        return false;
    }
    const double age = std::chrono::duration<double>(fs::file_time_type::clock::now() - mtime).count();
    if (age > max_age_s) {
        char b[128];
        std::snprintf(b, sizeof b, "the cached calibration is %.1f h old (stale after %.1f h)", age / 3600, max_age_s / 3600);
        why = b;
        return false;
    }
    try {
        out.link = sim::load_link_profile(path);
    } catch (const std::exception& e) {
        why = std::string("the cached calibration does not load (") + e.what() + ")";
        return false;
    }
    const double now = load_average();
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    if (load_changed(out.link.measured_load_average, now, cores)) {
        char b[160];
        std::snprintf(b, sizeof b, "the load changed since the cached calibration (load average %.2f then, %.2f now)",
                      out.link.measured_load_average, now);
        why = b;
        return false;
    }
    char b[160];
    std::snprintf(b, sizeof b, "cached %s, measured %.0f min ago", path.c_str(), age / 60);
    out.origin = b;
    out.cache_path = path;
    return true;
}

}  // namespace

LinkCalibration replay_link(const CalibrationSpec& spec, bool recalibrate, double max_age_s,
                            const std::function<LinkCalibration(const CalibrationSpec&)>& measure_fn) {
    const std::string path = calibration_cache_path(spec);
    LinkCalibration out;
    std::string why;
    if (path.empty()) {   // no cache folder of this user's to be had
        std::string folders;
        (void)user_cache_dir(folders);
        out = measure_fn ? measure_fn(spec) : measure_replay_link(spec);
        out.origin = "measured now, not cached (no cache folder: " + folders + ")";
        sim::clamp_measured_link(out.link);
        return out;
    }
    if (!recalibrate && read_cache(path, max_age_s, out, why)) return out;
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    // One measurement at a time per cache file: another process measuring now would halve
    // what this one sees. Waiting for it and reading its result is also faster.
    int lock = ec ? -1 : ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock >= 0 && flock(lock, LOCK_EX) != 0) {
        ::close(lock);
        lock = -1;
    }
    struct Unlock {
        int fd;
        ~Unlock() {
            if (fd >= 0) ::close(fd);   // releases the flock
        }
    } unlock{lock};
    if (!recalibrate && read_cache(path, max_age_s, out, why)) {
        out.origin += " (measured by another process meanwhile)";
        return out;
    }
    if (recalibrate) why = "--recalibrate";
    out = measure_fn ? measure_fn(spec) : measure_replay_link(spec);
    out.origin = "measured now (" + why + ")";
    std::vector<std::string> notes;
    if (lock >= 0 || !ec) {
        try {
            const NotOutputs cache;   // a signal later does not name the cache as the command's output
            notes = sim::write_link_profile(path, out.link);
            out.link = sim::load_link_profile(path);   // as it will be read next time: clamped
            out.cache_path = path;
            out.origin += ", cached in " + path;
        } catch (const std::exception& e) {
            out.origin += std::string(", not cached (") + e.what() + ")";
        }
    }
    if (out.cache_path.empty()) sim::clamp_measured_link(out.link);   // predict with what a profile would hold
    return out;
}

bool load_changed(double then, double now, int cores) {
    if (then < 0 || now < 0) return false;
    return std::fabs(now - then) > std::max(0.5, 0.25 * std::max(cores, 1));
}

double auto_time_scale(const sim::LinkModel& modelled, const sim::LinkModel& measured, std::string* why) {
    const double m = 0.5 * (modelled.h2d.bandwidth_Bps + modelled.d2h.bandwidth_Bps);
    const double h = 0.5 * (measured.h2d.bandwidth_Bps + measured.d2h.bandwidth_Bps);
    const double raw = h > 0 ? m / h : 1.0;
    const double s = std::clamp(raw, 1.0, 1000.0);
    if (why) {
        char line[768];
        if (s == raw)
            std::snprintf(
                line, sizeof line,
                "auto: %s moves %s, this replay's copies %s, so kernels and gaps run x%.3g slower and transfers "
                "take the share of the step they would on %s",
                modelled.name.c_str(), format_rate(m).c_str(), format_rate(h).c_str(), raw, modelled.name.c_str());
        else   // clamped: the replay and its prediction are both for this replay's link, at scale s
            std::snprintf(
                line, sizeof line,
                "auto: %s moves %s, this replay's copies %s: the ratio asks x%.3g, kept in [1, 1000] at x%g, so "
                "transfers take %.3g x the share of the step they would on %s (the ratio is not matched: "
                "the prediction is for this replay's link at x%g)",
                modelled.name.c_str(), format_rate(m).c_str(), format_rate(h).c_str(), raw, s, raw / s,
                modelled.name.c_str(), s);
        *why = line;
    }
    return s;
}

double floor_paced_time_scale(double scale, sim::LinkModel& paced, std::string* why) {
    if (!(scale < kMinPacedTimeScale)) return scale;
    const double slow = scale / kMinPacedTimeScale;
    paced.h2d.bandwidth_Bps *= slow;
    paced.d2h.bandwidth_Bps *= slow;
    for (auto& chunk : paced.by_chunk) {
        chunk.h2d_Bps *= slow;
        chunk.d2h_Bps *= slow;
        chunk.both_h2d_Bps *= slow;
        chunk.both_d2h_Bps *= slow;
    }
    if (why) {
        char line[256];
        std::snprintf(line, sizeof line, "; raised to x%g, the least for a paced replay's accuracy, with the paced link slowed to %s",
                      kMinPacedTimeScale, format_rate(0.5 * (paced.h2d.bandwidth_Bps + paced.d2h.bandwidth_Bps)).c_str());
        *why += line;
    }
    return kMinPacedTimeScale;
}

}  // namespace mhc::replay
