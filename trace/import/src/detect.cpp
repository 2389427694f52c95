// Format detection from content: pickle protocol byte, SQLite header + Nsight tables,
// JSON (plain or gzip) by its first top-level keys.
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"
#include "kineto_parse.hpp"
#include "source.hpp"
#include "sqlite_input.hpp"
#include "torch_save.hpp"

namespace mhc::trace::import {

std::string_view to_string(Format format) {
    switch (format) {
        case Format::Auto: return "auto";
        case Format::Snapshot: return "snapshot";
        case Format::Kineto: return "kineto";
        case Format::ExecutionTrace: return "et";
        case Format::Nsys: return "nsys";
    }
    return "?";
}

Format format_from_string(std::string_view name) {
    for (Format format : {Format::Auto, Format::Snapshot, Format::Kineto, Format::ExecutionTrace, Format::Nsys})
        if (to_string(format) == name) return format;
    throw Error("unknown format '" + std::string(name) + "' (known: auto, snapshot, kineto, et, nsys)");
}

// Tables of an SQLite file, or why it cannot be opened.
static std::vector<std::string> sqlite_tables(const std::string& path) {
    std::vector<std::string> out;
    sqlite3* db = open_sqlite_input(path);
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type IN ('table','view')", -1, &st, nullptr);
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    }
    std::string msg = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db);
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (!msg.empty()) throw Error(where(path, "the SQLite file is corrupt or truncated: " + msg));
    return out;
}

static bool is_nsys_table(const std::string& table) {
    return table == "StringIds" || table.rfind("CUPTI_ACTIVITY_KIND_", 0) == 0 || table.rfind("TARGET_INFO_", 0) == 0 ||
           table == "NVTX_EVENTS" || table == "CUDA_GPU_MEMORY_USAGE_EVENTS";
}

// What tensorboard_trace_handler writes into its directory: one file per worker and profiling
// cycle, WORKER.TIME_NS.pt.trace.json[.gz] (torch/profiler/profiler.py).
static bool is_handler_trace(const std::string& name) {
    for (const char* end : {".pt.trace.json", ".pt.trace.json.gz"}) {
        const size_t length = std::strlen(end);
        if (name.size() > length && name.compare(name.size() - length, length, end) == 0) return true;
    }
    return false;
}

void refuse_directory(const std::string& path) {
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_directory(path, ec)) return;
    std::vector<std::string> traces;
    bool nsys_tables = false;   // nsys export --type parquetdir or arrowdir: a file per table
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        const std::string name = entry.path().filename().string();
        if (is_handler_trace(name)) traces.push_back(name);
        const std::string table = name.substr(0, name.rfind('.'));
        const std::string suffix = name.substr(table.size());
        if ((suffix == ".parquet" || suffix == ".arrow") && is_nsys_table(table)) nsys_tables = true;
    }
    std::sort(traces.begin(), traces.end());
    // torch_npu's tensorboard_trace_handler writes WORKER_TIME_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json.
    std::filesystem::path normal = std::filesystem::path(path).lexically_normal();
    if (normal.filename().empty()) normal = normal.parent_path();   // "dir/" names "dir"
    const std::string name = normal.filename().string();
    if (traces.empty() && (name == "ASCEND_PROFILER_OUTPUT" ||
                           (name.size() > 10 && name.compare(name.size() - 10, 10, "_ascend_pt") == 0) ||
                           std::filesystem::exists(std::filesystem::path(path) / "ASCEND_PROFILER_OUTPUT", ec)))
        throw Error(where(path, "is a directory of torch_npu's profiler (Ascend NPU), whose trace_view.json is not a "
                                "Kineto trace: mhc does not read it"));
    if (traces.empty() && nsys_tables)
        throw Error(where(path, "is a directory of Nsight Systems tables (nsys export --type parquetdir or "
                                "arrowdir), which mhc does not read: export the report with nsys export "
                                "--type sqlite and import the .sqlite"));
    if (traces.empty()) throw Error(where(path, "is a directory, not a trace file: import one file"));
    std::string names;
    for (size_t i = 0; i < traces.size() && i < 3; ++i) names += (i ? ", " : "") + traces[i];
    if (traces.size() > 3) names += ", ...";
    throw Error(where(path, "is a directory of " + std::to_string(traces.size()) + " PyTorch profiler trace" +
                                (traces.size() == 1 ? "" : "s") +
                                " (tensorboard_trace_handler writes one file per process "
                                "and profiling cycle: " +
                                names +
                                "): import each file into a trace of its own; the ranks of one job are then "
                                "simulated together with mhc simulate --ranks"));
}

