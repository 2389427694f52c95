#pragma once
// Reading input files, gzip or plain: plain files through zlib's gz* interface (which passes them
// through), gzip ones inflated member after member (`cat a.gz b.gz` is read whole, as gzip reads
// it). Truncated or corrupt gzip data is an error naming the file, and so are bytes after the last
// member that are neither a member nor zeros (gzip's and Python's rule), and gzip data that
// expands past the caller's limit (docs/import.md, "Limits").
#include <zlib.h>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <streambuf>
#include <thread>
#include <vector>
#include <string>
#include <string_view>

namespace mhc::trace::import {

// A directory given as the input is refused naming it, and the profiler traces in it where
// tensorboard_trace_handler wrote them (detect.cpp).
void refuse_directory(const std::string& path);
// An Nsight Systems report or non-SQLite export, or an Nsight Compute report, refused naming it
// and the export to import (detect.cpp).
void refuse_nvidia_file(const std::string& path);

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
    // Plain files: the next read starts at `offset`. False where the input cannot seek.
    bool seek(uint64_t offset);
    bool is_gzip() const { return !direct_; }
    // A regular file read as it is (not gzip): it can be read from any offset.
    bool is_plain_file() const { return direct_ && !special_; }
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
    size_t inflate_some(char* buf, size_t cap);
    std::string path_;
    gzFile f_ = nullptr;   // plain input (zlib passes it through; it can seek)
    // gzip input, inflated here (not by gzread, which ignored bytes after the last member that
    // were no gzip member: a damaged or appended file read as whole): its descriptor, the inflate
    // state and the compressed bytes read but not yet inflated.
    int fd_ = -1;
    z_stream z_{};
    bool z_open_ = false, z_end_ = false, in_eof_ = false;
    uint64_t in_read_ = 0;   // compressed bytes read
    std::vector<unsigned char> in_;
    uint64_t total_ = 0, mark_ = 0, limit_ = UINT64_MAX;
    bool special_ = false;   // not a regular file
    bool direct_ = true;     // not gzip: the bytes as they are in the file
    char* buf_ = nullptr;
    char* cur_ = nullptr;
    char* end_ = nullptr;
};

// A GzSource whose gzip input may be decompressed on a thread of its own, a few blocks ahead of
// the caller: inflating runs on another core while the caller parses. A plain file is read on
// the caller's thread (the kernel's copy is cheap; a thread would cost more than it hides).
// read() gives the same bytes as GzSource::read, and an error of the input (corrupt or
// truncated gzip) is thrown by the read() that reaches the place where it occurred.
// Memory: at most kBlocks blocks of kBlock bytes ahead.
class ReadAhead {
public:
    // `start`: the offset to read from (plain files only; gzip input starts at 0). `inflate_ahead`:
    // gzip input is inflated on a second thread (else on the caller's, as GzSource does).
    ReadAhead(const std::string& path, uint64_t start, bool inflate_ahead);
    ~ReadAhead();
    ReadAhead(const ReadAhead&) = delete;
    ReadAhead& operator=(const ReadAhead&) = delete;

    size_t read(char* buf, size_t cap);
    bool is_gzip() const { return src_.is_gzip(); }

private:
    static constexpr size_t kBlocks = 4, kBlock = size_t{1} << 20;
    void produce();
    GzSource src_;
    std::array<std::vector<char>, kBlocks> data_;
    std::array<size_t, kBlocks> size_{};
    std::mutex m_;
    std::condition_variable cv_;
    uint64_t filled_ = 0, taken_ = 0;   // blocks the reader has filled, the caller has used up
    size_t pos_ = 0;                    // bytes of the current block given to the caller
    bool done_ = false, stop_ = false;  // the reader reached the end (or an error); told to stop
    std::exception_ptr error_;          // what stopped the reader, thrown after its last block
    std::thread thread_;                // not started (reads inline) if no thread could be made
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
