// prepare(): everything a run needs that does not depend on the configuration.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/sim/allocator_compare.hpp"
#include "mhc/trace/cache.hpp"
#include "mhc/trace/event_order.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/comm_kernels.hpp"
#include "mhc/trace/summary.hpp"
#include "prepared.hpp"

namespace mhc::sim {

void Intervals::build(std::vector<std::pair<int64_t, int64_t>> v) {
    std::sort(v.begin(), v.end());
    for (auto& [b, e] : v) {
        if (e <= b) continue;
        if (!end.empty() && b <= end.back()) {
            end.back() = std::max(end.back(), e);
        } else {
            begin.push_back(b);
            end.push_back(e);
        }
    }
}

bool Intervals::contains(int64_t t) const {
    auto it = std::upper_bound(begin.begin(), begin.end(), t);
    if (it == begin.begin()) return false;
    return t < end[static_cast<size_t>(it - begin.begin() - 1)];
}

void MaxTree::build(const std::vector<int64_t>& v) {
    n = v.size();
    t.assign(2 * n, INT64_MIN);
    std::copy(v.begin(), v.end(), t.begin() + static_cast<std::ptrdiff_t>(n));
    for (size_t i = n; i-- > 1;) t[i] = std::max(t[2 * i], t[2 * i + 1]);
}

int64_t MaxTree::max(size_t lo, size_t hi) const {
    int64_t m = INT64_MIN;
    if (hi >= n) hi = n - 1;
    if (n == 0 || lo > hi) return m;
    for (size_t l = lo + n, r = hi + n + 1; l < r; l >>= 1, r >>= 1) {
        if (l & 1) m = std::max(m, t[l++]);
        if (r & 1) m = std::max(m, t[--r]);
    }
    return m;
}

namespace {

template <class Less>
std::vector<int32_t> sorted_indices(std::vector<int32_t> idx, Less less) {
    if (!std::is_sorted(idx.begin(), idx.end(), less)) std::sort(idx.begin(), idx.end(), less);
    return idx;
}

// The GPU device (>= 0) with the largest live peak (ties: the lowest number). The host
// (device -1) is never picked: nsys and ET imports record its pinned buffers, which are not
// the GPU memory the simulator models.
int32_t pick_device(const trace::TraceData& t) {
    std::vector<int32_t> devs(t.allocations.device.begin(), t.allocations.device.end());
    devs.insert(devs.end(), t.kernels.device.begin(), t.kernels.device.end());
    std::sort(devs.begin(), devs.end());
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
    const bool has_host = !devs.empty() && devs.front() < 0;
    devs.erase(std::remove_if(devs.begin(), devs.end(), [](int32_t d) { return d < 0; }), devs.end());
    if (devs.empty()) {
        if (has_host)
            throw Error(std::string(t.path.empty() ? "trace" : t.path) +
                            ": only host memory (device -1) in this trace; simulate it with --device -1",
                        Error::Kind::BadInput);
        return 0;
    }
    int32_t best = devs[0];
    int64_t best_peak = -1;
    for (int32_t d : devs) {
        int64_t p = trace::live_peak(t, d).bytes;
        if (p > best_peak) { best_peak = p; best = d; }
    }
    return best;
}

void build_on_device(Prepared& p) {
    const auto& a = p.t->allocations;
    p.on_device.assign(a.size(), 0);
    for (size_t i = 0; i < a.size(); ++i) p.on_device[i] = a.device[i] == p.device;
    if (p.device < 0) return;
    // In the one order of docs/trace-format.md ("Events at one instant"): at one time the frees of
    // earlier allocations first, then the allocations, one freed at that time right after it is
    // made (it counts in the host peak, as in the host's own peak). Sorting (time, bytes) put its
    // free first: 5 MiB alive only at one instant never counted (tests/sim/test_host_allocations.cpp).
    for (const trace::MemoryEvent& event : trace::memory_events(a, -1)) {
        const int64_t bytes = a.bytes[static_cast<size_t>(event.row)];
        p.host_events.emplace_back(event.time, event.free ? -bytes : bytes);
    }
}

// Private pools of the device's allocations (meta snapshot.allocation_pools, from the trace events'
// pool_id, else snapshot.segment_pools: a snapshot's CUDA graph or torch.cuda.MemPool segments), by
// the rule mhc allocator reads them with.
void build_pools(Prepared& p) {
    if (p.device < 0 || (!p.t->meta.count("snapshot.segment_pools") && !p.t->meta.count("snapshot.allocation_pools")))
        return;
    const PrivatePools pools = private_pools(*p.t, p.device);
    if (pools.allocations == 0) return;
    p.alloc_pool.assign(pools.allocation.begin(), pools.allocation.end());
    p.pool_given_back_at = pools.given_back_at;
}

// Accesses in seq order. When the device has none (no kernel of the device accesses one of
// its allocations), each allocation is assumed written by the first kernel starting at or
// after its allocation, if that kernel also ends by its free (so that it never runs past the
// free, rule 4), and read by the latest-starting kernel that ends at or before its free (ties:
// the later in kernel order; an allocation never freed: the device's last kernel), if that is
// a later kernel (docs/simulator.md, Inputs).
void build_accesses(Prepared& p) {
    const auto& t = *p.t;
    size_t n = p.korder.size();
    p.acc_begin.assign(n + 1, 0);
    if (t.accesses.size() > 0) {
        for (size_t s = 0; s < n; ++s) {
            int32_t k = p.korder[s];
            for (int64_t j = t.kernels.access_begin[k]; j < t.kernels.access_begin[k + 1]; ++j) {
                int32_t al = t.accesses.allocation[j];
                if (!p.on_device[al]) continue;
                p.acc_alloc.push_back(al);
                p.acc_write.push_back(t.accesses.mode[j] != trace::AccessMode::Read);
                p.acc_read.push_back(t.accesses.mode[j] != trace::AccessMode::Write);
            }
            p.acc_begin[s + 1] = static_cast<int64_t>(p.acc_alloc.size());
        }
        // Per device: accesses recorded on other devices say nothing about this one's.
        if (!p.acc_alloc.empty()) return;
    }
    // Accesses are assumed only where there is something to assume: kernels and allocations.
    p.assumed_accesses = !p.alloc_order.empty() && n > 0;
    const auto& a = t.allocations;
    // latest[i]: the largest seq among the first i+1 kernels by end time (kend_order)
    std::vector<int32_t> latest(n);
    for (size_t i = 0; i < n; ++i) latest[i] = std::max(i ? latest[i - 1] : -1, p.kend_order[i]);
    std::vector<std::vector<std::pair<int32_t, uint8_t>>> per(n);
    for (int32_t al : p.alloc_order) {
        const int64_t tf = a.t_free[al];
        const bool freed = tf != trace::kNoTime;
        const int64_t first = std::lower_bound(p.kstart.begin(), p.kstart.end(), a.t_alloc[al]) - p.kstart.begin();
        int64_t last = -1;
        if (!freed) {
            last = static_cast<int64_t>(n) - 1;
        } else {
            auto e = std::upper_bound(p.kend_order.begin(), p.kend_order.end(), tf,
                                      [&](int64_t f, int32_t s) { return f < p.kend[s]; });
            if (e != p.kend_order.begin()) last = latest[static_cast<size_t>(e - p.kend_order.begin() - 1)];
        }
        if (first < static_cast<int64_t>(n) && (!freed || p.kend[first] <= tf)) per[first].push_back({al, 1});
        if (last > first) per[last].push_back({al, 0});
    }
    // A kernel's operands in allocation id order, the order of a stored accesses table
    // (primary key (kernel, allocation)): the same trace with these accesses written into it
    // simulates the same (LRU's clock ticks per operand, in this order).
    for (size_t s = 0; s < n; ++s) {
        std::sort(per[s].begin(), per[s].end(), [&](const auto& x, const auto& y) { return a.id[x.first] < a.id[y.first]; });
        for (auto& [al, w] : per[s]) {
            p.acc_alloc.push_back(al);
            p.acc_write.push_back(w);
            p.acc_read.push_back(!w);
        }
        p.acc_begin[s + 1] = static_cast<int64_t>(p.acc_alloc.size());
    }
}

void build_next_use(Prepared& p) {
    size_t n = p.korder.size();
    p.next_use.assign(p.acc_alloc.size(), kNever);
    p.first_use.assign(p.t->allocations.size(), kNever);
    for (size_t s = n; s-- > 0;) {
        for (int64_t j = p.acc_begin[s]; j < p.acc_begin[s + 1]; ++j) {
            int32_t al = p.acc_alloc[j];
            p.next_use[j] = p.first_use[al] == static_cast<int32_t>(s) ? kNever : p.first_use[al];
            p.first_use[al] = static_cast<int32_t>(s);
        }
    }
    // An allocation accessed twice by one kernel: the inner loop above set next_use of the
    // first of the two to s itself; point both at the next kernel instead.
    for (size_t s = 0; s < n; ++s)
        for (int64_t j = p.acc_begin[s]; j < p.acc_begin[s + 1]; ++j)
            if (p.next_use[j] == static_cast<int32_t>(s)) {
                for (int64_t q = j + 1; q < p.acc_begin[s + 1]; ++q)
                    if (p.acc_alloc[q] == p.acc_alloc[j]) { p.next_use[j] = p.next_use[q]; break; }
            }
}

void build_operand_frees(Prepared& p) {
    const size_t n = p.korder.size();
    const auto& t_free = p.t->allocations.t_free;
    p.operand_free1.assign(n, trace::kNoTime);
    p.operand_free2.assign(n, trace::kNoTime);
    p.operand_free1_alloc.assign(n, -1);
    for (size_t s = 0; s < n; ++s)
        for (int64_t j = p.acc_begin[s]; j < p.acc_begin[s + 1]; ++j) {
            const int32_t al = p.acc_alloc[j];
            const int64_t f = t_free[al];
            if (al == p.operand_free1_alloc[s]) continue;   // an allocation accessed twice
            if (f < p.operand_free1[s]) {
                p.operand_free2[s] = p.operand_free1[s];
                p.operand_free1[s] = f;
                p.operand_free1_alloc[s] = al;
            } else if (f < p.operand_free2[s]) {
                p.operand_free2[s] = f;
            }
        }
}

void build_steps(Prepared& p) {
    const auto& t = *p.t;
    size_t n = p.korder.size();
    p.step_of.assign(n, -1);
    size_t known = 0;
    for (size_t s = 0; s < n; ++s) known += t.kernels.step[p.korder[s]] >= 0;
    std::vector<int64_t> raw(n, -1);
    // An importer that found the steps (meta steps_from) put each kernel in its step itself, by its
    // launch: one in none was launched outside every step, or before recording began though it ran
    // in the first, and the markers would count it there by its start (docs/import.md, "Steps").
    if ((known * 2 >= n || t.meta.count("steps_from") > 0) && n > 0) {
        for (size_t s = 0; s < n; ++s) raw[s] = t.kernels.step[p.korder[s]];
    } else {
        // From step markers: the step whose marker contains the kernel's start.
        std::vector<std::pair<int64_t, int64_t>> mk;   // (t_start, marker index)
        for (size_t m = 0; m < t.markers.size(); ++m)
            if (t.markers.kind[m] == trace::MarkerKind::Step) mk.push_back({t.markers.t_start[m], static_cast<int64_t>(m)});
        std::sort(mk.begin(), mk.end());
        for (size_t s = 0; s < n && !mk.empty(); ++s) {
            auto it = std::upper_bound(mk.begin(), mk.end(), std::make_pair(p.kstart[s], INT64_MAX));
            if (it == mk.begin()) continue;
            --it;
            if (p.kstart[s] < t.markers.t_end[it->second]) raw[s] = it - mk.begin();
        }
    }
    // Dense step numbers in order of appearance; a step is the run of kernels sharing one.
    int32_t cur = -1;
    int64_t last_raw = INT64_MIN;
    for (size_t s = 0; s < n; ++s) {
        if (raw[s] < 0) continue;
        if (raw[s] != last_raw) {
            ++cur;
            last_raw = raw[s];
            p.step_begin.push_back(static_cast<int32_t>(s));
        }
        p.step_of[s] = cur;
    }
    p.step_begin.push_back(static_cast<int32_t>(n));
    // Allocation step: the step of the latest kernel started at or before the allocation.
    const auto& a = t.allocations;
    p.alloc_step.assign(a.size(), -1);
    p.alloc_ordinal.assign(a.size(), -1);
    int32_t steps = static_cast<int32_t>(p.step_begin.size()) - 1;
    std::vector<int64_t> count(static_cast<size_t>(std::max(steps, 0)) + 1, 0);
    for (int32_t al : p.alloc_order) {
        auto it = std::upper_bound(p.kstart.begin(), p.kstart.end(), a.t_alloc[al]);
        int64_t s = (it - p.kstart.begin()) - 1;
        if (s < 0) continue;
        int32_t st = p.step_of[static_cast<size_t>(s)];
        if (st < 0) continue;
        p.alloc_step[al] = st;
        p.alloc_ordinal[al] = static_cast<int32_t>(count[st]++);
    }
    p.step_allocs_begin.assign(count.size() + 1, 0);
    for (size_t s = 0; s < count.size(); ++s) p.step_allocs_begin[s + 1] = p.step_allocs_begin[s] + count[s];
    p.step_allocs.assign(static_cast<size_t>(p.step_allocs_begin.back()), -1);
    for (int32_t al : p.alloc_order)
        if (p.alloc_step[al] >= 0)
            p.step_allocs[p.step_allocs_begin[p.alloc_step[al]] + p.alloc_ordinal[al]] = al;
}

// One caching model walked over the recorded events (at unlimited capacity unless given), and its peak.
struct CachingWalk {
    CachingAllocator ca;
    bool warm, warmed = false;
    std::vector<int32_t> block;
    int64_t peak = 0;
    CachingWalk(const Prepared& prepared, const AllocatorSettings& set, bool from_first_event, size_t rows,
                int64_t capacity = INT64_MAX / 2)
        : ca(capacity, set), warm(from_first_event), block(rows, -1) {
        prepared.give_pools_back(ca);
    }
    void allocate(const Prepared& prepared, size_t al) {
        const auto& rows = prepared.t->allocations;
        if (warm && !warmed) warmed = warm_start(prepared, ca, rows.t_alloc[al]);
        ca.pools_due(rows.t_alloc[al]);
        block[al] = ca.allocate(rows.bytes[al], rows.stream[al], prepared.pool_of(static_cast<int32_t>(al)));
        peak = std::max(peak, ca.reserved());
    }
    void free(const Prepared& prepared, size_t al) {
        ca.pools_due(prepared.t->allocations.t_free[al]);
        if (block[al] >= 0) ca.free(block[al]);
        block[al] = -1;
    }
};

// Live bytes at each kernel start and the peaks of both allocator models, by one walk of the
// recorded events in the simulator's order (EventCursor). Where the trace records the profiler's
// reserved peak, also the caching peaks modelled_reserved_warning compares with it.
void build_live(Prepared& p) {
    const auto& a = p.t->allocations;
    p.live_at.assign(p.korder.size(), 0);
    const std::string dev = ".device" + std::to_string(p.device);
    if (auto first = parse_integer<int64_t>(p.t->meta_or("kineto.reserved_first" + dev, "")); first && *first > 0)
        p.reserved_start = *first;
    // The caching peak under the settings the trace recorded (meta allocator.conf).
    const AllocatorSettings recorded = allocator_settings_for(*p.t, "");
    std::vector<CachingWalk> walks;
    walks.reserve(3);
    walks.emplace_back(p, recorded, true, a.size());
    const bool compared = p.t->meta.count("kineto.reserved_peak" + dev) > 0;
    if (compared) {
        walks.emplace_back(p, recorded, false, a.size());   // from an empty cache
        if (!recorded.expandable_segments)
            walks.emplace_back(p, parse_allocator_conf("expandable_segments:True", "what-if", recorded), true,
                               a.size());
    }
    int64_t live = 0;
    EventCursor events(p, *p.t);
    RecordedEvent e;
    while (events.next(e)) {
        const auto al = static_cast<size_t>(e.row);
        switch (e.what) {
            case Recorded::Free:
                live -= a.bytes[al];
                for (auto& walk : walks) walk.free(p, al);
                break;
            case Recorded::Allocation:
                live += a.bytes[al];
                for (auto& walk : walks) walk.allocate(p, al);
                p.peak_ideal = std::max(p.peak_ideal, live);
                break;
            case Recorded::KernelStart: p.live_at[static_cast<size_t>(e.seq)] = live; break;
            case Recorded::KernelEnd: break;
        }
    }
    p.peak_caching = walks[0].peak;
    if (compared) {
        p.peak_caching_cold = walks[1].peak;
        p.peak_expandable = walks.size() > 2 ? walks[2].peak : -1;
    }
}

void build_contention(Prepared& p) {
    const auto& t = *p.t;
    std::vector<std::pair<int64_t, int64_t>> nccl, h2d, d2h;
    std::vector<char> is_nccl(t.strings.size(), 0);
    for (size_t i = 0; i < t.strings.size(); ++i) is_nccl[i] = trace::is_comm_kernel(t.strings[i]);
    for (size_t s = 0; s < p.korder.size(); ++s) {
        int64_t name = t.kernels.name[p.korder[s]];
        if (name >= 0 && static_cast<size_t>(name) < is_nccl.size() && is_nccl[name])
            nccl.push_back({p.kstart[s], p.kend[s]});
    }
    for (size_t c = 0; c < t.copies.size(); ++c) {
        if (t.copies.device[c] != p.device) continue;
        if (t.copies.kind[c] == trace::CopyKind::H2D) h2d.push_back({t.copies.t_start[c], t.copies.t_end[c]});
        if (t.copies.kind[c] == trace::CopyKind::D2H) d2h.push_back({t.copies.t_start[c], t.copies.t_end[c]});
    }
    p.nccl.build(std::move(nccl));
    p.h2d_busy.build(std::move(h2d));
    p.d2h_busy.build(std::move(d2h));
}

}  // namespace

EventStreams event_streams(const trace::TraceData& t, int32_t device) {
    EventStreams e;
    const auto& k = t.kernels;
    std::vector<int32_t> idx;
    for (size_t i = 0; i < k.size(); ++i)
        if (k.device[i] == device) idx.push_back(static_cast<int32_t>(i));
    e.korder = sorted_indices(std::move(idx), [&](int32_t x, int32_t y) {
        return k.t_start[x] != k.t_start[y] ? k.t_start[x] < k.t_start[y] : x < y;
    });
    const size_t n = e.korder.size();
    e.kstart.resize(n);
    e.kend.resize(n);
    for (size_t s = 0; s < n; ++s) {
        e.kstart[s] = k.t_start[e.korder[s]];
        e.kend[s] = k.t_end[e.korder[s]];
    }
    std::vector<int32_t> seqs(n);
    std::iota(seqs.begin(), seqs.end(), 0);
    e.kend_order = sorted_indices(std::move(seqs), [&](int32_t x, int32_t y) {
        return e.kend[x] != e.kend[y] ? e.kend[x] < e.kend[y] : x < y;
    });
    const auto& a = t.allocations;
    std::vector<int32_t> aidx, fidx;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a.device[i] != device) continue;
        aidx.push_back(static_cast<int32_t>(i));
        // Freed at the instant it was made: EventCursor frees it right after its allocation.
        if (a.t_free[i] != trace::kNoTime && a.t_free[i] != a.t_alloc[i]) fidx.push_back(static_cast<int32_t>(i));
    }
    e.alloc_order = sorted_indices(std::move(aidx), [&](int32_t x, int32_t y) {
        return a.t_alloc[x] != a.t_alloc[y] ? a.t_alloc[x] < a.t_alloc[y] : x < y;
    });
    e.free_order = sorted_indices(std::move(fidx), [&](int32_t x, int32_t y) {
        return a.t_free[x] != a.t_free[y] ? a.t_free[x] < a.t_free[y] : x < y;
    });
    return e;
}

