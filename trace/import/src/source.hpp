#pragma once
// Reading input files, gzip or plain, through zlib's gz* interface (which passes plain
// files through). Truncated or corrupt gzip data is an error naming the file.
#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace mhc::trace::import {

class GzSource {
public:
    explicit GzSource(const std::string& path);
    ~GzSource();
    GzSource(const GzSource&) = delete;
    GzSource& operator=(const GzSource&) = delete;

    // Next chunk of decompressed bytes; 0 at the end. Throws mhc::Error on corrupt data.
    size_t read(char* buf, size_t cap);
    uint64_t consumed() const { return total_; }

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
    uint64_t total_ = 0;
    char* buf_ = nullptr;
    char* cur_ = nullptr;
    char* end_ = nullptr;
};

// The whole (decompressed) file.
std::string read_all(const std::string& path);

// The whole file as bytes: a plain file is mapped read-only (no copy, pages come from the
// page cache), a gzip file is decompressed into memory with read_all.
class FileBytes {
public:
    explicit FileBytes(const std::string& path);
    ~FileBytes();
    FileBytes(const FileBytes&) = delete;
    FileBytes& operator=(const FileBytes&) = delete;
    std::string_view view() const { return map_ ? std::string_view(map_, size_) : std::string_view(copy_); }

private:
    const char* map_ = nullptr;
    size_t size_ = 0;
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
