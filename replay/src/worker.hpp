#pragma once
// A stream worker: runs the kernels of one recorded stream, in order, on the backend (host:
// a thread; CUDA: a thread driving its own stand-in stream). Private to the executor.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mhc/kernels/standin.hpp"
#include "mhc/kernels/types.hpp"

namespace mhc::replay::detail {

using Clock = std::chrono::steady_clock;

struct Range {
    unsigned char* p = nullptr;
    size_t bytes = 0;
};

struct SinkhornJob {
    bool on = false, backward = false;
    int n = 4, iters = 20;
    int64_t tokens = 0;
    void* H = nullptr;   // logits (forward and backward)
    void* P = nullptr;   // forward output
    void* G = nullptr;   // backward: incoming gradient
    void* dH = nullptr;  // backward output
};

struct Job {
    int32_t slot = -1;              // where its times go (kernel index, or K + recompute #)
    double seconds = 0;             // scaled duration
    std::vector<Range> reads, writes;
    std::vector<uint64_t> seeds;    // one per write: the stamp pattern's version
    SinkhornJob sk;
};

struct JobTimes {
    Clock::time_point start, end;
    int64_t paused_start = 0, paused_end = 0;   // the replay clock's stood-still ns at each
    bool overrun = false;
};

class Worker {
public:
    // paused: ns the replay's clock stood still (may be null); host stand-ins end that much later.
    Worker(kernels::Device device, int sinkhorn_threads, std::vector<JobTimes>* times,
           const std::atomic<int64_t>* paused = nullptr);
    ~Worker();
    // Queues a job; returns its number in this worker.
    uint64_t push(Job job);
    void wait(uint64_t n);   // until job n has finished
    bool finished(uint64_t n);
    void stop();

private:
    void loop();
    void run(Job& j);

    kernels::Device device_;
    int sinkhorn_threads_;
    std::vector<JobTimes>* times_;
    const std::atomic<int64_t>* paused_;
    std::unique_ptr<kernels::Standin> standin_;
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    std::deque<Job> queue_;
    uint64_t pushed_ = 0, done_ = 0;
    bool stop_ = false;
    std::thread thread_;
    volatile uint64_t sink_ = 0;
};

// The stamp of page p of a buffer written with pattern `seed`: any stale or misplaced copy
// of the buffer has other stamps, so the end-to-end checksum differs.
inline uint64_t stamp(uint64_t seed, uint64_t page) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + page * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    return x ^ (x >> 32);
}
inline constexpr size_t kPage = 4096;

// Where stamps go: one word every kStampStride bytes and the buffer's last word. Every 4 KiB
// page made the touches of big operands outrun short kernels' scaled durations (hundreds of
// overruns a replay, each a random delay); 64 KiB still puts several stamps in every 2 MiB
// pool page and every swap chunk, and the first and last words catch overlapping placements.
inline constexpr size_t kStampStride = 64 << 10;
template <class F>
void for_each_stamp(size_t bytes, F&& f) {   // f(offset, stamp index)
    if (bytes < 8) return;
    size_t i = 0;
    for (size_t o = 0; o + 8 <= bytes; o += kStampStride) f(o, i++);
    const size_t last = (bytes - 8) / 8 * 8;
    if (last % kStampStride != 0) f(last, i);
}

}  // namespace mhc::replay::detail
