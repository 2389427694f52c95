#pragma once
// The recorder inside the host process: a queue fed by CUPTI callbacks and buffer
// completions, and one writer thread that owns the Translator and the trace Writer.
// Nothing here may throw into the host program or abort it: failures print one line on
// stderr and stop recording (see docs/recording.md).
#include <semaphore.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "mhc/record/events.hpp"
#include "mhc/record/translator.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::record::inject {

struct Config {
    std::string output;          // this process's trace file
    std::string manifest;        // file to append "path<TAB>status" to, or empty
    bool accesses = true;
    bool replace = false;        // an existing output is replaced (MHC_RECORD_FORCE=1), else refused
    size_t buffer_bytes = 8u << 20;         // host activity buffers
    size_t device_buffer_bytes = 32u << 20; // CUPTI device buffer
    bool signals = true;
};

Config config_from_env();

struct ActivityBuffer {
    uint8_t* data = nullptr;
    size_t valid = 0;
};
using Item = std::variant<ActivityBuffer, AllocEvent, FreeEvent, LaunchEvent>;

class Recorder {
public:
    static Recorder& get();   // created on first use, never destroyed (exit paths use it)

    bool start(Config cfg, uint64_t origin);
    const Config& config() const { return cfg_; }

    // True while recording: callbacks check this first.
    bool active() const { return active_.load(std::memory_order_relaxed); }
    // One stderr line, then recording stops; the trace so far is kept, marked incomplete.
    void fail(const std::string& what);

    void push(Item&& item);
    void add_dropped(size_t n) { dropped_.fetch_add(n, std::memory_order_relaxed); }

    // Normal end (atexit): flush CUPTI, drain, write the file. Safe to call twice.
    void finish_at_exit();
    // From a signal handler (async-signal-safe): ask the writer thread to flush and finish,
    // and wait for it up to `timeout_ms`. Returns true when the file was written.
    bool finish_from_signal(int sig, int timeout_ms);
    // From a signal handler whose previous handler keeps the program running: note that
    // the run was interrupted (meta complete=false) and let the normal exit finish.
    void note_signal(int sig) { interrupted_by_.store(sig); }
    // After fork() in the child: the child does not record (its parent's writer thread is
    // not there).
    void disown() { active_.store(false); owner_pid_ = -1; }
    long owner_pid() const { return owner_pid_; }

private:
    Recorder() = default;
    void run();                  // writer thread
    // run()'s stages: open the trace, translate what arrived, flush CUPTI on a signal, and
    // write the trace's meta and the manifest line at the end.
    void open_trace(std::unique_ptr<trace::Writer>& writer, std::unique_ptr<Translator>& tr);
    void process(std::vector<Item>& items, std::unique_ptr<trace::Writer>& writer, std::unique_ptr<Translator>& tr);
    void flush_after_signal();
    void finish_trace(trace::Writer& writer, Translator& tr);
    void drain(std::vector<Item>& batch, bool lock_may_block);
    bool stopping() const;

    Config cfg_;
    uint64_t origin_ = 0;
    long owner_pid_ = -1;
    std::atomic<bool> active_{false}, failed_{false}, started_{false};
    std::atomic<bool> stop_{false};        // finish now
    std::atomic<bool> signal_stop_{false}; // finish now, from a signal: bounded waits only
    std::atomic<bool> done_{false};
    std::atomic<bool> exit_called_{false};
    std::atomic<int> interrupted_by_{0};
    std::atomic<size_t> dropped_{0};
    std::mutex mu_;
    std::vector<Item> queue_;
    sem_t wake_{}, finished_{};
    std::thread thread_;
    std::string error_;
    std::mutex error_mu_;
};

// Flushes every CUPTI buffer (forced). Returns false and stops recording on failure.
bool flush_activity(const char* why);

}  // namespace mhc::record::inject
