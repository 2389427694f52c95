#include "mhc/record/translator.hpp"

#include <algorithm>
#include <climits>
#include <deque>
#include <numeric>
#include <set>

#include "mhc/record/markers.hpp"

namespace mhc::record {

namespace {
// Allocations at one address still waiting for their activity records (the oldest are dropped
// beyond this many: records that never came).
constexpr size_t kHistoryPerAddress = 4096;
// Calls whose activity record has not come yet, by correlation id (forgotten beyond this many).
constexpr size_t kMaxPendingCorrelations = size_t{1} << 22;
// Launches whose kernel record never came (dropped, or a launch that failed) are
// forgotten beyond this many, oldest slots first reused.
constexpr size_t kMaxPendingLaunches = size_t{1} << 22;

const char* sync_name(uint32_t type) {
    switch (type) {
        case 1: return "cuda-sync:event";
        case 2: return "cuda-sync:stream-wait-event";
        case 3: return "cuda-sync:stream";
        case 4: return "cuda-sync:context";
        default: return "cuda-sync";
    }
}
}  // namespace

Translator::Translator(trace::Writer& writer, TranslatorOptions options)
    : w_(writer), opt_(options), origin_(options.origin) {}

int64_t Translator::rel(uint64_t t) {
    auto raw = static_cast<int64_t>(t);
    if (origin_ < 0) origin_ = raw;
    if (raw < origin_) {
        ++stats_.times_clamped;
        return 0;
    }
    int64_t r = raw - origin_;
    stats_.last_time = std::max(stats_.last_time, r);
    return r;
}

void Translator::remember(uint64_t address, int64_t id) {
    // The allocations at this address still waiting for their allocation record and for their
    // release record (the pool reuses a hot address hundreds of times before CUPTI hands over a
    // buffer). Records come oldest first, so the answered ones are dropped from the front.
    Pending& pending = history_[address];
    auto push = [](std::deque<int64_t>& ids, int64_t add, auto answered) {
        while (!ids.empty() && answered(ids.front())) ids.pop_front();
        if (ids.size() >= kHistoryPerAddress) ids.pop_front();   // records that never came
        ids.push_back(add);
    };
    const Held& held = allocs_[static_cast<size_t>(id - 1)];
    if (!held.activity_alloc)
        push(pending.alloc, id, [this](int64_t old) { return allocs_[static_cast<size_t>(old - 1)].activity_alloc; });
    push(pending.release, id, [this](int64_t old) { return allocs_[static_cast<size_t>(old - 1)].activity_release; });
}

void Translator::expect_record(bool release, uint32_t corr, uint32_t runtime_corr, int64_t id) {
    auto& by_corr = release ? free_corr_ : alloc_corr_;
    if (by_corr.size() >= kMaxPendingCorrelations) by_corr.clear();   // records that never came
    Held& held = allocs_[static_cast<size_t>(id - 1)];
    uint32_t* keys = release ? held.free_keys : held.alloc_keys;
    keys[0] = corr;
    keys[1] = runtime_corr != corr ? runtime_corr : 0;
    for (int i = 0; i < 2; ++i)
        if (keys[i] != 0) by_corr[keys[i]] = id;
}

int64_t Translator::take_record(bool release, uint32_t corr, uint64_t address, uint32_t device) {
    if (corr == 0) return -1;
    auto& by_corr = release ? free_corr_ : alloc_corr_;
    auto it = by_corr.find(corr);
    if (it == by_corr.end()) return -1;
    const int64_t id = it->second;
    const Held& held = allocs_[static_cast<size_t>(id - 1)];
    if (held.row.address != static_cast<int64_t>(address) || held.row.device != static_cast<int32_t>(device)) return -1;
    forget_keys(release, id);
    ++stats_.activity_by_correlation;
    return id;
}

void Translator::forget_keys(bool release, int64_t id) {
    auto& by_corr = release ? free_corr_ : alloc_corr_;
    Held& held = allocs_[static_cast<size_t>(id - 1)];
    for (uint32_t& key : release ? held.free_keys : held.alloc_keys) {   // the driver's and the runtime's id
        auto it = key != 0 ? by_corr.find(key) : by_corr.end();
        if (it != by_corr.end() && it->second == id) by_corr.erase(it);
        key = 0;
    }
}

// An activity record of an allocation a driver callback already reported: by the call's
// correlation id, else the oldest allocation at that address still waiting for its record whose
// host lifetime (with the slack) holds the record's time.
int64_t Translator::find_alloc_of(const AllocEvent& record, int64_t time) {
    const int64_t id = take_record(false, record.correlation, record.address, record.device);
    if (id >= 0) return id;
    auto it = history_.find(record.address);
    if (it == history_.end()) return -1;
    const auto slack = static_cast<int64_t>(opt_.match_slack_ns);
    for (int64_t cand : it->second.alloc) {
        const Held& held = allocs_[static_cast<size_t>(cand - 1)];
        if (held.source == AllocSource::Activity || held.activity_alloc ||
            held.row.device != static_cast<int32_t>(record.device))
            continue;
        if (time >= held.t_enter - slack && (!held.freed || time <= held.row.t_free + slack)) {
            forget_keys(false, cand);
            return cand;
        }
    }
    return -1;
}

// The same for a release record: the allocation whose free it reports.
int64_t Translator::find_release_of(const FreeEvent& record, int64_t time) {
    const int64_t id = take_record(true, record.correlation, record.address, record.device);
    if (id >= 0) return id;
    auto it = history_.find(record.address);
    if (it == history_.end()) return -1;
    const auto slack = static_cast<int64_t>(opt_.match_slack_ns);
    for (int64_t cand : it->second.release) {
        const Held& held = allocs_[static_cast<size_t>(cand - 1)];
        if (held.activity_release || held.row.device != static_cast<int32_t>(record.device)) continue;
        if (time < held.t_enter - slack) continue;
        if (held.freed && time > held.row.t_free + slack) continue;
        forget_keys(true, cand);
        return cand;
    }
    return -1;
}

int64_t Translator::new_allocation(const AllocEvent& e, int64_t t) {
    Held h;
    h.row.id = static_cast<int64_t>(allocs_.size()) + 1;
    h.row.device = static_cast<int32_t>(e.device);
    h.row.address = static_cast<int64_t>(e.address);
    h.row.bytes = static_cast<int64_t>(e.bytes);
    h.row.t_alloc = t;
    h.t_call = t;
    h.row.stream = static_cast<int64_t>(e.stream);
    h.row.category = trace::Category::Other;   // the driver cannot tell tensor roles
    std::string label(e.api);
    if (e.pool && label.find("pool") == std::string::npos) label += " (pool)";
    h.row.label = w_.intern(label);
    // Matching window only: may lie before the origin, so it is not clamped.
    h.t_enter = e.t_enter ? std::min(static_cast<int64_t>(e.t_enter) - origin_, t) : t;
    h.source = e.source;
    h.pool = e.pool;
    h.static_memory = e.static_memory;
    if (e.static_memory) ++stats_.static_allocations;
    h.activity_alloc = e.source == AllocSource::Activity;
    allocs_.push_back(h);
    ++stats_.allocations;
    switch (e.source) {
        case AllocSource::Driver: ++stats_.allocations_driver; break;
        case AllocSource::Activity: ++stats_.allocations_activity; break;
        case AllocSource::Vmm: ++stats_.allocations_vmm; break;
    }
    return h.row.id;
}

void Translator::free_held(Held& h, int64_t t) {
    h.freed = true;
    h.row.t_free = std::max(t, h.row.t_alloc);
}

void Translator::on_alloc(const AllocEvent& e) {
    if (e.bytes == 0 || e.address == 0) {
        ++stats_.zero_size;
        return;
    }
    const int64_t t = rel(e.t);
    auto layer = e.source == AllocSource::Vmm ? LiveMap::Layer::Vmm : LiveMap::Layer::Fine;

    if (e.source == AllocSource::Activity) {
        const int64_t seen = find_alloc_of(e, t);
        if (seen >= 0) {
            Held& held = allocs_[static_cast<size_t>(seen - 1)];
            held.activity_alloc = true;
            if (held.row.stream == 0) held.row.stream = static_cast<int64_t>(e.stream);
            ++stats_.activity_merged;
            return;
        }
        // Activity arrives late: a driver allocation made later at this address may already
        // be live. Then this one is history and stays out of the live map.
        int64_t cur = live_.at(e.address, layer);
        if (cur >= 0 && allocs_[static_cast<size_t>(cur - 1)].row.t_alloc > t) {
            int64_t id = new_allocation(e, t);
            remember(e.address, id);
            return;
        }
    }
    int64_t id = new_allocation(e, t);
    int64_t old = live_.insert(e.address, e.bytes, id, layer);
    if (old >= 0) {
        Held& o = allocs_[static_cast<size_t>(old - 1)];
        if (!o.freed) {
            free_held(o, t);
            ++stats_.implicit_frees;
        }
    }
    // A callback's allocation (cuMemAlloc*, or a cuMemMap mapping) waits for its activity record.
    if (e.source != AllocSource::Activity) expect_record(false, e.correlation, e.runtime_correlation, id);
    remember(e.address, id);
}

void Translator::on_free(const FreeEvent& e) {
    if (e.address == 0) return;   // cudaFree(nullptr)
    const int64_t t = rel(e.t);
    if (e.source == AllocSource::Vmm) {
        std::vector<int64_t> ids;
        live_.erase_range(e.address, e.bytes, ids);
        if (ids.empty()) ++stats_.frees_unmatched;
        for (int64_t id : ids) {
            free_held(allocs_[static_cast<size_t>(id - 1)], t);
            expect_record(true, e.correlation, e.runtime_correlation, id);
        }
        return;
    }
    if (e.source == AllocSource::Driver) {
        int64_t id = live_.erase(e.address);
        if (id < 0) {
            ++stats_.frees_unmatched;
            return;
        }
        Held& held = allocs_[static_cast<size_t>(id - 1)];
        free_held(held, t);
        held.free_stream = static_cast<int64_t>(e.stream);
        expect_record(true, e.correlation, e.runtime_correlation, id);
        return;
    }
    // Activity release: of an allocation whose free a callback saw, or of one it describes alone.
    const int64_t id = find_release_of(e, t);
    if (id < 0) {
        ++stats_.frees_unmatched;
        return;
    }
    Held& held = allocs_[static_cast<size_t>(id - 1)];
    held.activity_release = true;
    if (!held.freed) {
        // No callback saw this free (or the allocation is activity-only).
        if (live_.at(e.address) == id) live_.erase(e.address);
        free_held(held, t);
        held.free_stream = static_cast<int64_t>(e.stream);
    }
}

void Translator::on_launch(const LaunchEvent& e) {
    if (!opt_.accesses) return;
    ++stats_.launches;
    uint32_t slot;
    if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
    } else if (launches_.size() < kMaxPendingLaunches) {
        slot = static_cast<uint32_t>(launches_.size());
        launches_.emplace_back();
    } else {
        // Full of launches that never met their kernel: start over.
        stats_.launches_unmatched += static_cast<int64_t>(launch_by_corr_.size());
        launch_by_corr_.clear();
        free_slots_.clear();
        for (uint32_t i = 1; i < launches_.size(); ++i) free_slots_.push_back(i);
        slot = 0;
    }
    Launch& l = launches_[slot];
    scan_words(e.words, live_, l.ids);
    if (!l.ids.empty()) ++stats_.launches_with_hits;
    l.t = rel(e.t);
    l.keys[0] = e.correlation;
    l.keys[1] = e.runtime_correlation != e.correlation ? e.runtime_correlation : 0;
    for (uint32_t k : l.keys) {
        if (k == 0) continue;
        auto [it, added] = launch_by_corr_.try_emplace(k, slot);
        if (!added) {   // a stale launch with this id: forget it
            uint32_t old = it->second;
            it->second = slot;
            if (old != slot) {
                for (uint32_t& ok : launches_[old].keys)
                    if (ok == k) ok = 0;
                if (launches_[old].keys[0] == 0 && launches_[old].keys[1] == 0) {
                    ++stats_.launches_unmatched;
                    free_slots_.push_back(old);
                }
            }
        }
    }
}

