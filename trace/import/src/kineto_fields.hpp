#pragma once
// The keys of a Kineto trace the tokenizer reads (kineto_handler.hpp): each as a field (F), its
// name as the file writes it (for messages), and the lookups from a key's text to its field.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mhc::trace::import {

// The top-level list of the GPUs: deviceProperties, or computeProperties in Kineto's traces of
// early 2021 (PyTorch 1.9 pre-releases; the same entries: id, name, totalGlobalMem).
inline bool is_device_list(std::string_view key) { return key == "deviceProperties" || key == "computeProperties"; }

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
    ProfEvIdx,   // PyTorch 1.13's name of Ev Idx, "Profiler Event Index"
    SeqNr,
    SyclQueue,
    InDevice,
    ArgName,   // args.name (a metadata event's process name)
    PgName,    // args.Process Group Name (an NCCL kernel's process group, PyTorch 2.x)
    PgRanks,   // args.Process Group Ranks ("[0, 1]": its members' global ranks)
    // deviceProperties
    DpId,
    DpName,
    DpMem,
    // distributedInfo
    DistRank,
    DistWorld,
    DistPgConfig,   // distributedInfo.pg_config: every process group of the job
    DistPgName,     // pg_config[i].pg_name
    DistPgRanks,    // pg_config[i].ranks
    TopKey,   // a key of the root object was just read (its name in Handler::top_key)
    Count,    // how many there are (a bit each in Handler::seen_keys)
};
static_assert(static_cast<unsigned>(F::Count) <= 64, "Handler::seen_keys holds a bit per field");

// The name of a field the mapping reads, as the file writes it (for messages).
inline const char* field_name(F key) {
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
        case F::ProfEvIdx: return "args.Profiler Event Index";
        case F::SeqNr: return "args.Sequence number";
        case F::SyclQueue: return "args.sycl queue";
        case F::InDevice: return "args.inDevice";
        case F::ArgName: return "args.name";
        case F::PgName: return "args.Process Group Name";
        case F::PgRanks: return "args.Process Group Ranks";
        default: return "a field";
    }
}

// The top-level members the tokenizer reads (the others are skipped whole).
inline bool is_read_top_key(std::string_view key) {
    return key == "traceEvents" || is_device_list(key) || key == "distributedInfo" || key == "profile_memory" ||
           key == "baseTimeNanoseconds";
}

// Key lookups switch on length first: they run for every key of every event.
inline F event_key(const char* key, size_t n) {
    std::string_view text(key, n);
    switch (n) {
        case 2: return text == "ph" ? F::Ph : text == "ts" ? F::Ts : text == "id" ? F::Id : F::None;
        case 3:
            return text == "cat"   ? F::Cat
                   : text == "pid" ? F::Pid
                   : text == "tid" ? F::Tid
                   : text == "dur" ? F::Dur
                                   : F::None;
        case 4: return text == "name" ? F::Name : text == "args" ? F::Args : F::None;
        default: return F::None;
    }
}

inline F arg_key(const char* key, size_t n) {
    std::string_view text(key, n);
    switch (n) {
        case 4: return text == "grid" ? F::Grid : text == "Addr" ? F::Addr : text == "name" ? F::ArgName : F::None;
        case 5:
            return text == "bytes" ? F::Bytes : text == "Bytes" ? F::MemBytes : text == "block" ? F::Block : F::None;
        case 6:
            return text == "device" ? F::Device : text == "stream" ? F::Stream : text == "Ev Idx" ? F::EvIdx : F::None;
        case 8: return text == "inDevice" ? F::InDevice : F::None;
        case 9: return text == "Device Id" ? F::DevId : F::None;
        case 10: return text == "sycl queue" ? F::SyclQueue : F::None;
        case 11:
            return text == "correlation"   ? F::Corr
                   : text == "External id" ? F::ExtId
                   : text == "Device Type" ? F::DevType
                                           : F::None;
        case 13: return text == "shared memory" ? F::Smem : F::None;
        case 14: return text == "Total Reserved" ? F::Reserved : F::None;
        case 15: return text == "Total Allocated" ? F::Total : text == "Sequence number" ? F::SeqNr : F::None;
        case 18: return text == "Record function id" ? F::RfId : text == "Process Group Name" ? F::PgName : F::None;
        case 19: return text == "Process Group Ranks" ? F::PgRanks : F::None;
        case 20:
            return text == "registers per thread"   ? F::Regs
                   : text == "Profiler Event Index" ? F::ProfEvIdx
                                                    : F::None;
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

// The members of an event in Chrome's trace event format, which a Kineto trace's events hold: the
// index of `key` among them, or -1.
inline int event_member(std::string_view key) {
    static constexpr std::string_view kMembers[] = {"ph",   "pid", "tid", "ts", "dur", "tts",   "tdur",  "cat",    "name",
                                                    "args", "id",  "id2", "s",  "bp",  "cname", "scope", "bind_id"};
    for (size_t i = 0; i < sizeof kMembers / sizeof kMembers[0]; ++i)
        if (key == kMembers[i]) return static_cast<int>(i);
    return -1;
}

}  // namespace mhc::trace::import
