#pragma once
// An output file written to a temporary name and renamed on commit(); gzip when asked.
#include <zlib.h>

#include <cstdio>
#include <memory>
#include <string>

#include "mhc/common/output_file.hpp"

namespace mhc::trace::exporter {

class Output {
public:
    Output(std::string path, bool gzip, IfExists if_exists);
    ~Output();   // without commit(): the temporary file is removed
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;

    void write(const char* p, size_t n);
    void write(const std::string& s) { write(s.data(), s.size()); }
    Output& operator<<(const std::string& s) { write(s); return *this; }
    Output& operator<<(const char* s) { write(s, std::char_traits<char>::length(s)); return *this; }
    Output& operator<<(int64_t v);
    // Writes what is buffered and closes the temporary file: complete, not yet in place.
    void close();
    void commit();   // close(), then rename into place
    OutputFile& file() { return *out_; }

private:
    void flush();
    [[noreturn]] void write_failed() const;
    std::string path_, tmp_;
    std::unique_ptr<OutputFile> out_;   // the temporary name, its cleanup and the rename
    bool gzip_;
    FILE* f_ = nullptr;
    gzFile gz_ = nullptr;
    std::string buf_;
    bool done_ = false;
};

// CSV field, quoted when needed.
std::string csv_field(const std::string& s);
// ns -> microseconds with 3 decimals, as Chrome trace JSON wants.
std::string us(int64_t ns);

}  // namespace mhc::trace::exporter
