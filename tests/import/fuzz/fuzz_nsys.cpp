// libFuzzer: Nsight Systems SQLite import on mutated database bytes. Most mutations make the
// file unreadable to SQLite (an error, as it should be); the seed keeps the fuzzer near
// valid files, where table/column lookups and row mapping run.
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::import_bytes({reinterpret_cast<const char*>(data), size}, mhc::trace::import::Format::Nsys);
    return 0;
}
