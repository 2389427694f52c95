#pragma once
// The emitter turns "allocate / run a kernel / free" calls into trace rows on a simulated
// GPU timeline: one cursor per stream, kernel durations from the roofline of the GPU,
// allocation lifetimes from the kernels that touch them, and addresses from a per-stream
// pool that reuses freed blocks of the same size (as a caching allocator would).
#include <atomic>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mhc/datasets/config.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::datasets::detail {

using trace::AccessMode;
using trace::Category;

// The emitter's streams. PpNext / PpPrev: the pipeline send/receive streams of a multi-rank trace
// (one NCCL communicator each, with the next and the previous stage); single-rank traces use Comm.
enum class Stream : uint8_t { Compute, Comm, PpNext, PpPrev };
inline constexpr size_t kStreamCount = 4;
// The stream's slot in the emitter's per-stream arrays (declaration order).
constexpr size_t index(Stream stream) { return static_cast<size_t>(stream); }

// How a kernel's duration is derived (docs/datasets.md, "Roofline").
enum class KClass : uint8_t {
    Gemm,       // cuBLAS matmul: max(flops / (tensor rate * gemm_eff), bytes / (bw * mem_eff))
    HcGemm,     // mHC coefficient projection: same roofline, not counted as a cuBLAS GEMM
    Attention,  // flash attention: causal half of the flops at attn_eff
    Memory,     // elementwise / norms / optimizer: bytes / (bw * mem_eff)
    Vector,     // fp32 ALU work (Sinkhorn-Knopp): max(flops / fp32 rate, bytes / bw)
    Comm,       // collectives: duration given by the caller
};

struct Acc {
    int64_t buf;
    AccessMode mode;
};

struct Launch {
    int32_t grid[3] = {1, 1, 1};
    int32_t block[3] = {256, 1, 1};
    int32_t smem = 0;
    int32_t regs = 32;
};
Launch launch_gemm(int64_t m, int64_t n, bool hopper);
Launch launch_elementwise(int64_t elements);
Launch launch_rows(int64_t rows, int32_t threads);
Launch launch_nccl(int32_t channels);

class Emitter {
public:
    Emitter(trace::Writer& w, const GeneratorConfig& cfg, const GenerateHooks& hooks);

    int64_t intern(std::string_view s) { return w_.intern(s); }

    // A new allocation made at the stream's current time. Persistent ones live to the end.
    int64_t alloc(int64_t bytes, Category cat, int64_t label, Stream stream = Stream::Compute,
                  bool persistent = false);
    // Frees at the stream's current time, or after the last kernel that touched it.
    void free(int64_t buf);
    int64_t bytes(int64_t buf) const { return bytes_[static_cast<size_t>(buf)]; }

    // Emits a kernel; returns its end time. `not_before`: a cross-stream dependency.
    int64_t kernel(Stream s, int64_t name, KClass cls, double flops, std::initializer_list<Acc> acc,
                   const Launch& launch, int64_t not_before = 0, double seconds = -1);
    int64_t kernel(Stream s, int64_t name, KClass cls, double flops, const std::vector<Acc>& acc,
                   const Launch& launch, int64_t not_before = 0, double seconds = -1);

    // A collective or point-to-point kernel (KClass::Comm) of `seconds`, ending no earlier
    // than min_end (a receive ends no earlier than its send), written with CUDA stream number
    // stream_id (-1: the stream's own) so that each communicator has its own stream number.
    int64_t comm_kernel(Stream s, int64_t name, const std::vector<Acc>& acc, const Launch& launch,
                        int64_t not_before, double seconds, int64_t min_end, int64_t stream_id);
    int64_t last_start() const { return last_start_; }

    int64_t now(Stream stream) const { return cursor_[index(stream)]; }
    void wait_until(Stream stream, int64_t time) {
        if (time > cursor_[index(stream)]) cursor_[index(stream)] = time;
    }
    // Host time during which the stream is idle (data loading, Python overhead).
    void idle(Stream s, double seconds);
    void copy(Stream s, trace::CopyKind kind, int64_t bytes, double bw);

    int64_t marker_begin();   // returns an id; the row is written by marker_end
    void marker_end(int64_t id, int64_t name, int64_t t_start, trace::MarkerKind kind,
                    int32_t index, int64_t t_end);

    void set_step(int32_t step) { step_ = step; }
    void check_cancel();
    void progress(double fraction);
    // Writes every allocation still pending; all non-persistent ones must be freed.
    void finish();

    const GeneratorConfig& cfg() const { return cfg_; }
    GenerateStats& stats() { return stats_; }

private:
    struct Slot {
        trace::Allocation a;
        Stream stream = Stream::Compute;
        bool done = false;   // freed or persistent: ready to be written
    };
    Slot& slot(int64_t id) { return pending_[static_cast<size_t>(id - first_pending_)]; }
    const Slot& slot(int64_t id) const { return pending_[static_cast<size_t>(id - first_pending_)]; }
    void flush();
    double uniform();   // [-1, 1)
    int64_t emit(Stream s, int64_t name, KClass cls, double flops, const Acc* acc, size_t n,
                 const Launch& launch, int64_t not_before, double seconds, int64_t min_end = 0,
                 int64_t stream_id = -1);

    trace::Writer& w_;
    const GeneratorConfig& cfg_;
    GenerateHooks hooks_;
    GenerateStats stats_;
    uint64_t rng_;
    int64_t cursor_[kStreamCount] = {0, 0, 0, 0};
    int64_t total_bytes_ = 0;   // of every allocation so far
    int64_t last_start_ = 0;
    int64_t next_alloc_ = 1, next_kernel_ = 1, next_copy_ = 1, next_marker_ = 1;
    int64_t first_pending_ = 1;
    std::deque<Slot> pending_;            // rows not yet written (id order)
    std::vector<int64_t> bytes_{0}, last_use_{0};   // by id, for every allocation
    // Free blocks per stream pool: rounded size -> (address, free from).
    struct Block { int64_t address, free_at; };
    std::unordered_map<int64_t, std::vector<Block>> free_blocks_[kStreamCount];
    int64_t pool_top_[kStreamCount];
    int32_t step_ = -1;
    int64_t stream_ids_[kStreamCount] = {7, 13, 23, 24};   // as CUDA numbers them in nsys traces
    std::vector<Acc> scratch_;
    int64_t kernels_since_check_ = 0;
};

}  // namespace mhc::datasets::detail
