// The writer thread and the exit paths of the recorder.
#include "recorder.hpp"

#include <cuda.h>
#include <cupti.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "mhc/record/cupti_decode.hpp"
#include "mhc/record/output.hpp"
#include "mhc/record/translator.hpp"
#include "mhc/trace/store.hpp"

#ifndef MHC_VERSION
#define MHC_VERSION "0.1.0"
#endif

namespace mhc::record::inject {

namespace {

std::string command_line() {
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::string out;
    size_t i = 0;
    while (i < all.size()) {
        size_t j = all.find('\0', i);
        if (j == std::string::npos) j = all.size();
        std::string arg = all.substr(i, j - i);
        if (!out.empty()) out += ' ';
        bool plain = !arg.empty() && arg.find_first_of(" \t\"'\\$`") == std::string::npos;
        out += plain ? arg : "'" + arg + "'";
        i = j + 1;
    }
    return out;
}

// A bounded wait on a semaphore that a signal handler may use (sem_trywait and nanosleep
// are async-signal-safe; sem_timedwait is not listed).
bool wait_sem(sem_t* s, int timeout_ms) {
    for (int waited = 0; waited <= timeout_ms; waited += 5) {
        if (sem_trywait(s) == 0) return true;
        timespec ts{0, 5 * 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
    return false;
}

void append_manifest(const std::string& manifest, const std::string& line) {
    if (manifest.empty()) return;
    int fd = ::open(manifest.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    // One write with O_APPEND: lines from several processes do not interleave.
    ssize_t n = ::write(fd, line.data(), line.size());
    (void)n;
    ::close(fd);
}

}  // namespace

Config config_from_env() {
    Config c;
    const char* out = std::getenv("MHC_RECORD_OUTPUT");
    std::string base = out && *out ? out : "mhc-record.db";
    const char* root = std::getenv("MHC_RECORD_ROOT_PID");
    bool is_root = !root || !*root || std::atol(root) == static_cast<long>(getpid());
    c.output = output_path(base, std::getenv("RANK"), std::getenv("LOCAL_RANK"),
                           static_cast<long>(getpid()), is_root);
    if (const char* m = std::getenv("MHC_RECORD_MANIFEST")) c.manifest = m;
    // A value outside the documented ones: one line on stderr, and the default.
    const EnvSettings env = settings_from_env([](const char* name) -> const char* { return std::getenv(name); },
                                              [](const std::string& problem, const std::string& fallback) {
                                                  std::fprintf(stderr, "mhc-record: %s; using %s\n", problem.c_str(),
                                                               fallback.c_str());
                                              });
    c.accesses = env.accesses;
    c.signals = env.signals;
    c.replace = env.replace;
    c.buffer_bytes = env.buffer_bytes;
    c.device_buffer_bytes = env.device_buffer_bytes;
    return c;
}

Recorder& Recorder::get() {
    static Recorder* r = new Recorder();   // leaked on purpose: used by exit paths
    return *r;
}

bool flush_activity(const char* why) {
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) {
        const char* s = nullptr;
        cuptiGetResultString(r, &s);
        Recorder::get().fail(std::string("cuptiActivityFlushAll (") + why + "): " +
                             (s ? s : "error"));
        return false;
    }
    return true;
}

void Recorder::fail(const std::string& what) {
    if (failed_.exchange(true)) return;
    active_.store(false);
    {
        std::lock_guard<std::mutex> lk(error_mu_);
        error_ = what;
    }
    std::fprintf(stderr, "mhc-record: %s; %s\n", what.c_str(),
                 started_.load() ? "recording stopped (the trace so far is kept, marked incomplete)"
                                 : "not recording; the program runs on");
}

bool Recorder::start(Config cfg, uint64_t origin) {
    if (started_.exchange(true)) return false;
    cfg_ = std::move(cfg);
    origin_ = origin;
    owner_pid_ = static_cast<long>(getpid());
    if (sem_init(&wake_, 0, 0) != 0 || sem_init(&finished_, 0, 0) != 0) {
        fail(std::string("sem_init: ") + std::strerror(errno));
        return false;
    }
    active_.store(true);
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::exception& e) {
        fail(std::string("cannot start the writer thread: ") + e.what());
        return false;
    }
    return true;
}

void Recorder::push(Item&& item) {
    if (!active_.load(std::memory_order_relaxed)) {
        if (auto* b = std::get_if<ActivityBuffer>(&item)) std::free(b->data);
        return;
    }
    bool wake;
    {
        std::lock_guard<std::mutex> lk(mu_);
        queue_.push_back(std::move(item));
        // Buffers are the big items; callbacks are batched until the next wake-up.
        wake = queue_.size() >= 4096 || std::holds_alternative<ActivityBuffer>(queue_.back());
    }
    if (wake) sem_post(&wake_);
}

bool Recorder::stopping() const { return stop_.load() || signal_stop_.load(); }

void Recorder::drain(std::vector<Item>& batch, bool lock_may_block) {
    batch.clear();
    if (lock_may_block) {
        std::lock_guard<std::mutex> lk(mu_);
        batch.swap(queue_);
        return;
    }
    // From the signal path the interrupted thread may hold the lock: try for a while only.
    for (int i = 0; i < 200; ++i) {
        if (mu_.try_lock()) {
            batch.swap(queue_);
            mu_.unlock();
            return;
        }
        timespec ts{0, 5 * 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
}

void Recorder::open_trace(std::unique_ptr<trace::Writer>& writer, std::unique_ptr<Translator>& tr) {
    try {
        writer = std::make_unique<trace::Writer>(cfg_.output, cfg_.replace ? IfExists::Replace : IfExists::Refuse);
        TranslatorOptions o;
        o.origin = static_cast<int64_t>(origin_);
        o.accesses = cfg_.accesses;
        o.job = job_identity([](const char* name) -> const char* { return std::getenv(name); });
        tr = std::make_unique<Translator>(*writer, o);
    } catch (const std::exception& e) {
        fail(e.what());
    }
}

// Every item into the trace; after a failure to write, the trace is dropped and the buffers
// only freed.
void Recorder::process(std::vector<Item>& items, std::unique_ptr<trace::Writer>& writer, std::unique_ptr<Translator>& tr) {
    for (Item& it : items) {
        auto* buf = std::get_if<ActivityBuffer>(&it);
        if (!tr) {
            if (buf) std::free(buf->data);
            continue;
        }
        try {
            if (buf) {
                CUpti_Activity* rec = nullptr;
                while (true) {
                    CUptiResult r = cuptiActivityGetNextRecord(buf->data, buf->valid, &rec);
                    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
                    if (r != CUPTI_SUCCESS) {
                        fail("cuptiActivityGetNextRecord failed");
                        break;
                    }
                    decode_record(rec, *tr);
                }
                std::free(buf->data);
            } else if (auto* a = std::get_if<AllocEvent>(&it)) {
                tr->on_alloc(*a);
            } else if (auto* f = std::get_if<FreeEvent>(&it)) {
                tr->on_free(*f);
            } else if (auto* l = std::get_if<LaunchEvent>(&it)) {
                tr->on_launch(*l);
            }
        } catch (const std::exception& e) {
            if (buf) std::free(buf->data);
            fail(std::string("writing the trace: ") + e.what());
            tr.reset();
            writer.reset();   // removes the temporary file
        }
    }
    items.clear();
}

// Flush on a helper thread: if CUPTI is stuck (the interrupted thread may hold a driver lock)
// we finish with what we have instead of hanging.
void Recorder::flush_after_signal() {
    auto flushed = std::make_shared<std::atomic<bool>>(false);
    try {
        std::thread([flushed] {
            cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            flushed->store(true);
        }).detach();
        for (int i = 0; i < 400 && !flushed->load(); ++i) {
            timespec d{0, 5 * 1000 * 1000};
            nanosleep(&d, nullptr);
        }
    } catch (const std::exception&) {
    }
}

void Recorder::finish_trace(trace::Writer& writer, Translator& tr) {
    try {
        tr.finish();
        int sig = interrupted_by_.load();
        bool complete = sig == 0 && !failed_.load();
        writer.set_meta("source", "record");
        writer.set_meta("recorder", "mhc record (CUPTI injection)");
        writer.set_meta("recorder_version", MHC_VERSION);
        writer.set_meta("complete", complete ? "true" : "false");
        if (sig != 0) writer.set_meta("interrupted_by", sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : std::to_string(sig));
        {
            std::lock_guard<std::mutex> lk(error_mu_);
            if (!error_.empty()) writer.set_meta("error", error_);
        }
        writer.set_meta("dropped_records", std::to_string(dropped_.load()));
        writer.set_meta("command_line", command_line());
        writer.set_meta("pid", std::to_string(owner_pid_));
        for (const char* k : {"RANK", "LOCAL_RANK", "WORLD_SIZE"})
            if (const char* v = std::getenv(k)) writer.set_meta(std::string("env.") + k, v);
        char host[256] = {0};
        if (gethostname(host, sizeof host - 1) == 0) writer.set_meta("host", host);
        int drv = 0;
        if (cuDriverGetVersion(&drv) == CUDA_SUCCESS)
            writer.set_meta("driver_cuda_version", std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10));
        writer.set_meta("cuda_toolkit_version",
                        std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10));
        uint32_t cupti = 0;
        if (cuptiGetVersion(&cupti) == CUPTI_SUCCESS) writer.set_meta("cupti_api_version", std::to_string(cupti));
        writer.finish();
        const auto& s = tr.stats();
        std::string line = cfg_.output + "\t" + (complete ? "complete" : "incomplete") + "\t" + std::to_string(s.kernels) +
                           " kernels\t" + std::to_string(s.allocations) + " allocations\t" + std::to_string(s.accesses) +
                           " accesses\t" + std::to_string(dropped_.load()) + " dropped\n";
        if (cfg_.manifest.empty()) std::fprintf(stderr, "mhc-record: wrote %s", line.c_str());
        append_manifest(cfg_.manifest, line);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mhc-record: cannot write %s: %s\n", cfg_.output.c_str(), e.what());
    }
}

void Recorder::run() {
    // Signals go to the program's threads; this one must stay free to write the file.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    std::unique_ptr<trace::Writer> writer;
    std::unique_ptr<Translator> tr;
    open_trace(writer, tr);
    std::vector<Item> batch;
    while (true) {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec += 1;
            ts.tv_nsec -= 1000000000L;
        }
        while (sem_timedwait(&wake_, &ts) != 0 && errno == EINTR) {}
        bool stop = stopping();
        if (signal_stop_.load() && active_.load()) flush_after_signal();
        if (stop) active_.store(false);   // nothing new after the last drain
        drain(batch, !signal_stop_.load());
        process(batch, writer, tr);
        if (stop) break;
    }
    if (tr && writer) finish_trace(*writer, *tr);
    // Whatever arrives from now on is dropped by push().
    drain(batch, !signal_stop_.load());
    for (Item& it : batch)
        if (auto* b = std::get_if<ActivityBuffer>(&it)) std::free(b->data);
    done_.store(true);
    sem_post(&finished_);
}

void Recorder::finish_at_exit() {
    if (!started_.load() || owner_pid_ != static_cast<long>(getpid())) return;
    bool self = std::this_thread::get_id() == thread_.get_id();
    if (exit_called_.exchange(true) || self) {
        if (!self && thread_.joinable()) thread_.join();
        return;
    }
    // Flush before asking the writer to stop, so that the last buffers are still taken.
    if (!done_.load() && active_.load()) flush_activity("exit");
    stop_.store(true);
    sem_post(&wake_);
    if (thread_.joinable()) thread_.join();
}

bool Recorder::finish_from_signal(int sig, int timeout_ms) {
    if (!started_.load() || owner_pid_ != static_cast<long>(getpid())) return false;
    int expected = 0;
    interrupted_by_.compare_exchange_strong(expected, sig);
    if (done_.load()) return true;
    signal_stop_.store(true);
    sem_post(&wake_);
    if (!wait_sem(&finished_, timeout_ms)) return false;
    sem_post(&finished_);   // leave it posted for any other waiter
    return true;
}

}  // namespace mhc::record::inject
