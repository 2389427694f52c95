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

Translator::Translator(trace::Writer& writer, const TranslatorOptions& options)
    : w_(writer), opt_(options), origin_(options.origin) {}

int64_t Translator::rel(uint64_t timestamp) {
    auto raw = static_cast<int64_t>(timestamp);
    if (origin_ < 0) origin_ = raw;
    if (raw < origin_) {
        ++stats_.times_clamped;
        return 0;
    }
    int64_t relative = raw - origin_;
    stats_.last_time = std::max(stats_.last_time, relative);
    return relative;
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

int64_t Translator::new_allocation(const AllocEvent& event, int64_t time) {
    Held held;
    held.row.id = static_cast<int64_t>(allocs_.size()) + 1;
    held.row.device = static_cast<int32_t>(event.device);
    held.row.address = static_cast<int64_t>(event.address);
    held.row.bytes = static_cast<int64_t>(event.bytes);
    held.row.t_alloc = time;
    held.t_call = time;
    held.row.stream = static_cast<int64_t>(event.stream);
    held.row.category = trace::Category::Other;   // the driver cannot tell tensor roles
    std::string label(event.api);
    if (event.pool && label.find("pool") == std::string::npos) label += " (pool)";
    held.row.label = w_.intern(label);
    // Matching window only: may lie before the origin, so it is not clamped.
    held.t_enter = event.t_enter ? std::min(static_cast<int64_t>(event.t_enter) - origin_, time) : time;
    held.source = event.source;
    held.pool = event.pool;
    held.static_memory = event.static_memory;
    if (event.static_memory) ++stats_.static_allocations;
    held.activity_alloc = event.source == AllocSource::Activity;
    allocs_.push_back(held);
    ++stats_.allocations;
    switch (event.source) {
        case AllocSource::Driver: ++stats_.allocations_driver; break;
        case AllocSource::Activity: ++stats_.allocations_activity; break;
        case AllocSource::Vmm: ++stats_.allocations_vmm; break;
    }
    return held.row.id;
}

void Translator::free_held(Held& held, int64_t time) {
    held.freed = true;
    held.row.t_free = std::max(time, held.row.t_alloc);
}

void Translator::on_alloc(const AllocEvent& event) {
    if (event.bytes == 0 || event.address == 0) {
        ++stats_.zero_size;
        return;
    }
    const int64_t time = rel(event.t);
    auto layer = event.source == AllocSource::Vmm ? LiveMap::Layer::Vmm : LiveMap::Layer::Fine;

    if (event.source == AllocSource::Activity) {
        const int64_t seen = find_alloc_of(event, time);
        if (seen >= 0) {
            Held& held = allocs_[static_cast<size_t>(seen - 1)];
            held.activity_alloc = true;
            if (held.row.stream == 0) held.row.stream = static_cast<int64_t>(event.stream);
            ++stats_.activity_merged;
            return;
        }
        // Activity arrives late: a driver allocation made later at this address may already
        // be live. Then this one is history and stays out of the live map.
        int64_t cur = live_.at(event.address, layer);
        if (cur >= 0 && allocs_[static_cast<size_t>(cur - 1)].row.t_alloc > time) {
            int64_t id = new_allocation(event, time);
            remember(event.address, id);
            return;
        }
    }
    int64_t id = new_allocation(event, time);
    int64_t old = live_.insert(event.address, event.bytes, id, layer);
    if (old >= 0) {
        Held& previous = allocs_[static_cast<size_t>(old - 1)];
        if (!previous.freed) {
            free_held(previous, time);
            ++stats_.implicit_frees;
        }
    }
    // A callback's allocation (cuMemAlloc*, or a cuMemMap mapping) waits for its activity record.
    if (event.source != AllocSource::Activity) expect_record(false, event.correlation, event.runtime_correlation, id);
    remember(event.address, id);
}

void Translator::on_free(const FreeEvent& event) {
    if (event.address == 0) return;   // cudaFree(nullptr)
    const int64_t time = rel(event.t);
    if (event.source == AllocSource::Vmm) {
        std::vector<int64_t> ids;
        live_.erase_range(event.address, event.bytes, ids);
        if (ids.empty()) ++stats_.frees_unmatched;
        for (int64_t id : ids) {
            free_held(allocs_[static_cast<size_t>(id - 1)], time);
            expect_record(true, event.correlation, event.runtime_correlation, id);
        }
        return;
    }
    if (event.source == AllocSource::Driver) {
        int64_t id = live_.erase(event.address);
        if (id < 0) {
            ++stats_.frees_unmatched;
            return;
        }
        Held& held = allocs_[static_cast<size_t>(id - 1)];
        free_held(held, time);
        held.free_stream = static_cast<int64_t>(event.stream);
        expect_record(true, event.correlation, event.runtime_correlation, id);
        return;
    }
    // Activity release: of an allocation whose free a callback saw, or of one it describes alone.
    const int64_t id = find_release_of(event, time);
    if (id < 0) {
        ++stats_.frees_unmatched;
        return;
    }
    Held& held = allocs_[static_cast<size_t>(id - 1)];
    held.activity_release = true;
    if (!held.freed) {
        // No callback saw this free (or the allocation is activity-only).
        if (live_.at(event.address) == id) live_.erase(event.address);
        free_held(held, time);
        held.free_stream = static_cast<int64_t>(event.stream);
    }
}

void Translator::on_launch(const LaunchEvent& event) {
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
    Launch& launch = launches_[slot];
    scan_words(event.words, live_, launch.ids);
    if (!launch.ids.empty()) ++stats_.launches_with_hits;
    launch.t = rel(event.t);
    launch.keys[0] = event.correlation;
    launch.keys[1] = event.runtime_correlation != event.correlation ? event.runtime_correlation : 0;
    for (uint32_t key : launch.keys) {
        if (key == 0) continue;
        auto [it, added] = launch_by_corr_.try_emplace(key, slot);
        if (!added) {   // a stale launch with this id: forget it
            uint32_t old = it->second;
            it->second = slot;
            if (old != slot) {
                for (uint32_t& ok : launches_[old].keys)
                    if (ok == key) ok = 0;
                if (launches_[old].keys[0] == 0 && launches_[old].keys[1] == 0) {
                    ++stats_.launches_unmatched;
                    free_slots_.push_back(old);
                }
            }
        }
    }
}

void Translator::release_launch(uint32_t slot) {
    Launch& launch = launches_[slot];
    for (uint32_t key : launch.keys)
        if (key != 0) launch_by_corr_.erase(key);
    launch.keys[0] = launch.keys[1] = 0;
    launch.ids.clear();
    free_slots_.push_back(slot);
}

int32_t Translator::step_at(int64_t time) const {
    auto it = std::upper_bound(steps_.begin(), steps_.end(), time,
                               [](int64_t when, const StepRange& range) { return when < range.start; });
    if (it == steps_.begin()) return -1;
    --it;
    return time < it->end ? it->index : -1;
}

void Translator::on_kernel(const KernelEvent& event) {
    if (event.start == 0 || event.end == 0 || event.end < event.start) {
        ++stats_.kernels_without_time;
        return;
    }
    trace::Kernel kernel;
    kernel.id = ++stats_.kernels;
    kernel.device = static_cast<int32_t>(event.device);
    kernel.stream = event.stream;
    kernel.name = w_.intern(event.name);
    kernel.t_start = rel(event.start);
    kernel.t_end = rel(event.end);
    for (int i = 0; i < 3; ++i) {
        kernel.grid[i] = event.grid[i];
        kernel.block[i] = event.block[i];
    }
    kernel.shared_mem = event.shared_mem;
    kernel.registers = event.registers;
    kernel.correlation = event.correlation;

    int64_t slot = -1;
    if (opt_.accesses && event.correlation != 0) {
        auto it = launch_by_corr_.find(event.correlation);
        if (it != launch_by_corr_.end()) slot = it->second;
    }
    // The step is the one the host was in when it launched the kernel, when known.
    kernel.step = step_at(slot >= 0 ? launches_[static_cast<size_t>(slot)].t : kernel.t_start);
    w_.add(kernel);
    if (slot < 0) return;
    stream_work_[{kernel.device, kernel.stream}].push_back({launches_[static_cast<size_t>(slot)].t, kernel.t_end});
    for (int64_t id : launches_[static_cast<size_t>(slot)].ids) {
        w_.add(trace::Access{kernel.id, id, trace::AccessMode::ReadWrite});
        ++stats_.accesses;
        Held& held = allocs_[static_cast<size_t>(id - 1)];
        held.use_start = std::min(held.use_start, kernel.t_start);
        held.use_end = std::max(held.use_end, kernel.t_end);
    }
    release_launch(static_cast<uint32_t>(slot));
}

void Translator::on_copy(const CopyEvent& event) {
    if (event.start == 0 || event.end < event.start) return;
    trace::Copy copy;
    copy.id = ++stats_.copies;
    copy.device = static_cast<int32_t>(event.device);
    copy.stream = event.stream;
    copy.kind = event.kind;
    copy.bytes = static_cast<int64_t>(event.bytes);
    copy.t_start = rel(event.start);
    copy.t_end = rel(event.end);
    w_.add(copy);
}

void Translator::write_marker(int64_t name, int64_t start, int64_t end, trace::MarkerKind kind,
                              int32_t index) {
    trace::Marker marker;
    marker.id = ++stats_.markers;
    marker.name = name;
    marker.t_start = start;
    marker.t_end = std::max(end, start);
    marker.kind = kind;
    marker.index = index;
    w_.add(marker);
}

void Translator::on_marker(const MarkerEvent& event) {
    const int64_t time = rel(event.t);
    using P = MarkerEvent::Phase;
    if (event.phase == P::End) {
        auto it = open_.find(event.id);
        if (it == open_.end()) {
            ++stats_.marker_ends_unmatched;
            return;
        }
        const Open& opened = it->second;
        if (opened.step_slot >= 0) steps_[static_cast<size_t>(opened.step_slot)].end = std::max(time, opened.t);
        write_marker(opened.name, opened.t, time, opened.kind, opened.index);
        open_.erase(it);
        return;
    }
    MarkerClass marker_class = classify_marker(event.name, steps_seen_);
    if (marker_class.kind == trace::MarkerKind::Step) ++steps_seen_;
    int64_t name = w_.intern(event.name);
    if (event.phase == P::Instant) {
        write_marker(name, time, time, marker_class.kind, marker_class.index);
        return;
    }
    Open opened{name, time, marker_class.kind, marker_class.index, -1};
    if (marker_class.kind == trace::MarkerKind::Step) {
        StepRange step{time, INT64_MAX, marker_class.index};
        auto pos = std::upper_bound(steps_.begin(), steps_.end(), time,
                                    [](int64_t when, const StepRange& range) { return when < range.start; });
        // Ranges nearly always come in order; an out-of-order one shifts the slots after it.
        if (pos != steps_.end())
            for (auto& [id, op] : open_)
                if (op.step_slot >= pos - steps_.begin()) ++op.step_slot;
        opened.step_slot = pos - steps_.begin();
        steps_.insert(pos, step);
    }
    open_[event.id] = opened;
}

void Translator::on_sync(const SyncEvent& event) {
    if (event.start == 0 || event.end < event.start) return;
    ++stats_.syncs;
    write_marker(w_.intern(sync_name(event.type)), rel(event.start), rel(event.end), trace::MarkerKind::Range, -1);
}

void Translator::on_overhead(const OverheadEvent& event) {
    ++stats_.overhead_records;
    if (event.end > event.start) stats_.overhead_ns += static_cast<int64_t>(event.end - event.start);
}

void Translator::on_pool(const PoolEvent& event) {
    switch (event.op) {
        case PoolEvent::Created: ++stats_.pools_created; break;
        case PoolEvent::Destroyed: ++stats_.pools_destroyed; break;
        case PoolEvent::Trimmed: ++stats_.pools_trimmed; break;
        case PoolEvent::Sampled: break;
        default: return;
    }
    if (!event.local) return;   // an imported pool: its memory is another process's
    if (event.op == PoolEvent::Sampled) {
        // A pool smaller than what it has handed out (or than the allocation just made from it)
        // is not a size: the field was not filled.
        if (event.size < std::max(event.utilized, event.bytes)) {
            ++stats_.pool_samples_skipped;
            return;
        }
        ++stats_.pool_samples;
    }
    stats_.pool_utilized_max_bytes = std::max(stats_.pool_utilized_max_bytes, static_cast<int64_t>(event.utilized));
    const int64_t size = event.op == PoolEvent::Destroyed ? 0 : static_cast<int64_t>(event.size);
    stats_.pool_max_bytes = std::max(stats_.pool_max_bytes, size);
    pool_points_.push_back(
        {static_cast<int32_t>(event.device), event.address, event.op, size, rel(event.t), pool_points_.size()});
}

// The memory each pool holds over time as segments rows whose live bytes sum to the size CUPTI
// last reported: a row for each growth, stacked above the pool's base address; a shrink frees the
// newest rows first (the one it cuts into is freed and its kept part opened again in its place).
// Between two reports the size is taken to stay as the first said.
void Translator::pool_segments(std::vector<trace::Segment>& out) {
    using Key = std::pair<int32_t, uint64_t>;
    std::map<Key, std::vector<PoolPoint>> pools;
    std::map<int32_t, std::set<uint64_t>> sampled;   // device -> pools that memory records named
    for (const PoolPoint& point : pool_points_)
        if (point.op == PoolEvent::Sampled) sampled[point.device].insert(point.address);
    for (const PoolPoint& point : pool_points_) {
        Key key{point.device, point.address};
        if (point.op != PoolEvent::Sampled) {
            // A MEMORY_POOL record of an address no memory record named: the device's pool when it
            // has one (the two records may not name the pool by one address).
            auto it = sampled.find(point.device);
            if (it != sampled.end() && !it->second.count(point.address) && it->second.size() == 1) {
                key.second = *it->second.begin();
                ++stats_.pool_records_by_device;
            }
        }
        pools[key].push_back(point);
    }
    // Address ranges the rows of a device may not overlap (at any time): the other segments, and
    // the pools laid out before.
    std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> taken;
    for (const trace::Segment& segment : out)
        taken[segment.device].push_back({segment.address, segment.address + segment.bytes});
    for (auto& [key, points] : pools) {
        std::sort(points.begin(), points.end(), [](const PoolPoint& lhs, const PoolPoint& rhs) {
            return lhs.t != rhs.t ? lhs.t < rhs.t : lhs.seq < rhs.seq;
        });
        struct Row { int64_t offset, bytes, t; };
        std::vector<Row> stack;
        std::vector<trace::Segment> rows;   // addresses relative to the pool's base
        int64_t held = 0, extent = 0;
        const int32_t device = key.first;   // a lambda may not capture a structured binding (C++17)
        auto close = [&](const Row& row, int64_t end) {
            trace::Segment segment;
            segment.device = device;
            segment.address = row.offset;
            segment.bytes = row.bytes;
            segment.t_alloc = row.t;
            segment.t_free = end;
            rows.push_back(segment);
        };
        for (size_t i = 0; i < points.size(); ++i) {
            // Of several reports at one time, the last holds.
            if (i + 1 < points.size() && points[i + 1].t == points[i].t) continue;
            const int64_t size = points[i].size, time = points[i].t;
            while (held > size) {
                Row top = stack.back();
                stack.pop_back();
                held -= top.bytes;
                close(top, time);
                if (held < size) {   // cut into: the part still held opens again at once
                    stack.push_back({top.offset, size - held, time});
                    held = size;
                }
            }
            if (size > held) {
                stack.push_back({held, size - held, time});
                held = size;
                extent = std::max(extent, held);
            }
        }
        for (const Row& row : stack) close(row, trace::kNoTime);
        if (rows.empty()) continue;
        // Above the pool's base address, unless that range meets another segment or pool (the
        // pool's pages need not lie there): then above everything on the device.
        auto& used = taken[key.first];
        auto base = static_cast<int64_t>(key.second);
        auto meets = [&](int64_t lo, int64_t hi) {
            return std::any_of(used.begin(), used.end(),
                               [&](const auto& range) { return lo < range.second && range.first < hi; });
        };
        if (base < 0 || base > INT64_MAX - extent || meets(base, base + extent)) {
            int64_t top = 0;
            for (const auto& range : used) top = std::max(top, range.second);
            constexpr int64_t kAlign = int64_t{2} << 20;
            base = (top + kAlign - 1) / kAlign * kAlign;
            ++stats_.pools_moved;
        }
        used.push_back({base, base + extent});
        for (trace::Segment& row : rows) {
            row.address += base;
            out.push_back(row);
        }
    }
}

void Translator::on_device(const DeviceEvent& event) {
    std::string prefix = "device." + std::to_string(event.id) + ".";
    w_.set_meta(prefix + "name", std::string(event.name));
    w_.set_meta(prefix + "memory", std::to_string(event.memory));
    w_.set_meta(prefix + "compute_capability", std::to_string(event.cc_major) + "." + std::to_string(event.cc_minor));
    w_.set_meta(prefix + "multiprocessors", std::to_string(event.multiprocessors));
    if (first_device_ || event.id == 0) {
        w_.set_meta("device_name", std::string(event.name));
        w_.set_meta("device_memory", std::to_string(event.memory));
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
int64_t Translator::stream_reached(int32_t device, int64_t stream, int64_t time) const {
    if (stream == 0) return INT64_MIN;
    auto it = stream_work_.find({device, stream});
    if (it == stream_work_.end()) return INT64_MIN;
    const auto& work = it->second;
    auto pos = std::lower_bound(
        work.begin(), work.end(), time,
        [](const std::pair<int64_t, int64_t>& entry, int64_t when) { return entry.first < when; });
    return pos == work.begin() ? INT64_MIN : std::prev(pos)->second;
}

void Translator::settle_allocations() {
    for (auto& [key, work] : stream_work_) {
        std::sort(work.begin(), work.end());
        for (size_t i = 1; i < work.size(); ++i) work[i].second = std::max(work[i].second, work[i - 1].second);
    }
    // A stream-ordered free (cuMemFreeAsync) gives the memory back when its stream reaches it: after
    // every kernel launched on that stream before the call.
    for (Held& held : allocs_) {
        if (!held.freed || held.free_stream == 0) continue;
        const int64_t reached = stream_reached(held.row.device, held.free_stream, held.row.t_free);
        if (reached > held.row.t_free) {
            held.row.t_free = reached;
            ++stats_.frees_stream_ordered;
        }
    }
    // Memory is in use until the last kernel that accesses it has run.
    for (Held& held : allocs_) {
        if (held.freed && held.use_end > held.row.t_free) {
            held.row.t_free = held.use_end;
            ++stats_.lifetimes_extended;
        }
    }
    // At one address, in the order they were made, an allocation starts no earlier than the
    // previous holder's free.
    std::vector<size_t> order(allocs_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t lhs_index, size_t rhs_index) {
        const auto& lhs = allocs_[lhs_index].row;
        const auto& rhs = allocs_[rhs_index].row;
        if (lhs.device != rhs.device) return lhs.device < rhs.device;
        if (lhs.address != rhs.address) return lhs.address < rhs.address;
        if (lhs.t_alloc != rhs.t_alloc) return lhs.t_alloc < rhs.t_alloc;
        return lhs.id < rhs.id;
    });
    chain_lifetimes(order);
    // A stream-ordered allocation (cuMemAllocAsync) is made when its stream reaches it: after every
    // kernel launched on that stream before the call; never after a kernel that uses it nor after
    // its free. Only ever later, so no holder at the address comes to overlap another.
    for (Held& held : allocs_) {
        if (!held.pool) continue;
        const int64_t reached = std::min(
            {stream_reached(held.row.device, held.row.stream, held.t_call), held.use_start, held.row.t_free});
        if (reached > held.row.t_alloc) {
            held.row.t_alloc = reached;
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

namespace {

// What the settling changed, as one line.
std::string settling_line(const TranslatorStats& counts) {
    std::string line = std::to_string(counts.lifetimes_extended) + " of " + std::to_string(counts.allocations) +
                       " allocations freed at their last kernel's end, not at the free call; " +
                       std::to_string(counts.allocs_delayed) + " started at the previous holder's end, not at the call (" +
                       std::to_string(counts.lifetimes_emptied) + " left with no time, " +
                       std::to_string(counts.lifetime_conflicts) + " with a kernel before that start)";
    if (counts.allocs_stream_started + counts.frees_stream_ordered > 0)
        line += "; stream-ordered: " + std::to_string(counts.allocs_stream_started) +
                " started when their stream reached the call (the end of the kernel launched before it on "
                "that stream), " +
                std::to_string(counts.frees_stream_ordered) + " frees ended when their stream reached them";
    return line;
}

}  // namespace

void Translator::finish() {
    settle_allocations();
    for (const Held& held : allocs_) w_.add(held.row);
    if (opt_.segments) write_segments();
    close_open_ranges();
    write_counts();
}

// Settled lifetimes, as the allocation rows: a segment is held until its last use.
void Translator::write_segments() {
    std::vector<trace::Segment> rows;
    for (const Held& held : allocs_) {
        if (held.pool || held.static_memory) continue;
        trace::Segment segment;
        segment.device = held.row.device;
        segment.stream = held.row.stream;
        segment.address = held.row.address;
        segment.bytes = held.row.bytes;
        segment.t_alloc = held.row.t_alloc;
        segment.t_free = held.row.t_free;
        segment.expandable = held.source == AllocSource::Vmm;
        rows.push_back(segment);
    }
    const auto driver = static_cast<int64_t>(rows.size());
    pool_segments(rows);
    stats_.pool_segments = static_cast<int64_t>(rows.size()) - driver;
    std::stable_sort(rows.begin(), rows.end(), [](const trace::Segment& lhs, const trace::Segment& rhs) {
        if (lhs.t_alloc != rhs.t_alloc) return lhs.t_alloc < rhs.t_alloc;
        if (lhs.device != rhs.device) return lhs.device < rhs.device;
        return lhs.address < rhs.address;
    });
    int64_t segment_count = 0;
    for (trace::Segment& segment : rows) {
        segment.id = ++segment_count;
        w_.add(segment);
    }
    w_.set_meta("segments",
                std::to_string(segment_count) + " rows: " + std::to_string(driver) +
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
void Translator::close_open_ranges() {
    std::vector<std::pair<uint32_t, Open>> still(open_.begin(), open_.end());
    std::sort(still.begin(), still.end(), [](const auto& lhs, const auto& rhs) { return lhs.second.t < rhs.second.t; });
    for (const auto& [id, o] : still) {
        write_marker(o.name, o.t, stats_.last_time, o.kind, o.index);
        ++stats_.markers_left_open;
    }
    open_.clear();
    stats_.launches_unmatched += static_cast<int64_t>(launches_.size() - free_slots_.size());
}

// What the recording saw and the settling did, as the trace's meta (docs/recording.md).
void Translator::write_counts() {
    const TranslatorStats& counts = stats_;
    auto put = [this](const char* key, int64_t value) { w_.set_meta(key, std::to_string(value)); };
    w_.set_meta("accesses", opt_.accesses ? "inferred" : "none");
    w_.set_meta("timing", "exact");
    put("time_origin_ns", origin_);
    for (const auto& [k, v] : opt_.job) w_.set_meta(k, v);
    put("record.allocations_driver", counts.allocations_driver);
    put("record.allocations_activity", counts.allocations_activity);
    put("record.allocations_vmm", counts.allocations_vmm);
    put("record.activity_merged", counts.activity_merged);
    put("record.activity_by_correlation", counts.activity_by_correlation);
    put("record.host_allocations_skipped", counts.host_allocations);
    put("record.implicit_frees", counts.implicit_frees);
    put("record.frees_unmatched", counts.frees_unmatched);
    put("record.lifetimes_extended", counts.lifetimes_extended);
    put("record.allocations_delayed", counts.allocs_delayed);
    // What the settling changed, in one line `mhc info` shows (docs/recording.md).
    if (counts.lifetimes_extended + counts.allocs_delayed + counts.allocs_stream_started + counts.frees_stream_ordered >
        0)
        w_.set_meta("record.lifetimes", settling_line(counts));
    put("record.allocations_stream_started", counts.allocs_stream_started);
    put("record.frees_stream_ordered", counts.frees_stream_ordered);
    put("record.lifetimes_emptied", counts.lifetimes_emptied);
    put("record.lifetime_conflicts", counts.lifetime_conflicts);
    put("record.kernels_without_time", counts.kernels_without_time);
    put("record.launches", counts.launches);
    put("record.launches_with_hits", counts.launches_with_hits);
    put("record.launches_unmatched", counts.launches_unmatched);
    put("record.syncs", counts.syncs);
    put("record.marker_ends_unmatched", counts.marker_ends_unmatched);
    put("record.markers_left_open", counts.markers_left_open);
    put("record.times_clamped", counts.times_clamped);
    put("cupti_overhead_records", counts.overhead_records);
    put("cupti_overhead_ns", counts.overhead_ns);
    put("record.pools_created", counts.pools_created);
    put("record.pools_destroyed", counts.pools_destroyed);
    put("record.pools_trimmed", counts.pools_trimmed);
    put("record.pool_max_bytes", counts.pool_max_bytes);
    put("record.pool_samples", counts.pool_samples);
    put("record.pool_utilized_max_bytes", counts.pool_utilized_max_bytes);
    put("record.pool_samples_skipped", counts.pool_samples_skipped);
    put("record.pool_records_by_device", counts.pool_records_by_device);
    put("record.pools_moved", counts.pools_moved);
    put("record.static_allocations", counts.static_allocations);
}

}  // namespace mhc::record
