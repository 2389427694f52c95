#pragma once
// The Kineto tokenizer's SAX handler: rapidjson hands it the keys and values of the JSON, and it
// assembles one event at a time from its keys (KEvent) and hands it to the mapping (map_event,
// kineto_map.cpp). Included by the parses that drive it (kineto_parse.cpp, kineto_two_parts.cpp):
// its members are defined here so that they inline into rapidjson's parse loop.
#ifdef __SSE2__
#ifndef RAPIDJSON_SSE2
#define RAPIDJSON_SSE2   // SIMD whitespace skipping on the in-memory path
#endif
#endif
#include <rapidjson/reader.h>

#include <climits>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kineto_fields.hpp"
#include "kineto_map.hpp"
#include "kineto_numbers.hpp"
#include "kineto_parse.hpp"
#include "limits.hpp"
#include "source.hpp"

namespace mhc::trace::import {

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
    DistPgs,      // distributedInfo.pg_config (the job's process groups)
    DistPg,       // one pg_config entry
    DistPgRanks,  // its ranks
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
    std::string own_cat, own_name, own_arg_name, own_group_name, own_group_ranks;
    // distributedInfo.pg_config entry being read: its name, its ranks, whether they all read
    std::string pg_name;
    std::vector<int64_t> pg_ranks;
    bool pg_ranks_ok = true;
    // deviceProperties entry
    std::string dp_name;
    int64_t dp_id = -1, dp_mem = 0;
    bool too_deep = false;       // nesting past kMaxNesting: stops the parse
    GzSource* src = nullptr;     // streamed parse: marked between events (the input limit)

    Handler(KinetoData& data, const std::string& file) : d(data), path(file) { stack.reserve(16); }

