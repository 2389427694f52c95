// Kineto [memory] events -> allocation rows; the rules are in kineto_memory.hpp.
#include "kineto_memory.hpp"

#include <algorithm>
#include <cassert>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "source.hpp"

namespace mhc::trace::import {

namespace {

// A device's running sum of Bytes stays within +-2^62 (each event is within 2^50), so that
// baselines and their sums over devices fit int64.
constexpr int64_t kMaxSum = INT64_C(1) << 62;

struct DeviceState {
    KMemoryDevice info;
    size_t id = 0;              // its index in Mapper::states_
    int64_t sum = 0, low = 0;   // running sum of Bytes and its lowest value (first pass)
    bool has_total = false;     // some event records Total Allocated
    int64_t pool = 0;     // baseline bytes not freed yet
    int64_t last_t = -1;  // time given to the device's previous event
    std::unordered_map<int64_t, size_t> at_addr;              // address -> live row (pairing by address)
    std::unordered_map<int64_t, std::vector<size_t>> of_size;  // bytes -> rows, latest last (by size)
    std::vector<size_t> order;   // the device's rows in allocation order; freed ones are skipped lazily
};

class Mapper {
public:
    Mapper(const KMemoryLabels& labels, const std::string& in) : labels_(labels), in_(in) {}

    KMemoryResult run(const std::vector<KMemory>& events, int64_t base);

private:
    DeviceState& state(const KMemory& event, bool mapped);
    void classify(const std::vector<KMemory>& events);
    void first_pass(const std::vector<KMemory>& events);
    size_t add(const DeviceState& space, int64_t address, int64_t bytes, int64_t t_alloc, int64_t t_free, int64_t label);
    void allocate(DeviceState& s, const KMemory& m, int64_t t);
    void free(DeviceState& s, const KMemory& m, int64_t t);
    void release(DeviceState& s, int64_t row, int64_t need, int64_t t);
    int64_t take(DeviceState& s, size_t row, int64_t need, int64_t t);
    int64_t latest_live(DeviceState& s);
    void check_totals(const std::vector<KMemory>& events, const std::vector<int64_t>& times);

