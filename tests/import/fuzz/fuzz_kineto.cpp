// libFuzzer: Kineto JSON import (SAX parse, memory pairing, kernel timeline, checks).
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::import_bytes({reinterpret_cast<const char*>(data), size}, mhc::trace::import::Format::Kineto);
    return 0;
}
