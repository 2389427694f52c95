#pragma once
// Shared helpers of the importer tests: a scratch directory, importing into it, running mhc.
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "mhc/test/paths.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/summary.hpp"

namespace test {

// Built by appending to one string: GCC 12 warns (-Warray-bounds, a false positive) on
// `std::string(literal) + "/" + rel` once the Catch2 header is precompiled.
inline std::string joined_path(const char* folder, const std::string& rel) {
    std::string path(folder);
    path.append("/").append(rel);
    return path;
}
inline std::string pub(const std::string& rel) { return joined_path(mhc::test::public_datasets(), rel); }
inline std::string fixture(const std::string& rel) { return joined_path(mhc::test::source_path("tests/import/fixtures").c_str(), rel); }

using TempDir = mhc::test::TempDir;

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A missing fixture is a failure that names the file, not an empty string (which a parser
// would then report as a truncated input).
inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error(path + ": cannot open (missing fixture?)");
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// A gzipped fixture's text, for tests that rewrite a real file as another writer would.
inline std::string gunzip(const std::string& path) {
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) throw std::runtime_error(path + ": cannot open (missing fixture?)");
    std::string text;
    char buf[1 << 16];
    int got = 0;
    while ((got = gzread(file, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(got));
    gzclose(file);
    if (got < 0) throw std::runtime_error(path + ": not a whole gzip file");
    return text;
}

// Runs `mhc ARGS`, returns the exit status; stderr goes to `err`.
inline int run_mhc(const std::string& args, std::string* err = nullptr) {
    TempDir t;
    std::string e = t.file("stderr");
    int rc = std::system((std::string(mhc::test::mhc_exe()) + " " + args + " >/dev/null 2>" + e).c_str());
    if (err) *err = read_file(e);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Runs `mhc ARGS` and returns its stdout (the exit status in `rc`).
inline std::string mhc_stdout(const std::string& args, int* rc = nullptr) {
    TempDir t;
    std::string o = t.file("stdout");
    int status = std::system((std::string(mhc::test::mhc_exe()) + " " + args + " >" + o + " 2>/dev/null").c_str());
    if (rc) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return read_file(o);
}

}  // namespace test