void Translator::release_launch(uint32_t slot) {
    Launch& l = launches_[slot];
    for (uint32_t k : l.keys)
        if (k != 0) launch_by_corr_.erase(k);
    l.keys[0] = l.keys[1] = 0;
    l.ids.clear();
    free_slots_.push_back(slot);
}

int32_t Translator::step_at(int64_t t) const {
    auto it = std::upper_bound(steps_.begin(), steps_.end(), t,
                               [](int64_t v, const StepRange& s) { return v < s.start; });
    if (it == steps_.begin()) return -1;
    --it;
    return t < it->end ? it->index : -1;
}

void Translator::on_kernel(const KernelEvent& e) {
    if (e.start == 0 || e.end == 0 || e.end < e.start) {
        ++stats_.kernels_without_time;
        return;
    }
    trace::Kernel k;
    k.id = ++stats_.kernels;
    k.device = static_cast<int32_t>(e.device);
    k.stream = e.stream;
    k.name = w_.intern(e.name);
    k.t_start = rel(e.start);
    k.t_end = rel(e.end);
    for (int i = 0; i < 3; ++i) {
        k.grid[i] = e.grid[i];
        k.block[i] = e.block[i];
    }
    k.shared_mem = e.shared_mem;
    k.registers = e.registers;
    k.correlation = e.correlation;

    int64_t slot = -1;
    if (opt_.accesses && e.correlation != 0) {
        auto it = launch_by_corr_.find(e.correlation);
        if (it != launch_by_corr_.end()) slot = it->second;
    }
    // The step is the one the host was in when it launched the kernel, when known.
    k.step = step_at(slot >= 0 ? launches_[static_cast<size_t>(slot)].t : k.t_start);
    w_.add(k);
    if (slot < 0) return;
    stream_work_[{k.device, k.stream}].push_back({launches_[static_cast<size_t>(slot)].t, k.t_end});
    for (int64_t id : launches_[static_cast<size_t>(slot)].ids) {
        w_.add(trace::Access{k.id, id, trace::AccessMode::ReadWrite});
        ++stats_.accesses;
        Held& h = allocs_[static_cast<size_t>(id - 1)];
        h.use_start = std::min(h.use_start, k.t_start);
        h.use_end = std::max(h.use_end, k.t_end);
    }
    release_launch(static_cast<uint32_t>(slot));
}

