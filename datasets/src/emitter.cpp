#include "emitter.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "mhc/common/error.hpp"
#include "mhc/trace/limits.hpp"

namespace mhc::datasets::detail {

namespace {
constexpr int64_t kAlign = 512;                        // caching-allocator rounding
constexpr int64_t kPoolBase[kStreamCount] = {0x7f0000000000ll, 0x7e0000000000ll, 0x7d0000000000ll,
                                             0x7c0000000000ll};

int32_t clamp32(int64_t v) { return static_cast<int32_t>(std::clamp<int64_t>(v, 1, 2147483647)); }

// Every trace the generator writes passes `mhc check`: its times stay within the value range
// (docs/trace-format.md), and its sizes too. Options that would pass them are refused here, where
// the time or size is computed, whatever combination of options led to it.
using trace::limits::kMaxAbsTime;
[[noreturn]] void too_long() {
    throw Error("generate: the trace would last past 2^62 ns (146 years) of simulated time: fewer --steps or "
                "--micro-batches, a smaller model, or a faster GPU (--gpu-flops, --gpu-bw)");
}
int64_t ns_of(double seconds) {
    const double ns = seconds * 1e9;
    if (!(ns >= -double(kMaxAbsTime) && ns <= double(kMaxAbsTime))) too_long();
    return std::llround(ns);
}
int64_t later(int64_t t, int64_t d) {
    if (d > 0 ? t > kMaxAbsTime - d : t < -kMaxAbsTime - d) too_long();
    return t + d;
}
}  // namespace

Launch launch_gemm(int64_t m, int64_t n, bool hopper) {
    Launch l;
    int64_t tm = 128, tn = hopper ? 256 : 128;
    l.grid[0] = clamp32((n + tn - 1) / tn);
    l.grid[1] = clamp32((m + tm - 1) / tm);
    l.block[0] = hopper ? 384 : 256;
    l.smem = hopper ? 232448 : 98304;
    l.regs = hopper ? 168 : 232;
    return l;
}

Launch launch_elementwise(int64_t elements) {
    Launch l;
    l.grid[0] = clamp32(std::min<int64_t>((elements + 1023) / 1024, 65535 * 8));
    l.block[0] = 128;
    l.regs = 30;
    return l;
}

Launch launch_rows(int64_t rows, int32_t threads) {
    Launch l;
    l.grid[0] = clamp32(rows);
    l.block[0] = threads;
    l.smem = 1024;
    l.regs = 40;
    return l;
}

Launch launch_nccl(int32_t channels) {
    Launch l;
    l.grid[0] = channels;
    l.block[0] = 544;
    l.regs = 96;
    return l;
}

Emitter::Emitter(trace::Writer& w, const GeneratorConfig& cfg, const GenerateHooks& hooks)
    : w_(w), cfg_(cfg), hooks_(hooks), rng_(cfg.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {
    for (size_t i = 0; i < kStreamCount; ++i) pool_top_[i] = kPoolBase[i];
}

double Emitter::uniform() {
    // splitmix64: tiny, fast and the same on every platform.
    uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return double(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

int64_t Emitter::alloc(int64_t bytes, Category cat, int64_t label, Stream s, bool persistent) {
    using trace::limits::kMaxBytes;
    using trace::limits::kMaxTotalBytes;
    if (bytes <= 0 || bytes > kMaxBytes)
        throw Error("generate: a tensor of " + std::to_string(bytes) + " bytes is larger than 2^56 bytes (64 PiB), the "
                    "most one allocation may hold: a smaller model, sequence or micro-batch");
    if (total_bytes_ > kMaxTotalBytes - bytes)
        throw Error("generate: the trace's allocations would hold more than 2^62 bytes together: fewer --steps or "
                    "--micro-batches, or a smaller model");
    total_bytes_ += bytes;
    Slot sl;
    sl.a.id = next_alloc_++;
    sl.a.bytes = bytes;
    sl.a.t_alloc = cursor_[index(s)];
    sl.a.stream = stream_ids_[index(s)];
    sl.a.category = cat;
    sl.a.label = label;
    sl.stream = s;
    bytes_.push_back(bytes);
    last_use_.push_back(cursor_[index(s)]);
    int64_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    auto& blocks = free_blocks_[index(s)][rounded];
    if (!blocks.empty() && blocks.back().free_at <= sl.a.t_alloc) {
        sl.a.address = blocks.back().address;
        blocks.pop_back();
    } else {
        // Each stream's pool lies below the previous one's base: it must not grow into it.
        if (s != Stream::Compute && pool_top_[index(s)] > kPoolBase[index(s) - 1] - rounded)
            throw Error("generate: the allocations of one stream would span more than 1 TiB of addresses, the room "
                        "the generator gives each stream: a smaller model, sequence or micro-batch");
        sl.a.address = pool_top_[index(s)];
        pool_top_[index(s)] += rounded;
    }
    if (persistent) sl.done = true;
    if (cat == Category::Param) stats_.param_bytes += bytes;
    pending_.push_back(sl);
    ++stats_.allocations;
    if (persistent) flush();
    return sl.a.id;
}

void Emitter::free(int64_t buf) {
    Slot& sl = slot(buf);
    assert(!sl.done);
    sl.a.t_free = std::max(cursor_[index(sl.stream)], last_use_[static_cast<size_t>(buf)]);
    sl.done = true;
    int64_t rounded = (sl.a.bytes + kAlign - 1) / kAlign * kAlign;
    free_blocks_[index(sl.stream)][rounded].push_back({sl.a.address, sl.a.t_free});
    flush();
}

void Emitter::flush() {
    while (!pending_.empty() && pending_.front().done) {
        w_.add(pending_.front().a);
        pending_.pop_front();
        ++first_pending_;
    }
}

int64_t Emitter::kernel(Stream s, int64_t name, KClass cls, double flops,
                        std::initializer_list<Acc> acc, const Launch& launch, int64_t not_before,
                        double seconds) {
    return emit(s, name, cls, flops, acc.begin(), acc.size(), launch, not_before, seconds);
}

int64_t Emitter::kernel(Stream s, int64_t name, KClass cls, double flops,
                        const std::vector<Acc>& acc, const Launch& launch, int64_t not_before,
                        double seconds) {
    return emit(s, name, cls, flops, acc.data(), acc.size(), launch, not_before, seconds);
}

int64_t Emitter::comm_kernel(Stream s, int64_t name, const std::vector<Acc>& acc, const Launch& launch,
                             int64_t not_before, double seconds, int64_t min_end, int64_t stream_id) {
    return emit(s, name, KClass::Comm, 0, acc.data(), acc.size(), launch, not_before, seconds, min_end, stream_id);
}

int64_t Emitter::emit(Stream s, int64_t name, KClass cls, double flops, const Acc* acc, size_t n,
                      const Launch& launch, int64_t not_before, double seconds, int64_t min_end,
                      int64_t stream_id) {
    const GpuSpec& g = cfg_.gpu;
    // Merge repeated buffers (one access row per kernel and allocation) and count traffic.
    scratch_.assign(acc, acc + n);
    std::sort(scratch_.begin(), scratch_.end(), [](const Acc& a, const Acc& b) { return a.buf < b.buf; });
    size_t m = 0;
    for (size_t i = 0; i < scratch_.size(); ++i) {
        if (m && scratch_[m - 1].buf == scratch_[i].buf)
            scratch_[m - 1].mode = AccessMode(uint8_t(scratch_[m - 1].mode) | uint8_t(scratch_[i].mode));
        else
            scratch_[m++] = scratch_[i];
    }
    scratch_.resize(m);
    double bytes = 0;
    for (const Acc& a : scratch_)
        bytes += double(bytes_[static_cast<size_t>(a.buf)]) * (a.mode == AccessMode::ReadWrite ? 2 : 1);

    double dur = seconds;
    if (dur < 0) {
        double mem = bytes / (g.mem_bw * g.mem_eff);
        double rate = cfg_.dtype == DType::FP32 ? g.tf32_flops : g.matmul_flops;
        switch (cls) {
            case KClass::Gemm:
            case KClass::HcGemm: dur = std::max(flops / (rate * g.gemm_eff), mem); break;
            case KClass::Attention: dur = std::max(0.5 * flops / (rate * g.attn_eff), mem); break;
            case KClass::Vector: dur = std::max(flops / (g.fp32_flops * g.mem_eff), mem); break;
            case KClass::Memory:
            case KClass::Comm: dur = mem; break;
        }
        dur = std::max(dur, g.launch_floor_s);
    }
    dur *= 1.0 + cfg_.jitter * uniform();
    double gap = g.launch_gap_s * (1.0 + 4 * cfg_.jitter * uniform());
    int64_t t0 = std::max<int64_t>(later(cursor_[index(s)], std::max<int64_t>(200, ns_of(gap))), not_before);
    int64_t t1 = std::max(later(t0, std::max<int64_t>(1000, ns_of(dur))), min_end);
    cursor_[index(s)] = t1;
    last_start_ = t0;

    trace::Kernel k;
    k.id = next_kernel_++;
    k.stream = stream_id >= 0 ? stream_id : stream_ids_[index(s)];
    k.name = name;
    k.t_start = t0;
    k.t_end = t1;
    k.step = step_;
    for (int i = 0; i < 3; ++i) {
        k.grid[i] = launch.grid[i];
        k.block[i] = launch.block[i];
    }
    k.shared_mem = launch.smem;
    k.registers = launch.regs;
    k.correlation = k.id;
    w_.add(k);
    ++stats_.kernels;
    for (const Acc& a : scratch_) {
        int64_t& last = last_use_[static_cast<size_t>(a.buf)];
        last = std::max(last, t1);
        w_.add(trace::Access{k.id, a.buf, a.mode});
    }
    stats_.accesses += static_cast<int64_t>(scratch_.size());
    stats_.flops_per_step += flops;   // total for now; divided by steps at the end
    if (cls == KClass::Gemm) stats_.gemm_flops_per_step += flops;
    if (++kernels_since_check_ >= 256) {
        kernels_since_check_ = 0;
        check_cancel();
    }
    return t1;
}

void Emitter::idle(Stream s, double seconds) {
    cursor_[index(s)] = later(cursor_[index(s)], ns_of(seconds * (1.0 + cfg_.jitter * uniform())));
}

void Emitter::copy(Stream s, trace::CopyKind kind, int64_t bytes, double bw) {
    if (bytes < 0 || bytes > trace::limits::kMaxBytes)
        throw Error("generate: a copy of " + std::to_string(bytes) + " bytes is outside [0, 2^56]: a smaller model");
    trace::Copy c;
    c.id = next_copy_++;
    c.stream = stream_ids_[index(s)];
    c.kind = kind;
    c.bytes = bytes;
    c.t_start = later(cursor_[index(s)], 2000);
    c.t_end = later(c.t_start, std::max<int64_t>(1500, ns_of(2e-6 + bytes / bw)));
    cursor_[index(s)] = c.t_end;
    w_.add(c);
    ++stats_.copies;
}

int64_t Emitter::marker_begin() { return next_marker_++; }

void Emitter::marker_end(int64_t id, int64_t name, int64_t t_start, trace::MarkerKind kind,
                         int32_t index, int64_t t_end) {
    trace::Marker m;
    m.id = id;
    m.name = name;
    m.t_start = t_start;
    m.t_end = std::max(t_start, t_end);
    m.kind = kind;
    m.index = index;
    w_.add(m);
    ++stats_.markers;
}

void Emitter::check_cancel() {
    if (hooks_.cancel && hooks_.cancel->load(std::memory_order_relaxed)) throw Cancelled();
}

void Emitter::progress(double fraction) {
    check_cancel();
    if (hooks_.progress) hooks_.progress(fraction);
}

void Emitter::finish() {
    // Every temporary is freed by the model; anything left is alive at the end.
    for (Slot& s : pending_) {
        assert(s.done);
        s.done = true;
    }
    flush();
}

}  // namespace mhc::datasets::detail
