// A training loop under PyTorch's backend:cudaMallocAsync as the injection library feeds it to
// the translator: callbacks in host order, the host ahead of the GPU until the step's end, the
// activity records (memory operations and kernels) in buffers of `buffer` records. The pool
// gives a freed block back to the next allocation of its size at once (LIFO per size), as the
// stream-ordered pool does on one stream. Property: the trace passes check_trace and has one row
// per allocation call, whatever the buffer size and whether the records carry correlation ids.
#include <catch2/catch.hpp>

#include <map>

#include "mhc/trace/summary.hpp"
#include <random>

#include "helpers.hpp"

using mhc::record::AllocEvent;
using mhc::record::AllocSource;
using mhc::record::FreeEvent;
using mhc::record::KernelEvent;
using mhc::record::LaunchEvent;
using mhc::record::Translator;
using mhc::record::TranslatorOptions;
namespace trace = mhc::trace;

namespace {

struct Rec {
    bool alloc;
    uint64_t addr, bytes, t;
    uint32_t corr;
};

class PoolLoop {
public:
    PoolLoop(Translator& translator, size_t buffer, bool ids, bool streams = false)
        : tr_(translator), buffer_(buffer), ids_(ids), streams_(streams) {}

    // Each call's lifetime on the GPU: from when the stream reached the allocation to when it
    // reached the free (the host's time where the stream was idle then).
    struct Life { int64_t start, end; };
    const std::vector<Life>& truth() const { return truth_; }

    uint64_t alloc(uint64_t bytes) {
        const uint64_t enter = host_;
        host_ += 3000;
        auto& blocks = free_[bytes];
        uint64_t addr = next_;
        if (blocks.empty()) next_ += bytes;
        else addr = blocks.back(), blocks.pop_back();
        AllocEvent event;
        event.address = addr, event.bytes = bytes, event.t = host_, event.t_enter = enter;
        event.stream = streams_ ? 7 : 0;
        event.pool = true, event.api = "cuMemAllocAsync";
        event.correlation = ids_ ? corr_ : 0;
        tr_.on_alloc(event);
        live_[addr] = truth_.size();
        truth_.push_back({static_cast<int64_t>(std::max(host_, gpu_)), trace::kNoTime});
        records_.push_back({true, addr, bytes, enter + 1000, corr_++});
        ++calls_;
        deliver_if_full();
        return addr;
    }
    void free(uint64_t addr, uint64_t bytes) {
        const uint64_t enter = host_;
        host_ += 2000;
        FreeEvent event;
        event.address = addr, event.t = host_, event.correlation = ids_ ? corr_ : 0;
        event.stream = streams_ ? 7 : 0;
        tr_.on_free(event);
        truth_[live_.at(addr)].end = static_cast<int64_t>(std::max(host_, gpu_));
        records_.push_back({false, addr, bytes, enter + 1000, corr_++});
        free_[bytes].push_back(addr);
        deliver_if_full();
    }
    void kernel(std::vector<uint64_t> ptrs) {
        LaunchEvent launch;
        launch.correlation = corr_, launch.t = host_, launch.words = std::move(ptrs);
        host_ += 6000;
        tr_.on_launch(launch);
        const uint64_t start = std::max(launch.t + 5000, gpu_), dur = 20000 + rng_() % 180000;
        gpu_ = start + dur;
        KernelEvent kernel;
        kernel.name = "k", kernel.start = start, kernel.end = gpu_, kernel.stream = 7, kernel.correlation = corr_++;
        kernels_.push_back(kernel);
        deliver_if_full();
    }
    void sync() { host_ = std::max(host_, gpu_) + 1000; }   // loss.item()
    void deliver() {
        for (const Rec& rec : records_) {
            if (rec.alloc) {
                AllocEvent event;
                event.address = rec.addr, event.bytes = rec.bytes, event.t = event.t_enter = rec.t;
                event.stream = streams_ ? 7 : 0;
                event.source = AllocSource::Activity, event.pool = true, event.api = "memory:pool";
                event.correlation = ids_ ? rec.corr : 0;
                tr_.on_alloc(event);
            } else {
                FreeEvent event;
                event.address = rec.addr, event.t = rec.t, event.source = AllocSource::Activity;
                event.correlation = ids_ ? rec.corr : 0;
                tr_.on_free(event);
            }
        }
        for (const KernelEvent& kernel : kernels_) tr_.on_kernel(kernel);
        records_.clear();
        kernels_.clear();
    }
    std::mt19937_64& rng() { return rng_; }
    int64_t calls() const { return calls_; }

private:
    void deliver_if_full() {
        if (records_.size() + kernels_.size() >= buffer_) deliver();
    }
    Translator& tr_;
    size_t buffer_;
    bool ids_, streams_;
    std::vector<Life> truth_;
    std::map<uint64_t, size_t> live_;   // address -> the call holding it
    std::mt19937_64 rng_{42};
    uint64_t host_ = 1'000'000, gpu_ = 1'000'000, next_ = 0x7f0000000000;
    uint32_t corr_ = 1;
    int64_t calls_ = 0;
    std::map<uint64_t, std::vector<uint64_t>> free_;   // size -> freed blocks, last freed last
    std::vector<Rec> records_;
    std::vector<KernelEvent> kernels_;
};

// Parameters, then per step: a forward that keeps 2 of every 5 outputs for the backward, a
// backward of temporaries that frees them, an optimizer; 1 allocation in 10 has no kernel seen.
void train(PoolLoop& loop, int steps) {
    auto size = [&loop] { return uint64_t{4096} << (2 * (loop.rng()() % 8)); };
    std::vector<uint64_t> params(150);
    for (size_t i = 0; i < params.size(); ++i) params[i] = loop.alloc(uint64_t{4096} << (2 * (i % 8)));
    for (int step = 0; step < steps; ++step) {
        std::vector<std::pair<uint64_t, uint64_t>> saved;
        for (int op = 0; op < 12 * 25; ++op) {
            const uint64_t bytes = size(), out = loop.alloc(bytes);
            if (loop.rng()() % 10 != 0)
                loop.kernel({params[op % params.size()], out, saved.empty() ? 0 : saved.back().first});
            if (op % 5 < 2) saved.emplace_back(out, bytes);
            else loop.free(out, bytes);
        }
        for (int op = 0; op < 12 * 50; ++op) {
            const uint64_t bytes = size(), grad = loop.alloc(bytes);
            if (loop.rng()() % 10 != 0) loop.kernel({grad, saved.empty() ? 0 : saved.back().first});
            loop.free(grad, bytes);
            if (op % 5 == 0 && !saved.empty()) loop.free(saved.back().first, saved.back().second), saved.pop_back();
        }
        for (; !saved.empty(); saved.pop_back()) loop.free(saved.back().first, saved.back().second);
        for (int i = 0; i < 20; ++i) {
            const uint64_t bytes = size(), tmp = loop.alloc(bytes);
            loop.kernel({tmp});
            loop.free(tmp, bytes);
        }
        loop.sync();
    }
    loop.deliver();
}

}   // namespace