// torch.profiler's export_memory_timeline writes, by the path's suffix, a JSON array of arrays:
// `.raw.json.gz` one [time_ns, action 1-4, bytes, category 0-7] row per event of one device,
// `.json`/`.json.gz` the plot's [times, [bytes by category, ...]] (torch/profiler/_memory_profiler.py).
// `at` is the root's '['. Whether its first row is a raw event's.
static bool memory_timeline_raw(const std::string& text, size_t at) {
    int64_t field[4] = {};
    const char* cursor = text.c_str() + at + 1;
    while (*cursor == ' ' || *cursor == '\n') ++cursor;
    if (*cursor++ != '[') return false;
    for (int i = 0; i < 4; ++i) {
        char* end = nullptr;
        field[i] = std::strtoll(cursor, &end, 10);
        if (end == cursor) return false;
        cursor = end;
        while (*cursor == ' ') ++cursor;
        if (*cursor++ != (i == 3 ? ']' : ',')) return false;
        while (*cursor == ' ') ++cursor;
    }
    return field[1] >= 1 && field[1] <= 4 && field[3] >= 0 && field[3] <= 7;
}

// Chakra's .et files are length-prefixed protobuf messages (chakra's protolib encode_message), the
// first a GlobalMetadata: a varint length, then field 1 (version) or 2 (attr), length-delimited
// (tag 0x0a or 0x12). Taken for one when the name ends in .et or an attr "schema" comes first
// (mlcommons/chakra's tests/data/chakra.0.et: 5e 12 10 0a 06 "schema").
static bool looks_like_chakra_protobuf(const std::string& path, const std::string& prefix) {
    size_t at = 0;   // the varint's last byte
    while (at < prefix.size() && at < 5 && (static_cast<uint8_t>(prefix[at]) & 0x80)) ++at;
    if (at + 2 >= prefix.size() || (prefix[at + 1] != 0x0a && prefix[at + 1] != 0x12)) return false;
    const bool named = path.size() > 3 &&
                       (path.compare(path.size() - 3, 3, ".et") == 0 || path.find(".et.") != std::string::npos);
    return named || prefix.substr(0, 64).find("\x0a\x06schema") != std::string::npos;
}

