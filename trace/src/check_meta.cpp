// The meta that readers of a trace parse (capture.*, a rank's job meta) and a model capture's own
// rules (check_capture, check.hpp).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check_parts.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/json.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/trace/capture_timing.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/data_parallel.hpp"
#include "mhc/trace/limits.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

namespace checks {

std::string quoted(const std::string& value) {
    return "'" + printable(value.substr(0, 40)) + (value.size() > 40 ? "...'" : "'");
}

void check_job_meta(const TraceData& trace, CheckReport& report) {
    auto number = [&](const char* key, bool negative_ok) -> std::optional<int64_t> {
        auto it = trace.meta.find(key);
        if (it == trace.meta.end()) return std::nullopt;
        const std::optional<int64_t> value = parse_integer<int64_t>(it->second);
        if (!value || (!negative_ok && *value < 0)) {
            report.problems.push_back({"meta", "meta", 0,
                                       std::string(key) + ": " + quoted(it->second) + " is not " +
                                           (negative_ok ? "a time in ns" : "a whole number >= 0")});
            return std::nullopt;
        }
        return value;
    };
    const auto rank = number("rank", false), world = number("world_size", false);
    number("time_origin_ns", true);
    // The device's memory in bytes (mhc info prints it): "1e400" read as 1 B, "abc" as nothing.
    if (auto it = trace.meta.find("device_memory"); it != trace.meta.end()) {
        const std::optional<int64_t> bytes = parse_integer<int64_t>(it->second);
        if (!bytes || *bytes < 0 || *bytes > limits::kMaxBytes)
            report.problems.push_back(
                {"meta", "meta", 0, "device_memory: " + quoted(it->second) + " is not a size in bytes in [0, 2^56]"});
    }
    if (rank && world && *rank >= *world)
        report.problems.push_back(
            {"meta", "meta", 0,
             "rank: " + std::to_string(*rank) + " is not below world_size " + std::to_string(*world)});
}

}  // namespace checks

namespace {

constexpr size_t kMaxCaptureJsonNesting = 64;

using checks::exact_ns;
using checks::quoted;

// Meta `key`, a JSON list of [allocation id, kernel id] (capture.frame_holds, capture.unpacks):
// its first entry that is no pair, or names a row the trace lacks.
void check_pairs_meta(const TraceData& trace, const char* key, CheckReport& report) {
    const std::string text = trace.meta_or(key, "");
    if (text.empty()) return;
    const nlohmann::json rows = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) {
        report.problems.push_back({"meta", "meta", 0, std::string(key) + ": " + why});
    };
    if (!rows.is_array()) return bad("not a JSON list of [allocation id, kernel id] pairs");
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& row = rows[i];
        const std::string entry = "entry " + std::to_string(i + 1) + " ";
        if (!row.is_array() || row.size() != 2 || !row[0].is_number_integer() || !row[1].is_number_integer())
            return bad(entry + row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 40) +
                       " is not an [allocation id, kernel id] pair");
        if (trace.allocation_at(row[0].get<int64_t>()) < 0)
            return bad(entry + "names allocation " + std::to_string(row[0].get<int64_t>()) + ", which does not exist");
        if (trace.kernel_at(row[1].get<int64_t>()) < 0)
            return bad(entry + "names kernel " + std::to_string(row[1].get<int64_t>()) + ", which does not exist");
    }
}