void Translator::on_copy(const CopyEvent& e) {
    if (e.start == 0 || e.end < e.start) return;
    trace::Copy c;
    c.id = ++stats_.copies;
    c.device = static_cast<int32_t>(e.device);
    c.stream = e.stream;
    c.kind = e.kind;
    c.bytes = static_cast<int64_t>(e.bytes);
    c.t_start = rel(e.start);
    c.t_end = rel(e.end);
    w_.add(c);
}

void Translator::write_marker(int64_t name, int64_t start, int64_t end, trace::MarkerKind kind,
                              int32_t index) {
    trace::Marker m;
    m.id = ++stats_.markers;
    m.name = name;
    m.t_start = start;
    m.t_end = std::max(end, start);
    m.kind = kind;
    m.index = index;
    w_.add(m);
}

void Translator::on_marker(const MarkerEvent& e) {
    const int64_t t = rel(e.t);
    using P = MarkerEvent::Phase;
    if (e.phase == P::End) {
        auto it = open_.find(e.id);
        if (it == open_.end()) {
            ++stats_.marker_ends_unmatched;
            return;
        }
        const Open& o = it->second;
        if (o.step_slot >= 0) steps_[static_cast<size_t>(o.step_slot)].end = std::max(t, o.t);
        write_marker(o.name, o.t, t, o.kind, o.index);
        open_.erase(it);
        return;
    }
    MarkerClass c = classify_marker(e.name, steps_seen_);
    if (c.kind == trace::MarkerKind::Step) ++steps_seen_;
    int64_t name = w_.intern(e.name);
    if (e.phase == P::Instant) {
        write_marker(name, t, t, c.kind, c.index);
        return;
    }
    Open o{name, t, c.kind, c.index, -1};
    if (c.kind == trace::MarkerKind::Step) {
        StepRange r{t, INT64_MAX, c.index};
        auto pos = std::upper_bound(steps_.begin(), steps_.end(), t,
                                    [](int64_t v, const StepRange& s) { return v < s.start; });
        // Ranges nearly always come in order; an out-of-order one shifts the slots after it.
        if (pos != steps_.end())
            for (auto& [id, op] : open_)
                if (op.step_slot >= pos - steps_.begin()) ++op.step_slot;
        o.step_slot = pos - steps_.begin();
        steps_.insert(pos, r);
    }
    open_[e.id] = o;
}

