#pragma once
// A unique temporary path removed at scope exit.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

struct TempPath {
    std::string path;
    explicit TempPath(const std::string& name) {
        static std::atomic<int> n{0};
        path = (std::filesystem::temp_directory_path() /
                ("mhc-test-" + std::to_string(getpid()) + "-" + std::to_string(n++) + "-" + name))
                   .string();
    }
    ~TempPath() {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
};
