#include "worker.hpp"

#include <algorithm>
#include <cstring>

#include "mhc/kernels/sinkhorn.hpp"

namespace mhc::replay::detail {

Worker::Worker(kernels::Device device, int sinkhorn_threads, std::vector<JobTimes>* times,
               const std::atomic<int64_t>* paused)
    : device_(device), sinkhorn_threads_(sinkhorn_threads), times_(times), paused_(paused),
      // Host stand-ins are the worker's own touch and wait (run()); CUDA's run on the GPU.
      standin_(device == kernels::Device::Cpu ? nullptr : kernels::make_standin(device, 1)) {
    thread_ = std::thread([this] { loop(); });
}

Worker::~Worker() { stop(); }

void Worker::stop() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

uint64_t Worker::push(Job job) {
    uint64_t n;
    {
        std::lock_guard<std::mutex> l(mu_);
        queue_.push_back(std::move(job));
        n = pushed_++;
    }
    cv_.notify_one();
    return n;
}

void Worker::wait(uint64_t n) {
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return done_ > n; });
}

bool Worker::finished(uint64_t n) {
    std::lock_guard<std::mutex> l(mu_);
    return done_ > n;
}

void Worker::loop() {
    if (device_ == kernels::Device::Cpu) kernels::precise_timer_slack();   // stand-ins end on time
    for (;;) {
        Job j;
        {
            std::unique_lock<std::mutex> l(mu_);
            cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;   // stopping with nothing left
            j = std::move(queue_.front());
            queue_.pop_front();
        }
        run(j);
        {
            std::lock_guard<std::mutex> l(mu_);
            ++done_;
        }
        done_cv_.notify_all();
    }
}

void Worker::run(Job& j) {
    JobTimes& t = (*times_)[static_cast<size_t>(j.slot)];
    t.start = Clock::now();
    const int64_t paused0 = paused_ ? paused_->load() : 0;
    t.paused_start = paused0;
    if (device_ == kernels::Device::Cpu) {
        // Touch the operands where stamps go (for_each_stamp): a read of the inputs, a
        // versioned stamp in the outputs (the pattern the end-to-end checksums see).
        uint64_t acc = 0;
        for (const Range& r : j.reads)
            for_each_stamp(r.bytes, [&](size_t o, size_t) {
                uint64_t v;
                std::memcpy(&v, r.p + o, 8);
                acc += v;
            });
        sink_ = sink_ + acc;
        for (size_t w = 0; w < j.writes.size(); ++w) {
            const Range& r = j.writes[w];
            for_each_stamp(r.bytes, [&](size_t o, size_t p) {
                uint64_t v = stamp(j.seeds[w], p);
                std::memcpy(r.p + o, &v, 8);
            });
        }
    } else {
        size_t n = std::max(j.reads.size(), j.writes.size());
        for (size_t i = 0; i < n; ++i) {
            const Range r = i < j.reads.size() ? j.reads[i] : Range{};
            const Range w = i < j.writes.size() ? j.writes[i] : Range{};
            standin_->touch(r.p, r.bytes, w.p, w.bytes);
        }
    }
    if (j.sk.on) {
        kernels::SinkhornOptions o;
        o.n = j.sk.n;
        o.iters = j.sk.iters;
        o.device = device_;
        o.threads = sinkhorn_threads_;
        if (!j.sk.backward)
            kernels::sinkhorn_forward(o, j.sk.tokens, {j.sk.H, kernels::DType::F32}, {j.sk.P, kernels::DType::F32});
        else
            kernels::sinkhorn_backward(o, j.sk.tokens, {j.sk.H, kernels::DType::F32}, {j.sk.G, kernels::DType::F32},
                                       {j.sk.dH, kernels::DType::F32});
    }
    const auto due = t.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(j.seconds));
    if (device_ == kernels::Device::Cpu) {
        // On the replay's clock: time it stood still (pages being mapped) does not count.
        kernels::host_wait_until(due, paused_, paused0);
    } else {
        // On the replay's clock, as the host's stand-ins: the time it stood still while this job
        // ran (pages mapped) does not count, so the GPU's stand-in runs that much longer; before,
        // it ended on real time and got the stood-still time for free.
        for (int round = 0; round < 16; ++round) {
            standin_->synchronize();
            const double stood = paused_ ? 1e-9 * static_cast<double>(paused_->load() - paused0) : 0;
            const double left = j.seconds + stood - std::chrono::duration<double>(Clock::now() - t.start).count();
            if (left <= 2e-6) break;
            standin_->run_for(left);
        }
    }
    t.end = Clock::now();
    t.paused_end = paused_ ? paused_->load() : 0;
    const double stood = 1e-9 * static_cast<double>(t.paused_end - paused0);
    const double took = std::chrono::duration<double>(t.end - t.start).count() - stood;
    t.overrun = took > j.seconds * 1.02 + 50e-6;
}

}  // namespace mhc::replay::detail