std::shared_ptr<const Prepared> prepare(const trace::TraceData& t, int32_t device) {
    trace::require_ok(trace::check_trace(t), t.path.empty() ? "trace" : t.path);
    auto p = std::make_shared<Prepared>();
    p->t = &t;
    if (device >= 0) {
        // A device the trace does not have would simulate nothing and report a clean run.
        std::vector<int32_t> devs(t.allocations.device.begin(), t.allocations.device.end());
        devs.insert(devs.end(), t.kernels.device.begin(), t.kernels.device.end());
        std::sort(devs.begin(), devs.end());
        devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
        if (!std::binary_search(devs.begin(), devs.end(), device)) {
            std::string list;
            for (int32_t d : devs) list += (list.empty() ? "" : ", ") + std::to_string(d);
            throw Error(where(t.path.empty() ? "trace" : t.path,
                              "has no device " + std::to_string(device) + " (--device); its devices: " +
                                  (list.empty() ? "none" : list)));
        }
    }
    p->device = device != kAutoDevice ? device : pick_device(t);
    static_cast<EventStreams&>(*p) = event_streams(t, p->device);
    build_on_device(*p);
    build_pools(*p);
    build_accesses(*p);
    build_next_use(*p);
    build_operand_frees(*p);
    build_steps(*p);
    build_live(*p);
    p->live_max.build(p->live_at);
    build_contention(*p);
    const auto& a = t.allocations;
    int64_t b = INT64_MAX, e = INT64_MIN;
    for (int32_t al : p->alloc_order) {
        b = std::min(b, a.t_alloc[al]);
        e = std::max(e, a.t_alloc[al]);
        if (a.t_free[al] != trace::kNoTime) e = std::max(e, a.t_free[al]);
    }
    for (size_t s = 0; s < p->korder.size(); ++s) {
        b = std::min(b, p->kstart[s]);
        e = std::max(e, p->kend[s]);
    }
    p->t_begin = b == INT64_MAX ? 0 : b;
    p->t_end = e == INT64_MIN ? 0 : e;
    p->rows = static_cast<int64_t>(p->alloc_order.size() + p->korder.size() + p->acc_alloc.size());
    return p;
}