void Translator::on_sync(const SyncEvent& e) {
    if (e.start == 0 || e.end < e.start) return;
    ++stats_.syncs;
    write_marker(w_.intern(sync_name(e.type)), rel(e.start), rel(e.end),
                 trace::MarkerKind::Range, -1);
}

void Translator::on_overhead(const OverheadEvent& e) {
    ++stats_.overhead_records;
    if (e.end > e.start) stats_.overhead_ns += static_cast<int64_t>(e.end - e.start);
}

void Translator::on_pool(const PoolEvent& e) {
    switch (e.op) {
        case PoolEvent::Created: ++stats_.pools_created; break;
        case PoolEvent::Destroyed: ++stats_.pools_destroyed; break;
        case PoolEvent::Trimmed: ++stats_.pools_trimmed; break;
        case PoolEvent::Sampled: break;
        default: return;
    }
    if (!e.local) return;   // an imported pool: its memory is another process's
    if (e.op == PoolEvent::Sampled) {
        // A pool smaller than what it has handed out (or than the allocation just made from it)
        // is not a size: the field was not filled.
        if (e.size < std::max(e.utilized, e.bytes)) {
            ++stats_.pool_samples_skipped;
            return;
        }
        ++stats_.pool_samples;
    }
    stats_.pool_utilized_max_bytes = std::max(stats_.pool_utilized_max_bytes, static_cast<int64_t>(e.utilized));
    const int64_t size = e.op == PoolEvent::Destroyed ? 0 : static_cast<int64_t>(e.size);
    stats_.pool_max_bytes = std::max(stats_.pool_max_bytes, size);
    pool_points_.push_back({static_cast<int32_t>(e.device), e.address, e.op, size, rel(e.t), pool_points_.size()});
}

