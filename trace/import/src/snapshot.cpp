// PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot) -> trace.
// device_traces[d] is the event history of device d; `segments` is the allocator's end state.
// Allocations that existed before recording began show up only as a free without an alloc
// or as an allocated block in the end state: both are reconstructed as alive from t = 0.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <unordered_map>

#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/pickle.hpp"
#include "mhc/trace/import/rows.hpp"
#include "limits.hpp"
#include "segments.hpp"
#include "source.hpp"

namespace mhc::trace::import {

namespace {

using Id = PickleDoc::Id;

// Frames from PyTorch internals, the Python standard library or C++ are not "user" frames.
bool user_frame(std::string_view file) {
    if (file.empty() || file == "??") return false;
    for (std::string_view bad : {"site-packages", "dist-packages", "/torch/", "\\torch\\", "/lib/python",
                                 "<frozen", "\\Lib\\"})
        if (file.find(bad) != std::string_view::npos) return false;
    for (std::string_view ext : {".cpp", ".h", ".cc", ".cu", ".cuh", ".hpp"})
        if (file.size() >= ext.size() && file.substr(file.size() - ext.size()) == ext) return false;
    return true;
}

std::string_view basename(std::string_view f) {
    size_t p = f.find_last_of("/\\");
    return p == std::string_view::npos ? f : f.substr(p + 1);
}

// A byte per pickle node, computed once per distinct string object: CPython memoizes
// strings, so every "action" key, every "alloc" value and every file name is one node, and
// a lookup here replaces string compares per event. calloc'd: only the pages of the nodes
// looked up are ever touched. Inline ints (ids >= node count) are computed every time.
class NodeCodes {
public:
    explicit NodeCodes(size_t n) : p_(static_cast<uint8_t*>(std::calloc(n ? n : 1, 1))), n_(n) {
        if (!p_) throw std::bad_alloc();
    }
    ~NodeCodes() { std::free(p_); }
    NodeCodes(const NodeCodes&) = delete;
    NodeCodes& operator=(const NodeCodes&) = delete;
    template <class F>
    uint8_t get(Id v, F compute) {
        if (v >= n_) return compute();
        uint8_t& c = p_[v];
        if (!c) c = static_cast<uint8_t>(compute() + 1);
        return static_cast<uint8_t>(c - 1);
    }

private:
    uint8_t* p_;
    size_t n_;
};

enum KeyCode : uint8_t { kKeyOther, kKeyAction, kKeyAddr, kKeySize, kKeyStream, kKeyTimeUs, kKeyFrames, kKeyName,
                         kKeyFilename, kKeyLine };

KeyCode key_code(std::string_view k) {
    if (k == "action") return kKeyAction;
    if (k == "addr") return kKeyAddr;
    if (k == "size") return kKeySize;
    if (k == "stream") return kKeyStream;
    if (k == "time_us") return kKeyTimeUs;
    if (k == "frames") return kKeyFrames;
    if (k == "name") return kKeyName;
    if (k == "filename") return kKeyFilename;
    if (k == "line") return kKeyLine;
    return kKeyOther;
}

// Labels "forward (model.py:54)" from the innermost user frame, else the innermost frame.
// CPython memoizes repeated strings, so (name node, file node, line) identifies a label and
// the string is built and interned once per distinct frame.
class Labels {
public:
    Labels(const PickleDoc& d, Rows& w, NodeCodes& keys)
        : d_(d), w_(w), keys_(keys), user_(d.node_count()) {}
    int64_t of(std::optional<Id> frames) {
        if (!frames) return kNoString;
        auto fs = d_.items(*frames);
        std::optional<Id> pick;
        for (Id f : fs) {
            auto file = field(f, kKeyFilename);
            if (file && is_user(*file)) { pick = f; break; }
        }
        if (!pick && !fs.empty()) pick = fs.front();
        if (!pick) return kNoString;
        auto name = field(*pick, kKeyName);
        auto file = field(*pick, kKeyFilename);
        auto line = field(*pick, kKeyLine);
        Key key{name ? *name : UINT32_MAX, file ? *file : UINT32_MAX,
                line && d_.is_int(*line) ? d_.as_int(*line) : INT64_MIN};
        auto it = cache_.find(key);
        if (it != cache_.end()) return it->second;
        std::string s(name ? d_.as_str(*name) : std::string_view{});
        if (file) {
            s += " (";
            s += basename(d_.as_str(*file));
            if (key.line != INT64_MIN) {
                s += ':';
                s += std::to_string(key.line);
            }
            s += ')';
        }
        int64_t id = s.empty() ? kNoString : w_.intern(s);
        cache_.emplace(key, id);
        return id;
    }

private:
    // The value of the first `key` in dict `v` (as PickleDoc::get), by key code.
    std::optional<Id> field(Id v, KeyCode key) {
        if (d_.kind(v) != PickleDoc::Kind::Dict) return std::nullopt;
        auto kv = d_.items(v);
        for (size_t k = 0; k + 1 < kv.size(); k += 2)
            if (keys_.get(kv[k], [&] { return key_code(d_.as_str(kv[k])); }) == key &&
                d_.kind(kv[k]) == PickleDoc::Kind::Str)
                return kv[k + 1];
        return std::nullopt;
    }
    bool is_user(Id file) {
        return user_.get(file, [&] { return static_cast<uint8_t>(user_frame(d_.as_str(file))); }) != 0;
    }
    struct Key {
        Id name, file;
        int64_t line;
        bool operator==(const Key& o) const { return name == o.name && file == o.file && line == o.line; }
    };
    struct KeyHash {
        size_t operator()(const Key& k) const {
            return std::hash<uint64_t>{}(uint64_t(k.line) * 1000003u + (uint64_t(k.name) << 20) + k.file);
        }
    };
    const PickleDoc& d_;
    Rows& w_;
    NodeCodes& keys_;
    NodeCodes user_;   // file name node -> is a user frame
    std::unordered_map<Key, int64_t, KeyHash> cache_;
};

enum Action : uint8_t {
    kAlloc, kFreeRequested, kFreeCompleted, kFree, kSegAlloc, kSegFree, kSegMap, kSegUnmap, kOom, kSnapshot,
    kUnknown, kActionCount
};
const char* const kActionNames[kActionCount] = {"alloc", "free_requested", "free_completed", "free",
                                                "segment_alloc", "segment_free", "segment_map",
                                                "segment_unmap", "oom", "snapshot", "other"};

Action action_of(std::string_view a) {
    for (int i = 0; i < kUnknown; ++i)
        if (a == kActionNames[i]) return static_cast<Action>(i);
    return kUnknown;
}

// One trace entry, decoded with a single pass over its dict.
struct Event {
    Action action = kUnknown;
    bool has_action = false, timed = false;
    int64_t addr = 0, size = 0, stream = 0;
    double time_us = 0;
    std::optional<Id> frames;
};

// snapshot['allocator_settings'] (PyTorch >= 2.4) as PYTORCH_CUDA_ALLOC_CONF text, the keys the
// caching model follows: expandable_segments, max_split_size_mb, roundup_power2_divisions,
// garbage_collection_threshold. max_split_size is in bytes there (-1 or SIZE_MAX: unlimited);
// roundup_power2_divisions maps each power-of-two interval start in MiB to its divisions.
void add_allocator_settings(const PickleDoc& d, std::optional<Id> settings, std::map<std::string, std::string>& meta) {
    if (!settings || d.kind(*settings) != PickleDoc::Kind::Dict) return;
    std::string conf;
    auto put = [&](const std::string& kv) { conf += (conf.empty() ? "" : ",") + kv; };
    if (auto v = d.get(*settings, "PYTORCH_CUDA_ALLOC_CONF"); v && d.kind(*v) == PickleDoc::Kind::Str)
        meta["allocator.PYTORCH_CUDA_ALLOC_CONF"] = std::string(d.as_str(*v));
    if (auto v = d.get(*settings, "expandable_segments"); v && d.is_int(*v))
        put(std::string("expandable_segments:") + (d.as_int(*v) ? "True" : "False"));
    if (auto v = d.get(*settings, "max_split_size"); v && d.is_int(*v)) {
        int64_t b = d.as_int(*v);
        if (b > 0 && b < (int64_t{1} << 56)) put("max_split_size_mb:" + std::to_string(b >> 20));
    }
    if (auto v = d.get(*settings, "roundup_power2_divisions"); v && d.kind(*v) == PickleDoc::Kind::Dict) {
        auto kv = d.items(*v);
        std::string list;
        bool any = false;
        for (size_t i = 0; i + 1 < kv.size(); i += 2) {
            if (!d.is_int(kv[i + 1])) continue;
            int64_t n = d.as_int(kv[i + 1]);
            any |= n != 0;
            std::string key = d.kind(kv[i]) == PickleDoc::Kind::Str ? std::string(d.as_str(kv[i]))
                                                                   : std::to_string(d.as_int(kv[i]));
            list += (list.empty() ? "" : ",") + key + ":" + std::to_string(n);
        }
        if (any) put("roundup_power2_divisions:[" + list + "]");
    } else if (v && d.is_int(*v) && d.as_int(*v) > 0) {
        put("roundup_power2_divisions:" + std::to_string(d.as_int(*v)));
    }
    if (auto v = d.get(*settings, "garbage_collection_threshold"); v && d.is_number(*v) && d.as_float(*v) > 0) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", d.as_float(*v));
        put(std::string("garbage_collection_threshold:") + b);
    }
    meta["allocator.conf"] = conf;
}

// The trace time (ns) of each event of one device: 1000 x (time_us - the first time_us) + 1 + k
// for the k-th event (from 0, in the file's order) of its microsecond, or 1 + k * 1000 / n of
// n when more than 1000 share one. So the trace keeps the order in which the allocator made
// them (docs/trace-format.md "Events at one instant"), (t - 1) / 1000 is still the recorded
// microsecond, and t = 0 is before the first event: blocks allocated before recording begin
// there. Without time_us: event k (from 0) at k + 1 ns.
std::vector<int64_t> event_times(const std::vector<Event>& evs, bool all_timed, double t_min) {
    std::vector<int64_t> t(evs.size());
    if (!all_timed) {
        for (size_t k = 0; k < evs.size(); ++k) t[k] = static_cast<int64_t>(k) + 1;
        return t;
    }
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> per_us;   // us -> (events, seen so far)
    per_us.reserve(evs.size());
    for (size_t k = 0; k < evs.size(); ++k) {
        t[k] = static_cast<int64_t>(std::floor(evs[k].time_us - t_min));
        ++per_us[t[k]].first;
    }
    for (size_t k = 0; k < evs.size(); ++k) {
        auto& [n, seen] = per_us[t[k]];
        const int64_t offset = n <= 1000 ? seen : seen * 1000 / n;
        ++seen;
        t[k] = t[k] * 1000 + 1 + offset;
    }
    return t;
}

}  // namespace

