// Swap engine factory and the parts common to both backends.
#include "mhc/common/error.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/swap.hpp"
#include "swap_internal.hpp"

namespace mhc::kernels {

const char* to_string(SwapDir d) { return d == SwapDir::HostToDevice ? "h2d" : "d2h"; }
const char* to_string(SwapPath p) { return p == SwapPath::CopyEngine ? "copy-engine" : "zero-copy"; }

SwapResult SwapEngine::wait_checked(uint64_t id) {
    SwapResult r = wait(id);
    if (!r.ok)
        throw Error(name() + ": transfer " + std::to_string(id) + " (" + to_string(r.dir) + ", " +
                        std::to_string(r.bytes) + " bytes) failed its checksum",
                    Error::Kind::Internal);
    return r;
}

void check_swap_config(const SwapConfig& c) {
    if (c.chunk_bytes < 8 || c.chunk_bytes % 8 != 0)
        throw Error("swap chunk size must be a positive multiple of 8 bytes");
    if (c.max_ops_per_s < 0) throw Error("swap rate limit must be >= 0 operations/s");
    if (c.threads_per_direction < 1 || c.threads_per_direction > 64)
        throw Error("swap threads per direction must be in 1..64");
    if (c.device_bytes == 0 || c.host_bytes == 0) throw Error("swap arenas must not be empty");
    if (!(c.pace_h2d_Bps >= 0 && c.pace_h2d_Bps < 1e300) || !(c.pace_d2h_Bps >= 0 && c.pace_d2h_Bps < 1e300))
        throw Error("swap pace must be >= 0 bytes/s (0: unpaced)");
    if (!(c.pace_duplex > 0 && c.pace_duplex <= 1)) throw Error("swap pace duplex factor must be in (0, 1]");
    if (!(c.pace_h2d_latency_s >= 0 && c.pace_h2d_latency_s <= 1e6) || !(c.pace_d2h_latency_s >= 0 && c.pace_d2h_latency_s <= 1e6))
        throw Error("swap pace latency must be in [0, 1e6] s");
    if ((c.pace_h2d_latency_s > 0 && !(c.pace_h2d_Bps > 0)) || (c.pace_d2h_latency_s > 0 && !(c.pace_d2h_Bps > 0)))
        throw Error("swap latency is emulated on a paced link only (set the direction's pace)");
}

void check_swap_range(const SwapConfig& c, size_t host_off, size_t dev_off, size_t bytes) {
    if (host_off > c.host_bytes || bytes > c.host_bytes - host_off)
        throw Error("swap: host range [" + std::to_string(host_off) + ", +" + std::to_string(bytes) +
                    ") is outside the " + std::to_string(c.host_bytes) + "-byte host arena");
    if (dev_off > c.device_bytes || bytes > c.device_bytes - dev_off)
        throw Error("swap: device range [" + std::to_string(dev_off) + ", +" + std::to_string(bytes) +
                    ") is outside the " + std::to_string(c.device_bytes) + "-byte device arena");
}

std::unique_ptr<SwapEngine> make_swap_engine(Device device, const SwapConfig& config) {
    check_swap_config(config);
    if (device == Device::Cuda) {
        if (config.pace_h2d_Bps > 0 || config.pace_d2h_Bps > 0)
            throw Error("swap engine: a paced link is the host backend's emulation; a GPU's copies run at its link's speed",
                        Error::Kind::Internal);
        require_device(Device::Cuda);
        return cuda_impl::make_swap_engine(config);
    }
    return make_host_swap_engine(config);
}

std::shared_ptr<unsigned char> pinned_host_memory(size_t bytes) {
    require_device(Device::Cuda);
    return cuda_impl::pinned_host_memory(bytes);
}

std::unique_ptr<Standin> make_standin(Device device, int threads) {
    if (device == Device::Cuda) {
        require_device(Device::Cuda);
        return cuda_impl::make_standin();
    }
    return make_host_standin(threads);
}

}  // namespace mhc::kernels
