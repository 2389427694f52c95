// PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot) -> trace.
// device_traces[d] is the event history of device d; `segments` is the allocator's end state.
// Allocations that existed before recording began show up only as a free without an alloc
// or as an allocated block in the end state: both are reconstructed as alive from t = 0.
#include <algorithm>
#include <unordered_map>

#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/pickle.hpp"
#include "mhc/trace/store.hpp"
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

// "forward (model.py:54)" from the innermost user frame, else the innermost frame.
std::string frame_label(const PickleDoc& d, std::optional<Id> frames) {
    if (!frames) return {};
    const auto& fs = d.items(*frames);
    std::optional<Id> pick;
    for (Id f : fs) {
        auto file = d.get(f, "filename");
        if (file && user_frame(d.as_str(*file))) { pick = f; break; }
    }
    if (!pick && !fs.empty()) pick = fs.front();
    if (!pick) return {};
    auto name = d.get(*pick, "name");
    auto file = d.get(*pick, "filename");
    auto line = d.get(*pick, "line");
    std::string s(name ? d.as_str(*name) : std::string_view{});
    if (file) {
        s += " (";
        s += basename(d.as_str(*file));
        if (line && d.is_int(*line)) {
            s += ':';
            s += std::to_string(d.as_int(*line));
        }
        s += ")";
    }
    return s;
}

struct Live {
    int64_t id, bytes;
};

}  // namespace