void import_snapshot(const std::string& in, Rows& w, Result& r, uint64_t max_input_size) {
    FileBytes data(in, max_input_size);
    PickleDoc d(data.view(), in);
    Id root = d.root();
    if (d.kind(root) != PickleDoc::Kind::Dict)
        throw Error(where(in, "not a PyTorch memory snapshot: the pickle holds no dict with "
                              "'segments' and 'device_traces'"));
    auto traces = d.get(root, "device_traces");
    auto segments = d.get(root, "segments");
    if (!traces || d.kind(*traces) != PickleDoc::Kind::List)
        throw Error(where(in, "snapshot has no 'device_traces': record it with "
                              "torch.cuda.memory._record_memory_history() before _dump_snapshot()"));

    // Decode every event once. Keys and action strings are memo-shared objects: their codes
    // are looked up per node, not per event.
    NodeCodes keys(d.node_count()), actions(d.node_count());
    std::vector<std::vector<Event>> devices;
    int64_t events = 0;
    bool all_timed = true;
    double t_min = 0;
    bool have_t = false;
    for (Id dev : d.items(*traces)) {
        auto& evs = devices.emplace_back();
        evs.reserve(d.size(dev));
        for (Id e : d.items(dev)) {
            Event ev;
            auto kv = d.items(e);
            for (size_t i = 0; i + 1 < kv.size(); i += 2) {
                Id k = kv[i], v = kv[i + 1];
                switch (keys.get(k, [&] { return key_code(d.as_str(k)); })) {
                    case kKeyAction:
                        if (d.kind(v) == PickleDoc::Kind::Str) {
                            ev.action = static_cast<Action>(actions.get(v, [&] { return action_of(d.as_str(v)); }));
                            ev.has_action = true;
                        }
                        break;
                    case kKeyAddr:
                        if (d.is_int(v)) ev.addr = d.as_int(v);
                        break;
                    case kKeySize:
                        if (d.is_int(v)) ev.size = d.as_int(v);
                        if (ev.size < 0 || ev.size > kMaxBytes)
                            throw Error(where(in, "device_traces[" + std::to_string(devices.size() - 1) + "][" +
                                                      std::to_string(evs.size()) + "]: size " + std::to_string(ev.size) +
                                                      " is out of range"));
                        break;
                    case kKeyStream:
                        if (d.is_int(v)) ev.stream = d.as_int(v);
                        break;
                    case kKeyTimeUs:
                        if (d.is_number(v)) {
                            ev.time_us = d.as_float(v);
                            // |t| <= 4e15 us keeps differences * 1000 inside int64 nanoseconds.
                            if (!(std::fabs(ev.time_us) <= 4e15))
                                throw Error(where(in, "device_traces[" + std::to_string(devices.size() - 1) + "][" +
                                                          std::to_string(evs.size()) + "]: time_us is out of range"));
                            ev.timed = true;
                        }
                        break;
                    case kKeyFrames: ev.frames = v; break;
                    default: break;
                }
            }
            if (!ev.has_action)
                throw Error(where(in, "device_traces[" + std::to_string(devices.size() - 1) + "][" +
                                          std::to_string(evs.size()) + "]: event has no 'action'"));
            if (ev.timed) {
                t_min = have_t ? std::min(t_min, ev.time_us) : ev.time_us;
                have_t = true;
            } else {
                all_timed = false;
            }
            evs.push_back(ev);
            ++events;
        }
    }
    if (events == 0)
        throw Error(where(in, "snapshot has no trace events (device_traces is empty): record it with "
                              "torch.cuda.memory._record_memory_history() before _dump_snapshot()"));

    // Allocations are kept here until the end so that frees set t_free in memory, not by
    // UPDATEs in the file; rows go out in id order.
    std::vector<Allocation> allocs;
    {
        // At most one row per alloc or free event (plus the end-state blocks): reserved once
        // instead of regrown (each regrowth copies and touches fresh pages).
        size_t upper = 0;
        for (const auto& evs : devices)
            for (const Event& e : evs)
                upper += e.action == kAlloc || e.action == kFree || e.action == kFreeCompleted || e.action == kFreeRequested;
        allocs.reserve(upper + 64);
    }
    Labels labels(d, w, keys);
    // Sizes are at most kMaxBytes each; sums of many may still pass int64.
    auto add_bytes = [&](int64_t& sum, int64_t v) {
        if (__builtin_add_overflow(sum, v, &sum)) throw Error(where(in, "sizes add up to more than 2^63 bytes"));
    };
    const int64_t pre_label = w.intern("(allocated before recording)");
    int64_t reconstructed = 0, reconstructed_bytes = 0, freed_unknown = 0, ooms = 0;
    int64_t segment_events = 0, reserved_peak_total = 0;
    int64_t action_counts[kActionCount] = {};
    SegmentLog seglog(in);
    std::vector<std::unordered_map<int64_t, size_t>> live_by_dev(devices.size());
    std::vector<std::unordered_map<int64_t, int64_t>> last_free_by_dev(devices.size());
    for (size_t dev = 0; dev < devices.size(); ++dev) {
        const auto& evs = devices[dev];
        auto& live = live_by_dev[dev];
        auto& last_free = last_free_by_dev[dev];
        live.reserve(1024);
        last_free.reserve(static_cast<size_t>(std::count_if(evs.begin(), evs.end(), [](const Event& e) {
            return e.action == kFree || e.action == kFreeCompleted || e.action == kFreeRequested;
        })));
        // Snapshots record free_completed when the block really returns to the allocator; very
        // old ones have only 'free'. free_requested marks the end only where nothing else does.
        bool has_completed = std::any_of(evs.begin(), evs.end(), [](const Event& e) { return e.action == kFreeCompleted; });
        int64_t reserved = 0, reserved_peak = 0;
        const std::vector<int64_t> times = event_times(evs, all_timed, t_min);
        for (size_t k = 0; k < evs.size(); ++k) {
            const Event& e = evs[k];
            ++action_counts[e.action];
            const int64_t t = times[k];
            auto bad = [&](const char* what) {
                return Error(where(in, "device_traces[" + std::to_string(dev) + "][" + std::to_string(k) + "] (" +
                                           kActionNames[e.action] + "): " + what));
            };
            switch (e.action) {
                case kAlloc: {
                    if (e.size <= 0) throw bad("size is missing or not positive");
                    auto it = live.find(e.addr);
                    if (it != live.end()) {   // a free we never saw: end the old block here
                        allocs[it->second].t_free = t;
                        live.erase(it);
                    }
                    Allocation al;
                    al.id = static_cast<int64_t>(allocs.size()) + 1;
                    al.device = static_cast<int32_t>(dev);
                    al.address = e.addr;
                    al.bytes = e.size;
                    al.t_alloc = t;
                    al.stream = e.stream;
                    al.label = labels.of(e.frames);
                    live.emplace(e.addr, allocs.size());
                    allocs.push_back(al);
                    break;
                }
                case kFreeRequested:
                    if (has_completed) break;   // the block returns at free_completed
                    [[fallthrough]];
                case kFreeCompleted:
                case kFree: {
                    auto it = live.find(e.addr);
                    if (it != live.end()) {
                        allocs[it->second].t_free = t;
                        live.erase(it);
                    } else {
                        // Allocated before recording began: alive from the start until now.
                        if (e.size <= 0) throw bad("frees an unknown block of unknown size");
                        Allocation al;
                        al.id = static_cast<int64_t>(allocs.size()) + 1;
                        al.device = static_cast<int32_t>(dev);
                        al.address = e.addr;
                        al.bytes = e.size;
                        al.t_alloc = 0;
                        al.t_free = t;
                        al.stream = e.stream;
                        al.label = pre_label;
                        allocs.push_back(al);
                        ++reconstructed;
                        ++freed_unknown;
                        add_bytes(reconstructed_bytes, e.size);
                    }
                    last_free[e.addr] = t;
                    break;
                }
                case kSegAlloc:
                case kSegMap:
                    ++segment_events;
                    seglog.alloc(static_cast<int32_t>(dev), k, kActionNames[e.action], t, e.addr, e.size, e.stream,
                                 e.action == kSegMap);
                    add_bytes(reserved, e.size);
                    reserved_peak = std::max(reserved_peak, reserved);
                    break;
                case kSegFree:
                case kSegUnmap:
                    ++segment_events;
                    seglog.free(static_cast<int32_t>(dev), k, kActionNames[e.action], t, e.addr, e.size, e.stream,
                                e.action == kSegUnmap);
                    reserved -= e.size;
                    break;
                case kOom: {
                    Marker m;
                    m.id = ++ooms;
                    m.name = w.intern("oom: " + std::to_string(e.size) + " bytes requested");
                    m.t_start = m.t_end = t;
                    m.kind = MarkerKind::Range;
                    w.add(m);
                    break;
                }
                default: break;
            }
        }
        add_bytes(reserved_peak_total, reserved_peak);
    }
    r.events = events;

    // End state: blocks allocated at the end that no trace event accounts for.
    int64_t end_blocks = 0, end_segments = 0;
    if (segments && d.kind(*segments) == PickleDoc::Kind::List) {
        for (Id seg : d.items(*segments)) {
            auto dv = d.get(seg, "device");
            int32_t dev = dv && d.is_int(*dv) ? static_cast<int32_t>(d.as_int(*dv)) : 0;
            auto st = d.get(seg, "stream");
            {
                // The segment itself: what the trace's live segments do not cover began before recording.
                auto sa = d.get(seg, "address");
                auto sz = d.get(seg, "total_size");
                auto ex = d.get(seg, "is_expandable");
                if (sa && sz && d.is_int(*sa) && d.is_int(*sz)) {
                    if (d.as_int(*sz) > kMaxBytes)
                        throw Error(where(in, "segments[" + std::to_string(end_segments) + "]: total_size " +
                                                  std::to_string(d.as_int(*sz)) + " is out of range"));
                    seglog.end_state(static_cast<size_t>(end_segments), dev, d.as_int(*sa), d.as_int(*sz),
                                     st && d.is_int(*st) ? d.as_int(*st) : 0, ex && d.is_int(*ex) && d.as_int(*ex) != 0);
                }
                ++end_segments;
            }
            auto blocks = d.get(seg, "blocks");
            if (!blocks) continue;
            for (Id b : d.items(*blocks)) {
                auto state = d.get(b, "state");
                auto addr_v = d.get(b, "address");
                auto size_v = d.get(b, "size");
                if (!state || !addr_v || !size_v || !d.is_int(*addr_v) || !d.is_int(*size_v)) continue;
                std::string_view s = d.as_str(*state);
                if (s != "active_allocated" && s != "active_pending_free") continue;
                ++end_blocks;
                int64_t addr = d.as_int(*addr_v), size = d.as_int(*size_v);
                bool known_dev = dev >= 0 && static_cast<size_t>(dev) < live_by_dev.size();
                if ((known_dev && live_by_dev[dev].count(addr)) || size <= 0) continue;
                if (size > kMaxBytes) throw Error(where(in, "segments: a block of " + std::to_string(size) + " bytes is out of range"));
                Allocation al;
                al.id = static_cast<int64_t>(allocs.size()) + 1;
                al.device = dev;
                al.address = addr;
                al.bytes = size;
                // Alive from the start, or from the last free at its address if the trace saw one.
                al.t_alloc = 0;
                if (known_dev) {
                    auto lf = last_free_by_dev[dev].find(addr);
                    if (lf != last_free_by_dev[dev].end()) al.t_alloc = lf->second;
                }
                al.stream = st && d.is_int(*st) ? d.as_int(*st) : 0;
                int64_t label = labels.of(d.get(b, "frames"));
                al.label = label == kNoString ? pre_label : label;
                allocs.push_back(al);
                ++reconstructed;
                add_bytes(reconstructed_bytes, size);
            }
        }
    }
    w.reserve(allocs.size());
    for (const auto& a : allocs) w.add(a);
    std::vector<Segment> segment_rows = seglog.take();
    for (const auto& g : segment_rows) w.add(g);
    add_allocator_settings(d, d.get(root, "allocator_settings"), r.meta);

    std::string act_list;
    for (int i = 0; i < kActionCount; ++i)
        if (action_counts[i]) {
            if (!act_list.empty()) act_list += ", ";
            act_list += kActionNames[i];
            act_list += '=';
            act_list += std::to_string(action_counts[i]);
        }
    r.meta["source"] = "pytorch-memory-snapshot";
    r.meta["import.format"] = "snapshot";
    r.meta["import.events"] = std::to_string(events);
    r.meta["import.actions"] = act_list;
    r.meta["accesses"] = "none";   // snapshots hold no kernels
    r.meta["kernels"] = "none";
    r.meta["timing"] = all_timed ? "exact" : "order-only";
    r.meta["categories"] = "unknown";
    r.meta["labels"] = "top user stack frame";
    r.meta["reconstructed_blocks"] = std::to_string(reconstructed);
    r.meta["reconstructed_blocks.freed_during_trace"] = std::to_string(freed_unknown);
    r.meta["reconstructed_bytes"] = std::to_string(reconstructed_bytes);
    r.meta["snapshot.end_state_allocated_blocks"] = std::to_string(end_blocks);
    r.meta["snapshot.segment_events"] = std::to_string(segment_events);
    r.meta["snapshot.reserved_peak_from_segment_events"] = std::to_string(reserved_peak_total);
    r.meta["snapshot.oom_events"] = std::to_string(ooms);
    r.meta["segments"] = std::to_string(segment_rows.size()) + " rows (segment events and end state)";
    r.meta["segments.reconstructed"] = std::to_string(seglog.reconstructed);
    if (seglog.live_not_in_end_state)
        r.meta["segments.live_not_in_end_state"] = std::to_string(seglog.live_not_in_end_state);
    r.meta["snapshot.devices"] = std::to_string(devices.size());
    if (action_counts[kUnknown]) r.meta["snapshot.unknown_actions"] = std::to_string(action_counts[kUnknown]);
}

}  // namespace mhc::trace::import
