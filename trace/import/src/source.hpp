#pragma once
// Reading input files, gzip or plain, through zlib's gz* interface (which passes plain
// files through). Truncated or corrupt gzip data is an error naming the file, and so is gzip
// data that expands past the caller's limit (docs/import.md, "Limits").
#include <zlib.h>

#include <cstdint>
#include <streambuf>
#include <string>
#include <string_view>

namespace mhc::trace::import {

class GzSource {
public:
    // `limit`: the most decompressed bytes of a gzip input read since the last mark(), and the
    // most bytes of a pipe or device (plain regular files are not limited: what a reader holds
    // of them is bounded by their own size; /dev/zero has none).
    explicit GzSource(const std::string& path, uint64_t limit = UINT64_MAX);
    ~GzSource();
    GzSource(const GzSource&) = delete;
    GzSource& operator=(const GzSource&) = delete;

    // Next chunk of decompressed bytes; 0 at the end. Throws mhc::Error on corrupt data.
    size_t read(char* buf, size_t cap);
    uint64_t consumed() const { return total_; }
    // Streaming readers call this where they hold nothing of the input (between events):
    // the limit counts the bytes read after `at` (an offset in the decompressed input).
    void mark(uint64_t at) { mark_ = at; }

    // Streaming character interface for rapidjson (Peek/Take/Tell).
    char peek() {
        if (cur_ == end_) refill();
        return cur_ == end_ ? '\0' : *cur_;
    }
    char take() {
        if (cur_ == end_) refill();
        return cur_ == end_ ? '\0' : *cur_++;
    }
    size_t tell() const { return static_cast<size_t>(total_ - static_cast<uint64_t>(end_ - cur_)); }

private:
    void refill();
    std::string path_;
    gzFile f_ = nullptr;
    uint64_t total_ = 0, mark_ = 0, limit_ = UINT64_MAX;
    bool special_ = false;   // not a regular file
    char* buf_ = nullptr;
    char* cur_ = nullptr;
    char* end_ = nullptr;
};

// std::streambuf over a GzSource (for nlohmann::json's SAX parser); pos() is the offset of
// the next character in the decompressed input.
class GzStreamBuf : public std::streambuf {
public:
    explicit GzStreamBuf(GzSource& s) : src_(s) {}
    uint64_t pos() const { return src_.consumed() - static_cast<uint64_t>(egptr() - gptr()); }

protected:
    int_type underflow() override;

private:
    GzSource& src_;
    char buf_[1 << 16];
};

// The whole (decompressed) file; gzip input at most `limit` decompressed bytes.
std::string read_all(const std::string& path, uint64_t limit = UINT64_MAX);

// The whole file as bytes: a plain file is mapped read-only (no copy, pages come from the
// page cache); a gzip file is decompressed into an anonymous mapping that grows in place
// (one byte of RAM per decompressed byte), at most `limit` bytes.
class FileBytes {
public:
    explicit FileBytes(const std::string& path, uint64_t limit = UINT64_MAX);
    ~FileBytes();
    FileBytes(const FileBytes&) = delete;
    FileBytes& operator=(const FileBytes&) = delete;
    std::string_view view() const { return map_ ? std::string_view(map_, size_) : std::string_view(copy_); }

private:
    const char* map_ = nullptr;
    size_t size_ = 0, mapped_ = 0;   // mapped_: length of the mapping (>= size_)
    std::string copy_;
};

// rapidjson stream adapter over GzSource.
struct JsonStream {
    typedef char Ch;
    GzSource* src;
    Ch Peek() const { return src->peek(); }
    Ch Take() { return src->take(); }
    size_t Tell() const { return src->tell(); }
    Ch* PutBegin() { return nullptr; }
    void Put(Ch) {}
    void Flush() {}
    size_t PutEnd(Ch*) { return 0; }
};

}  // namespace mhc::trace::import