int64_t baseline_peak(const Prepared& p, AllocatorKind allocator) {
    return allocator == AllocatorKind::Caching ? p.peak_caching : p.peak_ideal;
}

int64_t baseline_peak(const Prepared& p, const std::string& allocator) {
    return baseline_peak(p, parse_allocator(allocator));
}

CachingUnderLimit caching_under_limit(const Prepared& prepared, const std::string& allocator_conf, int64_t capacity) {
    // The walk of build_live, one caching model with `capacity` as the device's limit: a request
    // that finds no free block cudaMallocs (or maps pages); when that would take the reserved
    // bytes above the capacity, the model gives cached memory back as PyTorch does
    // (release_available_cached_blocks, then release_cached_blocks) and tries again
    // (CachingAllocator::allocate); a request still unserved is PyTorch's OutOfMemoryError.
    CachingWalk walk(prepared, allocator_settings_for(*prepared.t, allocator_conf), true,
                     prepared.t->allocations.size(), capacity);
    CachingUnderLimit out;
    EventCursor events(prepared, *prepared.t);
    RecordedEvent event;
    // the counters when the second step's first allocation is made (-1: not yet)
    int64_t at_releases = -1, at_allocs = 0, at_frees = 0, at_alloc_bytes = 0, at_free_bytes = 0;
    while (events.next(event)) {
        const auto al = static_cast<size_t>(event.row);
        if (event.what == Recorded::Free) {
            walk.free(prepared, al);
        } else if (event.what == Recorded::Allocation) {
            if (at_releases < 0 && prepared.alloc_step[al] >= 1) {
                at_releases = walk.ca.full_releases();
                at_allocs = walk.ca.device_allocs();
                at_frees = walk.ca.device_frees();
                at_alloc_bytes = walk.ca.device_alloc_bytes();
                at_free_bytes = walk.ca.device_free_bytes();
            }
            walk.allocate(prepared, al);
            if (walk.block[al] < 0) {
                out.runs = false;
                out.failed_row = static_cast<int64_t>(al);
                out.bytes_needed = walk.ca.rounded(prepared.t->allocations.bytes[al]);
                break;
            }
        }
    }
    out.reserved_peak = walk.peak;
    out.retries = walk.ca.retried_requests();
    out.releases = walk.ca.full_releases();
    out.device_allocs = walk.ca.device_allocs();
    out.device_frees = walk.ca.device_frees();
    out.alloc_bytes = walk.ca.device_alloc_bytes();
    out.free_bytes = walk.ca.device_free_bytes();
    out.steps = prepared.step_begin.empty() ? 0 : static_cast<int64_t>(prepared.step_begin.size()) - 1;
    if (at_releases >= 0) {
        out.later_releases = out.releases - at_releases;
        out.later_allocs = out.device_allocs - at_allocs;
        out.later_frees = out.device_frees - at_frees;
        out.later_alloc_bytes = out.alloc_bytes - at_alloc_bytes;
        out.later_free_bytes = out.free_bytes - at_free_bytes;
    }
    return out;
}