// The memory each pool holds over time as segments rows whose live bytes sum to the size CUPTI
// last reported: a row for each growth, stacked above the pool's base address; a shrink frees the
// newest rows first (the one it cuts into is freed and its kept part opened again in its place).
// Between two reports the size is taken to stay as the first said.
void Translator::pool_segments(std::vector<trace::Segment>& out) {
    using Key = std::pair<int32_t, uint64_t>;
    std::map<Key, std::vector<PoolPoint>> pools;
    std::map<int32_t, std::set<uint64_t>> sampled;   // device -> pools that memory records named
    for (const PoolPoint& p : pool_points_)
        if (p.op == PoolEvent::Sampled) sampled[p.device].insert(p.address);
    for (const PoolPoint& p : pool_points_) {
        Key key{p.device, p.address};
        if (p.op != PoolEvent::Sampled) {
            // A MEMORY_POOL record of an address no memory record named: the device's pool when it
            // has one (the two records may not name the pool by one address).
            auto it = sampled.find(p.device);
            if (it != sampled.end() && !it->second.count(p.address) && it->second.size() == 1) {
                key.second = *it->second.begin();
                ++stats_.pool_records_by_device;
            }
        }
        pools[key].push_back(p);
    }
    // Address ranges the rows of a device may not overlap (at any time): the other segments, and
    // the pools laid out before.
    std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> taken;
    for (const trace::Segment& s : out) taken[s.device].push_back({s.address, s.address + s.bytes});
    for (auto& [key, points] : pools) {
        std::sort(points.begin(), points.end(),
                  [](const PoolPoint& a, const PoolPoint& b) { return a.t != b.t ? a.t < b.t : a.seq < b.seq; });
        struct Row { int64_t offset, bytes, t; };
        std::vector<Row> stack;
        std::vector<trace::Segment> rows;   // addresses relative to the pool's base
        int64_t held = 0, extent = 0;
        auto close = [&](const Row& r, int64_t t) {
            trace::Segment s;
            s.device = key.first;
            s.address = r.offset;
            s.bytes = r.bytes;
            s.t_alloc = r.t;
            s.t_free = t;
            rows.push_back(s);
        };
        for (size_t i = 0; i < points.size(); ++i) {
            // Of several reports at one time, the last holds.
            if (i + 1 < points.size() && points[i + 1].t == points[i].t) continue;
            const int64_t size = points[i].size, t = points[i].t;
            while (held > size) {
                Row top = stack.back();
                stack.pop_back();
                held -= top.bytes;
                close(top, t);
                if (held < size) {   // cut into: the part still held opens again at once
                    stack.push_back({top.offset, size - held, t});
                    held = size;
                }
            }
            if (size > held) {
                stack.push_back({held, size - held, t});
                held = size;
                extent = std::max(extent, held);
            }
        }
        for (const Row& r : stack) close(r, trace::kNoTime);
        if (rows.empty()) continue;
        // Above the pool's base address, unless that range meets another segment or pool (the
        // pool's pages need not lie there): then above everything on the device.
        auto& used = taken[key.first];
        auto base = static_cast<int64_t>(key.second);
        auto meets = [&](int64_t lo, int64_t hi) {
            return std::any_of(used.begin(), used.end(), [&](const auto& u) { return lo < u.second && u.first < hi; });
        };
        if (base < 0 || base > INT64_MAX - extent || meets(base, base + extent)) {
            int64_t top = 0;
            for (const auto& u : used) top = std::max(top, u.second);
            constexpr int64_t kAlign = int64_t{2} << 20;
            base = (top + kAlign - 1) / kAlign * kAlign;
            ++stats_.pools_moved;
        }
        used.push_back({base, base + extent});
        for (trace::Segment& r : rows) {
            r.address += base;
            out.push_back(r);
        }
    }
}

