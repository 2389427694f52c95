// The page pool and host arena that every replay of a validation shares: sized before the first
// replay, grown when a plan needs more, refused when this host lacks the memory.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/kernels/swap.hpp"
#include "mhc/replay/arena.hpp"
#include "mhc/replay/host_memory.hpp"
#include "validation.hpp"

namespace mhc::replay::detail {

namespace {

// The host arena: anonymous memory faulted in by the kernel at mmap (MAP_POPULATE: 1.6 s
// for 4 GiB on the 2-core VM, where new[] + memset took 3.0 s), not in a timed transfer.
struct Unmap {
    size_t bytes = 0;
    void operator()(unsigned char* memory) const { ::munmap(memory, bytes); }
};

// `bytes` of anonymous memory, the first `populate` of them faulted in now (the rest, room
// for the first-fit arena's fragmentation, only if a replay ever places a copy there).
std::shared_ptr<unsigned char> populated_host_memory(size_t bytes, size_t populate) {
    auto failed = [&](const char* what) {
        return Error(std::string("the replay's host arena: ") + what + " of " + format_bytes(static_cast<int64_t>(bytes)) + ": " +
                     std::strerror(errno));
    };
    void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw failed("mmap");
    std::shared_ptr<unsigned char> out{static_cast<unsigned char*>(mem), Unmap{bytes}};
    if (populate > 0 && ::mmap(mem, populate, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0) == MAP_FAILED)
        throw failed("populating");
    return out;
}

}  // namespace

// One page pool for every configuration: allocated and populated once (the baseline's, the
// largest), mapped and unmapped by each replay; the host arena likewise (host backend):
// allocated and zeroed once, grown when needed. The replay's options point at both.
Options Validation::shared_memory_for(const Plan& plan) {
    const int64_t cap_bytes = replay_capacity(plan.capacity, plan.predicted_peak, plan.allocator);
    const size_t host_bytes = static_cast<size_t>(host_arena_bytes(*timed_, plan));
    reserve_shared_memory(cap_bytes, has_swaps(plan) ? cap_bytes : cap_bytes / 2, host_bytes,
                          static_cast<size_t>(host_arena_populated_bytes(*timed_, plan)));
    Options options = replay_options_;
    options.mapper = pool_.get();
    options.host_memory = host_mem_.get();
    options.host_memory_bytes = host_mem_bytes_;
    return options;
}

// Before the first replay: the pool for the largest device capacity (the baseline's) and the
// host arena for the largest host need of the plans predicted on the recorded trace, both at
// once (page tables and zeroing are the kernel's work, one core each). Pages with memory of
// their own only as many as the largest run that swaps needs: the baseline reads nothing
// back, so its pages beyond those alias them (4.1 of gpt2-small's 13.1 GB at 70%). A
// retimed plan that needs more grows the pool or the arena later.
void Validation::reserve_shared_memory_up_front() {
    int64_t cap_bytes = 0, distinct_bytes = 0, host_bytes = 0, host_populate = 0;
    for (size_t i = 0; i < on_recorded_.size(); ++i) {
        const Plan plan = make_plan(t_, on_recorded_[i]);
        const int64_t cap = replay_capacity(plan.capacity, plan.predicted_peak, plan.allocator);
        cap_bytes = std::max(cap_bytes, cap);
        if (has_swaps(plan)) distinct_bytes = std::max(distinct_bytes, cap);
        if (i > 0) {
            host_bytes = std::max(host_bytes, host_arena_bytes(t_, plan));
            host_populate = std::max(host_populate, host_arena_populated_bytes(t_, plan));
        }
    }
    // At most half the pages alias (none when nothing swaps): stand-ins writing the same
    // few cache lines of a small pool from several threads would time something else.
    distinct_bytes = distinct_bytes > 0 ? std::max(distinct_bytes, cap_bytes / 2) : cap_bytes;
    reserve_shared_memory(cap_bytes, distinct_bytes, static_cast<size_t>(host_bytes), static_cast<size_t>(host_populate));
}

// Makes the pool hold `cap_bytes` (`distinct_bytes` of them with memory of their own) and the
// host arena `host_bytes` (host backend; its first `host_populate` bytes faulted in), allocating
// what is missing; the two allocations run in parallel.
void Validation::reserve_shared_memory(int64_t cap_bytes, int64_t distinct_bytes, size_t host_bytes, size_t host_populate) {
    if (!shared_pool_) return;
    const bool new_pool = !pool_ || pool_->pool_pages() < Arena::pool_pages(cap_bytes) ||
                          pool_->va_bytes() < Arena::default_va(cap_bytes) ||
                          pool_->distinct_pages() < Arena::pool_pages(distinct_bytes);
    // A grown pool keeps the old one's size and aliases at least.
    if (new_pool && pool_) {
        cap_bytes = std::max(cap_bytes, pool_->pool_pages() * PageMapper::kPage);
        distinct_bytes = std::max(distinct_bytes, pool_->distinct_pages() * PageMapper::kPage);
    }
    // Both backends: the CUDA engine pinned (and unpinned) an arena of GiBs in every replay,
    // outside the replay's clock: on the H200 the cost_aware slice's replays cost about 2 s
    // each beyond their makespans, the likely reason the lru slices ran past gpu-check's 60 s.
    const bool new_host = host_bytes > host_mem_bytes_;
    if (!new_pool && !new_host) return;
    check_host_memory(new_pool ? distinct_bytes : 0, new_host ? host_bytes : 0, new_host ? host_populate : 0);
    const auto t_pool = std::chrono::steady_clock::now();
    const double cpu_pool = process_cpu_seconds();
    std::exception_ptr host_error;
    std::thread host_thread;
    if (new_host) {
        host_mem_.reset();
        host_mem_bytes_ = 0;
    }
    if (new_host &&
        spec_.replay.backend == Backend::Cuda) {   // pinned, before the pool (one thread drives the GPU)
        host_mem_ = kernels::pinned_host_memory(host_bytes);
        host_mem_bytes_ = host_bytes;
    } else if (new_host) {
        host_thread = std::thread([&] {
            try {
                host_mem_ = populated_host_memory(host_bytes, std::min(host_populate, host_bytes));
                host_mem_bytes_ = host_bytes;
            } catch (...) {
                host_error = std::current_exception();
            }
        });
    }
    std::exception_ptr pool_error;
    if (new_pool) {
        sample_resident();   // the old pool's aliases, before they go
        pool_.reset();
        try {
            pool_ = spec_.replay.backend == Backend::Cuda
                        ? make_cuda_mapper(Arena::pool_pages(cap_bytes), Arena::default_va(cap_bytes), true)
                        : make_host_mapper(Arena::pool_pages(cap_bytes), Arena::default_va(cap_bytes), true,
                                           std::max<int64_t>(Arena::pool_pages(distinct_bytes), 1));
        } catch (...) {
            pool_error = std::current_exception();
        }
    }
    if (host_thread.joinable()) host_thread.join();
    if (pool_error) std::rethrow_exception(pool_error);
    if (host_error) std::rethrow_exception(host_error);
    rep_.pool_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_pool).count();
    rep_.pool_cpu_seconds += process_cpu_seconds() - cpu_pool;
}

