// The Kineto tokenizer: a SAX parse of the JSON with rapidjson (over a sliding window, or a
// gzip stream) that assembles one event at a time from its keys (KEvent, kineto_handler.hpp) and
// hands it to the mapping (map_event, kineto_map.cpp), which keeps it in compact form: memory
// stays proportional to the kept events, not to the JSON text. Here: which parse runs (the
// windowed one, kineto_window.hpp, on one thread or two, kineto_two_parts.hpp; else the
// reference streamed one), and the refusal of traces of other tools.
#include <rapidjson/error/en.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "kineto_handler.hpp"
#include "kineto_parse.hpp"
#include "kineto_repair.hpp"
#include "kineto_two_parts.hpp"
#include "kineto_window.hpp"
#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "source.hpp"

namespace mhc::trace::import {

namespace {

// The reference parse: rapidjson over a character stream, strings copied. Used for inputs
// the windowed parse does not take, and to report errors.
// Errors the handler found (a bad field, too deep a nesting) before any syntax error.
void throw_handler_error(const std::string& path, const KinetoData& d, const Handler& h) {
    if (h.too_deep) throw Error(where(path, nesting_message()));
    if (!h.bad.empty() && h.bad_at_root) throw Error(where(path, h.bad));
    if (!h.bad.empty()) throw Error(where(path, "traceEvents[" + std::to_string(d.events) + "]: " + h.bad));
}

// The streamed parse; `event_names`: RepairingStream's last resort. Where the JSON is broken past
// mending, the message to refuse it with (else empty).
std::string parse_streamed(const std::string& path, KinetoData& data, Handler& handler, uint64_t max_input_size,
                           bool event_names) {
    rapidjson::Reader reader;
    GzSource src(path, max_input_size);
    handler.src = &src;
    // What Kineto wrote wrongly is mended (kineto_repair.hpp): only this parse repairs, so a trace
    // that needs it is read here, after the windowed parse stopped at it.
    RepairingStream stream(&src, data.empty_values, data.raw_strings, event_names);
    rapidjson::ParseResult res = reader.Parse<kStreamFlags>(stream, handler);
    handler.src = nullptr;
    throw_handler_error(path, data, handler);
    if (!res.IsError()) return "";
    std::string why = rapidjson::GetParseError_En(res.Code());
    // The input ends where the parse stopped (a NUL byte there would advance take()): the file is
    // cut short. Kineto writes NAME.tmp and renames it once complete, so a process stopped while
    // writing leaves that file, and a copy stopped part way leaves a cut one.
    if (res.Offset() == src.tell() && src.take() == '\0' && src.tell() == res.Offset())
        why +=
            " The file ends there, inside the JSON: it is cut short (a copy that did not finish, or the .tmp "
            "file the profiler writes before renaming it, left by a process stopped while writing)";
    return where(path, "invalid JSON at byte " + std::to_string(res.Offset()) + ": " + why);
}

// The streamed parse, and where it stops at broken JSON or at an event's member written twice, or
// reads a member after a name that no trace event holds (a raw name holding `", "ph": "i` or `",
// "key": "y` is valid JSON), once more with an event's name read to the quote before the event's
// next member (RepairingStream). A trace that only this reading takes, or that it reads without
// such a member and with as many events, is read so; else a file that parsed is read as written
// (its members after a name said), any other refused as the first parse found it.
KinetoData parse_streamed(const std::string& path, uint64_t max_input_size) {
    std::string refused;
    std::exception_ptr thrown;   // the first parse's bad input, where it found a member twice
    std::optional<KinetoData> as_written;   // the first parse's, where members follow a name
    for (bool event_names : {false, true}) {
        KinetoData data;
        data.streamed = true;
        Handler handler(data, path);
        std::string error;
        try {
            error = parse_streamed(path, data, handler, max_input_size, event_names);
        } catch (const Error&) {
            if (as_written) break;                        // the first reading stands
            if (thrown) std::rethrow_exception(thrown);   // the second reading fails too
            if (event_names || !handler.member_twice) throw;
            thrown = std::current_exception();
            continue;
        }
        if (error.empty() && !handler.saw_events)
            throw Error(where(path, "not a Kineto trace: the JSON has no top-level 'traceEvents' array"));
        // The right reading of a raw name keeps every event: one that takes events into a name is not it.
        if (error.empty() && (event_names || data.members_after_name.count == 0)) {
            if (!as_written) return data;
            data.raw_strings.valid_json = true;
            if (data.members_after_name.count == 0 && data.events == as_written->events) return data;
            break;
        }
        if (error.empty()) as_written = std::move(data);
        else if (refused.empty() && !thrown) refused = error;
    }
    if (as_written) return std::move(*as_written);
    if (thrown) std::rethrow_exception(thrown);
    throw Error(refused);
}

// Whether a core is idle now: fewer tasks runnable than cores (this thread is one of them;
// /proc/loadavg's fourth field counts them). False where that cannot be read.
bool idle_core() {
    std::ifstream loadavg("/proc/loadavg");
    double avg[3];
    int running = 0;
    char slash = 0;
    if (!(loadavg >> avg[0] >> avg[1] >> avg[2] >> running >> slash) || slash != '/') return false;
    return running < static_cast<int>(std::thread::hardware_concurrency());
}

// Whether a second thread is worth starting: Two says so, One not, Auto where a core is idle.
bool second_thread(ParseThreads threads) {
    return threads == ParseThreads::Two || (threads == ParseThreads::Auto && idle_core());
}

}  // namespace

KinetoData parse_kineto(const std::string& path, uint64_t max_input_size, ParseThreads threads) {
    {
        KinetoData d;
        Handler h(d, path);
        h.copy_strings = false;
        // A large plain file: its second half is parsed on a second thread meanwhile.
        // A second thread inflates gzip input ahead of the parse, or parses the second half of a
        // large plain file.
        const bool two = second_thread(threads);
        const bool plain = GzSource(path).is_plain_file();
        std::unique_ptr<SecondPart> second;
        SplitPoint split;
        std::error_code ec;
        const uint64_t size = plain ? std::filesystem::file_size(path, ec) : 0;
        if (two && plain && !ec && (threads == ParseThreads::Two || size >= kSplitFrom)) {
            split.at = guess_element_start(path, size / 2);
            if (split.at != UINT64_MAX) {
                second = std::make_unique<SecondPart>(path, max_input_size, split.at);
                split.take_over = [&] { return second->take_over(d); };
            }
        }
        if (Windowed(path, h, max_input_size, 0, two && !plain).run(second ? &split : nullptr)) {
            if (!h.saw_events)
                throw Error(where(path, "not a Kineto trace: the JSON has no top-level 'traceEvents' array"));
            d.learn_lanes();
            return d;
        }
        // Too deep a nesting stops the streamed parse at the same place (and it recurses); a
        // bad field is reported by the streamed parse, which sees every value whole.
        if (h.too_deep) throw Error(where(path, nesting_message()));
    }
    KinetoData data = parse_streamed(path, max_input_size);
    data.learn_lanes();
    return data;
}

std::string ascend_trace_message() {
    return "an Ascend NPU profiler trace (trace_view.json of torch_npu's or MindSpore's profiler, msprof's "
           "timeline: process 'Ascend Hardware'), not a Kineto trace: its NPU tasks are no events mhc reads, so it "
           "would import without its device work; mhc does not read it";
}

void refuse_foreign_trace(const std::string& path, const KinetoData& data) {
    // Its framework events are Kineto's (cpu_op), its NPU tasks are none mhc reads: it imported as
    // a run without device work, with one warning about events without a category.
    if (data.ascend_npu) throw Error(where(path, ascend_trace_message()));
    if (data.profiler_events > 0 || data.foreign_events == 0) return;
    std::string categories;
    for (const auto& [category, count] : data.foreign_categories)
        categories += (categories.empty() ? "" : ", ") + std::to_string(count) + " " + category;
    const std::string none = "none of its " + std::to_string(data.foreign_events) + " events (" + categories +
                             ") is of a kind Kineto (the PyTorch profiler's trace) writes, so it would import as nothing";
    if (data.autograd_legacy)
        throw Error(where(path, "the autograd profiler's own Chrome trace (export_chrome_trace of PyTorch 1.7 or "
                                "earlier, or of use_kineto=False: processes 'CPU functions' and 'CUDA functions'), "
                                "not a Kineto trace: " +
                                    none + "; record with torch.profiler (Kineto) for mhc"));
    if (!data.xprof_process.empty())
        throw Error(where(path, "a TensorFlow or JAX profiler trace (XProf's trace viewer JSON: process '" +
                                    data.xprof_process + "'), not a PyTorch profiler (Kineto) trace: " + none +
                                    "; mhc does not read it"));
    throw Error(where(path, "a Chrome trace JSON that is not a PyTorch profiler (Kineto) trace: " + none));
}

}  // namespace mhc::trace::import
