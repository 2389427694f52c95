#pragma once
// Backend constructors behind make_swap_engine / make_standin.
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "mhc/kernels/standin.hpp"
#include "mhc/kernels/swap.hpp"

namespace mhc::kernels {

void check_swap_config(const SwapConfig& c);
void check_swap_range(const SwapConfig& c, size_t host_off, size_t dev_off, size_t bytes);
std::unique_ptr<SwapEngine> make_host_swap_engine(const SwapConfig& c);
std::unique_ptr<Standin> make_host_standin(int threads);

namespace cuda_impl {
std::unique_ptr<SwapEngine> make_swap_engine(const SwapConfig& c);
std::unique_ptr<Standin> make_standin();
std::shared_ptr<unsigned char> pinned_host_memory(size_t bytes);
}  // namespace cuda_impl

// Spaces operation starts at least 1/rate apart (0 = no limit); shared by both directions.
class RateLimiter {
public:
    explicit RateLimiter(double ops_per_s) : period_(ops_per_s > 0 ? 1.0 / ops_per_s : 0.0) {}
    // Returns the slot the operation was given (the epoch when there is no limit).
    std::chrono::steady_clock::time_point acquire() {
        if (period_ <= 0) return {};
        std::chrono::steady_clock::time_point slot;
        {
            std::lock_guard<std::mutex> lock(mu_);
            auto now = std::chrono::steady_clock::now();
            if (next_ < now) next_ = now;
            slot = next_;
            next_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(period_));
        }
        std::this_thread::sleep_until(slot);
        return slot;
    }

private:
    double period_;
    std::mutex mu_;
    std::chrono::steady_clock::time_point next_{};
};

}  // namespace mhc::kernels