// The files of NVIDIA's tools that users hold beside (or instead of) an Nsight Systems SQLite
// export, each refused naming it and the export to make, under --format too. Magics seen in real
// files: a .qdrep of 2023 and .nsys-rep files of 2022 to 2026 begin "NVIDIA Tegra Profiler Report " (then
// "1." or, nsys 2025.6's, "2025@6@1@190-..."), .ncu-rep files of 2023 and 2025 "NVR\0"; nsys export --type json writes
// a protobuf message per line, {"Type":N,"<Kind>Event":{...}} (or {"type":"String",... with
// --separate-strings); --type hdf, arrow and parquetdir write HDF5, Arrow IPC and Parquet files.
void refuse_nvidia_file(const std::string& path) {
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return;
    std::string head(4096, '\0');
    {
        std::ifstream file(path, std::ios::binary);
        file.read(head.data(), static_cast<std::streamsize>(head.size()));
        head.resize(static_cast<size_t>(std::max<std::streamsize>(file.gcount(), 0)));
    }
    const auto starts = [&](std::string_view magic) { return head.rfind(magic, 0) == 0; };
    const std::string export_it = ": export it with nsys export --type sqlite and import the .sqlite";
    if (starts("NVIDIA Tegra Profiler Report ")) {
        // A version "2025@6@1@190-..." is said as 2025.6.1.190; older reports write "1." (no version).
        std::string version;
        const size_t at = std::strlen("NVIDIA Tegra Profiler Report ");
        if (head.size() > at + 5 && std::isdigit(static_cast<unsigned char>(head[at])) && head[at + 4] == '@') {
            version = head.substr(at, head.find_first_not_of("0123456789@", at) - at);
            std::replace(version.begin(), version.end(), '@', '.');
            while (!version.empty() && version.back() == '.') version.pop_back();
            version = ", written by nsys " + version;
        }
        throw Error(where(path, "an Nsight Systems report (.nsys-rep or .qdrep" + version +
                                    "), which mhc does not read" + export_it));
    }
    if (starts(std::string_view("NVR\0", 4)))
        throw Error(where(path,
                          "an Nsight Compute report (.ncu-rep: metrics per kernel, no timeline), which mhc "
                          "does not read: record the run with nsys profile --trace=cuda,nvtx and import its "
                          "SQLite export (nsys export --type sqlite)"));
    // The first line: an event ({"Type":48,"TraceProcessEvent":{...}}, in whatever key order), or with
    // --separate-strings a string ({"type":"String","id":...}) or the strings' list ({"data":["[Unknown]",...).
    const size_t brace = head.find_first_not_of(" \t\r\n");
    const std::string line = brace == std::string::npos ? "" : head.substr(brace, head.find('\n', brace) - brace);
    const size_t type = line.find("\"Type\":");
    const bool event = !line.empty() && line[0] == '{' && type != std::string::npos &&
                       type + 7 < line.size() && std::isdigit(static_cast<unsigned char>(line[type + 7])) &&
                       line.find("Event\":{") != std::string::npos;
    if (event || line.rfind("{\"type\":\"String\",\"id\":", 0) == 0 || line.rfind("{\"data\":[\"[Unknown]\"", 0) == 0)
        throw Error(where(path, "an Nsight Systems JSON export (nsys export --type json: one event per line), which "
                                "mhc does not read: export the report with nsys export --type sqlite and "
                                "import the .sqlite"));
    const char* container = starts("\x89HDF\r\n\x1a\n") ? "an HDF5 file (such as nsys export --type hdf"
                            : starts("ARROW1")               ? "an Apache Arrow file (such as nsys export --type arrow"
                            : starts("PAR1")                 ? "a Parquet file (such as nsys export --type parquetdir"
                                                             : nullptr;
    if (container != nullptr)
        throw Error(where(path, std::string(container) +
                                    " writes), which mhc does not read: where it is an Nsight Systems export, export "
                                    "the report with nsys export --type sqlite and import the .sqlite"));
}

