#pragma once
// Swap paths: copies of allocation-sized buffers between a host arena and a device arena.
// SwapEngine is what replay programs against; make_swap_engine(Device::Cpu) gives the host
// backend (two arenas in RAM, copy threads, memcpy by chunks) and Device::Cuda the GPU one
// (pinned mapped host arena, a stream per direction, cudaMemcpyAsync by chunks through the
// copy engines, or a zero-copy kernel that moves 16-byte words over the mapped memory).
// Every transfer can be verified: the source is checksummed before, the destination after.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mhc/kernels/types.hpp"

namespace mhc::kernels {

// 64-bit checksum. A sum over 8-byte words of a keyed mix of (word, position): any order
// and any split into parts give the same value (so threads and GPU blocks can share the
// work), yet moved, lost or changed words change it. Not cryptographic.
uint64_t checksum64(const void* data, size_t bytes);
// Parts: partial(data + off, len, off / 8) summed (mod 2^64) over parts that tile the buffer
// at 8-byte boundaries, then finish(sum, total bytes) == checksum64(data, total bytes).
uint64_t checksum64_partial(const void* data, size_t bytes, uint64_t first_word);
uint64_t checksum64_finish(uint64_t sum, size_t total_bytes);
// Copies `bytes` from src to dst (not overlapping) and returns checksum64_partial(src, bytes,
// first_word), reading the source once.
uint64_t checksum64_copy_partial(void* dst, const void* src, size_t bytes, uint64_t first_word);

enum class SwapDir { HostToDevice, DeviceToHost };
enum class SwapPath { CopyEngine, ZeroCopy };
const char* to_string(SwapDir d);
const char* to_string(SwapPath p);

struct SwapConfig {
    size_t device_bytes = 64 << 20;   // the device arena (host backend: RAM standing in for it)
    size_t host_bytes = 64 << 20;     // the host arena (CUDA: pinned and mapped)
    size_t chunk_bytes = 2 << 20;     // each transfer moves in chunks of this size
    double max_ops_per_s = 0;         // transfers start no faster than this; 0 = unlimited
    bool verify = true;               // checksum every transfer
    // CUDA backend, with verify: hash on the device alone, a swap-out's source before its copy
    // (source_sum) and a swap-in's destination after it (dest_sum), and nothing on the host.
    // The host's checksum of the other end ran on the caller's thread at one core's speed
    // (about 6 GB/s on an H200 machine, against its link's 55 GB/s), so a verified swap-in
    // held the replay up about as long as the copy took (docs/validation.md). Such results
    // are round_trip, not verified: the caller compares a swap-in's dest_sum with the
    // source_sum of the swap-out that moved the same bytes (replay does), which catches
    // damage in either direction.
    bool verify_on_device_only = false;
    int threads_per_direction = 1;    // host backend: copy threads per direction (unpaced)
    // Host backend: an emulated link of known speed. A direction's transfers move no faster
    // than pace_h2d_Bps / pace_d2h_Bps; one that starts while the other direction is copying
    // moves at that times pace_duplex (the simulator's duplex rule). Paced, one thread per
    // direction copies, chunk by chunk, and waits out each chunk's share of the pace; a host
    // too slow for the pace makes transfers late (SwapResult::late_s), never faster. Without
    // a pace the rate is whatever memcpy gets from a host whose cores the replay shares: it
    // varied 1.4-3.2 GB/s between repeats on the 2-core host (docs/validation.md). 0 = unpaced.
    double pace_h2d_Bps = 0, pace_d2h_Bps = 0, pace_duplex = 1.0;
    // Paced: the link's per-transfer latency, each direction. As in the simulator, a transfer
    // starts when it is submitted or when the one before it in its direction completed,
    // whichever is later, and completes latency + bytes / pace after that start.
    double pace_h2d_latency_s = 0, pace_d2h_latency_s = 0;
    // Paced: ns the caller's clock stood still (replay maps pages with its clock stopped); a
    // transfer's deadlines move by what it grew during the transfer. Null: never paused.
    const std::atomic<int64_t>* paused_ns = nullptr;
    SwapPath path = SwapPath::CopyEngine;  // CUDA backend only
    int zero_copy_blocks = 0;         // CUDA zero-copy kernel blocks; 0 = one per SM
    // When set: the device arena is this memory of device_bytes, owned by the caller (replay's
    // page-mapped pool: virtual ranges backed by 2 MiB pages), instead of one the engine allocates.
    void* device_memory = nullptr;
    // The host arena is this memory of host_bytes, owned by the caller, instead of one the
    // engine allocates (host: and zeroes; CUDA: and pins), so that one arena serves many
    // engines (replay shares one between its replays). CUDA: it must be pinned and mapped
    // (swap_host_memory(Device::Cuda, ...)); other memory is refused.
    void* host_memory = nullptr;
};

struct SwapResult {
    uint64_t id = 0;
    SwapDir dir = SwapDir::HostToDevice;
    size_t bytes = 0;
    double start_s = 0, end_s = 0;    // seconds since the engine was made (host clock)
    bool verified = false;            // checksums were compared
    bool round_trip = false;          // verify_on_device_only: only the device end was hashed
    bool ok = true;                   // false: checksum mismatch (lost, stale or damaged)
    uint64_t source_sum = 0, dest_sum = 0;
    double late_s = 0;                // paced: how much later than the pace it ended
};

struct SwapStats {
    uint64_t transfers = 0, verified = 0, mismatches = 0;
    uint64_t bytes_h2d = 0, bytes_d2h = 0;
    uint64_t late = 0;                // paced transfers that ended later than the pace allows
    double late_s = 0;                // by how much, in all
};

class SwapEngine {
public:
    virtual ~SwapEngine() = default;
    virtual std::string name() const = 0;
    virtual const SwapConfig& config() const = 0;
    // Base of the arenas. Host backend: both are RAM. CUDA: device_arena is device memory.
    virtual void* device_arena() = 0;
    virtual void* host_arena() = 0;

