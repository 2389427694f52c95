// Host swap backend: two RAM arenas, one copy worker per direction (its "stream"), each
// transfer copied chunk by chunk with memcpy, checksummed on both sides when verifying.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <set>

#include "cpu/threads.hpp"
#include "mhc/kernels/standin.hpp"
#include "mhc/common/error.hpp"
#include "swap_internal.hpp"

namespace mhc::kernels {

namespace {

struct ArenaFree {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{4096}); }
};
using Arena = std::unique_ptr<unsigned char[], ArenaFree>;

Arena make_arena(size_t bytes) {
    Arena a(static_cast<unsigned char*>(::operator new[](bytes, std::align_val_t{4096})));
    std::memset(a.get(), 0, bytes);  // fault the pages in now, not during a timed transfer
    return a;
}

class HostSwapEngine final : public SwapEngine {
public:
    explicit HostSwapEngine(const SwapConfig& c)
        : cfg_(c), dev_(c.device_memory ? Arena{} : make_arena(c.device_bytes)), host_(c.host_memory ? Arena{} : make_arena(c.host_bytes)), limiter_(c.max_ops_per_s),
          t0_(std::chrono::steady_clock::now()) {
        for (int d = 0; d < 2; ++d) workers_[d] = std::thread([this, d] { work(static_cast<SwapDir>(d)); });
    }
    ~HostSwapEngine() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        work_cv_.notify_all();
        for (auto& w : workers_) w.join();
    }

    std::string name() const override { return "host-swap"; }
    const SwapConfig& config() const override { return cfg_; }
    void* device_arena() override { return dev(); }
    void* host_arena() override { return host(); }

    uint64_t submit(SwapDir dir, size_t host_off, size_t dev_off, size_t bytes) override {
        check_swap_range(cfg_, host_off, dev_off, bytes);
        std::lock_guard<std::mutex> lock(mu_);
        Op op{next_id_++, dir, host_off, dev_off, bytes, fault_[idx(dir)], std::chrono::steady_clock::now(),
              cfg_.paused_ns ? cfg_.paused_ns->load() : 0};
        fault_[idx(dir)] = Fault::None;
        queue_[idx(dir)].push_back(op);
        pending_.insert(op.id);
        work_cv_.notify_all();
        return op.id;
    }

    bool done(uint64_t id) override {
        std::lock_guard<std::mutex> lock(mu_);
        if (finished_.count(id)) return true;
        if (pending_.count(id)) return false;
        throw Error("swap: unknown or already collected transfer id " + std::to_string(id), Error::Kind::Internal);
    }

    SwapResult wait(uint64_t id) override {
        std::unique_lock<std::mutex> lock(mu_);
        if (!finished_.count(id) && !pending_.count(id))
            throw Error("swap: unknown or already collected transfer id " + std::to_string(id), Error::Kind::Internal);
        done_cv_.wait(lock, [&] { return finished_.count(id) > 0; });
        SwapResult r = finished_[id];
        finished_.erase(id);
        return r;
    }

    std::vector<SwapResult> drain() override {
        std::unique_lock<std::mutex> lock(mu_);
        done_cv_.wait(lock, [&] { return pending_.empty(); });
        std::vector<SwapResult> out;
        for (auto& [id, r] : finished_) out.push_back(r);
        finished_.clear();
        return out;
    }

    SwapStats stats() const override {
        std::lock_guard<std::mutex> lock(mu_);
        return stats_;
    }

    void inject_fault(SwapDir dir, Fault f) override {
        std::lock_guard<std::mutex> lock(mu_);
        fault_[idx(dir)] = f;
    }

