// The Kineto tokenizer: a SAX parse of the JSON with rapidjson (over a sliding window, or a
// gzip stream) that assembles one event at a time from its keys (KEvent) and hands it to the
// mapping (map_event, kineto_map.cpp), which keeps it in compact form: memory stays
// proportional to the kept events, not to the JSON text.
#ifdef __SSE2__
#define RAPIDJSON_SSE2   // SIMD whitespace skipping on the in-memory path
#endif
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "kineto_map.hpp"
#include "kineto_parse.hpp"
#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"
#include "source.hpp"

namespace mhc::trace::import {

uint32_t KStrings::intern(std::string_view s) {
    auto it = index.find(s);   // heterogeneous lookup: no string built for known names
    if (it != index.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(list.size());
    list.emplace_back(s);
    index.emplace(std::string(s), id);
    return id;
}

namespace {

// ts must lie in [0, 2^62] ns and dur in [-2^61, 2^61] (negative durations become 0): then
// ts + dur and differences of times stay inside int64.
constexpr int64_t kMaxTs = kMaxTime;
constexpr int64_t kMaxDur = INT64_C(1) << 61;

// Microseconds as written ("4458676983543.183") -> integer nanoseconds, exactly.
bool parse_us_to_ns(const char* s, size_t n, int64_t& out, int64_t lo, int64_t hi) {
    size_t i = 0;
    bool neg = false;
    if (i < n && s[i] == '-') { neg = true; ++i; }
    int64_t ip = 0;
    size_t digits = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (ip > (INT64_MAX / 1000 - 9) / 10) return false;
        ip = ip * 10 + (s[i++] - '0');
        ++digits;
    }
    int64_t frac = 0;
    int fd = 0;
    if (i < n && s[i] == '.') {
        ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (fd < 3) { frac = frac * 10 + (s[i] - '0'); ++fd; }
            ++i;
        }
    }
    if (i != n || digits == 0) {   // exponent form: go through double
        char buf[64];
        if (n >= sizeof buf) return false;
        std::memcpy(buf, s, n);
        buf[n] = 0;
        char* end = nullptr;
        double v = std::strtod(buf, &end);
        if (end != buf + n || !(v * 1000 < 4.6e18 && v * 1000 > -4.6e18)) return false;
        out = static_cast<int64_t>(v * 1000.0);
        return out <= hi && out >= lo;
    }
    while (fd < 3) { frac *= 10; ++fd; }
    out = ip * 1000 + frac;
    if (neg) out = -out;
    return out <= hi && out >= lo;
}

}  // namespace

// An integer as written (a JSON number; an integral float such as 1e3 is taken too). False for
// NaN, Inf, fractions beyond int64 and anything else: the caller reports the field.
bool parse_int(const char* s, size_t n, int64_t& out) {
    // Fast path: an optional '-' and up to 18 digits (every id, size and address seen).
    if (n > 0 && n <= 19) {
        size_t i = s[0] == '-' ? 1 : 0;
        if (i < n && n - i <= 18) {
            int64_t v = 0;
            for (; i < n && s[i] >= '0' && s[i] <= '9'; ++i) v = v * 10 + (s[i] - '0');
            if (i == n) {
                out = s[0] == '-' ? -v : v;
                return true;
            }
        }
    }
    if (auto whole = parse_integer<int64_t>(std::string_view(s, n))) {
        out = *whole;
        return true;
    }
    char buf[64];
    if (n == 0 || n >= sizeof buf) return false;
    std::memcpy(buf, s, n);
    buf[n] = 0;
    char* end = nullptr;
    double d = std::strtod(buf, &end);
    if (end != buf + n || !(d >= -9.2e18 && d <= 9.2e18)) return false;   // NaN fails too
    out = static_cast<int64_t>(d);
    return true;
}

