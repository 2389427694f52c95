// InitializeInjection: the entry point the CUDA driver calls when CUDA_INJECTION64_PATH
// names this library (at cuInit). It configures CUPTI activity recording and callbacks and
// starts the writer thread. It never aborts the host: on any failure it prints one line
// and leaves the program running unrecorded.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "callbacks.hpp"
#include "recorder.hpp"
#include "signals.hpp"

namespace mhc::record::inject {

namespace {

std::string result_string(CUptiResult r) {
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    return s ? s : "CUPTI error " + std::to_string(static_cast<int>(r));
}

bool check(CUptiResult r, const char* what) {
    if (r == CUPTI_SUCCESS) return true;
    Recorder::get().fail(std::string(what) + ": " + result_string(r));
    return false;
}

void at_exit() { Recorder::get().finish_at_exit(); }
void in_child() { Recorder::get().disown(); }

// NVTX ranges reach CUPTI only when NVTX_INJECTION64_PATH names libcupti. `mhc record`
// sets it before the program starts; this covers programs whose first NVTX call comes
// after CUDA is initialised.
void point_nvtx_at_cupti() {
    if (std::getenv("NVTX_INJECTION64_PATH")) return;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &info) && info.dli_fname)
        setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

// CUPTI of CUDA N needs a driver for CUDA N or newer (minor versions are compatible). An
// older driver is named in one line, instead of an obscure CUPTI error later.
bool driver_supports_this_cupti() {
    int driver = 0;
    if (cuDriverGetVersion(&driver) != CUDA_SUCCESS || driver / 1000 >= CUDA_VERSION / 1000) return true;
    std::fprintf(stderr,
                 "mhc-record: the NVIDIA driver supports CUDA %d.%d, older than the CUDA %d.%d this "
                 "recorder and its CUPTI were built for (it needs a driver for CUDA %d.x%s); not "
                 "recording; the program runs on\n",
                 driver / 1000, driver % 1000 / 10, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,
                 CUDA_VERSION / 1000, CUDA_VERSION / 1000 == 13 ? ", Linux 580 or newer" : "");
    return false;
}

bool setup() {
    if (!driver_supports_this_cupti()) return false;
    Config cfg = config_from_env();
    Recorder& rec = Recorder::get();
    // Registered first, so that a recorder started and then stopped by a failure below
    // still writes what it has (marked incomplete) instead of leaving a temporary file.
    if (std::atexit(at_exit) != 0) {
        std::fprintf(stderr, "mhc-record: atexit failed; not recording\n");
        return false;
    }
    uint64_t origin = 0;
    if (!check(cuptiGetTimestamp(&origin), "cuptiGetTimestamp")) return false;

    size_t dev_buf = cfg.device_buffer_bytes;
    size_t attr_size = sizeof dev_buf;
    // A larger device buffer keeps records from being dropped between flushes; CUPTI's
    // default still records, so a refusal is worth a line, not the recording.
    if (CUptiResult r = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE,
                                                  &attr_size, &dev_buf);
        r != CUPTI_SUCCESS)
        std::fprintf(stderr, "mhc-record: device buffer size left at CUPTI's default: %s\n",
                     result_string(r).c_str());
    if (!check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
               "cuptiActivityRegisterCallbacks"))
        return false;
    bool accesses = cfg.accesses;
    if (!rec.start(std::move(cfg), origin)) return false;

    // Kernels and memory are what the trace is for: without them, stop.
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMORY2})
        if (!check(cuptiActivityEnable(k), "cuptiActivityEnable(kernel/memory)")) return false;
    // The rest enrich the trace; a driver that lacks one still records the others.
    const CUpti_ActivityKind optional[] = {
        CUPTI_ACTIVITY_KIND_MEMORY_POOL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
        CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_DEVICE};
    for (CUpti_ActivityKind k : optional) {
        CUptiResult r = cuptiActivityEnable(k);
        if (r != CUPTI_SUCCESS)
            std::fprintf(stderr, "mhc-record: activity kind %d not recorded: %s\n",
                         static_cast<int>(k), result_string(r).c_str());
    }

    CUpti_SubscriberHandle sub = nullptr;
    if (!check(cuptiSubscribe(&sub, on_api, nullptr), "cuptiSubscribe")) return false;
    if (!enable_callbacks(sub, accesses)) return false;

    if (rec.config().signals && !install_signal_handlers())
        std::fprintf(stderr, "mhc-record: cannot install SIGINT/SIGTERM handlers\n");
    pthread_atfork(nullptr, nullptr, in_child);
    point_nvtx_at_cupti();
    return true;
}

}  // namespace
}  // namespace mhc::record::inject

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    static bool done = false;
    if (done) return 1;
    done = true;
    try {
        mhc::record::inject::setup();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mhc-record: %s; recording stopped\n", e.what());
    } catch (...) {
        std::fprintf(stderr, "mhc-record: unexpected error; recording stopped\n");
    }
    // 1 either way: the program runs on, recorded or not.
    return 1;
}