private:
    using Clock = std::chrono::steady_clock;
    struct Op {
        uint64_t id;
        SwapDir dir;
        size_t host_off, dev_off, bytes;
        Fault fault;
        std::chrono::steady_clock::time_point submitted;
        int64_t paused_at_submit;   // SwapConfig::paused_ns then
    };
    // Paced: where a transfer's time on the emulated link starts, and the caller's stood-still
    // counter at that point.
    struct LinkStart {
        std::chrono::steady_clock::time_point at;
        int64_t paused;
    };
    static int idx(SwapDir d) { return d == SwapDir::HostToDevice ? 0 : 1; }
    double now_s() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    }

    // The pace of a transfer that starts now in `dir`: the simulator's rule, decided once at
    // its start (the other direction busy then: the duplex factor for the whole transfer).
    double pace_for(SwapDir dir) const {
        const double p = dir == SwapDir::HostToDevice ? cfg_.pace_h2d_Bps : cfg_.pace_d2h_Bps;
        if (p <= 0) return 0;
        return copying_[1 - idx(dir)].load() ? p * cfg_.pace_duplex : p;
    }

    void work(SwapDir dir) {
        if (cfg_.pace_h2d_Bps > 0 || cfg_.pace_d2h_Bps > 0) precise_timer_slack();   // the pace's sleeps end on time
        for (;;) {
            Op op;
            {
                std::unique_lock<std::mutex> lock(mu_);
                work_cv_.wait(lock, [&] { return stop_ || !queue_[idx(dir)].empty(); });
                if (queue_[idx(dir)].empty()) return;  // stopping with nothing left
                op = queue_[idx(dir)].front();
                queue_[idx(dir)].pop_front();
            }
            const auto slot = limiter_.acquire();
            const double pace = pace_for(dir);
            copying_[idx(dir)] = true;
            SwapResult r;
            if (pace > 0) {
                // The simulator's queue: submitted, or freed by the previous transfer, or given
                // its slot by the rate limit, whichever is last.
                LinkStart s{op.submitted, op.paused_at_submit};
                if (link_free_[idx(dir)].at > s.at) s = link_free_[idx(dir)];
                if (slot > s.at) s = {slot, cfg_.paused_ns ? cfg_.paused_ns->load() : 0};
                r = copy_paced(op, pace, s);
                link_free_[idx(dir)] = {Clock::now(), cfg_.paused_ns ? cfg_.paused_ns->load() : 0};
            } else {
                r = copy(op);
            }
            copying_[idx(dir)] = false;
            std::lock_guard<std::mutex> lock(mu_);
            stats_.transfers++;
            if (r.late_s > 0) {
                stats_.late++;
                stats_.late_s += r.late_s;
            }
            (dir == SwapDir::HostToDevice ? stats_.bytes_h2d : stats_.bytes_d2h) += r.bytes;
            if (r.verified) stats_.verified++;
            if (!r.ok) stats_.mismatches++;
            finished_[op.id] = r;
            pending_.erase(op.id);
            done_cv_.notify_all();
        }
    }

    SwapResult copy(const Op& op) {
        SwapResult r;
        r.id = op.id;
        r.dir = op.dir;
        r.bytes = op.bytes;
        r.start_s = now_s();
        const bool h2d = op.dir == SwapDir::HostToDevice;
        const unsigned char* src = h2d ? host() + op.host_off : dev() + op.dev_off;
        unsigned char* dst = h2d ? dev() + op.dev_off : host() + op.host_off;
        const size_t chunk = cfg_.chunk_bytes;
        const int64_t chunks = static_cast<int64_t>((op.bytes + chunk - 1) / chunk);
        const int workers = std::min<int64_t>(cfg_.threads_per_direction, std::max<int64_t>(chunks, 1));
        std::vector<uint64_t> ssum(workers, 0), dsum(workers, 0);
        cpu::parallel_for(chunks, workers, 1, [&](int w, int64_t c0, int64_t c1) {
            for (int64_t c = c0; c < c1; ++c) copy_chunk(op, src, dst, c, chunks, ssum[w], dsum[w]);
        });
        finish_sums(op, r, ssum, dsum);
        r.end_s = now_s();
        return r;
    }

    // One chunk of a transfer, its source and destination checksummed when verifying (the
    // source while it is copied); the test faults applied.
    void copy_chunk(const Op& op, const unsigned char* src, unsigned char* dst, int64_t c, int64_t chunks, uint64_t& ssum,
                    uint64_t& dsum) const {
        const size_t off = static_cast<size_t>(c) * cfg_.chunk_bytes;
        const size_t len = std::min(cfg_.chunk_bytes, op.bytes - off);
        const bool drop = op.fault == Fault::Drop && c == chunks - 1;
        if (cfg_.verify && !drop) ssum += checksum64_copy_partial(dst + off, src + off, len, off / 8);
        else if (cfg_.verify) ssum += checksum64_partial(src + off, len, off / 8);
        else if (!drop) std::memcpy(dst + off, src + off, len);
        if (op.fault == Fault::Corrupt && c == chunks / 2) dst[off + len / 2] ^= 0x5a;
        if (cfg_.verify) dsum += checksum64_partial(dst + off, len, off / 8);
    }

    void finish_sums(const Op& op, SwapResult& r, const std::vector<uint64_t>& ssum, const std::vector<uint64_t>& dsum) const {
        if (!cfg_.verify) return;
        uint64_t s = 0, d = 0;
        for (size_t w = 0; w < ssum.size(); ++w) {
            s += ssum[w];
            d += dsum[w];
        }
        r.verified = true;
        r.source_sum = checksum64_finish(s, op.bytes);
        r.dest_sum = checksum64_finish(d, op.bytes);
        r.ok = r.source_sum == r.dest_sum;
    }

    // The emulated link: the copy runs as fast as it goes and the transfer completes at
    // start + latency + bytes / pace (what waits for it cannot see the data sooner), its start
    // being the simulator's (`s`: submitted, or the previous transfer of the direction done).
    // Pacing chunk by chunk made every slow moment of the host's memory late: on the 2-core VM
    // a 2 MiB chunk takes 3-4 ms instead of 0.7 now and then, even with nothing else running,
    // and one near a transfer's end had no time left to be made up. Time the caller's clock
    // stood still (SwapConfig::paused_ns) since the start moves the completion by as much.
    SwapResult copy_paced(const Op& op, double pace, LinkStart s) {
        SwapResult r;
        r.id = op.id;
        r.dir = op.dir;
        r.bytes = op.bytes;
        r.start_s = std::chrono::duration<double>(s.at - t0_).count();
        const bool h2d = op.dir == SwapDir::HostToDevice;
        const unsigned char* src = h2d ? host() + op.host_off : dev() + op.dev_off;
        unsigned char* dst = h2d ? dev() + op.dev_off : host() + op.host_off;
        const int64_t chunks = static_cast<int64_t>((op.bytes + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes);
        std::vector<uint64_t> ssum(1, 0), dsum(1, 0);
        const int64_t paused0 = s.paused;
        for (int64_t c = 0; c < chunks; ++c) copy_chunk(op, src, dst, c, chunks, ssum[0], dsum[0]);
        const double latency = h2d ? cfg_.pace_h2d_latency_s : cfg_.pace_d2h_latency_s;
        const auto due = s.at + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(latency + static_cast<double>(op.bytes) / pace));
        finish_sums(op, r, ssum, dsum);
        const auto copied = Clock::now();
        host_wait_until(due, cfg_.paused_ns, paused0);   // sleeps, spins the last 150 us
        r.end_s = std::chrono::duration<double>(Clock::now() - t0_).count();
        // Late: the copy itself took longer than the pace allows (the clock's pauses aside).
        const auto stood = std::chrono::nanoseconds(cfg_.paused_ns ? cfg_.paused_ns->load() - paused0 : 0);
        const double late = std::chrono::duration<double>(copied - due - stood).count();
        if (late > 0) r.late_s = late;
        return r;
    }

    SwapConfig cfg_;
    Arena dev_, host_;   // empty when the caller owns that memory
    unsigned char* dev() const { return cfg_.device_memory ? static_cast<unsigned char*>(cfg_.device_memory) : dev_.get(); }
    unsigned char* host() const { return cfg_.host_memory ? static_cast<unsigned char*>(cfg_.host_memory) : host_.get(); }
    RateLimiter limiter_;
    std::chrono::steady_clock::time_point t0_;
    LinkStart link_free_[2] = {};   // paced, per direction: when the previous transfer completed
    mutable std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    bool stop_ = false;
    uint64_t next_id_ = 1;
    std::deque<Op> queue_[2];
    Fault fault_[2] = {Fault::None, Fault::None};
    std::set<uint64_t> pending_;
    std::map<uint64_t, SwapResult> finished_;
    SwapStats stats_;
    std::thread workers_[2];
    std::atomic<bool> copying_[2] = {false, false};   // per direction: a transfer is being copied
};

}  // namespace

std::unique_ptr<SwapEngine> make_host_swap_engine(const SwapConfig& c) {
    return std::make_unique<HostSwapEngine>(c);
}

}  // namespace mhc::kernels