namespace {

// Addresses are unsigned 64-bit in some traces: kept as their two's-complement bits.
bool parse_addr(const char* s, size_t n, int64_t& out) {
    if (parse_int(s, n, out)) return true;
    const auto bits = parse_integer<uint64_t>(std::string_view(s, n));
    if (!bits) return false;
    out = static_cast<int64_t>(*bits);
    return true;
}

// The top-level list of the GPUs: deviceProperties, or computeProperties in Kineto's traces of
// early 2021 (PyTorch 1.9 pre-releases; the same entries: id, name, totalGlobalMem).
bool is_device_list(std::string_view key) { return key == "deviceProperties" || key == "computeProperties"; }

enum class F : uint8_t {
    None,
    Ph,
    Cat,
    Name,
    Pid,
    Tid,
    Ts,
    Dur,
    Id,
    Args,
    // args
    ExtId,
    Corr,
    Device,
    Stream,
    Bytes,
    Regs,
    Smem,
    Grid,
    Block,
    Addr,
    MemBytes,
    Total,
    Reserved,
    DevType,
    DevId,
    RfId,
    EvIdx,
    SeqNr,
    SyclQueue,
    InDevice,
    ArgName,   // args.name (a metadata event's process name)
    // deviceProperties
    DpId,
    DpName,
    DpMem,
    // distributedInfo
    DistRank,
    DistWorld,
    TopKey,   // a key of the root object was just read (its name in Handler::top_key)
    Count,    // how many there are (a bit each in Handler::seen_keys)
};
static_assert(static_cast<unsigned>(F::Count) <= 64, "Handler::seen_keys holds a bit per field");

// The name of a field the mapping reads, as the file writes it (for messages).
const char* field_name(F key) {
    switch (key) {
        case F::Ph: return "ph";
        case F::Cat: return "cat";
        case F::Name: return "name";
        case F::Pid: return "pid";
        case F::Tid: return "tid";
        case F::Ts: return "ts";
        case F::Dur: return "dur";
        case F::Id: return "id";
        case F::Args: return "args";
        case F::ExtId: return "args.External id";
        case F::Corr: return "args.correlation";
        case F::Device: return "args.device";
        case F::Stream: return "args.stream";
        case F::Bytes: return "args.bytes";
        case F::Regs: return "args.registers per thread";
        case F::Smem: return "args.shared memory";
        case F::Grid: return "args.grid";
        case F::Block: return "args.block";
        case F::Addr: return "args.Addr";
        case F::MemBytes: return "args.Bytes";
        case F::Total: return "args.Total Allocated";
        case F::Reserved: return "args.Total Reserved";
        case F::DevType: return "args.Device Type";
        case F::DevId: return "args.Device Id";
        case F::RfId: return "args.Record function id";
        case F::EvIdx: return "args.Ev Idx";
        case F::SeqNr: return "args.Sequence number";
        case F::SyclQueue: return "args.sycl queue";
        case F::InDevice: return "args.inDevice";
        case F::ArgName: return "args.name";
        default: return "a field";
    }
}

// The top-level members the tokenizer reads (the others are skipped whole).
bool is_read_top_key(std::string_view key) {
    return key == "traceEvents" || is_device_list(key) || key == "distributedInfo" || key == "profile_memory";
}

// Key lookups switch on length first: they run for every key of every event.
F event_key(const char* k, size_t n) {
    std::string_view s(k, n);
    switch (n) {
        case 2: return s == "ph" ? F::Ph : s == "ts" ? F::Ts : s == "id" ? F::Id : F::None;
        case 3: return s == "cat" ? F::Cat : s == "pid" ? F::Pid : s == "tid" ? F::Tid : s == "dur" ? F::Dur : F::None;
        case 4: return s == "name" ? F::Name : s == "args" ? F::Args : F::None;
        default: return F::None;
    }
}

F arg_key(const char* k, size_t n) {
    std::string_view s(k, n);
    switch (n) {
        case 4: return s == "grid" ? F::Grid : s == "Addr" ? F::Addr : s == "name" ? F::ArgName : F::None;
        case 5: return s == "bytes" ? F::Bytes : s == "Bytes" ? F::MemBytes : s == "block" ? F::Block : F::None;
        case 6: return s == "device" ? F::Device : s == "stream" ? F::Stream : s == "Ev Idx" ? F::EvIdx : F::None;
        case 8: return s == "inDevice" ? F::InDevice : F::None;
        case 9: return s == "Device Id" ? F::DevId : F::None;
        case 10: return s == "sycl queue" ? F::SyclQueue : F::None;
        case 11: return s == "correlation" ? F::Corr : s == "External id" ? F::ExtId : s == "Device Type" ? F::DevType : F::None;
        case 13: return s == "shared memory" ? F::Smem : F::None;
        case 14: return s == "Total Reserved" ? F::Reserved : F::None;
        case 15: return s == "Total Allocated" ? F::Total : s == "Sequence number" ? F::SeqNr : F::None;
        case 18: return s == "Record function id" ? F::RfId : F::None;
        case 20: return s == "registers per thread" ? F::Regs : F::None;
        default: return F::None;
    }
}

// The keys whose value not_number judges when it is not a number (args.* inside args, 'ts' and
// 'dur' of an event); for every other key a string, null or container is no error.
constexpr bool read_as_number(F key) {
    switch (key) {
        case F::Ts: case F::Dur: case F::Corr: case F::Device: case F::Stream: case F::Bytes: case F::Addr:
        case F::MemBytes: case F::Total: case F::Reserved: case F::DevType: case F::DevId:
            return true;
        default:
            return false;
    }
}

// Where the tokenizer is: the container it is directly inside. A stack of these replaces
// depth arithmetic; only the named containers are read, every other one is skipped whole.
enum class In : uint8_t {
    Root,         // the top-level object
    Events,       // the traceEvents array
    Event,        // one event object
    Args,         // an event's args object
    GridDims,     // args.grid
    BlockDims,    // args.block
    EventOther,   // any other container inside an event (skipped)
    Props,        // the deviceProperties array
    Prop,         // one deviceProperties object
    Dist,         // the distributedInfo object (the process's rank in its job)
    Other,        // any other container (skipped)
};

struct Handler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Handler> {
    KinetoData& d;
    const std::string& path;
    std::vector<In> stack;   // open containers, innermost last
    bool saw_events = false;
    F key = F::None;
    int dim_i = 0;           // next index of args.grid / args.block
    KEvent e;
    bool copy_strings = true;   // false for the in-situ parse: strings stay in the buffer
    std::string own_cat, own_name, own_arg_name;
    // deviceProperties entry
    std::string dp_name;
    int64_t dp_id = -1, dp_mem = 0;
    bool too_deep = false;       // nesting past kMaxNesting: stops the parse
    GzSource* src = nullptr;     // streamed parse: marked between events (the input limit)

    Handler(KinetoData& data, const std::string& p) : d(data), path(p) { stack.reserve(16); }