namespace {

// An SQLite file: an Nsight Systems export, or refused by what it is.
Format sqlite_format(const std::string& path) {
    auto tables = sqlite_tables(path);
    bool mhc = false, nsys = false;
    for (auto& table : tables) {
        if (table == "allocations" || table == "runs") mhc = true;
        if (is_nsys_table(table)) nsys = true;
    }
    if (nsys) return Format::Nsys;
    if (mhc) throw Error(where(path, "this is already an mhc trace; nothing to import"));
    throw Error(where(path,
                      "an SQLite file but not an Nsight Systems export (no StringIds, "
                      "TARGET_INFO_* or CUPTI_ACTIVITY_KIND_* tables)"));
}

// The bytes of JSON read to tell a format by its keys; past them only the top-level keys are read.
constexpr size_t kPrefixBytes = size_t{1} << 20;

// The first of `wanted` among a JSON object's top-level keys, read from the start of the input
// without holding it (each value skipped by its brackets and strings); empty where none is. Kineto
// writes its header before traceEvents, and a large job's distributedInfo lists every process
// group's ranks: a 16,384-rank job's 11 groups take 1.1 MB, past the first MiB.
std::string top_level_key(const std::string& path, std::initializer_list<std::string_view> wanted) {
    GzSource source(path);
    std::vector<char> buf(size_t{1} << 16);
    int depth = 0;
    bool in_string = false, escaped = false, key_next = false, in_key = false;
    std::string key;
    for (size_t got; (got = source.read(buf.data(), buf.size())) > 0;)
        for (size_t i = 0; i < got; ++i) {
            const char ch = buf[i];
            if (in_string) {
                if (escaped) {
                    escaped = false;
                } else if (ch == '\\') {
                    escaped = true;
                } else if (ch == '"') {
                    in_string = false;
                    if (in_key && std::find(wanted.begin(), wanted.end(), key) != wanted.end()) return key;
                    continue;
                }
                if (in_key && key.size() < 64) key += ch;
                continue;
            }
            if (ch == '"') {
                in_string = true;
                in_key = depth == 1 && key_next;
                key_next = false;
                key.clear();
            } else if (ch == '{' || ch == '[') {
                ++depth;
                key_next = ch == '{' && depth == 1;
            } else if (ch == '}' || ch == ']') {
                if (--depth <= 0) return "";
            } else if (ch == ',') {
                key_next = depth == 1;
            }
        }
    return "";
}

// A JSON object: by its top-level keys in the first MiB (past it, by its top-level keys alone), or
// refused naming what it is.
Format json_object_format(const std::string& path, const std::string& prefix, bool snapshot_keys) {
    // mhc's own Chrome trace export (mhc export --format perfetto) writes its meta in otherData:
    // read back as Kineto it lost every copy, marker and allocation (counters) with a warning only.
    if (prefix.find("\"otherData\":{") != std::string::npos &&
        prefix.find("\"format\":\"mhc-trace\"") != std::string::npos)
        throw Error(where(path,
                          "an mhc trace exported for viewing (mhc export --format perfetto), which "
                          "mhc does not import: use the mhc trace it was exported from"));
    if (prefix.find("\"traceEvents\"") != std::string::npos) return Format::Kineto;
    if (snapshot_keys && prefix.find("\"nodes\"") == std::string::npos) return Format::Snapshot;
    if (prefix.find("\"nodes\"") != std::string::npos) return Format::ExecutionTrace;
    // Traces of other tools that users take for these (both seen in public test data).
    if (prefix.find("\"rocprofiler-sdk-tool\"") != std::string::npos)
        throw Error(where(path,
                          "a rocprofiler-sdk JSON (rocprofv3 --output-format json), which mhc does not read: "
                          "import the PyTorch profiler's trace of the run (Kineto JSON) instead"));
    if (prefix.find("\"memoryProfilePerAllocator\"") != std::string::npos)
        throw Error(where(path,
                          "a TensorFlow or JAX profiler memory profile (XProf's HOST.memory_profile.json), "
                          "which mhc does not read: mhc reads PyTorch's memory snapshots and profiler traces"));
    // py-spy's (and other sampling profilers') speedscope JSON, committed beside PyTorch traces.
    if (prefix.find("\"$schema\":\"https://www.speedscope.app/file-format-schema.json\"") != std::string::npos)
        throw Error(where(path,
                          "a speedscope profile (py-spy record --format speedscope, or another sampling "
                          "profiler's): CPU stack samples without memory or kernels, which mhc does not read: "
                          "import the PyTorch profiler's trace (Kineto JSON) or a memory snapshot instead"));
    if (prefix.find("\"workload_graph\"") != std::string::npos)
        throw Error(where(path,
                          "a Chakra workload-graph JSON (converted from a Chakra trace), which mhc "
                          "does not read: import the PyTorch execution trace it was converted from"));
    // Before 2026-12-06 a Kineto trace whose header passed the first MiB was refused here.
    if (prefix.size() >= kPrefixBytes) {
        const std::string key = top_level_key(path, {"traceEvents", "nodes", "device_traces"});
        if (key == "traceEvents") return Format::Kineto;
        if (key == "nodes") return Format::ExecutionTrace;
        if (key == "device_traces") return Format::Snapshot;
    }
    throw Error(where(path,
                      "a JSON object without a top-level 'traceEvents' (Kineto) or 'nodes' (execution "
                      "trace): not a known trace format"));
}

// The Chrome trace's JSON Array Format, as PyTorch 1.8's profiler wrote it: [{"ph": ...}, ...].
// Kineto or a snapshot's JSON; nothing where the array is none of these.
std::optional<Format> json_array_format(const std::string& path, const std::string& prefix, size_t start,
                                        bool snapshot_keys) {
    size_t first = prefix.find_first_not_of(" \t\r\n", start + 1);
    if (first != std::string::npos && prefix[first] == '[')
        throw Error(where(path, memory_timeline_raw(prefix, start)
                                    ? "the raw memory timeline of PyTorch's profiler (export_memory_timeline to "
                                      ".raw.json.gz: [time, action, bytes, category] rows of one device), which mhc "
                                      "does not import: its rows name no address, tensor or stream. Import the "
                                      "profiler's trace of the same run (export_chrome_trace, with "
                                      "profile_memory=True): it holds every allocation and free with its address"
                                    : "a JSON array of arrays, such as the memory timeline plot of PyTorch's "
                                      "profiler (export_memory_timeline to .json: times and bytes by category), a "
                                      "curve without allocations, which mhc does not import. Import the profiler's "
                                      "trace of the same run (export_chrome_trace, with profile_memory=True)"));
    if (first != std::string::npos && prefix[first] == '{' && prefix.find("\"ph\"") != std::string::npos)
        return Format::Kineto;
    if (first != std::string::npos && prefix[first] == '{' && snapshot_keys) return Format::Snapshot;
    return std::nullopt;
}

// HTML: torch.cuda._memory_viz's pages (trace_plot, segment_plot) embed the snapshot's pickle,
// which the snapshot importer reads; the profiler's memory timeline page is a PNG picture.
std::optional<Format> html_format(const std::string& path, const std::string& prefix, size_t start) {
    if (prefix.find("add_local_files") != std::string::npos && prefix.find("\"base64\"") != std::string::npos)
        return Format::Snapshot;
    // PyTorch 2.0's pages (trace_plot, segment_plot, profile_plot of torch/cuda/_memory_viz.py before
    // _format_viz) write the plot's data, `let alloc_data = {"actions": [...], "elements": [...], ...}`:
    // element ids in the order they were allocated and freed, each with a size and a stack, of one
    // device; no address, stream or time.
    if (prefix.find("let alloc_data = ") != std::string::npos)
        throw Error(where(path,
                          "a torch.cuda._memory_viz page of PyTorch 2.0 (let alloc_data = ...: the plot's blocks by "
                          "size and order, of one device, without addresses, streams or times), which mhc does not "
                          "read: import the snapshot pickle it was plotted from (torch.cuda.memory._dump_snapshot)"));
    if (prefix.find("<title>GPU Memory Timeline HTML</title>") != std::string::npos)
        throw Error(where(path,
                          "the memory timeline plot of PyTorch's profiler (export_memory_timeline to .html): "
                          "a PNG picture, no data to import. Import the profiler's trace of the same run "
                          "(export_chrome_trace, with profile_memory=True)"));
    std::string lower = prefix.substr(start, 256);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char letter) { return std::tolower(letter); });
    if (lower.find("<html") != std::string::npos || lower.find("<!doctype html") != std::string::npos)
        throw Error(where(path,
                          "an HTML page without a memory snapshot in it (mhc reads the pages of "
                          "torch.cuda._memory_viz trace_plot and segment_plot, which embed one)"));
    return std::nullopt;
}

