// libFuzzer: execution-trace JSON import (both schema styles), without Kineto.
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::import_bytes({reinterpret_cast<const char*>(data), size}, mhc::trace::import::Format::ExecutionTrace);
    return 0;
}