    bool at(In w) const { return !stack.empty() && stack.back() == w; }
    bool in_event() const {
        if (stack.empty()) return false;
        In w = stack.back();
        return w == In::Event || w == In::Args || w == In::GridDims || w == In::BlockDims || w == In::EventOther;
    }
    // Between top-level members and between the items of a top-level array (the events)
    // nothing of the input is held: the streamed parse may forget what it has read.
    void boundary() {
        if (src && stack.size() <= 2) src->mark(src->tell());
    }
    // The windowed parse walks the root object itself and hands each member value over.
    void open_root() { stack.assign(1, In::Root); }
    void close_root() { stack.clear(); }
    bool enter(In w) {
        boundary();
        stack.push_back(w);
        if (stack.size() > static_cast<size_t>(kMaxNesting)) too_deep = true;
        return !too_deep;
    }
    void leave() {
        stack.pop_back();
        boundary();
        key = F::None;
    }
    // A string, null, bool, array or object where a number is read: a bad field.
    void not_number(const char* what) {
        if (!read_as_number(key)) return;   // most calls: the value of cat, name, ph or an unread key
        const char* name = nullptr;
        if (at(In::Args) && key == F::Bytes) {
            // Only copies and memsets use args.bytes; ROCm runtime calls write it as a string
            // ("bytes": "4096"): judged when the event is complete (EndObject).
            if (!e.bytes_not_number) e.bytes_not_number = what;
            return;
        }
        if (at(In::Args) && (key == F::Device || key == F::Stream)) {
            // Only kernels, copies and memsets use them; ROCm 6 runtime calls write the stream
            // as a string ("stream": "0x0"): judged when the event is complete (EndObject).
            if (!e.activity_field_not_number) {
                e.activity_field_not_number = key == F::Device ? "args.device" : "args.stream";
                e.activity_field_was = what;
            }
            return;
        }
        if (at(In::Args)) {
            switch (key) {
                case F::MemBytes: name = "args.Bytes"; break;
                case F::Addr: name = "args.Addr"; break;
                case F::Total: name = "args.Total Allocated"; break;
                case F::Reserved: name = "args.Total Reserved"; break;
                case F::DevId: name = "args.Device Id"; break;
                case F::DevType: name = "args.Device Type"; break;
                case F::Corr: name = "args.correlation"; break;
                default: break;
            }
        } else if (at(In::Event)) {
            if (key == F::Ts) name = "'ts'";
            if (key == F::Dur) name = "'dur'";
        }
        if (name && bad.empty()) bad = std::string(name) + " is " + what + ", not a number";
    }