    bool at(In container) const { return !stack.empty() && stack.back() == container; }
    bool in_event() const {
        if (stack.empty()) return false;
        In top = stack.back();
        return top == In::Event || top == In::Args || top == In::GridDims || top == In::BlockDims ||
               top == In::EventOther;
    }
    // Between top-level members and between the items of a top-level array (the events)
    // nothing of the input is held: the streamed parse may forget what it has read.
    void boundary() {
        if (src && stack.size() <= 2) src->mark(src->tell());
    }
    // The windowed parse walks the root object itself and hands each member value over.
    void open_root() { stack.assign(1, In::Root); }
    void close_root() { stack.clear(); }
    bool enter(In container) {
        boundary();
        stack.push_back(container);
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

    // A number, null, bool, array or object where a string is read (the event's ph, cat and name,
    // a metadata event's args.name): refused, never read as an empty string. No profiler writes
    // these as anything but strings (Kineto, the autograd profiler, rocprofiler, nsys exports).
    void not_string(const char* what) {
        const char* name = nullptr;
        if (at(In::Event)) name = key == F::Ph ? "'ph'" : key == F::Cat ? "'cat'" : key == F::Name ? "'name'" : nullptr;
        if (at(In::Args) && key == F::ArgName) name = "args.name";
        if (name && bad.empty()) bad = std::string(name) + " is " + what + ", not a string";
    }

    // args.Process Group Name or Ranks that is no string: the kernel's group is not read (said). A
    // pg_config entry's ranks that are no list of numbers: its members are not known (num judges numbers).
    void group_not_string(bool number = false) {
        if (at(In::Args) && (key == F::PgName || key == F::PgRanks)) e.group_unreadable = true;
        if (!number && (at(In::DistPgRanks) || (at(In::DistPg) && key == F::DistPgRanks))) pg_ranks_ok = false;
    }

    bool StartObject() {
        not_number("an object");
        not_string("an object");
        group_not_string();
        In opened = stack.empty()                                                      ? In::Root
                    : at(In::Events)                                                   ? In::Event
                    : at(In::Event) && key == F::Args                                  ? In::Args
                    : at(In::Props)                                                    ? In::Prop
                    : at(In::Root) && key == F::TopKey && top_key == "distributedInfo" ? In::Dist
                    : at(In::DistPgs)                                                  ? In::DistPg
                    : in_event()                                                       ? In::EventOther
                                                                                       : In::Other;
        if (!enter(opened) || !bad.empty()) return false;
        if (opened == In::Event) {
            e = KEvent{};
            seen_keys = 0;
            after_name = false;
        }
        if (opened == In::DistPg) {
            pg_name.clear();
            pg_ranks.clear();
            pg_ranks_ok = true;
        }
        if (opened == In::Prop) {
            dp_name.clear();
            dp_id = -1;
            dp_mem = 0;
        }
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
        if (at(In::DistPg) && !pg_name.empty()) {
            if (!pg_ranks_ok) pg_ranks.clear();
            d.pg_config[pg_name] = pg_ranks;
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
        not_string("an array");
        const bool pg_list = (at(In::Dist) && key == F::DistPgConfig) || (at(In::DistPg) && key == F::DistPgRanks);
        if (!pg_list) group_not_string();
        bool top = at(In::Root) && key == F::TopKey;
        In inside = dims                              ? (key == F::Grid ? In::GridDims : In::BlockDims)
                    : top && top_key == "traceEvents" ? In::Events
                    : top && is_device_list(top_key)  ? In::Props
                    : pg_list                         ? (at(In::Dist) ? In::DistPgs : In::DistPgRanks)
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
        if (bad.empty()) {
            bad = std::string("'") + field_name(field) + "' appears twice in the event: its value is not one";
            member_twice = true;
        }
        return false;
    }
    // A member right after the name of an event whose "ph" came before it (Kineto's order) that no
    // trace event holds (Chrome's trace event format): Kineto writes none there, and a name it
    // wrote raw that holds `", "key": "` reads so as valid JSON. The windowed parse leaves such a
    // file to the streamed one (false), which counts it and reads the file once more
    // (kineto_parse.cpp).
    bool after_name = false;   // the event's last key was its name, after its "ph"
    bool member_after_name(std::string_view member) {
        if (event_member(member) >= 0) return true;
        if (!copy_strings) return false;
        StrayMember& stray = d.members_after_name;
        if (stray.count++ == 0) {
            stray.key.assign(member.substr(0, 64));
            stray.row = static_cast<size_t>(d.events);
        }
        return true;
    }
    bool Key(const char* text, rapidjson::SizeType n, bool) {
        const std::string_view name(text, n);
        switch (stack.empty() ? In::Other : stack.back()) {
            case In::Event: {
                key = event_key(text, n);
                if (key != F::None && !once(key)) return false;
                const bool follows_name = after_name;
                after_name = key == F::Name && (seen_keys & uint64_t{1} << static_cast<unsigned>(F::Ph)) != 0;
                if (follows_name && !member_after_name(name)) return false;
                break;
            }
            case In::Args:
                key = arg_key(text, n);
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
                top_key.assign(text, n);
                key = F::TopKey;
                if (name.rfind("roctracer", 0) == 0 || name.rfind("rocprofiler", 0) == 0 || name.rfind("hip_", 0) == 0)
                    d.rocm = true;
                break;
            case In::Prop: key = name == "id" ? F::DpId : name == "name" ? F::DpName : name == "totalGlobalMem" ? F::DpMem : F::None; break;
            case In::Dist:
                key = name == "rank"         ? F::DistRank
                      : name == "world_size" ? F::DistWorld
                      : name == "pg_config"  ? F::DistPgConfig
                                             : F::None;
                break;
            case In::DistPg: key = name == "pg_name" ? F::DistPgName : name == "ranks" ? F::DistPgRanks : F::None; break;
            default: key = F::None; break;
        }
        return true;
    }
    // One integer field: parsed, then checked against [lo, hi]; otherwise `bad` names it.
    bool field(const char* text, size_t n, const char* name, int64_t& out, int64_t lo, int64_t hi, bool addr = false) {
        int64_t value = 0;
        bool number = addr ? parse_addr(text, n, value) : parse_int(text, n, value);
        if (!number || value < lo || value > hi) {
            if (bad.empty())
                bad = std::string(name) + " " + std::string(text, n) +
                      (number ? " is out of range" : " is not an integer");
            return false;
        }
        out = value;
        return true;
    }
    // A number: one dispatch on the container it is in (this runs for every number of the input).
    void num(const char* text, size_t n) {
        if (stack.empty()) return;
        switch (stack.back()) {
            case In::Args: args_number(text, n); break;
            case In::Event: event_number(text, n); break;
            case In::EventOther: break;
            case In::GridDims:
            case In::BlockDims: {
                bool grid = stack.back() == In::GridDims;
                int64_t value = 0;
                if (dim_i < 3 && field(text, n, grid ? "args.grid" : "args.block", value, 0, INT32_MAX))
                    (grid ? e.grid : e.block)[dim_i++] = static_cast<int32_t>(value);
                return;
            }
            case In::Dist:   // the job identity (docs/trace-format.md): a rank below 2^24
                if (key == F::DistRank) field(text, n, "distributedInfo.rank", d.rank, 0, 1 << 24);
                if (key == F::DistWorld) field(text, n, "distributedInfo.world_size", d.world_size, 1, 1 << 24);
                break;
            case In::DistPgRanks: {   // a process group's members; another value: the group's are not known
                int64_t member = -1;
                if (parse_int(text, n, member) && member >= 0 && member <= (1 << 24)) pg_ranks.push_back(member);
                else pg_ranks_ok = false;
                return;
            }
            case In::DistPg:
                if (key == F::DistPgRanks) pg_ranks_ok = false;
                break;
            case In::Root:   // the recording's own flags (docs/import.md): profile_memory, and its clock's base
                if (key == F::TopKey && top_key == "profile_memory") root_flag(std::string_view(text, n));
                if (key == F::TopKey && top_key == "baseTimeNanoseconds") {
                    int64_t base = 0;   // not a time the importer needs: an odd one is left unsaid, not refused
                    if (parse_int(text, n, base) && base >= 0 && base <= (INT64_C(1) << 62)) d.base_time_ns = base;
                }
                break;
            case In::Prop: {
                int64_t value = 0;
                if (key == F::DpId && parse_int(text, n, value)) dp_id = value;
                if (key == F::DpMem && field(text, n, "deviceProperties.totalGlobalMem", value, 0, kMaxBytes))
                    dp_mem = value;
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
            case F::ProfEvIdx: field(text, size, "args.Profiler Event Index", e.ev_idx, lo, hi); break;
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
    bool member_twice = false;   // `bad` is an event's member written twice (a raw name's `", "ph": `?)
    bool RawNumber(const char* text, rapidjson::SizeType n, bool) {
        not_string("a number");
        group_not_string(true);
        num(text, n);
        boundary();
        return bad.empty();
    }
    // A backspace, form feed, newline, carriage return or tab: what JSON writes as \b \f \n \r \t.
    static bool holds_letter_control(std::string_view text) {
        return text.find_first_of("\b\f\n\r\t") != std::string_view::npos;
    }
    bool String(const char* text, rapidjson::SizeType n, bool) {
        boundary();
        not_number("a string");
        if (at(In::Prop) && key == F::DpName) dp_name.assign(text, n);
        if (at(In::DistPg) && key == F::DistPgName) pg_name.assign(text, n);
        if (at(In::DistPg) && key == F::DistPgRanks) pg_ranks_ok = false;
        if (at(In::DistPgRanks)) pg_ranks_ok = false;
        if (at(In::Args) && key == F::PgName) {
            own_group_name.assign(text, n);
            e.group_name = own_group_name;
        }
        if (at(In::Args) && key == F::PgRanks) {
            own_group_ranks.assign(text, n);
            e.group_ranks = own_group_ranks;
        }
        if (at(In::Args) && key == F::ArgName) {
            if (copy_strings) {
                own_arg_name.assign(text, n);
                e.arg_name = own_arg_name;
            } else e.arg_name = {text, n};
        }
        if (at(In::Root) && key == F::TopKey && top_key == "profile_memory") root_flag({text, n});
        if (at(In::Event)) {
            switch (key) {
                case F::Ph: e.ph = n ? text[0] : 0; break;
                case F::Cat:
                    if (copy_strings) {
                        own_cat.assign(text, n);
                        e.cat = own_cat;
                    } else e.cat = {text, n};
                    break;
                case F::Name:
                    // Only the streamed parse tells `\n` from `\u000a` (kineto_repair.hpp: a name's
                    // `\n` is a Windows path's backslash): the windowed one leaves such a name to it.
                    if (!copy_strings && holds_letter_control({text, n})) return false;
                    if (copy_strings) {
                        own_name.assign(text, n);
                        e.name = own_name;
                    } else e.name = {text, n};
                    break;
                // string pids/tids ("Traces", "stream 7"): a stable number
                case F::Pid:
                    e.pid = static_cast<int64_t>(std::hash<std::string_view>{}({text, n}) >> 2);
                    // The autograd profiler's own export (before Kineto): its processes by name
                    if (std::string_view(text, n) == "CPU functions" || std::string_view(text, n) == "CUDA functions")
                        d.autograd_legacy = true;
                    break;
                case F::Tid: {
                    e.tid = static_cast<int64_t>(std::hash<std::string_view>{}({text, n}) >> 2);
                    const std::string_view tid(text, n);   // "stream 7" (PyTorch 1.9), "Stream 7" (converters)
                    int64_t stream = -1;
                    if (n > 7 && (tid.substr(0, 7) == "stream " || tid.substr(0, 7) == "Stream ") &&
                        parse_int(text + 7, n - 7, stream) && stream >= 0)
                        e.tid_stream = stream;
                } break;
                case F::Id: {   // flow ids are sometimes strings: a number when they are one
                    int64_t number = 0;
                    e.id = parse_int(text, n, number)
                               ? number
                               : static_cast<int64_t>(std::hash<std::string_view>{}({text, n}) >> 2);
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
        not_string("null");
        group_not_string();
        key = F::None;
        return bad.empty();
    }
    bool Bool(bool value) {
        boundary();
        not_number("a boolean");
        not_string("a boolean");
        group_not_string();
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

}  // namespace mhc::trace::import