// Meta capture.save_unpacks: a kernel id, or 0, beside each entry of capture.pack_order (what
// advise refuses in it, said here first).
void check_save_unpacks(const TraceData& trace, CheckReport& report) {
    const std::string text = trace.meta_or("capture.save_unpacks", "");
    if (text.empty()) return;
    const nlohmann::json ids = nlohmann::json::parse(text, nullptr, false);
    const nlohmann::json order = nlohmann::json::parse(trace.meta_or("capture.pack_order", "[]"), nullptr, false);
    auto bad = [&](const std::string& why) {
        report.problems.push_back({"meta", "meta", 0, "capture.save_unpacks: " + why});
    };
    if (!ids.is_array() || !order.is_array() || ids.size() != order.size())
        return bad("not a JSON list of kernel ids, one per entry of capture.pack_order");
    for (size_t i = 0; i < ids.size(); ++i) {
        if (!ids[i].is_number_integer())
            return bad("entry " + std::to_string(i + 1) + " is not a kernel id");
        const int64_t kernel = ids[i].get<int64_t>();
        if (kernel != 0 && trace.kernel_at(kernel) < 0)
            return bad("entry " + std::to_string(i + 1) + " names kernel " + std::to_string(kernel) +
                       ", which does not exist");
    }
}

// The other capture.* meta `mhc advise` reads (python/mhc_torch writes them): their forms.
void check_capture_meta(const TraceData& trace, CheckReport& report) {
    // The JSON a capture writes nests a few levels. What nests deeper is no capture's, and code
    // that walks it recursively (nlohmann's dump(), advise's printer of Python literals) overflowed
    // the stack: a list nested 200,000 deep in capture.unpacks made mhc check and advise segfault.
    // Said here, before anything parses it; check and advise alike.
    bool too_deep = false;
    for (const auto& [key, value] : trace.meta)
        if (key.rfind("capture.", 0) == 0 && json_nesting(value) > kMaxCaptureJsonNesting) {
            report.problems.push_back({"meta", "meta", 0,
                                       key + ": JSON nested deeper than " + std::to_string(kMaxCaptureJsonNesting) +
                                           " levels (a capture writes a few)"});
            too_deep = true;
        }
    if (too_deep) return;
    check_pairs_meta(trace, "capture.frame_holds", report);
    check_pairs_meta(trace, "capture.unpacks", report);
    check_save_unpacks(trace, report);
    auto bad = [&](const std::string& key, const std::string& why) {
        report.problems.push_back({"meta", "meta", 0, key + ": " + why});
    };
    // As advise reads them: an empty value is no value; the call is read only beside layers.
    const std::string layers = trace.meta_or("capture.hf_checkpoint_layers", "");
    if (!layers.empty()) {
        const auto names = nlohmann::json::parse(layers, nullptr, false);
        if (!names.is_array() || std::any_of(names.begin(), names.end(), [](const auto& n) { return !n.is_string(); }))
            bad("capture.hf_checkpoint_layers", "not a JSON list of module names");
        const std::string call = trace.meta_or("capture.hf_checkpoint_call", "gradient_checkpointing_enable");
        if (call != "gradient_checkpointing_enable" && call != "activation_checkpointing_enable")
            bad("capture.hf_checkpoint_call", quoted(call) +
                                                  " is not a Hugging Face checkpointing call "
                                                  "(gradient_checkpointing_enable, activation_checkpointing_enable)");
    }
    if (const CaptureTiming timing = capture_timing(trace.meta); !timing.error.empty())
        report.problems.push_back({"meta", "meta", 0, timing.error});
    const std::string defaults = trace.meta_or("capture.optimizer_defaults", "");
    if (!defaults.empty() && !nlohmann::json::parse(defaults, nullptr, false).is_object())
        bad("capture.optimizer_defaults", "not a JSON object");
    const std::string dp = trace.meta_or("capture.data_parallel", "");
    if (!dp.empty() && dp != "ddp" && dp != "fsdp2" && dp != "ddp+fsdp2")
        bad("capture.data_parallel", quoted(dp) + " is not ddp, fsdp2 or ddp+fsdp2");
    // Its sizes, as advise reads them: capture.ddp under DDP alone, else capture.fsdp2.
    if (dp == "ddp" || dp == "fsdp2" || dp == "ddp+fsdp2") {
        const std::string key = dp == "ddp" ? "capture.ddp" : "capture.fsdp2";
        const DataParallelSizes sizes = data_parallel_sizes(trace.meta_or(key, ""));
        if (!sizes.error.empty()) bad(key, sizes.error);
    }
}

