// Host stand-ins: a timed busy wait and a bandwidth-bound read/write over given buffers.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "cpu/threads.hpp"
#include "swap_internal.hpp"

namespace mhc::kernels {

namespace {
using Clock = std::chrono::steady_clock;

// Sleeping is cheap but wakes up late by tens of µs; spinning is exact but burns a core.
// Sleep until kSpinMargin before the deadline, then spin on the clock.
constexpr auto kSpinMargin = std::chrono::microseconds(150);

void wait_until(Clock::time_point deadline) {
    for (;;) {
        auto now = Clock::now();
        if (now >= deadline) return;
        if (deadline - now > kSpinMargin)
            std::this_thread::sleep_for(deadline - now - kSpinMargin);
    }
}

class HostStandin final : public Standin {
public:
    explicit HostStandin(int threads) : threads_(threads > 0 ? threads : cpu::default_threads()) {
        // The overhead is the cost of one call with nothing to wait for (clock reads).
        auto t0 = Clock::now();
        for (int i = 0; i < 1000; ++i) wait_until(Clock::now());
        overhead_ = std::chrono::duration<double>(Clock::now() - t0).count() / 1000.0;
    }
    std::string name() const override { return "host-standin"; }

    void run_for(double seconds) override {
        auto t0 = Clock::now();
        double s = std::max(0.0, seconds - overhead_);
        wait_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)));
        last_ = std::chrono::duration<double>(Clock::now() - t0).count();
    }

    void touch(const void* read, size_t read_bytes, void* write, size_t write_bytes) override {
        auto t0 = Clock::now();
        const size_t unit = 1 << 16;
        const size_t total = std::max(read_bytes, write_bytes);
        const int64_t units = static_cast<int64_t>((total + unit - 1) / unit);
        const int workers = cpu::workers_for(units, threads_, 4);
        std::vector<uint64_t> sinks(workers, 0);
        cpu::parallel_for(units, workers, 1, [&](int w, int64_t u0, int64_t u1) {
            uint64_t acc = 0;
            for (int64_t u = u0; u < u1; ++u) {
                const size_t off = static_cast<size_t>(u) * unit;
                if (off < read_bytes) {
                    const auto* p = static_cast<const unsigned char*>(read) + off;
                    const size_t len = std::min(unit, read_bytes - off);
                    uint64_t x = 0;
                    for (size_t i = 0; i + 8 <= len; i += 8) {
                        uint64_t v;
                        std::memcpy(&v, p + i, 8);
                        x ^= v;
                    }
                    acc += x;
                }
                if (off < write_bytes)
                    std::memset(static_cast<unsigned char*>(write) + off, 0x3c, std::min(unit, write_bytes - off));
            }
            sinks[w] = acc;
        });
        uint64_t all = 0;
        for (auto s : sinks) all ^= s;
        sink_ = all;  // keeps the reads from being optimised away
        last_ = std::chrono::duration<double>(Clock::now() - t0).count();
    }

    void synchronize() override {}
    double overhead_s() const override { return overhead_; }
    double last_elapsed_s() override { return last_; }

private:
    int threads_;
    double overhead_ = 0, last_ = 0;
    volatile uint64_t sink_ = 0;
};

}  // namespace

void host_wait_for(double seconds) {
    wait_until(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

long precise_timer_slack() {
#if defined(__linux__)
    const int previous = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (previous < 0 || prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) != 0) return -1;
    return previous;
#else
    return -1;
#endif
}

void restore_timer_slack(long previous_ns) {
#if defined(__linux__)
    if (previous_ns > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(previous_ns), 0, 0, 0);
#else
    (void)previous_ns;
#endif
}

void host_wait_until(Clock::time_point due, const std::atomic<int64_t>* paused, int64_t paused_at_start) {
    for (;;) {
        const auto real = due + std::chrono::nanoseconds(paused ? paused->load() - paused_at_start : 0);
        const auto now = Clock::now();
        if (now >= real) return;
        if (real - now > kSpinMargin) std::this_thread::sleep_for(real - now - kSpinMargin);
    }
}

std::unique_ptr<Standin> make_host_standin(int threads) { return std::make_unique<HostStandin>(threads); }

}  // namespace mhc::kernels