int32_t device_of(const Prepared& p) { return p.device; }
bool assumed_accesses(const Prepared& p) { return p.assumed_accesses; }
bool zero_duration(const Prepared& prepared) {
    return !prepared.t->order_only() && prepared.t_end == prepared.t_begin && !prepared.alloc_order.empty();
}

std::vector<int32_t> devices_with_allocations(const trace::TraceData& trace) {
    std::vector<int32_t> devices(trace.allocations.device.begin(), trace.allocations.device.end());
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    return devices;
}

void require_allocations(const trace::TraceData& trace, const Prepared& prepared, int32_t requested,
                         const std::string& path) {
    const auto& devices = trace.allocations.device;
    if (std::find(devices.begin(), devices.end(), prepared.device) != devices.end()) return;
    // What to do instead: a trace without allocations needs its memory recorded; else the
    // devices that have them (--device given one without: "use --device" told it what it did).
    if (devices.empty())
        throw Error(path +
                        ": no allocations: nothing to simulate under a memory limit (a timeline only: "
                        "import its memory snapshot, or a trace recorded with memory)",
                    Error::Kind::BadInput);
    const std::vector<int32_t> with = devices_with_allocations(trace);
    std::string list;
    for (int32_t number : with)
        list += (list.empty() ? "" : ", ") + std::to_string(number) + (number < 0 ? " (the host)" : "");
    throw Error(path + ": no allocations on device " + std::to_string(prepared.device) +
                    (requested == kAutoDevice ? " (the GPU simulated by default)" : " (--device)") +
                    ": nothing to simulate under a memory limit; the devices with allocations: " + list +
                    " (--device " + std::to_string(with.front()) + ")",
                Error::Kind::BadInput);
}