void Translator::on_device(const DeviceEvent& e) {
    std::string p = "device." + std::to_string(e.id) + ".";
    w_.set_meta(p + "name", std::string(e.name));
    w_.set_meta(p + "memory", std::to_string(e.memory));
    w_.set_meta(p + "compute_capability",
                std::to_string(e.cc_major) + "." + std::to_string(e.cc_minor));
    w_.set_meta(p + "multiprocessors", std::to_string(e.multiprocessors));
    if (first_device_ || e.id == 0) {
        w_.set_meta("device_name", std::string(e.name));
        w_.set_meta("device_memory", std::to_string(e.memory));
        first_device_ = false;
    }
}

// One pass over the allocations in `order` (sorted by device, address, start, id).
void Translator::chain_lifetimes(const std::vector<size_t>& order) {
    for (size_t k = 1; k < order.size(); ++k) {
        Held& prev = allocs_[order[k - 1]];
        Held& next = allocs_[order[k]];
        if (prev.row.device != next.row.device || prev.row.address != next.row.address) continue;
        if (!prev.freed) {   // its free was never seen: it ended when the next one began
            prev.freed = true;
            prev.row.t_free = std::max(prev.row.t_alloc, std::max(next.row.t_alloc, prev.use_end));
            ++stats_.implicit_frees;
        }
        if (next.row.t_alloc < prev.row.t_free) {
            next.row.t_alloc = prev.row.t_free;
            next.delayed = true;
            if (next.freed && next.row.t_free < next.row.t_alloc) {
                next.row.t_free = next.row.t_alloc;
                next.emptied = true;
            }
        }
    }
}

// An emptied allocation ([t, t]: delayed to or past its own free) starts where an allocation that
// holds the memory after t may start too; `mhc check` orders allocations that start together by
// id, so an emptied one moves to the end of each such holder with a smaller id. `group`: one
// address's allocations in the settled order.
void Translator::place_emptied(const std::vector<size_t>& group) {
    std::map<int64_t, const Held*> holders;   // start -> the allocation that holds the memory from then
    for (size_t idx : group)
        if (allocs_[idx].row.t_free > allocs_[idx].row.t_alloc)
            holders.emplace(allocs_[idx].row.t_alloc, &allocs_[idx]);
    for (size_t idx : group) {
        Held& held = allocs_[idx];
        if (held.row.t_free != held.row.t_alloc) continue;
        for (auto it = holders.find(held.row.t_alloc); it != holders.end() && it->second->row.id < held.row.id;
             it = holders.find(held.row.t_alloc))
            held.row.t_alloc = held.row.t_free = it->second->row.t_free;
    }
}

// When the GPU reached, on `stream`, work enqueued at host time t: the end of the last kernel
// launched on it before t (kernels of one stream run in launch order), INT64_MIN if none is known.
int64_t Translator::stream_reached(int32_t device, int64_t stream, int64_t t) const {
    if (stream == 0) return INT64_MIN;
    auto it = stream_work_.find({device, stream});
    if (it == stream_work_.end()) return INT64_MIN;
    const auto& work = it->second;
    auto pos = std::lower_bound(work.begin(), work.end(), t,
                                [](const std::pair<int64_t, int64_t>& w, int64_t v) { return w.first < v; });
    return pos == work.begin() ? INT64_MIN : std::prev(pos)->second;
}