// What the pool (its pages with memory of their own, host backend) and the host arena (the
// host backend's populated part, the CUDA backend's pinned whole) are about to take from this
// host, against what this process may still take (MemAvailable, or less under a memory
// cgroup's limit: a container's, a systemd unit's; host_memory.hpp), less what this
// validation gives back first: past it the kernel's OOM killer ends the process with SIGKILL
// and no word (a 24.39 GiB snapshot on a 23 GiB machine was killed after 13 s), so it is
// refused first.
void Validation::check_host_memory(int64_t pool_distinct, size_t host_bytes, size_t host_populate) const {
    const HostMemory host = available_host_memory();
    const int64_t available = host.available;
    if (available < 0) return;   // no /proc/meminfo and no cgroup limit: nothing to check against
    const bool host_backend = spec_.replay.backend != Backend::Cuda;
    const int64_t pool = host_backend ? pool_distinct : 0;
    const int64_t arena = static_cast<int64_t>(host_backend ? host_populate : host_bytes);
    int64_t released = 0;   // the pool and arena replaced are freed before the new ones are made
    if (pool > 0 && pool_) released += pool_->distinct_pages() * PageMapper::kPage;
    if (arena > 0 && !host_backend) released += static_cast<int64_t>(host_mem_bytes_);
    if (pool + arena <= available + released) return;
    throw Error(
        path_ + ": the replay needs " + format_bytes(pool + arena) + " of this host's memory (" +
            (host_backend ? "the device pool " + format_bytes(pool) + ", the host arena " + format_bytes(arena)
                          : "the pinned host arena " + format_bytes(arena)) +
            "), more than the " + format_bytes(available + released) + " available" +
            (host.limited_by.empty() ? "" : " under " + host.limited_by) +
            ": replay on a machine with more memory, or a trace whose peak fits",
        Error::Kind::BadInput);
}

}  // namespace mhc::replay::detail
