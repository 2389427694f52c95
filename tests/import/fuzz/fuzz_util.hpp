#pragma once
// Fuzz helper: write the input to a per-process file on tmpfs and import it; mhc::Error is
// the expected outcome for bad input, anything else (crash, sanitizer report, other
// exception) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"

namespace fuzz {

inline std::string scratch() {
    static const std::string dir = [] {
        std::string d = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        return d + "/mhc-fuzz-" + std::to_string(getpid());
    }();
    return dir;
}

inline void import_bytes(std::string_view bytes, mhc::trace::import::Format format) {
    std::string in = scratch() + "-in", out = scratch() + "-out.db";
    if (FILE* f = std::fopen(in.c_str(), "wb")) {
        std::fwrite(bytes.data(), 1, bytes.size(), f);
        std::fclose(f);
    }
    mhc::trace::import::Options opt;
    opt.format = format;
    opt.warn = false;
    // A small limit, so that gzip expansion bombs reach the refusal (and stay fast) instead of
    // decompressing up to the 4 GiB default on every run.
    opt.max_input_size = 1 << 20;
    try {
        mhc::trace::import::import_file(in, out, opt);
    } catch (const mhc::Error&) {
    }
    std::remove(out.c_str());
}

}  // namespace fuzz
