// Kineto Chrome-trace JSON -> trace: kernels, memcpy/memset, [memory] events as allocations,
// ProfilerStep#N as step markers, annotations as range markers.
#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "kineto_write.hpp"
#include "mhc/common/error.hpp"

namespace mhc::trace::import {

int64_t kineto_base(const KinetoData& d) {
    int64_t b = d.t_min;
    for (const auto& o : d.ops) b = std::min(b, o.ts);
    return b == INT64_MAX ? 0 : b;
}

void write_kineto_timeline(KinetoData& d, int64_t base, Rows& w, Result& r,
                           const std::function<void(size_t, int64_t)>& on_kernel) {
    // Kineto writes most events in time order: checking first saves sorting 100-byte structs.
    auto by_ts = [](const auto& a, const auto& b) { return a.ts < b.ts; };
    if (!std::is_sorted(d.kernels.begin(), d.kernels.end(), by_ts))
        std::stable_sort(d.kernels.begin(), d.kernels.end(), by_ts);
    // Steps from ProfilerStep#N (CPU side): a kernel belongs to the step its launch fell in.
    std::vector<const KRange*> steps;
    for (const auto& g : d.ranges)
        if (g.step >= 0) steps.push_back(&g);
    std::sort(steps.begin(), steps.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
    auto step_at = [&](int64_t t) -> int32_t {
        auto p = std::upper_bound(steps.begin(), steps.end(), t, [](int64_t v, const KRange* s) { return v < s->ts; });
        if (p == steps.begin()) return -1;
        const KRange* s = *(p - 1);
        return t <= s->ts + s->dur ? s->step : -1;
    };
    // Kernels on one stream are serial; clock jitter can make neighbours overlap by a few ns:
    // such starts are moved to the previous end (counted in meta).
    std::vector<size_t> order;
    for (size_t i = 0; i < d.kernels.size(); ++i)
        if (!d.kernels[i].is_copy && !d.kernels[i].is_memset) order.push_back(i);
    auto by_stream = [&](size_t a, size_t b) {
        const auto &x = d.kernels[a], &y = d.kernels[b];
        if (x.device != y.device) return x.device < y.device;
        if (x.stream != y.stream) return x.stream < y.stream;
        return x.ts < y.ts;
    };
    if (!std::is_sorted(order.begin(), order.end(), by_stream)) std::stable_sort(order.begin(), order.end(), by_stream);
    int64_t clamped = 0;
    for (size_t j = 1; j < order.size(); ++j) {
        auto &p = d.kernels[order[j - 1]], &k = d.kernels[order[j]];
        if (p.device != k.device || p.stream != k.stream) continue;
        if (k.ts < p.ts + p.dur) {
            int64_t end = k.ts + k.dur;
            k.ts = p.ts + p.dur;
            k.dur = std::max<int64_t>(0, end - k.ts);
            ++clamped;
        }
    }
    std::vector<int64_t> name_ids(d.strings.list.size(), -1);
    auto name = [&](uint32_t s) {
        if (name_ids[s] < 0) name_ids[s] = w.intern(d.strings.list[s]);
        return name_ids[s];
    };
    int64_t kid = 0, cid = 0, linked = 0, nkern = 0;
    for (size_t i = 0; i < d.kernels.size(); ++i) {
        const KKernel& k = d.kernels[i];
        if (k.is_copy || k.is_memset) {
            Copy c;
            c.id = ++cid;
            c.device = k.device;
            c.stream = k.stream;
            c.kind = k.copy_kind;
            c.bytes = std::max<int64_t>(0, k.bytes);
            c.t_start = k.ts - base;
            c.t_end = k.ts + k.dur - base;
            w.add(c);
            continue;
        }
        ++nkern;
        Kernel row;
        row.id = ++kid;
        row.device = k.device;
        row.stream = k.stream;
        row.name = name(k.name);
        row.t_start = k.ts - base;
        row.t_end = k.ts + k.dur - base;
        std::copy(k.grid, k.grid + 3, row.grid);
        std::copy(k.block, k.block + 3, row.block);
        row.shared_mem = k.shared_mem;
        row.registers = k.registers;
        row.correlation = k.correlation;
        int64_t launch_t = k.ts;
        auto l = d.launches.find(k.correlation);
        if (l != d.launches.end()) { launch_t = l->second.ts; ++linked; }
        else if ((l = d.flow_starts.find(k.correlation)) != d.flow_starts.end()) { launch_t = l->second.ts; ++linked; }
        row.step = step_at(launch_t);
        w.add(row);
        if (on_kernel) on_kernel(i, row.id);
    }
    int64_t mid = 0;
    for (const auto& g : d.ranges) {
        Marker m;
        m.id = ++mid;
        m.name = name(g.name);
        m.t_start = g.ts - base;
        m.t_end = g.ts + g.dur - base;
        m.kind = g.step >= 0 ? MarkerKind::Step : MarkerKind::Range;
        m.index = g.step;
        w.add(m);
    }
    r.meta["timing"] = "exact";
    r.meta["kineto.kernels"] = std::to_string(nkern);
    r.meta["kineto.copies"] = std::to_string(cid);
    r.meta["kineto.kernels_linked_to_launch"] = std::to_string(linked);
    r.meta["kineto.flow_events"] = std::to_string(d.flows);
    r.meta["kineto.step_markers"] = std::to_string(steps.size());
    r.meta["kineto.kernel_starts_clamped"] = std::to_string(clamped);
    if (!d.device_name.empty()) r.meta["device_name"] = d.device_name;
    if (d.device_memory > 0) r.meta["device_memory"] = std::to_string(d.device_memory);
}

void import_kineto(const std::string& in, Rows& w, Result& r, uint64_t max_input_size) {
    KinetoData d = parse_kineto(in, max_input_size);
    int64_t base = kineto_base(d);
    r.events = d.events;

    // [memory] events: Bytes > 0 allocates at Addr, Bytes < 0 frees it.
    auto mem_by_ts = [](const KMemory& a, const KMemory& b) { return a.ts < b.ts; };
    if (!std::is_sorted(d.memory.begin(), d.memory.end(), mem_by_ts))
        std::stable_sort(d.memory.begin(), d.memory.end(), mem_by_ts);
    struct Key {
        int32_t dev;
        int64_t addr;
        bool operator==(const Key& o) const { return dev == o.dev && addr == o.addr; }
    };
    struct KeyHash {
        size_t operator()(const Key& k) const { return std::hash<uint64_t>{}(uint64_t(k.addr) * 31u + uint64_t(k.dev)); }
    };
    // Allocations stay in memory until the end: frees set t_free here, not by UPDATEs.
    std::vector<Allocation> allocs;
    std::unordered_map<Key, size_t, KeyHash> live;   // -> index in allocs
    std::map<int32_t, int64_t> baseline, prefreed;       // per device: bytes live before the first event
    int64_t reconstructed = 0, unmatched_zero = 0;
    const int64_t pre_label = w.intern("(allocated before recording)");
    auto add = [&](int32_t dev, int64_t addr, int64_t bytes, int64_t t0, int64_t t1, int64_t label) {
        Allocation a;
        a.id = static_cast<int64_t>(allocs.size()) + 1;
        a.device = dev;
        a.address = addr;
        a.bytes = bytes;
        a.t_alloc = t0;
        a.t_free = t1;
        a.label = label;
        allocs.push_back(a);
        return allocs.size() - 1;
    };
    for (const auto& m : d.memory) {
        int64_t t = m.ts - base;
        if (!baseline.count(m.device) && m.total >= 0) baseline[m.device] = m.total - m.bytes;
        if (m.bytes > 0) {
            Key key{m.device, m.addr};
            auto it = live.find(key);
            if (it != live.end()) { allocs[it->second].t_free = t; live.erase(it); }
            live.emplace(key, add(m.device, m.addr, m.bytes, t, kNoTime, kNoString));
        } else if (m.bytes < 0) {
            auto it = live.find(Key{m.device, m.addr});
            if (it != live.end()) {
                allocs[it->second].t_free = t;
                live.erase(it);
            } else {   // allocated before the profiler started
                add(m.device, m.addr, -m.bytes, 0, t, pre_label);
                ++reconstructed;
                // Each free is at most kMaxBytes (the parser's range), their sum may not be.
                if (__builtin_add_overflow(prefreed[m.device], -m.bytes, &prefreed[m.device]))
                    throw Error(where(in, "the [memory] frees of device " + std::to_string(m.device) +
                                              " add up to more than 2^63 bytes"));
            }
        } else {
            ++unmatched_zero;
        }
    }
    // Bytes the allocator held before the first event (Total Allocated minus the event's own
    // bytes) that no free accounts for: one block alive over the whole trace, so peaks are right.
    int64_t unattributed = 0;
    for (auto& [dev, b] : baseline) {
        int64_t rest = b - prefreed[dev];
        if (rest <= 0) continue;
        add(dev, 0, rest, 0, kNoTime, w.intern("(allocated before recording, unattributed)"));
        ++reconstructed;
        if (__builtin_add_overflow(unattributed, rest, &unattributed))
            throw Error(where(in, "the bytes allocated before recording add up to more than 2^63"));
    }
    size_t copies = static_cast<size_t>(std::count_if(d.kernels.begin(), d.kernels.end(),
                                                      [](const KKernel& k) { return k.is_copy || k.is_memset; }));
    w.reserve(allocs.size(), d.kernels.size() - copies, copies);
    for (const auto& a : allocs) w.add(a);
    write_kineto_timeline(d, base, w, r, nullptr);
    r.meta["source"] = "pytorch-kineto";
    r.meta["import.format"] = "kineto";
    r.meta["import.events"] = std::to_string(d.events);
    r.meta["accesses"] = "none";   // Kineto links ops to kernels, not tensors to kernels: see docs/import.md
    r.meta["categories"] = "unknown";
    r.meta["kineto.memory_events"] = std::to_string(d.memory.size());
    r.meta["reconstructed_blocks"] = std::to_string(reconstructed);
    r.meta["reconstructed_bytes.unattributed"] = std::to_string(unattributed);
    if (d.host_memory_events)
        r.meta["kineto.host_memory_events"] = std::to_string(d.host_memory_events) +
                                              " (Device Type 0: imported on device -1, the host)";
    if (d.memory.empty()) r.meta["allocations"] = "none (the trace has no [memory] events: profile_memory=False?)";
}

}  // namespace mhc::trace::import