    bool StartObject() {
        not_number("an object");
        In w = stack.empty()                     ? In::Root
               : at(In::Events)                  ? In::Event
               : at(In::Event) && key == F::Args ? In::Args
               : at(In::Props)                   ? In::Prop
               : at(In::Root) && key == F::TopKey && top_key == "distributedInfo" ? In::Dist
               : in_event()                      ? In::EventOther
                                                 : In::Other;
        if (!enter(w) || !bad.empty()) return false;
        if (w == In::Event) {
            e = KEvent{};
            seen_keys = 0;
        }
        if (w == In::Prop) { dp_name.clear(); dp_id = -1; dp_mem = 0; }
        key = F::None;
        return true;
    }
    bool EndObject(rapidjson::SizeType) {
        if (at(In::Event)) {
            if (e.bytes_not_number && uses_copy_bytes(e)) {
                bad = std::string("args.bytes is ") + e.bytes_not_number + ", not a number";
                return false;
            }
            if (e.activity_field_not_number && uses_gpu_placement(e)) {
                bad = std::string(e.activity_field_not_number) + " is " + e.activity_field_was + ", not a number";
                return false;
            }
            ++d.events;
            map_event(e, d);
        }
        if (at(In::Prop)) {
            ++d.device_count;
            d.device_id = dp_id;
            if (d.device_name.empty() || dp_id == 0) { d.device_name = dp_name; d.device_memory = dp_mem; }
        }
        leave();
        return true;
    }
    bool StartArray() {
        // A document that is one array is the Chrome trace's JSON Array Format (PyTorch 1.8's
        // profiler wrote it): that array is traceEvents.
        if (stack.empty()) {
            array_root = true;
            stack.push_back(In::Root);
            key = F::TopKey;
            top_key = "traceEvents";
        }
        bool dims = at(In::Args) && (key == F::Grid || key == F::Block);
        if (!dims) not_number("an array");
        bool top = at(In::Root) && key == F::TopKey;
        In inside = dims                              ? (key == F::Grid ? In::GridDims : In::BlockDims)
                    : top && top_key == "traceEvents" ? In::Events
                    : top && is_device_list(top_key)  ? In::Props
                    : in_event()                      ? In::EventOther
                                                      : In::Other;
        if (!enter(inside) || !bad.empty()) return false;
        if (inside == In::Events) saw_events = true;
        if (dims) dim_i = 0;
        return true;
    }
    bool EndArray(rapidjson::SizeType) {
        leave();
        if (array_root && at(In::Root)) stack.clear();
        return true;
    }
    std::string top_key;
    bool array_root = false;   // the document is the traceEvents array itself
    // The fields of the current event (and its args) read so far, a bit per F: a field written
    // twice has no one value (JSON readers keep the first or the last), so the event is refused.
    uint64_t seen_keys = 0;
    std::set<std::string, std::less<>> top_keys_read;   // the same for the root's members the tokenizer reads
    bool bad_at_root = false;                           // `bad` is about the root object, not an event
    bool once(F field) {
        const uint64_t bit = uint64_t{1} << static_cast<unsigned>(field);
        if ((seen_keys & bit) == 0) {
            seen_keys |= bit;
            return true;
        }
        if (bad.empty())
            bad = std::string("'") + field_name(field) + "' appears twice in the event: its value is not one";
        return false;
    }
    bool Key(const char* s, rapidjson::SizeType n, bool) {
        const std::string_view name(s, n);
        switch (stack.empty() ? In::Other : stack.back()) {
            case In::Event:
                key = event_key(s, n);
                if (key != F::None && !once(key)) return false;
                break;
            case In::Args:
                key = arg_key(s, n);
                if (key != F::None && !once(key)) return false;
                break;
            case In::Root:
                boundary();
                if (is_read_top_key(name) && !top_keys_read.emplace(name).second) {
                    if (bad.empty()) {
                        bad = "the top-level key '" + std::string(name) +
                              "' appears twice: JSON readers take either one, so the file has no one meaning";
                        bad_at_root = true;
                    }
                    return false;
                }
                top_key.assign(s, n);
                key = F::TopKey;
                if (name.rfind("roctracer", 0) == 0 || name.rfind("rocprofiler", 0) == 0 || name.rfind("hip_", 0) == 0)
                    d.rocm = true;
                break;
            case In::Prop: key = name == "id" ? F::DpId : name == "name" ? F::DpName : name == "totalGlobalMem" ? F::DpMem : F::None; break;
            case In::Dist: key = name == "rank" ? F::DistRank : name == "world_size" ? F::DistWorld : F::None; break;
            default: key = F::None; break;
        }
        return true;
    }
    // One integer field: parsed, then checked against [lo, hi]; otherwise `bad` names it.
    bool field(const char* s, size_t n, const char* name, int64_t& out, int64_t lo, int64_t hi, bool addr = false) {
        int64_t v = 0;
        bool number = addr ? parse_addr(s, n, v) : parse_int(s, n, v);
        if (!number || v < lo || v > hi) {
            if (bad.empty()) bad = std::string(name) + " " + std::string(s, n) + (number ? " is out of range" : " is not an integer");
            return false;
        }
        out = v;
        return true;
    }
    // A number: one dispatch on the container it is in (this runs for every number of the input).
    void num(const char* s, size_t n) {
        if (stack.empty()) return;
        switch (stack.back()) {
            case In::Args: args_number(s, n); break;
            case In::Event: event_number(s, n); break;
            case In::EventOther: break;
            case In::GridDims:
            case In::BlockDims: {
                bool grid = stack.back() == In::GridDims;
                int64_t value = 0;
                if (dim_i < 3 && field(s, n, grid ? "args.grid" : "args.block", value, 0, INT32_MAX))
                    (grid ? e.grid : e.block)[dim_i++] = static_cast<int32_t>(value);
                return;
            }
            case In::Dist:   // the job identity (docs/trace-format.md): a rank below 2^24
                if (key == F::DistRank) field(s, n, "distributedInfo.rank", d.rank, 0, 1 << 24);
                if (key == F::DistWorld) field(s, n, "distributedInfo.world_size", d.world_size, 1, 1 << 24);
                break;
            case In::Root:   // the recording's own flags (docs/import.md): profile_memory only
                if (key == F::TopKey && top_key == "profile_memory") root_flag(std::string_view(s, n));
                break;
            case In::Prop: {
                int64_t value = 0;
                if (key == F::DpId && parse_int(s, n, value)) dp_id = value;
                if (key == F::DpMem && field(s, n, "deviceProperties.totalGlobalMem", value, 0, kMaxBytes)) dp_mem = value;
                return;
            }
            default: return;
        }
        key = F::None;
    }
    void args_number(const char* text, size_t size) {
        constexpr int64_t lo = INT64_MIN, hi = INT64_MAX;
        switch (key) {
            case F::ExtId: field(text, size, "args.External id", e.ext, lo, hi); break;
            case F::Corr: field(text, size, "args.correlation", e.corr, lo, hi); break;
            case F::Device: e.has_device = field(text, size, "args.device", e.device, -1, INT32_MAX); break;
            case F::InDevice: {   // a peer copy's executing device (CUPTI memcpy2); another value: not read
                int64_t device = -1;
                if (parse_int(text, size, device) && device >= 0 && device <= INT32_MAX) e.in_device = device;
                break;
            }
            case F::Stream: e.has_stream = field(text, size, "args.stream", e.stream, lo, hi); break;
            case F::SyclQueue: {   // a queue id past int64 (an invalid id written unsigned): no lane, no error
                int64_t queue = -1;
                if (parse_int(text, size, queue) && queue >= 0) e.sycl_queue = queue;
                break;
            }
            case F::Bytes: field(text, size, "args.bytes", e.bytes, 0, kMaxBytes); break;
            case F::Regs: field(text, size, "args.registers per thread", e.regs, 0, INT32_MAX); break;
            case F::Smem: field(text, size, "args.shared memory", e.smem, 0, INT32_MAX); break;
            case F::Addr:
                e.has_addr = field(text, size, "args.Addr", e.addr, lo, hi, true);
                e.has_mem |= e.has_addr;
                break;
            case F::MemBytes: e.has_mem |= field(text, size, "args.Bytes", e.mem_bytes, -kMaxBytes, kMaxBytes); break;
            case F::Total: field(text, size, "args.Total Allocated", e.total, -kMaxBytes, kMaxBytes); break;
            case F::Reserved: field(text, size, "args.Total Reserved", e.reserved, -kMaxBytes, kMaxBytes); break;
            case F::DevType: field(text, size, "args.Device Type", e.dev_type, lo, hi); break;
            case F::DevId: field(text, size, "args.Device Id", e.dev_id, -1, INT32_MAX); break;
            case F::RfId: field(text, size, "args.Record function id", e.rf_id, lo, hi); break;
            case F::EvIdx: field(text, size, "args.Ev Idx", e.ev_idx, lo, hi); break;
            case F::SeqNr: field(text, size, "args.Sequence number", e.seq, lo, hi); break;
            default: break;
        }
    }
    void event_number(const char* text, size_t size) {
        switch (key) {
            case F::Ts:
                if (!(e.has_ts = parse_us_to_ns(text, size, e.ts, 0, kMaxTs))) bad = "'ts' " + std::string(text, size) + " is out of range";
                break;
            case F::Dur: {
                int64_t dur = 0;
                if (parse_us_to_ns(text, size, dur, -kMaxDur, kMaxDur)) e.dur = dur;
                else bad = "'dur' " + std::string(text, size) + " is out of range";
            } break;
            case F::Pid: field(text, size, "'pid'", e.pid, INT64_MIN, INT64_MAX); break;
            case F::Tid:
                if (field(text, size, "'tid'", e.tid, INT64_MIN, INT64_MAX) && e.tid >= 0) e.tid_stream = e.tid;
                break;
            case F::Id: field(text, size, "'id'", e.id, INT64_MIN, INT64_MAX); break;
            default: break;
        }
    }
    std::string bad;   // set when a number cannot be used: stops the parse
    bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
        num(s, n);
        boundary();
        return bad.empty();
    }
    bool String(const char* s, rapidjson::SizeType n, bool) {
        boundary();
        not_number("a string");
        if (at(In::Prop) && key == F::DpName) dp_name.assign(s, n);
        if (at(In::Args) && key == F::ArgName) {
            if (copy_strings) { own_arg_name.assign(s, n); e.arg_name = own_arg_name; }
            else e.arg_name = {s, n};
        }
        if (at(In::Root) && key == F::TopKey && top_key == "profile_memory") root_flag({s, n});
        if (at(In::Event)) {
            switch (key) {
                case F::Ph: e.ph = n ? s[0] : 0; break;
                case F::Cat:
                    if (copy_strings) { own_cat.assign(s, n); e.cat = own_cat; }
                    else e.cat = {s, n};
                    break;
                case F::Name:
                    if (copy_strings) { own_name.assign(s, n); e.name = own_name; }
                    else e.name = {s, n};
                    break;
                // string pids/tids ("Traces", "stream 7"): a stable number
                case F::Pid:
                    e.pid = static_cast<int64_t>(std::hash<std::string_view>{}({s, n}) >> 2);
                    // The autograd profiler's own export (before Kineto): its processes by name
                    if (std::string_view(s, n) == "CPU functions" || std::string_view(s, n) == "CUDA functions")
                        d.autograd_legacy = true;
                    break;
                case F::Tid: {
                    e.tid = static_cast<int64_t>(std::hash<std::string_view>{}({s, n}) >> 2);
                    const std::string_view tid(s, n);   // "stream 7" (PyTorch 1.9), "Stream 7" (converters)
                    int64_t stream = -1;
                    if (n > 7 && (tid.substr(0, 7) == "stream " || tid.substr(0, 7) == "Stream ") &&
                        parse_int(s + 7, n - 7, stream) && stream >= 0)
                        e.tid_stream = stream;
                } break;
                case F::Id: {   // flow ids are sometimes strings: a number when they are one
                    int64_t v = 0;
                    e.id = parse_int(s, n, v) ? v : static_cast<int64_t>(std::hash<std::string_view>{}({s, n}) >> 2);
                } break;
                default: break;
            }
        }
        key = F::None;
        return bad.empty();
    }
    bool Null() {
        boundary();
        not_number("null");
        key = F::None;
        return bad.empty();
    }
    bool Bool(bool value) {
        boundary();
        not_number("a boolean");
        if (at(In::Root) && key == F::TopKey && top_key == "profile_memory") root_flag(value ? "1" : "0");
        key = F::None;
        return bad.empty();
    }
    // profile_memory: 1 or 0 (a number, "1" or a boolean); any other value leaves it unsaid.
    void root_flag(std::string_view value) {
        int64_t flag = 0;
        if (parse_int(value.data(), value.size(), flag) && (flag == 0 || flag == 1))
            d.profile_memory = static_cast<int>(flag);
    }
};

}  // namespace