std::vector<std::string> trace_warnings(const Prepared& p) {
    std::vector<std::string> w;
    std::string dev = "device " + std::to_string(p.device);
    if (p.t->order_only())
        w.push_back("the trace's timing is order only (its source has no timestamps): times are event numbers, so "
                    "throughput loss, stalls and makespan are not times and are not reported; memory figures stand");
    else if (zero_duration(p))
        w.push_back("every recorded event of " + dev +
                    " is at one instant: the trace has no duration, so a "
                    "throughput loss (a share of it) is not defined and is not reported, and a sweep does not "
                    "bisect; memory figures, stalls and the simulated makespan stand");
    if (p.alloc_order.empty())
        w.push_back(dev + " has no allocations: there is nothing to limit, so the run says nothing about memory");
    if (p.korder.empty())
        w.push_back(dev + " has no kernels (a memory snapshot?): nothing waits for a swap-in, so the throughput "
                          "loss comes from swap-outs delaying allocations only and understates the real cost");
    else if (p.assumed_accesses)
        w.push_back("the trace has no accesses: each allocation is assumed written by the first kernel after its "
                    "allocation and read by the last kernel before its free (coarser results; docs/simulator.md)");
    return w;
}

std::string modelled_reserved_warning(const Prepared& prepared, const Config& config, int64_t modelled) {
    if (parse_allocator(config.allocator) != AllocatorKind::Caching) return "";
    // A Kineto trace keeps the profiler's reserved peak (Total Reserved), not its segments.
    const auto recorded =
        parse_integer<int64_t>(prepared.t->meta_or("kineto.reserved_peak.device" + std::to_string(prepared.device), ""));
    if (!recorded || *recorded <= 0) return "";
    const int64_t bytes = *recorded;
    auto ratio = [bytes](int64_t other) { return static_cast<double>(other) / static_cast<double>(bytes); };
    // "More than 5% of the recorded peak", in whole bytes: for a whole difference d, d > R/20 exactly
    // when d > floor(R/20) (the ratios' difference in doubles said 5.000% was more than 5%).
    auto more_than_5_percent = [bytes](int64_t one, int64_t other) {
        return (one > other ? one - other : other - one) > bytes / 20;
    };
    auto times = [&](int64_t other) {
        char text[32];
        std::snprintf(text, sizeof text, "x%.3f", ratio(other));
        return std::string(text);
    };
    std::string said;
    // The warm start, where it made the figure: say so, and what an empty cache would have reserved.
    const int64_t cold = prepared.peak_caching_cold;
    if (prepared.reserved_start > 0 && cold >= 0 && more_than_5_percent(modelled, cold))
        said = "the caching allocator model starts from the " + format_bytes(prepared.reserved_start) +
               " the profiler recorded reserved at its first memory event (Total Reserved): memory the allocator "
               "held before profiling, which the model's new segments take before the GPU's (the trace does not say "
               "how it was laid out); from an empty cache the model reserves " +
               format_bytes(cold) + " (" + times(cold) + ")";
    if (!more_than_5_percent(modelled, bytes)) return said;
    said += std::string(said.empty() ? "" : "; ") + "the caching allocator model reserves " + format_bytes(modelled) +
            " at unlimited capacity where the profiler recorded a reserved peak of " + format_bytes(bytes) +
            " (Total Reserved, " + times(modelled) + "): ";
    if (modelled > bytes)
        said +=
            "its blocks took more segments than the run's allocator held, whose settings the profiler does not record";
    // A first figure of 0 is recorded (the cache was empty when profiling began): the run grew it.
    else if (const auto first = parse_integer<int64_t>(
                 prepared.t->meta_or("kineto.reserved_first.device" + std::to_string(prepared.device), ""));
             !first || *first < 0)
        said +=
            "the trace does not say what the allocator held at its first memory event (imported by an earlier "
            "mhc: import it again), so the model starts with no segments, and memory reserved before profiling is "
            "the likely difference";
    else
        said += "the run's allocator reserved more during the trace than the model does from the " +
                format_bytes(std::max<int64_t>(prepared.reserved_start, 0)) +
                " held at its first memory event; the trace does not say on "
                "which stream each block was allocated (the allocator keeps a pool per stream) nor the allocator's "
                "settings";
    said += "; a capacity given as a share is a share of the model's figure";
    // The what-if a user would try first (computed once per prepared trace), unless it is the run's own.
    const int64_t expandable = prepared.peak_expandable;
    if (expandable >= 0 && !allocator_settings_for(*prepared.t, config.allocator_conf).expandable_segments &&
        !more_than_5_percent(expandable, bytes))
        said += "; with expandable segments it reserves " + format_bytes(expandable) + " (" + times(expandable) +
                "): the run may have used them (--allocator-conf expandable_segments:True)";
    return said;
}

}  // namespace mhc::sim

