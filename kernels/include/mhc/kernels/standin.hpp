#pragma once
// Stand-ins let replay reproduce recorded kernels it cannot re-run: one occupies the device
// for a requested time, the other reads and/or writes given buffers at full bandwidth.
// Host (Device::Cpu): run_for busy-waits (sleeping through most of a long wait, spinning
// the last stretch) and is accurate to a few microseconds; touch uses all worker threads.
// CUDA: run_for enqueues a spin kernel on globaltimer, calibrated so that the kernel's
// duration as seen by CUDA events matches the request; work is asynchronous on the
// stand-in's own stream until synchronize().
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mhc/kernels/types.hpp"

namespace mhc::kernels {

class Standin {
public:
    virtual ~Standin() = default;
    virtual std::string name() const = 0;
    virtual void run_for(double seconds) = 0;
    // Reads read_bytes at `read` and writes write_bytes at `write` (either may be empty).
    // CUDA: device-accessible pointers.
    virtual void touch(const void* read, size_t read_bytes, void* write, size_t write_bytes) = 0;
    virtual void synchronize() = 0;
    // Fixed overhead (s) subtracted from requests, measured at construction.
    virtual double overhead_s() const = 0;
    // CUDA: elapsed time of the last run_for/touch measured with events (s); host: wall time.
    virtual double last_elapsed_s() = 0;
};

std::unique_ptr<Standin> make_standin(Device device, int threads = 0);

// Host helper: returns after `seconds` of wall time (sleep, then spin the last ~100 µs).
void host_wait_for(double seconds);

// Host helper: returns at `due` plus however long `paused` (ns; may be null) grew beyond
// `paused_at_start` meanwhile, rechecked after every wake-up: a replay stops its clock while it
// maps pages, and what runs then (a stand-in, a paced copy) must not get that time for free.
void host_wait_until(std::chrono::steady_clock::time_point due, const std::atomic<int64_t>* paused = nullptr,
                     int64_t paused_at_start = 0);

// The calling thread's timer slack (how late Linux may wake a sleeper to batch wake-ups; 50 us
// by default) set to 1 ns, so that timed sleeps end when asked. Returns the previous slack in
// ns (to restore with restore_timer_slack), -1 where it cannot be set (not Linux).
long precise_timer_slack();
void restore_timer_slack(long previous_ns);

}  // namespace mhc::kernels