namespace {

constexpr unsigned kStreamFlags = rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseNanAndInfFlag;
constexpr unsigned kInsituFlags = kStreamFlags | rapidjson::kParseInsituFlag | rapidjson::kParseStopWhenDoneFlag;

// The reference parse: rapidjson over a character stream, strings copied. Used for inputs
// the windowed parse does not take, and to report errors.
// Errors the handler found (a bad field, too deep a nesting) before any syntax error.
void throw_handler_error(const std::string& path, const KinetoData& d, const Handler& h) {
    if (h.too_deep) throw Error(where(path, nesting_message()));
    if (!h.bad.empty() && h.bad_at_root) throw Error(where(path, h.bad));
    if (!h.bad.empty()) throw Error(where(path, "traceEvents[" + std::to_string(d.events) + "]: " + h.bad));
}

void parse_streamed(const std::string& path, KinetoData& d, Handler& h, uint64_t max_input_size) {
    rapidjson::Reader reader;
    GzSource src(path, max_input_size);
    h.src = &src;
    JsonStream js{&src};
    rapidjson::ParseResult res = reader.Parse<kStreamFlags>(js, h);
    h.src = nullptr;
    throw_handler_error(path, d, h);
    if (res.IsError())
        throw Error(where(path, std::string("invalid JSON at byte ") + std::to_string(res.Offset()) + ": " +
                                    rapidjson::GetParseError_En(res.Code())));
}

struct KeyCatcher : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, KeyCatcher> {
    std::string_view s;
    bool ok = false;
    bool String(const char* p, rapidjson::SizeType n, bool) { s = {p, n}; ok = true; return true; }
    bool Default() { return false; }   // a key must be a string
};

// Where the windowed parse may hand the rest of the input to a second thread: an element of
// traceEvents that starts at byte `at` (only a guess until the first parse meets an element there).
struct SplitPoint {
    uint64_t at = UINT64_MAX;
    std::function<bool()> take_over;   // true: the rest is parsed and merged, the first parse stops
};

// Fast path: the JSON text, plain or gzip, is read into a sliding window; the top-level
// object and the traceEvents array are walked here and each member value / event is
// parsed by rapidjson in situ (no string or number is copied; the handler sees views of
// the window). The window (256 KiB, doubled up to 32 MiB while the input lasts) holds at
// least kKeep bytes ahead of each value, so an event is parsed while whole in memory. Anything unexpected (a syntax error, a value longer than
// the window, a root that is not an object) returns false: the caller starts again with
// parse_streamed, which gives the same result or the error message.
class Windowed {
public:
    // The window stays within `limit` too (at least its first 256 KiB): an event longer than it
    // goes to the streamed parse, which refuses it past the limit. `start`: the byte to begin at
    // (a plain file's second part: run with `stop`). `inflate_ahead`: as ReadAhead's.
    Windowed(const std::string& path, Handler& handler, uint64_t limit, uint64_t start, bool inflate_ahead)
        : src_(path, start, inflate_ahead), h_(handler),
          max_cap_(std::max(cap_, static_cast<size_t>(std::min<uint64_t>(kCap, limit)))),
          keep_(std::min(kKeep, max_cap_ / 2)), base_(start), limit_(src_.is_gzip() ? limit : UINT64_MAX) {
        buf_.resize(cap_ + kPad);
    }