    const KMemoryLabels& labels_;
    const std::string& in_;
    KMemoryResult r_;
    std::vector<DeviceState> states_;
    std::map<std::tuple<int32_t, int64_t, bool>, size_t> index_;   // (device, pid, mapped) -> states_
    std::map<int32_t, int32_t> processes_;                  // device -> its processes seen so far
    std::map<std::pair<int32_t, int64_t>, int32_t> process_of_;   // (device, pid) -> its number there
    std::vector<char> mapped_;                                    // event -> is_mapping
    std::vector<size_t> row_state_;                         // row -> its state
    std::vector<int64_t> row_address_;                      // row -> its address in its process
    size_t last_ = 0;                                       // the previous event's state: most events are one device's
};

DeviceState& Mapper::state(const KMemory& event, bool mapped) {
    if (last_ < states_.size() && states_[last_].info.device == event.device && states_[last_].info.pid == event.pid &&
        states_[last_].info.mapped == mapped)
        return states_[last_];
    auto it = index_.find({event.device, event.pid, mapped});
    if (it == index_.end()) {
        it = index_.emplace(std::tuple{event.device, event.pid, mapped}, states_.size()).first;
        states_.emplace_back();
        states_.back().id = states_.size() - 1;
        states_.back().info.device = event.device;
        states_.back().info.pid = event.pid;
        states_.back().info.mapped = mapped;
        // A process's mappings share its address space: its number, not one of their own.
        auto [number, fresh] = process_of_.emplace(std::pair{event.device, event.pid}, 0);
        if (fresh) number->second = processes_[event.device]++;
        states_.back().info.process = number->second;
    }
    return states_[last_ = it->second];
}

// Which host events are MapAllocator's (is_mapping), in time order, per process.
void Mapper::classify(const std::vector<KMemory>& events) {
    struct Process {
        std::unordered_set<int64_t> mappings, cpu;
        int64_t cpu_total = -1;
    };
    std::map<int64_t, Process> processes;
    mapped_.assign(events.size(), 0);
    for (size_t i = 0; i < events.size(); ++i) {
        const KMemory& event = events[i];
        if (event.device >= 0 || !event.has_addr || event.total < 0) continue;
        Process& process = processes[event.pid];
        const bool mapping = is_mapping(event, process.mappings.count(event.addr) > 0, process.cpu.count(event.addr) > 0, process.cpu_total);
        mapped_[i] = mapping ? 1 : 0;
        auto& live = mapping ? process.mappings : process.cpu;
        if (event.bytes > 0) live.insert(event.addr);
        else if (event.bytes < 0) live.erase(event.addr);
        if (mapping) ++r_.mapping_events;
        else process.cpu_total = event.total;
    }
}

// Baselines: Total Allocated - Bytes of a device's first event where recorded, and never less
// than the signed sum requires (a curve below zero is no curve).
void Mapper::first_pass(const std::vector<KMemory>& events) {
    for (size_t i = 0; i < events.size(); ++i) {
        const KMemory& event = events[i];
        DeviceState& space = state(event, mapped_[i] != 0);
        if (space.info.mapped) {   // Total Allocated 0 and Total Reserved the mapping's own: not the space's
            ++space.info.events;
        } else if (space.info.events++ == 0 && event.total >= 0) {
            space.info.baseline = event.total - event.bytes;   // both within +-2^50
            space.info.baseline_recorded = true;
        }
        if (!event.has_addr) space.info.by_size = true;
        if (!space.info.mapped) {
            if (event.total >= 0) space.has_total = true;
            space.info.reserved_peak = std::max(space.info.reserved_peak, event.reserved);
            if (space.info.reserved_first < 0) space.info.reserved_first = event.reserved;
        }
        space.sum += event.bytes;   // |Bytes| <= 2^50: checked against 2^62 at each step, it cannot overflow
        if (space.sum > kMaxSum || space.sum < -kMaxSum)
            throw Error(where(in_, "the [memory] events of device " + std::to_string(event.device) +
                                       " add up to more than 2^62 bytes"));
        space.low = std::min(space.low, space.sum);
    }
    for (auto& s : states_) {
        s.info.baseline = std::max(s.info.baseline, -s.low);
        s.pool = s.info.baseline;
        // Pieces of the baseline live from t = 0: the device's first event comes after.
        if (s.pool > 0) s.last_t = 0;
    }
}

size_t Mapper::add(const DeviceState& space, int64_t address, int64_t bytes, int64_t t_alloc, int64_t t_free,
                   int64_t label) {
    Allocation a;
    a.id = static_cast<int64_t>(r_.rows.size()) + 1;
    a.device = space.info.device;
    a.address = space.info.process > 0 ? 0 : address;   // a later process's addresses are its own
    if (space.info.process > 0 && address != 0) ++r_.unaddressed;
    row_state_.push_back(space.id);
    row_address_.push_back(address);
    a.bytes = bytes;
    a.t_alloc = t_alloc;
    a.t_free = t_free;
    a.label = label;
    r_.rows.push_back(a);
    return r_.rows.size() - 1;
}

void Mapper::allocate(DeviceState& s, const KMemory& m, int64_t t) {
    size_t row = add(s, s.info.by_size ? 0 : m.addr, m.bytes, t, kNoTime, kNoString);
    if (s.info.by_size) {
        s.of_size[m.bytes].push_back(row);
    } else {
        // An allocation at an address still live: its free was not recorded (or comes later).
        // The older row keeps its bytes (the curve follows the events) but leaves the address.
        auto [it, fresh] = s.at_addr.emplace(m.addr, row);
        if (!fresh) {
            if (r_.rows[it->second].t_free == kNoTime) r_.rows[it->second].address = row_address_[it->second] = 0;
            it->second = row;
        }
    }
    s.order.push_back(row);
}

void Mapper::free(DeviceState& s, const KMemory& m, int64_t t) {
    int64_t need = -m.bytes, row = -1;
    if (s.info.by_size) {
        auto it = s.of_size.find(need);
        if (it != s.of_size.end()) {
            auto& stack = it->second;
            while (!stack.empty() && r_.rows[stack.back()].t_free != kNoTime) stack.pop_back();
            if (!stack.empty()) {
                row = static_cast<int64_t>(stack.back());
                stack.pop_back();
                ++r_.by_size;
            }
        }
    } else {
        auto it = s.at_addr.find(m.addr);
        if (it != s.at_addr.end()) {
            if (r_.rows[it->second].t_free == kNoTime) {
                row = static_cast<int64_t>(it->second);
                ++r_.by_address;
            }
            s.at_addr.erase(it);
        }
    }
    release(s, row, need, t);
}

// Ends `need` bytes at t: the paired row first, then the baseline, then the latest live rows.
void Mapper::release(DeviceState& s, int64_t row, int64_t need, int64_t t) {
    if (row >= 0) need -= take(s, static_cast<size_t>(row), need, t);
    bool split = false;
    while (need > 0) {
        if (s.pool > 0) {
            int64_t piece = std::min(s.pool, need);
            add(s, 0, piece, 0, t, labels_.before_recording);
            ++r_.reconstructed;
            s.pool -= piece;
            need -= piece;
            continue;
        }
        // The baseline is at least what the signed sum requires: live rows cover the rest.
        int64_t other = latest_live(s);
        assert(other >= 0);
        if (other < 0) break;
        split = true;
        need -= take(s, static_cast<size_t>(other), need, t);
    }
    if (split) ++r_.split;
}

// Ends row at t and returns the bytes it ended (at most need): a larger row leaves a
// remainder, a new row from t with the same address and label.
int64_t Mapper::take(DeviceState& s, size_t row, int64_t need, int64_t t) {
    Allocation& a = r_.rows[row];
    a.t_free = t;
    if (a.bytes <= need) return a.bytes;
    int64_t address = row_address_[row], label = a.label, rest = a.bytes - need;
    size_t rem = add(s, address, rest, t, kNoTime, label);
    if (s.info.by_size) s.of_size[rest].push_back(rem);
    else if (address != 0) s.at_addr[address] = rem;
    s.order.push_back(rem);
    return need;
}

int64_t Mapper::latest_live(DeviceState& s) {
    while (!s.order.empty() && r_.rows[s.order.back()].t_free != kNoTime) s.order.pop_back();
    return s.order.empty() ? -1 : static_cast<int64_t>(s.order.back());
}

KMemoryResult Mapper::run(const std::vector<KMemory>& events, int64_t base) {
    classify(events);
    first_pass(events);
    std::vector<int64_t> times(events.size());
    for (size_t i = 0; i < events.size(); ++i) {
        const KMemory& m = events[i];
        DeviceState& space = state(m, mapped_[i] != 0);
        int64_t at = std::max(m.ts - base, space.last_t + 1);
        if (at > kMaxTime)
            throw Error(where(in_, "traceEvents[" + std::to_string(m.index) + "]: [memory] events at one time past 2^62 ns"));
        if (at != m.ts - base) {
            ++r_.moved;
            r_.max_move = std::max(r_.max_move, at - (m.ts - base));
        }
        space.last_t = times[i] = at;
        if (m.bytes > 0) allocate(space, m, at);
        else if (m.bytes < 0) free(space, m, at);
        else ++r_.zero_bytes;
    }
    for (auto& s : states_) {
        s.info.unattributed = s.pool;
        if (s.pool > 0) {
            add(s, 0, s.pool, 0, kNoTime, labels_.unattributed);
            ++r_.reconstructed;
            if (__builtin_add_overflow(r_.unattributed, s.pool, &r_.unattributed))
                throw Error(where(in_, "the bytes allocated before recording add up to more than 2^63"));
        }
    }
    check_totals(events, times);
    for (auto& s : states_) r_.devices.push_back(s.info);
    return std::move(r_);
}

// The imported curve, computed back from the rows, against Total Allocated at every event
// that records it.
void Mapper::check_totals(const std::vector<KMemory>& events, const std::vector<int64_t>& times) {
    for (auto& s : states_) {
        if (!s.has_total) continue;
        std::vector<std::pair<int64_t, int64_t>> deltas;   // (time, bytes)
        for (size_t row = 0; row < r_.rows.size(); ++row) {
            if (row_state_[row] != s.id) continue;
            const Allocation& alloc = r_.rows[row];
            deltas.emplace_back(alloc.t_alloc, alloc.bytes);
            if (alloc.t_free != kNoTime) deltas.emplace_back(alloc.t_free, -alloc.bytes);
        }
        std::sort(deltas.begin(), deltas.end());
        size_t next = 0;
        int64_t live = 0;
        for (size_t i = 0; i < events.size(); ++i) {
            const KMemory& m = events[i];
            if (m.device != s.info.device || m.pid != s.info.pid || (mapped_[i] != 0) != s.info.mapped) continue;
            while (next < deltas.size() && deltas[next].first <= times[i]) live += deltas[next++].second;
            if (m.total < 0) continue;
            ++s.info.checked;
            int64_t diff = live - m.total;
            if (diff == 0) continue;
            if (s.info.mismatches++ == 0) {
                s.info.first_index = m.index;
                s.info.first_t = times[i];
                s.info.first_imported = live;
                s.info.first_recorded = m.total;
            }
            s.info.max_diff = std::max(s.info.max_diff, diff < 0 ? -diff : diff);
        }
    }
}

}  // namespace

KMemoryResult map_memory(const std::vector<KMemory>& events, int64_t base, const KMemoryLabels& labels,
                         const std::string& in) {
    return Mapper(labels, in).run(events, base);
}

bool is_mapping(const KMemory& event, bool live_mapping, bool live_cpu, int64_t cpu_total) {
    if (event.device >= 0 || event.total != 0) return false;
    if (event.bytes > 0) return event.reserved == event.bytes;
    if (event.bytes == 0 || event.reserved != 0) return false;
    if (live_mapping) return true;
    if (live_cpu) return false;
    return cpu_total != -event.bytes;
}

std::string total_allocated_disagreement(const KMemoryDevice& d) {
    if (d.mismatches == 0) return {};
    return "device " + std::to_string(d.device) + (d.process > 0 ? " (pid " + std::to_string(d.pid) + ")" : "") +
           ": the imported live bytes differ from Total Allocated at " + std::to_string(d.mismatches) + " of " +
           std::to_string(d.checked) + " [memory] events; first at traceEvents[" + std::to_string(d.first_index) +
           "] (t = " + format_ns(d.first_t) + "): " + std::to_string(d.first_imported) + " B imported, " +
           std::to_string(d.first_recorded) + " B recorded; largest difference " + std::to_string(d.max_diff) + " B";
}

std::string memory_space_key(const KMemoryDevice& space) {
    return ".device" + std::to_string(space.device) + (space.process > 0 ? ".pid" + std::to_string(space.pid) : "") +
           (space.mapped ? ".mapped" : "");
}

}  // namespace mhc::trace::import