// A model capture's kernels run one after another on each device (mhc-torch puts every op on
// one compute stream; `mhc advise` plans the step as that one sequence): two that overlap, on
// any streams, are listed as `stream-overlap` lists them on one stream.
void check_capture_kernels(const TraceData& trace, CheckReport& report) {
    const auto& kernels = trace.kernels;
    std::vector<size_t> order(kernels.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t lhs, size_t rhs) {
        if (kernels.device[lhs] != kernels.device[rhs]) return kernels.device[lhs] < kernels.device[rhs];
        if (kernels.t_start[lhs] != kernels.t_start[rhs]) return kernels.t_start[lhs] < kernels.t_start[rhs];
        return kernels.id[lhs] < kernels.id[rhs];
    });
    // The kernel ending latest so far on this device, and the one ending latest on any other
    // stream than its: a kernel on the stream of `last` may still clash with `other` (before
    // 2026-12-06 only `last` was looked at, and such a clash went unlisted).
    size_t last = SIZE_MAX, other = SIZE_MAX;
    for (size_t row : order) {
        if (last != SIZE_MAX && kernels.device[last] != kernels.device[row]) last = other = SIZE_MAX;
        const size_t held = last == SIZE_MAX                                 ? SIZE_MAX
                            : kernels.stream[last] != kernels.stream[row] ? last
                                                                           : other;
        if (held != SIZE_MAX && kernels.t_start[row] < kernels.t_end[held])   // one stream: stream-overlap's
            report.problems.push_back(
                {"capture-overlap", "kernels", kernels.id[row],
                 "starts at " + exact_ns(kernels.t_start[row]) + " on stream " + std::to_string(kernels.stream[row]) +
                     " while kernel " + std::to_string(kernels.id[held]) + " still runs on stream " +
                     std::to_string(kernels.stream[held]) + " (until " + exact_ns(kernels.t_end[held]) +
                     "): a model capture runs its kernels one after another on device " +
                     std::to_string(kernels.device[row])});
        if (last == SIZE_MAX || kernels.t_end[row] > kernels.t_end[last]) {
            if (last != SIZE_MAX && kernels.stream[last] != kernels.stream[row]) other = last;
            last = row;
        } else if (kernels.stream[last] != kernels.stream[row] &&
                   (other == SIZE_MAX || kernels.t_end[row] > kernels.t_end[other])) {
            other = row;
        }
    }
}

}  // namespace

CheckReport check_capture(const TraceData& trace) {
    CheckReport report;
    check_capture_meta(trace, report);
    if (trace.path.empty()) return report;
    Reader reader(trace.path);
    auto count = [&](const std::string& sql) {
        sql::Stmt stmt(reader.handle(), reader.path(), sql.c_str());
        return stmt.step() ? stmt.i64(0) : 0;
    };
    if (!reader.has_table("modules") || count("SELECT count(*) FROM modules") == 0) return report;   // not a capture
    check_capture_kernels(trace, report);
    if (!reader.has_table("kernel_info")) return report;
    // Each kernel's module and phase: what the planner groups and moves. One problem, at the first
    // kernel without a row, with how many lack one (a capture cut short lacks thousands).
    sql::Stmt lacking(reader.handle(), reader.path(),
                      "SELECT min(id), count(*) FROM kernels WHERE id NOT IN (SELECT kernel FROM kernel_info)");
    if (lacking.step() && lacking.i64(1) > 0) {
        const int64_t others = lacking.i64(1) - 1;
        report.problems.push_back(
            {"kernel-info", "kernels", lacking.i64(0),
             "has no kernel_info row (its module and phase)" +
                 (others > 0 ? ", nor have " + std::to_string(others) + " later kernels" : std::string()) +
                 "; every kernel of a model capture has one"});
    }
    return report;
}

}  // namespace mhc::trace
