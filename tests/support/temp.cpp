#include "mhc/test/temp.hpp"

#include <unistd.h>

#include <atomic>

namespace mhc::test {

namespace {

std::string unique(const std::string& prefix) {
    static std::atomic<int> n{0};
    return prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

}  // namespace

TempPath::TempPath(const std::string& name, const std::string& prefix)
    : path((std::filesystem::temp_directory_path() / (unique(prefix) + "-" + name)).string()) {}

TempPath::~TempPath() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

TempDir::TempDir(const std::string& prefix) : path(std::filesystem::temp_directory_path() / unique(prefix)) {
    std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

size_t TempDir::entries() const {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(path)) ++n;
    return n;
}

std::filesystem::path scratch_dir(const std::string& prefix) {
    auto dir = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    return dir;
}

}  // namespace mhc::test