void import_snapshot(const std::string& in, Writer& w, Result& r) {
    std::string data = read_all(in);
    PickleDoc d(data, in);
    Id root = d.root();
    if (d.kind(root) != PickleDoc::Kind::Dict)
        throw Error(where(in, "not a PyTorch memory snapshot: the pickle holds no dict with "
                              "'segments' and 'device_traces'"));
    auto traces = d.get(root, "device_traces");
    auto segments = d.get(root, "segments");
    if (!traces || d.kind(*traces) != PickleDoc::Kind::List)
        throw Error(where(in, "snapshot has no 'device_traces': record it with "
                              "torch.cuda.memory._record_memory_history() before _dump_snapshot()"));
    int64_t events = 0;
    bool all_timed = true;
    int64_t t_min = INT64_MAX;
    for (Id dev : d.items(*traces))
        for (Id e : d.items(dev)) {
            ++events;
            auto t = d.get(e, "time_us");
            if (t && d.is_number(*t)) t_min = std::min<int64_t>(t_min, static_cast<int64_t>(d.as_float(*t)));
            else all_timed = false;
        }
    if (events == 0)
        throw Error(where(in, "snapshot has no trace events (device_traces is empty): record it with "
                              "torch.cuda.memory._record_memory_history() before _dump_snapshot()"));

    // Snapshots record free_completed when the block really returns to the allocator; very
    // old ones have only 'free'. free_requested marks the end only where nothing else does.
    int64_t next_id = 1, reconstructed = 0, reconstructed_bytes = 0, freed_unknown = 0, ooms = 0;
    int64_t segment_events = 0, unknown_actions = 0, reserved_peak_total = 0;
    std::map<std::string, int64_t> actions;
    int32_t dev_index = -1;
    std::vector<std::unordered_map<int64_t, Live>> live_by_dev;
    std::vector<std::unordered_map<int64_t, int64_t>> last_free_by_dev;
    for (Id dev : d.items(*traces)) {
        ++dev_index;
        live_by_dev.emplace_back();
        last_free_by_dev.emplace_back();
        auto& live = live_by_dev.back();
        auto& last_free = last_free_by_dev.back();
        bool has_completed = false;
        for (Id e : d.items(dev)) {
            auto a = d.get(e, "action");
            if (a && d.as_str(*a) == "free_completed") { has_completed = true; break; }
        }
        int64_t k = 0, reserved = 0, reserved_peak = 0;
        for (Id e : d.items(dev)) {
            ++k;
            auto act = d.get(e, "action");
            if (!act || d.kind(*act) != PickleDoc::Kind::Str)
                throw Error(where(in, "device_traces[" + std::to_string(dev_index) + "][" +
                                          std::to_string(k - 1) + "]: event has no 'action'"));
            std::string_view action = d.as_str(*act);
            ++actions[std::string(action)];
            int64_t t = k;   // order only: one nanosecond per event
            if (all_timed) {
                auto tu = d.get(e, "time_us");
                t = (static_cast<int64_t>(d.as_float(*tu)) - t_min) * 1000;
            }
            auto addr_v = d.get(e, "addr");
            auto size_v = d.get(e, "size");
            int64_t addr = addr_v && d.is_int(*addr_v) ? d.as_int(*addr_v) : 0;
            int64_t size = size_v && d.is_int(*size_v) ? d.as_int(*size_v) : 0;
            auto bad = [&](const char* what) {
                return Error(where(in, "device_traces[" + std::to_string(dev_index) + "][" +
                                           std::to_string(k - 1) + "] (" + std::string(action) + "): " + what));
            };
            if (action == "alloc") {
                if (size <= 0) throw bad("size is missing or not positive");
                auto it = live.find(addr);
                if (it != live.end()) {   // a free we never saw: end the old block here
                    w.set_free_time(it->second.id, t);
                    live.erase(it);
                }
                Allocation al;
                al.id = next_id++;
                al.device = dev_index;
                al.address = addr;
                al.bytes = size;
                al.t_alloc = t;
                auto st = d.get(e, "stream");
                al.stream = st && d.is_int(*st) ? d.as_int(*st) : 0;
                std::string label = frame_label(d, d.get(e, "frames"));
                al.label = label.empty() ? kNoString : w.intern(label);
                w.add(al);
                live.emplace(addr, Live{al.id, size});
            } else if (action == "free_completed" || action == "free" ||
                       (action == "free_requested" && !has_completed)) {
                auto it = live.find(addr);
                if (it != live.end()) {
                    w.set_free_time(it->second.id, t);
                    live.erase(it);
                } else {
                    // Allocated before recording began: alive from the start until now.
                    if (size <= 0) throw bad("frees an unknown block of unknown size");
                    Allocation al;
                    al.id = next_id++;
                    al.device = dev_index;
                    al.address = addr;
                    al.bytes = size;
                    al.t_alloc = 0;
                    al.t_free = t;
                    al.label = w.intern("(allocated before recording)");
                    w.add(al);
                    ++reconstructed;
                    ++freed_unknown;
                    reconstructed_bytes += size;
                }
                last_free[addr] = t;
            } else if (action == "free_requested") {
                // the block returns to the allocator at free_completed
            } else if (action == "segment_alloc" || action == "segment_map") {
                ++segment_events;
                reserved += size;
                reserved_peak = std::max(reserved_peak, reserved);
            } else if (action == "segment_free" || action == "segment_unmap") {
                ++segment_events;
                reserved -= size;
            } else if (action == "oom") {
                Marker m;
                m.id = ++ooms;
                m.name = w.intern("oom: " + std::to_string(size) + " bytes requested");
                m.t_start = m.t_end = t;
                m.kind = MarkerKind::Range;
                w.add(m);
            } else if (action != "snapshot") {
                ++unknown_actions;
            }
        }
        reserved_peak_total += reserved_peak;
    }
    r.events = events;

    // End state: blocks allocated at the end that no trace event accounts for.
    int64_t end_blocks = 0;
    if (segments && d.kind(*segments) == PickleDoc::Kind::List) {
        for (Id seg : d.items(*segments)) {
            auto dv = d.get(seg, "device");
            int32_t dev = dv && d.is_int(*dv) ? static_cast<int32_t>(d.as_int(*dv)) : 0;
            auto st = d.get(seg, "stream");
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
                if (dev >= 0 && static_cast<size_t>(dev) < live_by_dev.size() && live_by_dev[dev].count(addr))
                    continue;
                if (size <= 0) continue;
                Allocation al;
                al.id = next_id++;
                al.device = dev;
                al.address = addr;
                al.bytes = size;
                // Alive from the start, or from the last free at its address if the trace saw one.
                al.t_alloc = 0;
                if (dev >= 0 && static_cast<size_t>(dev) < last_free_by_dev.size()) {
                    auto lf = last_free_by_dev[dev].find(addr);
                    if (lf != last_free_by_dev[dev].end()) al.t_alloc = lf->second;
                }
                al.stream = st && d.is_int(*st) ? d.as_int(*st) : 0;
                std::string label = frame_label(d, d.get(b, "frames"));
                al.label = w.intern(label.empty() ? "(allocated before recording)" : label);
                w.add(al);
                ++reconstructed;
                reconstructed_bytes += size;
            }
        }
    }

    std::string act_list;
    for (auto& [a, c] : actions) act_list += (act_list.empty() ? "" : ", ") + a + "=" + std::to_string(c);
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
    r.meta["snapshot.devices"] = std::to_string(live_by_dev.size());
    if (unknown_actions) r.meta["snapshot.unknown_actions"] = std::to_string(unknown_actions);
}

}  // namespace mhc::trace::import
