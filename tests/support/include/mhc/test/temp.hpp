#pragma once
// Scratch paths for tests, in the temporary directory and unique per process (tests run in
// parallel under ctest -j): a file path or a directory removed at scope exit, and a
// per-process folder for files that outlive one test case.
#include <cstddef>
#include <filesystem>
#include <string>

namespace mhc::test {

// A unique path "<tmp>/<prefix>-<pid>-<n>-<name>", nothing created; removed (file or folder)
// at scope exit.
struct TempPath {
    std::string path;
    explicit TempPath(const std::string& name, const std::string& prefix = "mhc-test");
    ~TempPath();
    TempPath(const TempPath&) = delete;
    TempPath& operator=(const TempPath&) = delete;
};

// A fresh directory "<tmp>/<prefix>-<pid>-<n>", removed with its contents at scope exit.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& prefix = "mhc-test");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (path / name).string(); }
    size_t entries() const;   // files and folders directly inside
};

// "<tmp>/<prefix>-<pid>", created on first use and kept for the process (and after it, for
// a look at what a failed test left).
std::filesystem::path scratch_dir(const std::string& prefix);

}  // namespace mhc::test