void Translator::settle_allocations() {
    for (auto& [key, work] : stream_work_) {
        std::sort(work.begin(), work.end());
        for (size_t i = 1; i < work.size(); ++i) work[i].second = std::max(work[i].second, work[i - 1].second);
    }
    // A stream-ordered free (cuMemFreeAsync) gives the memory back when its stream reaches it: after
    // every kernel launched on that stream before the call.
    for (Held& h : allocs_) {
        if (!h.freed || h.free_stream == 0) continue;
        const int64_t reached = stream_reached(h.row.device, h.free_stream, h.row.t_free);
        if (reached > h.row.t_free) {
            h.row.t_free = reached;
            ++stats_.frees_stream_ordered;
        }
    }
    // Memory is in use until the last kernel that accesses it has run.
    for (Held& h : allocs_) {
        if (h.freed && h.use_end > h.row.t_free) {
            h.row.t_free = h.use_end;
            ++stats_.lifetimes_extended;
        }
    }
    // At one address, in the order they were made, an allocation starts no earlier than the
    // previous holder's free.
    std::vector<size_t> order(allocs_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        const auto& a = allocs_[x].row;
        const auto& b = allocs_[y].row;
        if (a.device != b.device) return a.device < b.device;
        if (a.address != b.address) return a.address < b.address;
        if (a.t_alloc != b.t_alloc) return a.t_alloc < b.t_alloc;
        return a.id < b.id;
    });
    chain_lifetimes(order);
    // A stream-ordered allocation (cuMemAllocAsync) is made when its stream reaches it: after every
    // kernel launched on that stream before the call; never after a kernel that uses it nor after
    // its free. Only ever later, so no holder at the address comes to overlap another.
    for (Held& h : allocs_) {
        if (!h.pool) continue;
        const int64_t reached =
            std::min({stream_reached(h.row.device, h.row.stream, h.t_call), h.use_start, h.row.t_free});
        if (reached > h.row.t_alloc) {
            h.row.t_alloc = reached;
            ++stats_.allocs_stream_started;
        }
    }
    std::vector<size_t> group;
    for (size_t k = 0; k < order.size(); ++k) {
        group.push_back(order[k]);
        const auto& row = allocs_[order[k]].row;
        const bool last = k + 1 == order.size() || allocs_[order[k + 1]].row.device != row.device ||
                          allocs_[order[k + 1]].row.address != row.address;
        if (!last) continue;
        if (group.size() > 1) place_emptied(group);
        group.clear();
    }
    for (const Held& held : allocs_) {
        if (!held.delayed) continue;
        ++stats_.allocs_delayed;
        if (held.emptied) ++stats_.lifetimes_emptied;
        if (held.use_start < held.row.t_alloc) ++stats_.lifetime_conflicts;
    }
}