// What is no format mhc reads: named where it is recognised (other profilers, containers,
// compressors, Chakra's protobuf, a Git LFS pointer), else "unknown format".
[[noreturn]] void refuse_unread_format(const std::string& path, std::string_view raw, const std::string& prefix) {
    // XProf's XSpace protobuf (HOST.xplane.pb of TensorFlow's, JAX's and PyTorch/XLA's profiler): field 1
    // (planes, tag 0x0a), its length, then the first plane, named "/host:..." or "/device:..." near the start.
    if (!prefix.empty() && static_cast<uint8_t>(prefix[0]) == 0x0a) {
        const std::string_view head(prefix.data(), std::min<size_t>(prefix.size(), 64));
        if (head.find("/host:") != std::string_view::npos || head.find("/device:") != std::string_view::npos)
            throw Error(where(path,
                              "an XProf XSpace protobuf (HOST.xplane.pb of TensorFlow's, JAX's or PyTorch/XLA's "
                              "profiler), which mhc does not read: mhc reads PyTorch's CUDA and ROCm profiler "
                              "traces (Kineto), memory snapshots, execution traces and Nsight Systems exports"));
    }
    // Containers and compressors other than gzip, named rather than called an unknown format.
    if (raw.substr(0, 2) == "\x1f\x8b" && prefix.rfind("SQLite format 3", 0) == 0)
        throw Error(where(path,
                          "a gzip-compressed SQLite file: decompress it (gunzip) and import the .sqlite "
                          "(Nsight Systems exports are read uncompressed)"));
    if (is_zip(raw))   // torch.save's archives are read (detect_format): this is another program's
        throw Error(where(path, "a zip archive, which mhc does not read: extract the trace from it first"));
    const char* packer = raw.substr(0, 3) == "BZh"                ? "bzip2"
                         : raw.substr(0, 4) == "\x28\xb5\x2f\xfd" ? "zstd"
                         : raw.substr(0, 6) == std::string_view(
                                                   "\xfd"
                                                   "7zXZ\0",
                                                   6)
                             ? "xz"
                             : nullptr;
    if (packer != nullptr)
        throw Error(where(path, std::string("compressed with ") + packer +
                                    ", which mhc does not read: decompress it first (gzip is read as it is)"));
    if (looks_like_chakra_protobuf(path, prefix))
        throw Error(where(path,
                          "a Chakra protobuf execution trace (chakra_converter's .et), which mhc does not "
                          "read: import the PyTorch execution trace JSON it was converted from"));
    // A Git LFS pointer in place of the trace (a clone without git-lfs, or a repository whose LFS
    // objects were not fetched): traces are often committed so (mlcommons/chakra's
    // llama_pytorch24.05.tgz, a CS336 fork's snapshots, an nsys export of a homework repository).
    if (prefix.rfind("version https://git-lfs.github.com/spec/", 0) == 0) {
        const size_t at = prefix.find("\nsize ");
        const std::string size =
            at == std::string::npos
                ? ""
                : " of " + prefix.substr(at + 6, prefix.find_first_not_of("0123456789", at + 6) - (at + 6)) + " bytes";
        throw Error(where(path, "a Git LFS pointer, not the trace: the file" + size +
                                    " is in the repository's LFS storage; fetch it (git lfs pull) and import that"));
    }
    // A pickle of protocol 0 or 1 (no PROTO opcode: a dict or list opened with MARK DICT/LIST and a
    // memo PUT, or EMPTY_DICT/EMPTY_LIST and BINPUT): PyTorch writes snapshots with pickle's default
    // protocol (3 or 4) or, from C++, protocol 2; these only come from writing one again with an old
    // protocol. Named, with the one line that writes it in the default protocol, not read: protocol
    // 0 writes its numbers and strings as text, a second grammar for one kind of file.
    const bool text_pickle = prefix.rfind("(dp0\n", 0) == 0 || prefix.rfind("(lp0\n", 0) == 0;
    const bool binary_pickle = prefix.size() >= 3 && (prefix[0] == '}' || prefix[0] == ']') && prefix[1] == 'q';
    if (text_pickle || binary_pickle)
        throw Error(where(path, std::string("a pickle of protocol ") + (text_pickle ? "0" : "1") +
                                    ", which mhc does not read (it reads protocol 2 and later, as PyTorch writes "
                                    "snapshots): write it again with pickle's default protocol, python3 -c \"import "
                                    "pickle, sys; pickle.dump(pickle.load(open(sys.argv[1], 'rb')), open(sys.argv[2], "
                                    "'wb'))\" IN OUT"));
    throw Error(where(path,
                      "unknown format: not a pickle (memory snapshot), JSON (Kineto or "
                      "execution trace, optionally gzip) or SQLite (Nsight Systems) file"));
}

}   // namespace