// ---- the prepared form kept in the trace file (trace/cache.hpp) ----

namespace mhc::sim {

namespace {

// The values of a Prepared that are not arrays.
struct PreparedScalars {
    int64_t t_begin, t_end, rows, peak_ideal, peak_caching, reserved_start, peak_caching_cold, peak_expandable;
    uint64_t live_max_n;
    int32_t device;
    uint8_t assumed_accesses;
};

// Every array of a Prepared, by name: the one list the cache writes and reads.
template <class P, class F>
void each_array(P& p, F&& f) {
    f("korder", p.korder); f("kstart", p.kstart); f("kend", p.kend); f("kend_order", p.kend_order);
    f("alloc_order", p.alloc_order); f("free_order", p.free_order);
    f("acc_begin", p.acc_begin); f("acc_alloc", p.acc_alloc); f("acc_write", p.acc_write); f("acc_read", p.acc_read);
    f("next_use", p.next_use); f("first_use", p.first_use);
    f("operand_free1", p.operand_free1); f("operand_free2", p.operand_free2); f("operand_free1_alloc", p.operand_free1_alloc);
    f("on_device", p.on_device);
    f("step_of", p.step_of); f("step_begin", p.step_begin); f("alloc_step", p.alloc_step); f("alloc_ordinal", p.alloc_ordinal);
    f("step_allocs_begin", p.step_allocs_begin); f("step_allocs", p.step_allocs); f("live_at", p.live_at);
    f("live_max", p.live_max.t);
    f("nccl.begin", p.nccl.begin); f("nccl.end", p.nccl.end); f("h2d_busy.begin", p.h2d_busy.begin);
    f("h2d_busy.end", p.h2d_busy.end); f("d2h_busy.begin", p.d2h_busy.begin); f("d2h_busy.end", p.d2h_busy.end);
}

// Each allocation's private pool (build_pools), an array of its own: an entry kept by a version
// before pools (2026-12-05) lacks it and reads as absent, so its caching peak, made with one pool
// per stream, is not served. Empty in a trace without private pools.
constexpr const char* kAllocPool = "alloc_pool";
// Per pool, when the recording gave it back (build_pools); an entry kept by a version before it
// (2026-12-05) lacks it and reads as absent.
constexpr const char* kPoolRelease = "pool_given_back_at";

// The program's host events in event order (build_on_device). Named anew when that order changed
// (2026-12-05): an entry kept in a trace file by an earlier version lacks it and reads as absent.
constexpr const char* kHostEvents = "host_events.ordered";

std::string cache_key(int32_t device) {
    return "sim.prepared device=" + (device == kAutoDevice ? std::string("auto") : std::to_string(device));
}

bool all_below(const std::vector<int32_t>& v, size_t n) {
    return std::all_of(v.begin(), v.end(), [n](int32_t x) { return x >= 0 && static_cast<size_t>(x) < n; });
}

// The arrays index each other and the trace's columns: a cached form that does not fit the
// trace it is read with is not used (the checksum finds damage; this finds a mismatch).
bool fits(const Prepared& p, const trace::TraceData& t) {
    const size_t n = p.korder.size(), na = t.allocations.size();
    return p.kstart.size() == n && p.kend.size() == n && p.kend_order.size() == n && p.acc_begin.size() == n + 1 &&
           all_below(p.korder, t.kernels.size()) && all_below(p.kend_order, n) && all_below(p.alloc_order, na) &&
           all_below(p.free_order, na) && all_below(p.acc_alloc, na) && p.acc_begin.front() == 0 &&
           std::is_sorted(p.acc_begin.begin(), p.acc_begin.end()) &&
           static_cast<size_t>(p.acc_begin.back()) == p.acc_alloc.size() && p.acc_write.size() == p.acc_alloc.size() &&
           p.acc_read.size() == p.acc_alloc.size() && p.next_use.size() == p.acc_alloc.size() &&
           p.first_use.size() == na && p.on_device.size() == na && (p.alloc_pool.empty() || p.alloc_pool.size() == na) && p.operand_free1.size() == n &&
           p.operand_free2.size() == n && p.operand_free1_alloc.size() == n && p.step_of.size() == n &&
           p.alloc_step.size() == na && p.alloc_ordinal.size() == na && p.live_at.size() == n &&
           !p.step_begin.empty() && !p.step_allocs_begin.empty() && all_below(p.step_allocs, na) &&
           p.live_max.t.size() == 2 * p.live_max.n && p.nccl.begin.size() == p.nccl.end.size() &&
           p.h2d_busy.begin.size() == p.h2d_busy.end.size() && p.d2h_busy.begin.size() == p.d2h_busy.end.size();
}

std::shared_ptr<Prepared> read_prepared(const trace::TraceData& t, int32_t device) {
    auto c = trace::read_cache(t.path, cache_key(device), t.fingerprint);
    if (!c) return nullptr;
    auto p = std::make_shared<Prepared>();
    p->t = &t;
    std::vector<PreparedScalars> s;
    std::vector<int64_t> host;
    bool ok = c->get("scalars", s) && s.size() == 1 && c->get(kHostEvents, host) && host.size() % 2 == 0 &&
              c->get(kAllocPool, p->alloc_pool) && c->get(kPoolRelease, p->pool_given_back_at);
    each_array(*p, [&](const char* name, auto& v) { ok = ok && c->get(name, v); });
    if (!ok || !c->finish()) return nullptr;
    p->t_begin = s[0].t_begin; p->t_end = s[0].t_end; p->rows = s[0].rows;
    p->peak_ideal = s[0].peak_ideal; p->peak_caching = s[0].peak_caching; p->live_max.n = s[0].live_max_n;
    p->reserved_start = s[0].reserved_start;
    p->peak_caching_cold = s[0].peak_caching_cold;
    p->peak_expandable = s[0].peak_expandable;
    p->device = s[0].device; p->assumed_accesses = s[0].assumed_accesses != 0;
    for (size_t i = 0; i < host.size(); i += 2) p->host_events.push_back({host[i], host[i + 1]});
    return fits(*p, t) ? p : nullptr;
}

void write_prepared(const Prepared& p, const trace::TraceData& t, int32_t device, int64_t counter) {
    const std::vector<PreparedScalars> scalars = {{p.t_begin, p.t_end, p.rows, p.peak_ideal, p.peak_caching,
                                                   p.reserved_start, p.peak_caching_cold, p.peak_expandable,
                                                   p.live_max.n, p.device, static_cast<uint8_t>(p.assumed_accesses)}};
    std::vector<int64_t> host;
    for (auto [time, bytes] : p.host_events) host.insert(host.end(), {time, bytes});
    trace::CacheWriter w, columns;
    w.put("scalars", scalars);
    w.put(kHostEvents, host);
    w.put(kAllocPool, p.alloc_pool);
    w.put(kPoolRelease, p.pool_given_back_at);
    each_array(p, [&](const char* name, const auto& v) { w.put(name, v); });
    std::vector<std::pair<std::string, const trace::CacheWriter*>> entries = {{cache_key(device), &w}};
    if (!t.from_cache) {   // the trace's columns too, in the same transaction
        trace::cache_columns(t, columns);
        entries.push_back({trace::kTraceCacheKey, &columns});
    }
    trace::write_cache(t.path, t.fingerprint, counter, entries);
}

}  // namespace

std::shared_ptr<const Prepared> prepare_cached(const trace::TraceData& t, int32_t device) {
    if (!t.path.empty() && !t.fingerprint.empty() && trace::cache_enabled())
        if (auto p = read_prepared(t, device)) {
            p->requested_device = device;
            p->from_cache = true;
            return p;
        }
    auto p = std::const_pointer_cast<Prepared>(prepare(t, device));
    p->requested_device = device;
    return p;
}

std::shared_ptr<const Prepared> prepare_kept(const trace::TraceData& t, int32_t device) {
    auto p = prepare_cached(t, device);
    keep_prepared(*p, 0);
    return p;
}

void keep_prepared(const Prepared& p, int writes_since_read) {
    if (p.from_cache || !p.t || p.t->path.empty() || p.t->fingerprint.empty() || !trace::cache_enabled()) return;
    if (p.t->change_counter < 0) return;
    // Each committed write transaction moves the counter on by one: the file is as it was read,
    // plus the command's own stores, only if the counter moved by exactly those.
    write_prepared(p, *p.t, p.requested_device, p.t->change_counter + writes_since_read);
}

}  // namespace mhc::sim