    // Queues a copy of `bytes` between host_arena + host_off and device_arena + dev_off and
    // returns its id. Transfers of one direction complete in submission order; the two
    // directions proceed concurrently. Throws mhc::Error for ranges outside the arenas.
    virtual uint64_t submit(SwapDir dir, size_t host_off, size_t dev_off, size_t bytes) = 0;
    virtual bool done(uint64_t id) = 0;
    // Waits for the transfer and returns its result (once; an id not pending throws).
    virtual SwapResult wait(uint64_t id) = 0;
    // Waits for every queued transfer; returns the results not yet collected by wait().
    virtual std::vector<SwapResult> drain() = 0;
    virtual SwapStats stats() const = 0;

    // Test hook: damage the next transfer in `dir`: Corrupt flips one byte of the copy,
    // Drop leaves its last chunk uncopied (stale). Verification must catch both.
    enum class Fault { None, Corrupt, Drop };
    virtual void inject_fault(SwapDir dir, Fault f) = 0;

    // wait() that throws mhc::Error (internal) on a checksum mismatch.
    SwapResult wait_checked(uint64_t id);
};

std::unique_ptr<SwapEngine> make_swap_engine(Device device, const SwapConfig& config);

// Pinned, mapped host memory (cudaHostAlloc) of `bytes` for a CUDA swap engine's host arena
// (SwapConfig::host_memory), freed with the last owner. A CUDA engine that pins its own arena
// does so on every construction: pinning GiBs costs about as much as copying them, and a
// validation that made an engine per replay spent most of its time there. Throws mhc::Error
// without a CUDA build or device, or when the memory cannot be pinned.
std::shared_ptr<unsigned char> pinned_host_memory(size_t bytes);

}  // namespace mhc::kernels