Format detect_format(const std::string& path) {
    refuse_directory(path);
    refuse_nvidia_file(path);
    char head[16] = {};
    {
        std::ifstream file(path, std::ios::binary);
        if (!file) throw Error(std::filesystem::exists(path) ? where(path, "cannot open") : no_such_file(path));
        file.read(head, sizeof head);
        if (file.gcount() == 0) throw Error(where(path, "the file is empty"));
    }
    if (static_cast<uint8_t>(head[0]) == 0x80) return Format::Snapshot;   // pickle PROTO
    if (std::memcmp(head, "SQLite format 3", 16) == 0) return sqlite_format(path);
    // torch.save(snapshot, ...): a zip whose <name>/data.pkl entry is the snapshot's pickle.
    if (is_zip(std::string_view(head, sizeof head)) && torch_save_entry(path)) return Format::Snapshot;
    // JSON, plain or gzip: look for the top-level keys near the start.
    std::string prefix;
    {
        GzSource source(path);
        prefix.resize(kPrefixBytes);
        size_t got = 0, chunk;
        while (got < prefix.size() && (chunk = source.read(prefix.data() + got, prefix.size() - got)) > 0) got += chunk;
        prefix.resize(got);
    }
    size_t start = prefix.find_first_not_of(" \t\r\n");
    if (start != std::string::npos && static_cast<uint8_t>(prefix[start]) == 0x80) return Format::Snapshot;
    // A PyTorch memory snapshot saved as JSON (json.dump(torch.cuda.memory._snapshot()), or of
    // memory_snapshot()'s segments list): its keys, which no Kineto or execution trace has.
    const bool snapshot_keys = prefix.find("\"device_traces\"") != std::string::npos ||
                               (prefix.find("\"total_size\"") != std::string::npos &&
                                prefix.find("\"blocks\"") != std::string::npos);
    // An Ascend NPU profiler's trace_view.json: refused here too, as msprof's events may write 'ts' as a
    // string, which the parse would refuse as a bad field before reading the process names.
    if (start != std::string::npos && (prefix[start] == '{' || prefix[start] == '[') &&
        prefix.find("\"Ascend Hardware\"") != std::string::npos)
        throw Error(where(path, ascend_trace_message()));
    if (start != std::string::npos && prefix[start] == '{') return json_object_format(path, prefix, snapshot_keys);
    if (start != std::string::npos && prefix[start] == '[')
        if (auto format = json_array_format(path, prefix, start, snapshot_keys)) return *format;
    if (start != std::string::npos && prefix[start] == '<')
        if (auto format = html_format(path, prefix, start)) return *format;
    refuse_unread_format(path, std::string_view(head, sizeof head), prefix);
}

}   // namespace mhc::trace::import
