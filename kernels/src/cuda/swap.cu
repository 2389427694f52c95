// CUDA swap backend: a device arena (cudaMalloc) and a pinned, mapped host arena; one
// non-blocking stream per direction. Copy-engine path: cudaMemcpyAsync by chunks. Zero-copy
// path: a kernel moving 16-byte words between the device arena and the host arena's device
// alias, so the SMs drive the PCIe/NVLink traffic. Verification hashes the source before
// and the destination after the copy (device side by a kernel computing the same checksum
// as the CPU's checksum64); with verify_on_device_only the device end alone, and the host
// does no hashing (the caller checks the round trip).
#include <chrono>
#include <limits>
#include <map>
#include <vector>

#include "../swap_internal.hpp"
#include "check.hpp"

namespace mhc::kernels::cuda_impl {

namespace {

constexpr unsigned long long kGolden = 0x9E3779B97F4A7C15ull;

// Sum over the 8-byte words of [p, p + bytes) of the checksum64 term (see src/hash.cpp).
__global__ void hash_kernel(const unsigned char* p, size_t bytes, unsigned long long* out) {
    const size_t words = bytes / 8;
    const bool aligned = (reinterpret_cast<uintptr_t>(p) & 7) == 0;
    unsigned long long sum = 0;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < words;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        unsigned long long w = 0;
        if (aligned) {
            w = reinterpret_cast<const unsigned long long*>(p)[i];
        } else {
            for (int b = 7; b >= 0; --b) w = (w << 8) | p[i * 8 + b];
        }
        const unsigned long long x = w ^ ((i + 1) * kGolden);
        sum += (x & 0xffffffffull) * (x >> 32) + w;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0 && bytes % 8) {
        unsigned long long w = 0;
        for (int b = static_cast<int>(bytes % 8) - 1; b >= 0; --b) w = (w << 8) | p[words * 8 + b];
        const unsigned long long x = w ^ ((words + 1) * kGolden);
        sum += (x & 0xffffffffull) * (x >> 32) + w;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, sum);
}

// Zero-copy: 16-byte words when both ends allow it, bytes otherwise.
__global__ void zero_copy_kernel(unsigned char* dst, const unsigned char* src, size_t bytes) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    size_t done = 0;
    if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
        const size_t vecs = bytes / 16;
        const uint4* s = reinterpret_cast<const uint4*>(src);
        uint4* d = reinterpret_cast<uint4*>(dst);
        for (size_t i = first; i < vecs; i += stride) d[i] = s[i];
        done = vecs * 16;
    }
    for (size_t i = done + first; i < bytes; i += stride) dst[i] = src[i];
}

__global__ void flip_byte_kernel(unsigned char* p) { *p ^= 0x5a; }

