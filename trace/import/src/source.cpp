#include "source.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "limits.hpp"
#include "mhc/common/error.hpp"

namespace mhc::trace::import {

namespace {
constexpr size_t kChunk = 1 << 18;

// True when the file does not start with the gzip magic.
bool gzdirect_hint(const std::string& path) {
    unsigned char m[2] = {0, 0};
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
        size_t n = std::fread(m, 1, 2, f);
        std::fclose(f);
        return !(n == 2 && m[0] == 0x1f && m[1] == 0x8b);
    }
    return true;
}
}  // namespace

// A pipe, a device (/dev/zero) or a /proc file: no size bounds what is read from it.
static bool special_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

GzSource::GzSource(const std::string& path, uint64_t limit) : path_(path) {
    special_ = special_file(path);
    direct_ = gzdirect_hint(path);
    if (special_ || !direct_) limit_ = limit;
    const auto cannot_open = [&] {
        return Error(errno == ENOENT ? no_such_file(path)
                                     : where(path, std::string("cannot open: ") + std::strerror(errno)));
    };
    if (direct_) {
        f_ = gzopen(path.c_str(), "rb");
        if (!f_) throw cannot_open();
        gzbuffer(f_, 1 << 17);
    } else {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) throw cannot_open();
        if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) {   // gzip only
            ::close(fd_);
            throw Error(where(path, "out of memory opening the gzip data"), Error::Kind::Internal);
        }
        z_open_ = true;
        in_.resize(1 << 17);
    }
    buf_ = new char[kChunk];
    cur_ = end_ = buf_;
}

GzSource::~GzSource() {
    if (f_) gzclose(f_);
    if (z_open_) inflateEnd(&z_);
    if (fd_ >= 0) ::close(fd_);
    delete[] buf_;
}

// Inflates up to `cap` bytes of gzip input into `buf`; 0 at its end. A member's end is followed
// by the end of the file, another member (inflated on), or zeros (padding, skipped as gzip and
// Python skip them); anything else is refused, as is input that ends inside a member.
size_t GzSource::inflate_some(char* buf, size_t cap) {
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(cap);
    uint64_t padding = 0;   // zeros seen after the last member
    while (z_.avail_out == cap) {
        if (z_.avail_in == 0 && !in_eof_) {
            ssize_t got = 0;
            do got = ::read(fd_, in_.data(), in_.size());
            while (got < 0 && errno == EINTR);
            if (got < 0) throw Error(where(path_, std::string("cannot read: ") + std::strerror(errno)));
            in_eof_ = got == 0;
            in_read_ += static_cast<uint64_t>(got);
            z_.next_in = in_.data();
            z_.avail_in = static_cast<uInt>(got);
        }
        if (z_end_) {   // between members: zeros, another member, or the end
            while (z_.avail_in > 0 && *z_.next_in == 0) {
                ++z_.next_in;
                --z_.avail_in;
                ++padding;
            }
            if (z_.avail_in == 0) {
                if (in_eof_) return 0;
                continue;
            }
            if (padding > 0 || *z_.next_in != 0x1f)
                throw Error(where(path_, "byte " + std::to_string(in_read_ - z_.avail_in) +
                                             " follows the end of the gzip data and is not gzip data (an appended "
                                             "or damaged file)"));
            inflateReset(&z_);
            z_end_ = false;
        }
        if (z_.avail_in == 0 && in_eof_) throw Error(where(path_, "the gzip data is truncated"));
        const int rc = inflate(&z_, Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            z_end_ = true;
        } else if (rc == Z_BUF_ERROR) {
            if (in_eof_ && z_.avail_in == 0) throw Error(where(path_, "the gzip data is truncated"));
        } else if (rc != Z_OK) {
            if (rc == Z_MEM_ERROR)
                throw Error(where(path_, "out of memory inflating the gzip data"), Error::Kind::Internal);
            throw Error(where(path_, std::string("corrupt gzip data: ") + (z_.msg ? z_.msg : "?")));
        }
    }
    return cap - z_.avail_out;
}

size_t GzSource::read(char* buf, size_t cap) {
    // Never more than one byte past the limit: a read of the caller's whole buffer (half of a
    // doubled mapping) would put up to twice the limit in memory before the limit is checked.
    const uint64_t held = total_ - mark_;
    if (limit_ != UINT64_MAX) cap = static_cast<size_t>(std::min<uint64_t>(cap, held < limit_ ? limit_ - held + 1 : 1));
    cap = std::min<size_t>(cap, 1u << 30);   // gzread and inflate count in unsigned int
    if (cap == 0) return 0;
    int got = 0;
    if (!direct_) {
        got = static_cast<int>(inflate_some(buf, cap));
    } else {
        got = gzread(f_, buf, static_cast<unsigned>(cap));
        int errnum = 0;
        const char* msg = gzerror(f_, &errnum);
        if (got < 0 || (errnum != Z_OK && errnum != Z_STREAM_END))
            throw Error(where(path_, std::string("cannot read: ") + (msg ? msg : "?")));
    }
    total_ += static_cast<uint64_t>(got);
    if (total_ - mark_ > limit_)
        throw Error(where(path_, special_ ? "not a regular file, and reads past " + human_bytes(limit_) +
                                                "; raise with --max-input-size"
                                          : expansion_message(limit_)));
    return static_cast<size_t>(got);
}

bool GzSource::seek(uint64_t offset) {
    if (!direct_ || special_ || offset > static_cast<uint64_t>(INT64_MAX)) return false;
    if (gzseek(f_, static_cast<z_off_t>(offset), SEEK_SET) != static_cast<z_off_t>(offset)) return false;
    total_ = mark_ = offset;
    cur_ = end_ = buf_;
    return true;
}

