#include "source.hpp"

#include <cerrno>
#include <cstring>

#include "mhc/common/error.hpp"

namespace mhc::trace::import {

namespace {
constexpr size_t kChunk = 1 << 18;
}

GzSource::GzSource(const std::string& path) : path_(path) {
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) throw Error(where(path, std::string("cannot open: ") + std::strerror(errno)));
    gzbuffer(f_, 1 << 17);
    buf_ = new char[kChunk];
    cur_ = end_ = buf_;
}

GzSource::~GzSource() {
    if (f_) gzclose(f_);
    delete[] buf_;
}

size_t GzSource::read(char* buf, size_t cap) {
    int got = gzread(f_, buf, static_cast<unsigned>(cap));
    int errnum = 0;
    const char* msg = gzerror(f_, &errnum);
    if (got < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
        std::string m = errnum == Z_BUF_ERROR ? "the gzip data is truncated" : std::string("corrupt gzip data: ") + (msg ? msg : "?");
        throw Error(where(path_, m));
    }
    total_ += static_cast<uint64_t>(got);
    return static_cast<size_t>(got);
}

void GzSource::refill() {
    size_t got = read(buf_, kChunk);
    cur_ = buf_;
    end_ = buf_ + got;
}

std::string read_all(const std::string& path) {
    GzSource s(path);
    std::string out;
    char buf[1 << 16];
    while (size_t got = s.read(buf, sizeof buf)) out.append(buf, got);
    return out;
}

}  // namespace mhc::trace::import