class CudaSwapEngine final : public SwapEngine {
public:
    explicit CudaSwapEngine(const SwapConfig& c) : cfg_(c), limiter_(c.max_ops_per_s) {
        if (c.device_memory)
            dev_ = static_cast<unsigned char*>(c.device_memory);   // the caller's (cuMemMap'd) memory
        else
            MHC_CUDA_CHECK(cudaMalloc(&dev_, c.device_bytes));
        if (c.host_memory) {   // the caller's: pinned and mapped, or refused
            host_ = static_cast<unsigned char*>(c.host_memory);
            cudaPointerAttributes at{};
            if (cudaPointerGetAttributes(&at, host_) != cudaSuccess || at.type != cudaMemoryTypeHost) {
                (void)cudaGetLastError();
                if (!c.device_memory) cudaFree(dev_);
                throw Error("swap engine: the caller's host arena is not pinned memory (kernels::pinned_host_memory)",
                            Error::Kind::Internal);
            }
        } else {
            MHC_CUDA_CHECK(cudaHostAlloc(&host_, c.host_bytes, cudaHostAllocMapped | cudaHostAllocPortable));
        }
        MHC_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_dev_), host_, 0));
        for (auto& s : streams_) MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        MHC_CUDA_CHECK(cudaEventCreate(&base_));
        MHC_CUDA_CHECK(cudaEventRecord(base_, streams_[0]));
        int sms = 0;
        MHC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        zc_blocks_ = c.zero_copy_blocks > 0 ? c.zero_copy_blocks : sms;
    }
    ~CudaSwapEngine() override {
        for (auto& s : streams_) cudaStreamSynchronize(s);
        for (auto& [id, op] : ops_) release(op);
        for (auto& s : streams_) cudaStreamDestroy(s);
        cudaEventDestroy(base_);
        for (auto& b : slot_blocks_) {
            cudaFree(b.dev);
            cudaFreeHost(b.host);
        }
        if (!cfg_.device_memory) cudaFree(dev_);
        if (!cfg_.host_memory) cudaFreeHost(host_);
    }

    std::string name() const override { return "cuda-swap"; }
    const SwapConfig& config() const override { return cfg_; }
    void* device_arena() override { return dev_; }
    void* host_arena() override { return host_; }

    uint64_t submit(SwapDir dir, size_t host_off, size_t dev_off, size_t bytes) override {
        check_swap_range(cfg_, host_off, dev_off, bytes);
        limiter_.acquire();
        Op op;
        op.r.id = next_id_++;
        op.r.dir = dir;
        op.r.bytes = bytes;
        op.host_off = host_off;
        op.fault = fault_[dir == SwapDir::HostToDevice ? 0 : 1];
        fault_[dir == SwapDir::HostToDevice ? 0 : 1] = Fault::None;
        const bool h2d = dir == SwapDir::HostToDevice;
        cudaStream_t s = streams_[h2d ? 0 : 1];
        unsigned char* hp = host_ + host_off;
        unsigned char* dp = dev_ + dev_off;
        MHC_CUDA_CHECK(cudaEventCreate(&op.start));
        MHC_CUDA_CHECK(cudaEventCreate(&op.end));
        MHC_CUDA_CHECK(cudaEventRecord(op.start, s));
        if (cfg_.verify) {
            op.slot = take_slot();
            MHC_CUDA_CHECK(cudaMemsetAsync(dev_slot(op.slot), 0, 8, s));
            if (!h2d) hash(dp, bytes, dev_slot(op.slot), s);  // the device source, in stream order
        }
        const size_t chunk = cfg_.chunk_bytes;
        for (size_t off = 0; off < bytes; off += chunk) {
            const size_t len = std::min(chunk, bytes - off);
            if (op.fault == Fault::Drop && off + len == bytes) break;  // test hook: lose the last chunk
            if (cfg_.path == SwapPath::CopyEngine) {
                MHC_CUDA_CHECK(cudaMemcpyAsync(h2d ? dp + off : hp + off, h2d ? hp + off : dp + off, len,
                                               h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
            } else {
                unsigned char* hd = host_dev_ + host_off;
                const unsigned blocks = static_cast<unsigned>(std::min<size_t>(zc_blocks_, (len + 4095) / 4096));
                zero_copy_kernel<<<std::max(1u, blocks), 256, 0, s>>>(h2d ? dp + off : hd + off,
                                                                    h2d ? hd + off : dp + off, len);
                MHC_CUDA_CHECK_LAUNCH("zero_copy_kernel");
            }
        }
        if (op.fault == Fault::Corrupt && h2d && bytes) {
            flip_byte_kernel<<<1, 1, 0, s>>>(dp + bytes / 2);
            MHC_CUDA_CHECK_LAUNCH("flip_byte_kernel");
        }
        if (cfg_.verify) {
            if (h2d) hash(dp, bytes, dev_slot(op.slot), s);  // the device destination
            MHC_CUDA_CHECK(cudaMemcpyAsync(host_slot(op.slot), dev_slot(op.slot), 8, cudaMemcpyDeviceToHost, s));
        }
        MHC_CUDA_CHECK(cudaEventRecord(op.end, s));
        // The host source, while the copy reads it too (the caller does not write it until
        // the transfer is collected): the copy's start does not wait for this hash.
        if (cfg_.verify && !cfg_.verify_on_device_only && h2d) op.r.source_sum = checksum64(hp, bytes);
        ops_[op.r.id] = op;
        return op.r.id;
    }

    bool done(uint64_t id) override {
        Op& op = find(id);
        cudaError_t e = cudaEventQuery(op.end);
        if (e == cudaErrorNotReady) return false;
        MHC_CUDA_CHECK(e);
        return true;
    }

    SwapResult wait(uint64_t id) override {
        Op op = find(id);
        ops_.erase(id);
        struct Release {
            CudaSwapEngine* e;
            Op* op;
            ~Release() { e->release(*op); }
        } guard{this, &op};
        MHC_CUDA_CHECK(cudaEventSynchronize(op.end));
        float ms0 = 0, ms1 = 0;
        MHC_CUDA_CHECK(cudaEventElapsedTime(&ms0, base_, op.start));
        MHC_CUDA_CHECK(cudaEventElapsedTime(&ms1, base_, op.end));
        SwapResult r = op.r;
        r.start_s = ms0 * 1e-3;
        r.end_s = ms1 * 1e-3;
        if (cfg_.verify && cfg_.verify_on_device_only) {
            const uint64_t device_sum = checksum64_finish(*host_slot(op.slot), r.bytes);
            if (r.dir == SwapDir::HostToDevice) r.dest_sum = device_sum;
            else r.source_sum = device_sum;
            if (op.fault == Fault::Corrupt && r.dir == SwapDir::DeviceToHost && r.bytes)
                host_[op.host_off + r.bytes / 2] ^= 0x5a;  // test hook: the round trip must catch it
            r.round_trip = true;
        } else if (cfg_.verify) {
            const unsigned long long dev_sum = *host_slot(op.slot);
            unsigned char* hp = host_ + op.host_off;
            if (r.dir == SwapDir::HostToDevice) {
                r.dest_sum = checksum64_finish(dev_sum, r.bytes);
            } else {
                if (op.fault == Fault::Corrupt && r.bytes) hp[r.bytes / 2] ^= 0x5a;  // test hook
                r.source_sum = checksum64_finish(dev_sum, r.bytes);
                r.dest_sum = checksum64(hp, r.bytes);
            }
            r.verified = true;
            r.ok = r.source_sum == r.dest_sum;
        }
        stats_.transfers++;
        (r.dir == SwapDir::HostToDevice ? stats_.bytes_h2d : stats_.bytes_d2h) += r.bytes;
        if (r.verified) stats_.verified++;
        if (!r.ok) stats_.mismatches++;
        return r;
    }

    std::vector<SwapResult> drain() override {
        std::vector<uint64_t> ids;
        for (auto& [id, op] : ops_) ids.push_back(id);
        std::vector<SwapResult> out;
        for (uint64_t id : ids) out.push_back(wait(id));
        return out;
    }

    SwapStats stats() const override { return stats_; }
    void inject_fault(SwapDir dir, Fault f) override { fault_[dir == SwapDir::HostToDevice ? 0 : 1] = f; }

private:
    struct Op {
        SwapResult r;
        size_t host_off = 0;
        Fault fault = Fault::None;
        cudaEvent_t start = nullptr, end = nullptr;
        size_t slot = kNoSlot;
    };
    static constexpr size_t kNoSlot = std::numeric_limits<size_t>::max();
    // The device hashes' results: the kernel adds into a device word, copied in stream order
    // into a pinned host word that wait() reads. Slots are reused, never freed one by one
    // (cudaFree waits for the whole device: one per transfer stalled the replay's kernels).
    static constexpr size_t kSlotsPerBlock = 4096;
    struct SlotBlock {
        unsigned long long* dev = nullptr;
        unsigned long long* host = nullptr;
    };
    size_t take_slot() {
        if (free_slots_.empty()) {
            SlotBlock b;
            MHC_CUDA_CHECK(cudaMalloc(&b.dev, kSlotsPerBlock * 8));
            MHC_CUDA_CHECK(cudaHostAlloc(&b.host, kSlotsPerBlock * 8, cudaHostAllocPortable));
            slot_blocks_.push_back(b);
            for (size_t i = kSlotsPerBlock; i-- > 0;) free_slots_.push_back((slot_blocks_.size() - 1) * kSlotsPerBlock + i);
        }
        const size_t slot = free_slots_.back();
        free_slots_.pop_back();
        return slot;
    }
    unsigned long long* dev_slot(size_t i) { return slot_blocks_[i / kSlotsPerBlock].dev + i % kSlotsPerBlock; }
    unsigned long long* host_slot(size_t i) { return slot_blocks_[i / kSlotsPerBlock].host + i % kSlotsPerBlock; }

    Op& find(uint64_t id) {
        auto it = ops_.find(id);
        if (it == ops_.end())
            throw Error("swap: unknown or already collected transfer id " + std::to_string(id), Error::Kind::Internal);
        return it->second;
    }
    void release(Op& op) {
        if (op.slot != kNoSlot) free_slots_.push_back(op.slot);
        if (op.start) cudaEventDestroy(op.start);
        if (op.end) cudaEventDestroy(op.end);
        op.slot = kNoSlot;
        op.start = op.end = nullptr;
    }
    void hash(const unsigned char* p, size_t bytes, unsigned long long* slot, cudaStream_t s) {
        const unsigned blocks = static_cast<unsigned>(std::min<size_t>(1024, (bytes / 8 + 255) / 256 + 1));
        hash_kernel<<<blocks, 256, 0, s>>>(p, bytes, slot);
        MHC_CUDA_CHECK_LAUNCH("hash_kernel");
    }

    SwapConfig cfg_;
    RateLimiter limiter_;
    unsigned char* dev_ = nullptr;
    unsigned char* host_ = nullptr;
    unsigned char* host_dev_ = nullptr;
    cudaStream_t streams_[2] = {nullptr, nullptr};
    cudaEvent_t base_ = nullptr;
    int zc_blocks_ = 1;
    uint64_t next_id_ = 1;
    Fault fault_[2] = {Fault::None, Fault::None};
    std::map<uint64_t, Op> ops_;
    std::vector<SlotBlock> slot_blocks_;
    std::vector<size_t> free_slots_;
    SwapStats stats_;
};

}  // namespace

std::unique_ptr<SwapEngine> make_swap_engine(const SwapConfig& c) { return std::make_unique<CudaSwapEngine>(c); }

std::shared_ptr<unsigned char> pinned_host_memory(size_t bytes) {
    void* p = nullptr;
    MHC_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    return {static_cast<unsigned char*>(p), [](unsigned char* q) { cudaFreeHost(q); }};
}

}  // namespace mhc::kernels::cuda_impl