    // The whole document; or, with `stop` (the second part, whose handler is inside
    // traceEvents), from the element at the start through the end of the document, polling
    // `stop` between elements (set: false). With a split point, the first part stops there
    // if the second part took over from there (true), and goes on by itself where it did not.
    // One loop for both: the per-element path is the hot one of an import.
    bool run(const SplitPoint* split = nullptr, const std::atomic<bool>* stop = nullptr) {
        bool at_element = stop != nullptr;
        if (!at_element) {
            if (!ws() || at() != '{') return false;
            ++beg_;
            h_.open_root();
            if (!ws()) return false;
        }
        if (!at_element && at() == '}') {
            ++beg_;
        } else {
            while (true) {
                if (!at_element && !member_key()) return false;
                if (at_element || (h_.top_key == "traceEvents" && at() == '[')) {
                    if (!at_element) {
                        ++beg_;
                        h_.StartArray();
                        if (!ws()) return false;
                    }
                    if (!at_element && at() == ']') {
                        ++beg_;
                    } else {
                        at_element = false;
                        while (true) {
                            if (split && base_ + beg_ == split->at && split->take_over()) return true;
                            if (stop && stop->load(std::memory_order_relaxed)) return false;
                            if (!value(h_) || !ws()) return false;
                            char c = at();
                            ++beg_;
                            if (c == ']') break;
                            if (c != ',' || !ws()) return false;
                        }
                    }
                    h_.EndArray(0);
                } else if (!value(h_)) {
                    return false;
                }
                if (!ws()) return false;
                char c = at();
                ++beg_;
                if (c == '}') break;
                if (c != ',') return false;
            }
        }
        h_.close_root();
        ws();
        return beg_ == end_ && eof_;   // nothing but whitespace after the root
    }

private:
    static constexpr size_t kCap = size_t(32) << 20, kKeep = size_t(4) << 20, kPad = 64;

    // A member's key and the ':' after it, up to its value.
    bool member_key() {
        if (!ws() || at() != '"') return false;
        KeyCatcher kc;
        if (!value(kc) || !kc.ok) return false;
        if (!h_.Key(kc.s.data(), static_cast<rapidjson::SizeType>(kc.s.size()), false)) return false;   // a key twice
        if (!ws() || at() != ':') return false;
        ++beg_;
        return ws();
    }

    char at() const { return buf_[beg_]; }
    // Keeps at least kKeep bytes ahead of beg_ (or all that is left), a NUL after them.
    void fill() {
        if (eof_ || end_ - beg_ >= keep_) return;
        std::memmove(buf_.data(), buf_.data() + beg_, end_ - beg_);
        base_ += beg_;
        end_ -= beg_;
        beg_ = 0;
        while (!eof_) {
            if (end_ == cap_) {   // small inputs keep a small buffer; large ones grow it to kCap
                if (cap_ >= max_cap_) break;
                cap_ *= 2;
                buf_.resize(cap_ + kPad);
            }
            size_t got = src_.read(buf_.data() + end_, cap_ - end_);
            if (got == 0) eof_ = true;
            end_ += got;
        }
        std::memset(buf_.data() + end_, 0, kPad);   // sentinel, and room for 16-byte loads
    }
    // Skips whitespace; false at the end of the input.
    bool ws() {
        while (true) {
            fill();
            while (beg_ < end_) {
                char c = buf_[beg_];
                if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return true;
                ++beg_;
            }
            if (eof_) return false;
        }
    }
    template <typename H>
    bool value(H& handler) {
        fill();
        rapidjson::InsituStringStream ss(buf_.data() + beg_);
        rapidjson::ParseResult res = reader_.Parse<kInsituFlags>(ss, handler);
        // A value of gzip input longer than the limit (which may be under the window's size)
        // goes to the streamed parse, which refuses it: the limit holds for every value.
        if (res.IsError() || ss.Tell() > limit_) return false;
        beg_ += ss.Tell();
        return beg_ <= end_;
    }

    ReadAhead src_;
    Handler& h_;
    rapidjson::Reader reader_;
    std::vector<char> buf_;
    size_t beg_ = 0, end_ = 0, cap_ = size_t(256) << 10, max_cap_, keep_;
    uint64_t base_ = 0;   // offset in the input of buf_[0]
    uint64_t limit_;      // the most bytes of one value (gzip input; plain files: no limit)
    bool eof_ = false;
};

// The first element of traceEvents that starts at or after `from`, as far as the bytes there
// tell: '{' after "}," (whitespace between). A guess: it may lie inside a string, so the first
// part accepts it only where one of its elements really starts. UINT64_MAX if none is near.
uint64_t guess_element_start(const std::string& path, uint64_t from) {
    std::ifstream file(path, std::ios::binary);
    std::string chunk(size_t{1} << 16, '\0');
    if (!file.seekg(static_cast<std::streamoff>(from))) return UINT64_MAX;
    file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<size_t>(file.gcount()));
    auto space = [](char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; };
    for (size_t i = 0; i < chunk.size(); ++i) {
        if (chunk[i] != '}') continue;
        size_t next = i + 1;
        while (next < chunk.size() && space(chunk[next])) ++next;
        if (next >= chunk.size() || chunk[next] != ',') continue;
        ++next;
        while (next < chunk.size() && space(chunk[next])) ++next;
        if (next < chunk.size() && chunk[next] == '{') return from + next;
    }
    return UINT64_MAX;
}

