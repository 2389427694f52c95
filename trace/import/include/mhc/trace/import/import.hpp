#pragma once
// Importers for traces users already have (docs/import.md): PyTorch CUDA memory snapshots,
// Kineto Chrome-trace JSON, PyTorch execution traces (optionally joined with Kineto) and
// Nsight Systems SQLite exports. Each writes one mhc trace through mhc::trace::Writer.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mhc/common/output_file.hpp"

namespace mhc::trace::import {

class Rows;

// Default Options::max_input_size: 256 MiB. A JSON parser holds up to ~3 bytes per byte of a
// value being read (nlohmann keeps the token and its raw text), so a gzip bomb stops at < 1 GB.
constexpr uint64_t kDefaultMaxInputSize = uint64_t(256) << 20;

enum class Format { Auto, Snapshot, Kineto, ExecutionTrace, Nsys };

std::string_view to_string(Format f);
// "snapshot", "kineto", "et", "nsys" (also "auto"); throws mhc::Error otherwise.
Format format_from_string(std::string_view s);

// Looks at the first bytes (and, for JSON, the first keys; for SQLite, the tables) of `path`.
// Throws mhc::Error naming the file when it is none of the known formats.
Format detect_format(const std::string& path);

// How many threads parse a large plain Kineto JSON file (docs/import.md, "Speed"): Auto takes
// two where a core is idle at the start. The trace is the same whichever parses it.
enum class ParseThreads : uint8_t { Auto, One, Two };

struct Options {
    Format format = Format::Auto;
    std::string kineto_path;   // execution traces: Kineto trace of the same run, for timing
    bool warn = true;          // print warnings (missing nsys tables, ...) on stderr
    // The most decompressed bytes of one gzip input held in memory at once (a whole memory
    // snapshot, one execution-trace node, one Kineto event): beyond it the import stops with
    // "expands past N; raise with --max-input-size" instead of exhausting memory.
    uint64_t max_input_size = kDefaultMaxInputSize;
    mhc::IfExists if_exists = mhc::IfExists::Replace;   // an existing output: replaced, or an error (the CLI without --force)
    ParseThreads parse_threads = ParseThreads::Auto;
};

// What an import did: the meta written into the trace and the row counts.
struct Result {
    Format format = Format::Auto;
    std::map<std::string, std::string> meta;
    int64_t allocations = 0, kernels = 0, accesses = 0, copies = 0, markers = 0;
    int64_t events = 0;        // input events read (snapshot trace entries, Kineto events, ...)
    std::vector<std::string> warnings;   // what the import repaired or left out (printed unless Options::warn is false)
};

// Imports `in` into a new trace file `out`. All or nothing: the trace is written to a
// temporary file, checked with check_trace (require_ok), then renamed into place; on any
// error nothing is left at `out`. Throws mhc::Error ("<file>: <what is wrong>") on bad input.
Result import_file(const std::string& in, const std::string& out, const Options& opt = {});

// The per-format importers: they write rows into `w` (a Writer and the columns checked after
// it) and fill `r` (meta is also set on w).
void import_snapshot(const std::string& in, Rows& w, Result& r, uint64_t max_input_size = kDefaultMaxInputSize);
void import_kineto(const std::string& in, Rows& rows, Result& result, uint64_t max_input_size = kDefaultMaxInputSize,
                   ParseThreads threads = ParseThreads::Auto);
void import_et(const std::string& in, const std::string& kineto, Rows& w, Result& r,
               uint64_t max_input_size = kDefaultMaxInputSize);
void import_nsys(const std::string& in, Rows& w, Result& r);

}  // namespace mhc::trace::import