// Before 2026-12-04 (the last 8 allocations at an address were the candidates for a record, ids
// unused) this loop's 2,910 allocation calls gave 5,514 rows with 40,000-record buffers (4,083
// with 1,000-record ones), overlapping at one address, as on the H200.
TEST_CASE("translator: cudaMallocAsync training loop with late activity buffers: one row per call, check-clean") {
    for (size_t buffer : {size_t{1000}, size_t{40000}}) {
        for (int variant = 0; variant < 4; ++variant) {
            const bool ids = variant % 2 == 1, streams = variant >= 2;
            INFO("buffer " << buffer << " records, correlation ids " << ids << ", streams " << streams);
            int64_t calls = 0;
            TranslatorOptions at_zero;
            at_zero.origin = 0;
            auto data = mhc::record::test::translate(
                [&](Translator& translator) {
                    PoolLoop loop(translator, buffer, ids, streams);
                    train(loop, 3);
                    calls = loop.calls();
                },
                at_zero);
            auto report = trace::check_trace(data);
            INFO(mhc::record::test::problems(report).substr(0, 2000));
            CHECK(report.ok());
            CHECK(static_cast<int64_t>(data.allocations.size()) == calls);
            CHECK(data.meta.at("record.activity_merged") == std::to_string(calls));
            CHECK(data.meta.at("record.frees_unmatched") == "0");
            CHECK(data.meta.at("record.implicit_frees") == "0");
            CHECK(data.meta.at("record.lifetime_conflicts") == "0");
            CHECK(data.meta.at("record.activity_by_correlation") == (ids ? std::to_string(2 * calls - 150) : "0"));
        }
    }
}

// The same loop with the streams of the calls known (cuMemAllocAsync's and cuMemFreeAsync's, as
// the callbacks record them): every allocation lives exactly from when its stream reached the call
// to when it reached the free. With the host's times instead (no streams: the recorder before
// 2026-12-04 evening) allocations start while the kernels queued before them still run, and the
// live peak is higher than on the GPU.
TEST_CASE("translator: cudaMallocAsync training loop: lifetimes on the GPU's timeline, not the host's") {
    TranslatorOptions at_zero;
    at_zero.origin = 0;
    std::vector<PoolLoop::Life> truth;
    auto run = [&](bool streams) {
        return mhc::record::test::translate(
            [&](Translator& translator) {
                PoolLoop loop(translator, 1000, true, streams);
                train(loop, 3);
                truth = loop.truth();
            },
            at_zero);
    };
    const trace::TraceData gpu = run(true);
    auto report = trace::check_trace(gpu);
    INFO(mhc::record::test::problems(report).substr(0, 2000));
    REQUIRE(report.ok());
    REQUIRE(gpu.allocations.size() == truth.size());
    size_t wrong = 0;
    for (size_t i = 0; i < truth.size(); ++i)
        if (gpu.allocations.t_alloc[i] != truth[i].start || gpu.allocations.t_free[i] != truth[i].end) ++wrong;
    CHECK(wrong == 0);
    CHECK(gpu.meta.at("record.lifetime_conflicts") == "0");
    CHECK(std::stoll(gpu.meta.at("record.allocations_stream_started")) > 0);
    CHECK(std::stoll(gpu.meta.at("record.frees_stream_ordered")) > 0);

    const trace::TraceData host = run(false);
    REQUIRE(trace::check_trace(host).ok());
    const int64_t gpu_peak = trace::live_peak(gpu, 0).bytes, host_peak = trace::live_peak(host, 0).bytes;
    INFO("live peak: " << gpu_peak << " B on the GPU's timeline, " << host_peak << " B with host start times");
    CHECK(host_peak > gpu_peak);
}