// Appends what the second part of the input gave to the first part's data, as one parse of
// the whole would have left it: names re-interned, event indexes shifted, later runtime calls
// and flows replacing earlier ones of the same id. False (nothing changed) where the two cannot
// be told apart from one parse: device properties in both parts.
bool merge_second_part(KinetoData& first, KinetoData&& second) {
    if (first.device_count > 0 && second.device_count > 0) return false;
    std::vector<uint32_t> name(second.strings.list.size());
    for (size_t i = 0; i < name.size(); ++i) name[i] = first.strings.intern(second.strings.list[i]);
    const int64_t shift = first.events;
    first.second_part_from = shift;
    first.kernels.reserve(first.kernels.size() + second.kernels.size());
    for (KKernel& kernel : second.kernels) {
        kernel.name = name[kernel.name];
        first.kernels.push_back(kernel);
    }
    first.memory.reserve(first.memory.size() + second.memory.size());
    for (KMemory& event : second.memory) {
        event.index += shift;
        first.memory.push_back(event);
    }
    first.ops.reserve(first.ops.size() + second.ops.size());
    for (KOp& op : second.ops) {
        op.name = name[op.name];
        first.ops.push_back(op);
    }
    for (KRange& range : second.ranges) {
        range.name = name[range.name];
        first.ranges.push_back(range);
    }
    for (KCall& call : second.launch_calls) {
        call.name = name[call.name];
        call.index += shift;
        first.launch_calls.push_back(call);
    }
    // Each process's calls of a shared id, then the last call of every id (which stays the last).
    for (const auto& [id, calls] : second.shared_launches)
        for (const KLaunch& call : calls) first.add_launch(id, call);
    for (const auto& [id, call] : second.launches) first.add_launch(id, call);
    for (const auto& [id, starts] : second.shared_flows)
        for (const KLaunch& start : starts) first.add_flow(id, start);
    for (const auto& [id, start] : second.flow_starts) first.add_flow(id, start);
    if (first.negative_durations == 0 && second.negative_durations > 0) {
        first.first_negative = second.first_negative + shift;
        first.first_negative_dur = second.first_negative_dur;
        first.first_negative_name = std::move(second.first_negative_name);
    }
    first.negative_durations += second.negative_durations;
    first.events += second.events;
    first.flows += second.flows;
    first.host_memory_events += second.host_memory_events;
    first.sycl_queue_lanes += second.sycl_queue_lanes;
    first.begin_end_events += second.begin_end_events;
    if (first.copies_without_direction == 0 && second.copies_without_direction > 0)
        first.first_copy_without_direction = std::move(second.first_copy_without_direction);
    first.copies_without_direction += second.copies_without_direction;
    if (first.out_of_memory == 0 && second.out_of_memory > 0) {
        first.first_out_of_memory = second.first_out_of_memory;
        first.first_out_of_memory.index += shift;
    }
    first.out_of_memory += second.out_of_memory;
    for (int64_t pid : second.launch_pids)
        if (first.launch_pids.size() < KinetoData::kMaxLaunchPids) first.launch_pids.insert(pid);
    for (const auto& [category, count] : second.unread_categories) first.unread_categories[category] += count;
    first.profiler_events += second.profiler_events;
    first.foreign_events += second.foreign_events;
    for (const auto& [category, count] : second.foreign_categories) first.foreign_categories[category] += count;
    if (first.xprof_process.empty()) first.xprof_process = std::move(second.xprof_process);
    first.autograd_legacy |= second.autograd_legacy;
    for (const auto& [category, count] : second.counter_categories) first.counter_categories[category] += count;
    for (const auto& [device, count] : second.odd_memory_devices) first.odd_memory_devices[device] += count;
    if (first.activities_without_device == 0 && second.activities_without_device > 0)
        first.first_without_device = std::move(second.first_without_device);
    first.activities_without_device += second.activities_without_device;
    first.copies_on_in_device += second.copies_on_in_device;
    first.streams_from_tid += second.streams_from_tid;
    first.activities_without_stream += second.activities_without_stream;
    first.t_min = std::min(first.t_min, second.t_min);
    if (second.device_count > 0) {
        first.device_count = second.device_count;
        first.device_id = second.device_id;
        first.device_name = std::move(second.device_name);
        first.device_memory = second.device_memory;
    }
    if (second.rank >= 0) first.rank = second.rank;
    if (second.world_size >= 0) first.world_size = second.world_size;
    first.has_rf_id |= second.has_rf_id;
    first.rocm |= second.rocm;
    if (second.profile_memory >= 0) first.profile_memory = second.profile_memory;   // a key after traceEvents
    return true;
}

// The second half of a large plain file, parsed on a thread of its own from a guessed element
// start while the caller parses the first half (docs/import.md, "Speed").
class SecondPart {
public:
    SecondPart(const std::string& path, uint64_t limit, uint64_t at) : h_(d_, path) {
        h_.copy_strings = false;
        h_.stack = {In::Root, In::Events};   // as the first part's handler is at that element
        h_.top_key = "traceEvents";
        h_.saw_events = true;
        thread_ = std::thread([this, &path, limit, at] {
            try {
                ok_ = Windowed(path, h_, limit, at, false).run(nullptr, &stop_);
            } catch (...) {   // the first part meets the same error where it lies, and says it
                ok_ = false;
            }
        });
    }
    ~SecondPart() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    SecondPart(const SecondPart&) = delete;
    SecondPart& operator=(const SecondPart&) = delete;