ReadAhead::ReadAhead(const std::string& path, uint64_t start, bool inflate_ahead) : src_(path) {
    if (start > 0 && !src_.seek(start)) throw Error(where(path, "cannot seek to byte " + std::to_string(start)));
    if (!src_.is_gzip() || !inflate_ahead) return;
    for (auto& block : data_) block.resize(kBlock);
    try {
        thread_ = std::thread([this] { produce(); });
    } catch (const std::system_error&) {
        // No thread to be had: read() reads on the caller's thread.
    }
}

ReadAhead::~ReadAhead() {
    {
        std::lock_guard<std::mutex> lock(m_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void ReadAhead::produce() {
    while (true) {
        size_t slot = 0;
        {
            std::unique_lock<std::mutex> lock(m_);
            cv_.wait(lock, [&] { return stop_ || filled_ - taken_ < kBlocks; });
            if (stop_) return;
            slot = static_cast<size_t>(filled_ % kBlocks);   // not the caller's: it is past filled_
        }
        size_t got = 0;
        std::exception_ptr error;
        try {
            got = src_.read(data_[slot].data(), kBlock);
        } catch (...) {
            error = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(m_);
            if (got > 0) {
                size_[slot] = got;
                ++filled_;
            }
            if (got == 0 || error) {
                done_ = true;
                error_ = error;
            }
        }
        cv_.notify_all();
        if (done_) return;   // only this thread sets done_
    }
}

size_t ReadAhead::read(char* buf, size_t cap) {
    if (!thread_.joinable()) return src_.read(buf, cap);
    size_t slot = 0;
    {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return taken_ < filled_ || done_; });
        if (taken_ == filled_) {   // the reader is done and everything it read was given
            if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
            return 0;
        }
        slot = static_cast<size_t>(taken_ % kBlocks);
    }
    // The block is the caller's until taken_ moves past it: copied without the lock.
    const size_t given = std::min(cap, size_[slot] - pos_);
    std::memcpy(buf, data_[slot].data() + pos_, given);
    pos_ += given;
    if (pos_ == size_[slot]) {
        pos_ = 0;
        {
            std::lock_guard<std::mutex> lock(m_);
            ++taken_;
        }
        cv_.notify_all();
    }
    return given;
}

GzStreamBuf::int_type GzStreamBuf::underflow() {
    size_t got = src_.read(buf_, sizeof buf_);
    if (got == 0) return traits_type::eof();
    setg(buf_, buf_, buf_ + got);
    return traits_type::to_int_type(buf_[0]);
}

void GzSource::refill() {
    size_t got = read(buf_, kChunk);
    cur_ = buf_;
    end_ = buf_ + got;
}

std::string read_all(const std::string& path, uint64_t limit) {
    GzSource s(path, limit);
    std::string out;
    // Plain files: one allocation of the right size (growing by doubling costs copies and
    // page faults on large inputs); gzip input grows from 4x its compressed size.
    std::error_code ec;
    auto size = std::filesystem::file_size(path, ec);
    if (!ec) out.reserve(static_cast<size_t>(size) * (gzdirect_hint(path) ? 1 : 4) + 1);
    size_t len = 0;
    while (true) {
        if (out.capacity() - len < (1 << 16)) out.reserve(out.capacity() * 2 + (1 << 16));
        out.resize(out.capacity());
        size_t got = s.read(out.data() + len, out.size() - len);
        if (got == 0) break;
        len += got;
    }
    out.resize(len);
    return out;
}

FileBytes::FileBytes(const std::string& path, uint64_t limit) {
    if (!gzdirect_hint(path)) {
        // A std::string regrown by doubling held up to 3 bytes per decompressed byte (old and
        // new buffer during the copy, zero-filled slack); mremap moves pages without copying.
        GzSource s(path, limit);
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        size_t cap = size_t(1) << 20, len = 0;
        void* p = mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw Error(where(path, "out of memory decompressing the file"), Error::Kind::Internal);
        try {
            while (true) {
                if (len == cap) {
                    size_t grown = (cap * 2 + page - 1) / page * page;
                    void* q = mremap(p, cap, grown, MREMAP_MAYMOVE);
                    if (q == MAP_FAILED)
                        throw Error(where(path, "out of memory decompressing the file"), Error::Kind::Internal);
                    p = q;
                    cap = grown;
                }
                size_t got = s.read(static_cast<char*>(p) + len, cap - len);   // throws past `limit`
                if (got == 0) break;
                len += got;
            }
        } catch (...) {
            munmap(p, cap);
            throw;
        }
        map_ = static_cast<const char*>(p);
        size_ = len;
        mapped_ = cap;
        return;
    }
    int fd = ::open(path.c_str(), O_RDONLY);
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (p != MAP_FAILED) {
            map_ = static_cast<const char*>(p);
            size_ = mapped_ = static_cast<size_t>(st.st_size);
        }
    }
    if (fd >= 0) ::close(fd);
    if (!map_) copy_ = read_all(path, limit);   // empty, special or unmappable: read it (errors name the file)
}

FileBytes::~FileBytes() {
    if (map_) munmap(const_cast<char*>(map_), mapped_);
}

std::string human_bytes(uint64_t n) {
    for (auto [shift, unit] : {std::pair{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}})
        if (n >= (uint64_t(1) << shift) && n % (uint64_t(1) << shift) == 0)
            return std::to_string(n >> shift) + " " + unit;
    return std::to_string(n) + " bytes";
}

std::string expansion_message(uint64_t limit) {
    return "expands past " + human_bytes(limit) + "; raise with --max-input-size";
}

std::string nesting_message() { return "nested deeper than " + std::to_string(kMaxNesting) + " levels"; }

}  // namespace mhc::trace::import
