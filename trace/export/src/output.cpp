#include "output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "mhc/common/error.hpp"

namespace mhc::trace::exporter {

Output::Output(std::string path, bool gzip, IfExists if_exists) : path_(std::move(path)), gzip_(gzip) {
    out_ = std::make_unique<OutputFile>(path_, if_exists);
    tmp_ = out_->temp_path();
    if (gzip_) gz_ = gzopen(tmp_.c_str(), "wb6");
    else f_ = std::fopen(tmp_.c_str(), "wb");
    if (!gz_ && !f_) throw Error(where(path_, std::string("cannot write: ") + std::strerror(errno)));
    buf_.reserve(1 << 20);
}

Output::~Output() {
    if (f_) std::fclose(f_);
    if (gz_) gzclose(gz_);
    // Then out_, uncommitted, removes the temporary file.
}

void Output::flush() {
    if (buf_.empty()) return;
    bool ok = gzip_ ? gzwrite(gz_, buf_.data(), static_cast<unsigned>(buf_.size())) == static_cast<int>(buf_.size())
                    : std::fwrite(buf_.data(), 1, buf_.size(), f_) == buf_.size();
    if (!ok) write_failed();
    buf_.clear();
}

void Output::write(const char* p, size_t n) {
    buf_.append(p, n);
    if (buf_.size() >= (1 << 20)) flush();
}

Output& Output::operator<<(int64_t v) {
    char b[24];
    int n = std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
    write(b, static_cast<size_t>(n));
    return *this;
}

void Output::close() {
    flush();
    int rc = 0;
    errno = 0;
    if (gz_) { rc = gzclose(gz_) == Z_OK ? 0 : -1; gz_ = nullptr; }
    if (f_) { rc = std::fclose(f_); f_ = nullptr; }
    if (rc != 0) write_failed();
}

void Output::commit() {
    close();
    out_->commit();
    done_ = true;
}

// A full disk or a file size limit: the environment, not the program (exit status 2, as for
// a trace that cannot be written).
void Output::write_failed() const {
    const int err = errno;
    throw Error(where(path_, std::string("write failed: ") + (err ? std::strerror(err) : "disk full?")));
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) {
        if (c == '"') o += '"';
        o += c;
    }
    return o + "\"";
}

std::string us(int64_t ns) {
    char b[40];
    const char* sign = ns < 0 ? "-" : "";
    uint64_t a = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
    std::snprintf(b, sizeof b, "%s%llu.%03llu", sign, static_cast<unsigned long long>(a / 1000),
                  static_cast<unsigned long long>(a % 1000));
    return b;
}

}  // namespace mhc::trace::exporter