    // Called when the first part reaches the guessed element: waits for the second part and
    // merges its data into `d`; false (d unchanged) where it failed.
    bool take_over(KinetoData& first) {
        thread_.join();
        return ok_ && merge_second_part(first, std::move(d_));
    }

private:
    KinetoData d_;
    Handler h_;
    std::atomic<bool> stop_{false};
    bool ok_ = false;
    std::thread thread_;
};

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
    KinetoData d;
    d.streamed = true;
    Handler h(d, path);
    parse_streamed(path, d, h, max_input_size);
    if (!h.saw_events)
        throw Error(where(path, "not a Kineto trace: the JSON has no top-level 'traceEvents' array"));
    d.learn_lanes();
    return d;
}

void refuse_foreign_trace(const std::string& path, const KinetoData& data) {
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

namespace {

// Records `call` as the last call of `id`; where another process's call of the id was read
// before, every process's last call of it is kept in `shared`.
void add_call(std::unordered_map<int64_t, KLaunch>& last, std::unordered_map<int64_t, std::vector<KLaunch>>& shared,
              int64_t id, const KLaunch& call) {
    auto [it, fresh] = last.try_emplace(id, call);
    if (fresh) return;
    auto all = shared.find(id);
    if (all == shared.end()) {
        if (it->second.pid == call.pid) {
            it->second = call;
            return;
        }
        all = shared.emplace(id, std::vector<KLaunch>{it->second}).first;
    }
    auto same = std::find_if(all->second.begin(), all->second.end(),
                             [&](const KLaunch& other) { return other.pid == call.pid; });
    if (same != all->second.end()) *same = call;
    else all->second.push_back(call);
    it->second = call;
}

// The call of `id` that launched kernel k: the only one, or among several processes' calls the
// one of the process that drove k's GPU lane, else the latest one made before k started (a
// launch precedes its kernel), else the earliest.
const KLaunch* pick_call(const std::unordered_map<int64_t, KLaunch>& last,
                         const std::unordered_map<int64_t, std::vector<KLaunch>>& shared,
                         const std::map<std::pair<int64_t, int32_t>, int64_t>& lane_process, const KKernel& kernel,
                         LaunchPick& how) {
    auto all = shared.find(kernel.correlation);
    if (all == shared.end()) {
        auto it = last.find(kernel.correlation);
        how = it == last.end() ? LaunchPick::None : LaunchPick::Only;
        return it == last.end() ? nullptr : &it->second;
    }
    const std::vector<KLaunch>& calls = all->second;
    auto lane = lane_process.find({kernel.pid, kernel.device});
    if (lane != lane_process.end() && lane->second >= 0)
        for (const KLaunch& call : calls)
            if (call.pid == lane->second) {
                how = LaunchPick::ByProcess;
                return &call;
            }
    how = LaunchPick::ByTime;
    const KLaunch* best = nullptr;
    for (const KLaunch& call : calls)
        if (call.ts <= kernel.ts && (best == nullptr || call.ts > best->ts)) best = &call;
    if (best != nullptr) return best;
    return &*std::min_element(calls.begin(), calls.end(),
                              [](const KLaunch& lhs, const KLaunch& rhs) { return lhs.ts < rhs.ts; });
}

}   // namespace

void KinetoData::add_launch(int64_t correlation, const KLaunch& call) {
    add_call(launches, shared_launches, correlation, call);
    if (launch_pids.size() < kMaxLaunchPids) launch_pids.insert(call.pid);
}

void KinetoData::add_flow(int64_t id, const KLaunch& start) {
    add_call(flow_starts, shared_flows, id, start);
    if (launch_pids.size() < kMaxLaunchPids) launch_pids.insert(start.pid);
}

void KinetoData::learn_lanes() {
    lane_process.clear();
    if (shared_launches.empty() && shared_flows.empty()) return;
    // Per lane, how many of its kernels each process launched (ids one process used only).
    std::map<std::pair<int64_t, int32_t>, std::map<int64_t, int64_t>> votes;
    for (const KKernel& kernel : kernels) {
        if (kernel.is_copy || kernel.is_memset) continue;
        LaunchPick how = LaunchPick::None;
        const KLaunch* call = launch_of(kernel, &how);
        if (how == LaunchPick::Only) ++votes[{kernel.pid, kernel.device}][call->pid];
    }
    // A lane is one process's where that process launched at least 99% of them (a stray kernel
    // whose own launch was not recorded can take another process's call of its id); a lane that
    // two processes drove (two ranks' GPU 0 under one pid) has no process: -1.
    for (const auto& [lane, counts] : votes) {
        int64_t process = -1, most = 0, total = 0;
        for (const auto& [pid, count] : counts) {
            total += count;
            if (count > most) {
                process = pid;
                most = count;
            }
        }
        lane_process[lane] = most * 100 >= total * 99 ? process : -1;
    }
}

const KLaunch* KinetoData::launch_of(const KKernel& kernel, LaunchPick* how) const {
    LaunchPick pick = LaunchPick::None;
    const KLaunch* call = pick_call(launches, shared_launches, lane_process, kernel, pick);
    if (call == nullptr) call = pick_call(flow_starts, shared_flows, lane_process, kernel, pick);
    if (how != nullptr) *how = pick;
    return call;
}

StepRanges::StepRanges(const std::vector<KRange>& ranges) {
    for (const auto& range : ranges)
        if (range.step >= 0) steps_.push_back(&range);
    std::sort(steps_.begin(), steps_.end(), [](const KRange* lhs, const KRange* rhs) { return lhs->ts < rhs->ts; });
}

int32_t StepRanges::at(int64_t time) const {
    auto after = std::upper_bound(steps_.begin(), steps_.end(), time,
                                  [](int64_t value, const KRange* step) { return value < step->ts; });
    if (after == steps_.begin()) return -1;
    const KRange* step = *(after - 1);
    return time <= step->ts + step->dur ? step->step : -1;
}

}  // namespace mhc::trace::import