void Translator::finish() {
    settle_allocations();
    for (const Held& h : allocs_) w_.add(h.row);
    if (opt_.segments) {
        // Settled lifetimes, as the allocation rows: a segment is held until its last use.
        std::vector<trace::Segment> rows;
        for (const Held& h : allocs_) {
            if (h.pool || h.static_memory) continue;
            trace::Segment s;
            s.device = h.row.device;
            s.stream = h.row.stream;
            s.address = h.row.address;
            s.bytes = h.row.bytes;
            s.t_alloc = h.row.t_alloc;
            s.t_free = h.row.t_free;
            s.expandable = h.source == AllocSource::Vmm;
            rows.push_back(s);
        }
        const auto driver = static_cast<int64_t>(rows.size());
        pool_segments(rows);
        stats_.pool_segments = static_cast<int64_t>(rows.size()) - driver;
        std::stable_sort(rows.begin(), rows.end(), [](const trace::Segment& a, const trace::Segment& b) {
            if (a.t_alloc != b.t_alloc) return a.t_alloc < b.t_alloc;
            if (a.device != b.device) return a.device < b.device;
            return a.address < b.address;
        });
        int64_t n = 0;
        for (trace::Segment& s : rows) {
            s.id = ++n;
            w_.add(s);
        }
        w_.set_meta("segments",
                    std::to_string(n) + " rows: " + std::to_string(driver) +
                        " device allocations not from a pool (cuMemAlloc, cuMemMap: PyTorch's segments under its "
                        "caching allocator), " +
                        std::to_string(stats_.pool_segments) +
                        " of the memory stream-ordered pools hold (cudaMallocAsync: the pool's size as CUPTI reports "
                        "it at the pool's allocations, releases, creation, trims and destruction; not known in "
                        "between); modules' static memory is not a segment");
        w_.set_meta("segments.from_driver", std::to_string(driver));
        w_.set_meta("segments.from_pools", std::to_string(stats_.pool_segments));
    }
    // Ranges still open (an interrupted run): they end at the latest time seen.
    std::vector<std::pair<uint32_t, Open>> still(open_.begin(), open_.end());
    std::sort(still.begin(), still.end(),
              [](const auto& a, const auto& b) { return a.second.t < b.second.t; });
    for (const auto& [id, o] : still) {
        write_marker(o.name, o.t, stats_.last_time, o.kind, o.index);
        ++stats_.markers_left_open;
    }
    open_.clear();
    stats_.launches_unmatched += static_cast<int64_t>(launches_.size() - free_slots_.size());

    const TranslatorStats& s = stats_;
    auto put = [this](const char* key, int64_t v) { w_.set_meta(key, std::to_string(v)); };
    w_.set_meta("accesses", opt_.accesses ? "inferred" : "none");
    w_.set_meta("timing", "exact");
    put("time_origin_ns", origin_);
    for (const auto& [k, v] : opt_.job) w_.set_meta(k, v);
    put("record.allocations_driver", s.allocations_driver);
    put("record.allocations_activity", s.allocations_activity);
    put("record.allocations_vmm", s.allocations_vmm);
    put("record.activity_merged", s.activity_merged);
    put("record.activity_by_correlation", s.activity_by_correlation);
    put("record.host_allocations_skipped", s.host_allocations);
    put("record.implicit_frees", s.implicit_frees);
    put("record.frees_unmatched", s.frees_unmatched);
    put("record.lifetimes_extended", s.lifetimes_extended);
    put("record.allocations_delayed", s.allocs_delayed);
    // What the settling changed, in one line `mhc info` shows (docs/recording.md).
    if (s.lifetimes_extended + s.allocs_delayed + s.allocs_stream_started + s.frees_stream_ordered > 0) {
        std::string line = std::to_string(s.lifetimes_extended) + " of " + std::to_string(s.allocations) +
                           " allocations freed at their last kernel's end, not at the free call; " +
                           std::to_string(s.allocs_delayed) +
                           " started at the previous holder's end, not at the call (" +
                           std::to_string(s.lifetimes_emptied) + " left with no time, " +
                           std::to_string(s.lifetime_conflicts) + " with a kernel before that start)";
        if (s.allocs_stream_started + s.frees_stream_ordered > 0)
            line += "; stream-ordered: " + std::to_string(s.allocs_stream_started) +
                    " started when their stream reached the call (the end of the kernel launched before it on "
                    "that stream), " +
                    std::to_string(s.frees_stream_ordered) + " frees ended when their stream reached them";
        w_.set_meta("record.lifetimes", line);
    }
    put("record.allocations_stream_started", s.allocs_stream_started);
    put("record.frees_stream_ordered", s.frees_stream_ordered);
    put("record.lifetimes_emptied", s.lifetimes_emptied);
    put("record.lifetime_conflicts", s.lifetime_conflicts);
    put("record.kernels_without_time", s.kernels_without_time);
    put("record.launches", s.launches);
    put("record.launches_with_hits", s.launches_with_hits);
    put("record.launches_unmatched", s.launches_unmatched);
    put("record.syncs", s.syncs);
    put("record.marker_ends_unmatched", s.marker_ends_unmatched);
    put("record.markers_left_open", s.markers_left_open);
    put("record.times_clamped", s.times_clamped);
    put("cupti_overhead_records", s.overhead_records);
    put("cupti_overhead_ns", s.overhead_ns);
    put("record.pools_created", s.pools_created);
    put("record.pools_destroyed", s.pools_destroyed);
    put("record.pools_trimmed", s.pools_trimmed);
    put("record.pool_max_bytes", s.pool_max_bytes);
    put("record.pool_samples", s.pool_samples);
    put("record.pool_utilized_max_bytes", s.pool_utilized_max_bytes);
    put("record.pool_samples_skipped", s.pool_samples_skipped);
    put("record.pool_records_by_device", s.pool_records_by_device);
    put("record.pools_moved", s.pools_moved);
    put("record.static_allocations", s.static_allocations);
}

}  // namespace mhc::record
