#include "mhc/sim/allocator_compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "mhc/common/error.hpp"
#include "mhc/common/json.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/trace/check.hpp"

namespace mhc::sim {

double AllocatorComparison::peak_error() const {
    return recorded_peak > 0 ? static_cast<double>(model_peak - recorded_peak) / static_cast<double>(recorded_peak) : 0;
}
double AllocatorComparison::segment_error() const {
    return recorded_segments > 0
               ? static_cast<double>(model_segments - recorded_segments) / static_cast<double>(recorded_segments)
               : 0;
}

namespace {

struct Ev {
    int64_t t;
    int kind;                    // 0 free, 1 empty_cache (or a pool given back), 2 alloc
    int64_t i;                   // allocation index; kind 1: the call's index, or minus the pool given back
    bool free_at_once = false;   // a kind-2 free: of allocation i, made at this instant (trace::MemoryEvent's order)
    bool operator<(const Ev& o) const {
        if (t != o.t) return t < o.t;
        if (kind != o.kind) return kind < o.kind;
        if (i != o.i) return i < o.i;
        return free_at_once < o.free_at_once;
    }
};

struct Run {
    int64_t peak = 0, segments = 0, mallocs = 0, frees = 0, seeded = 0, seeded_bytes = 0, seeded_blocks = 0;
    std::vector<int64_t> reserved_at;   // per time of `times`
    std::vector<std::pair<size_t, size_t>> log_at;   // model log entries [begin, end) per time
    std::vector<int64_t> alloc_at;      // first allocation index at each time (-1: none)
    std::vector<CachingAllocator::SegmentEvent> log;
};

// One torch.cuda.empty_cache() as the recording shows it: segment frees from `first` to `last`;
// whose segments they were: the default pool's (any), private pools' (their numbers: a pool let go
// of, or emptied by empty_cache of that pool).
struct CacheCall {
    int64_t first = 0, last = 0, frees = 0;
    bool of_default = false;
    std::set<int64_t> pools;
};

// Segment frees at times when nothing is allocated, grouped into calls: consecutive ones with no
// allocation between them are one call (empty_cache frees its segments one cudaFree at a time).
std::vector<CacheCall> empty_cache_calls(const std::vector<const trace::Segment*>& segments,
                                         const std::set<int64_t>& alloc_times, const PrivatePools& pools) {
    std::map<int64_t, std::vector<int64_t>> frees_at;   // time -> the pools of the segments freed then
    for (const auto* seg : segments)
        if (seg->t_free != trace::kNoTime && !alloc_times.count(seg->t_free)) {
            auto pool_of = pools.segment.find(seg);
            frees_at[seg->t_free].push_back(pool_of == pools.segment.end() ? 0 : pool_of->second);
        }
    std::vector<CacheCall> calls;
    for (const auto& [tm, of] : frees_at) {
        bool same_call = !calls.empty();
        if (same_call) {
            auto next_alloc = alloc_times.upper_bound(calls.back().last);
            same_call = next_alloc == alloc_times.end() || *next_alloc > tm;
        }
        if (same_call) {
            calls.back().last = tm;
        } else {
            CacheCall call;
            call.first = call.last = tm;
            calls.push_back(call);
        }
        calls.back().frees += static_cast<int64_t>(of.size());
        for (int64_t pool : of) {
            if (pool == 0) calls.back().of_default = true;
            else calls.back().pools.insert(pool);
        }
    }
    return calls;
}

// "cudaMalloc 2 MiB (stream 0)": a segment made or given back, by the model or the recording.
std::string seg_words(bool expandable, bool alloc, int64_t bytes, int64_t stream) {
    std::string what = expandable ? (alloc ? "map " : "unmap ") : (alloc ? "cudaMalloc " : "cudaFree ");
    return what + format_bytes(bytes) + " (stream " + std::to_string(stream) + ")";
}
std::string seg_words(const CachingAllocator::SegmentEvent& e) { return seg_words(e.expandable, e.alloc, e.bytes, e.stream); }

using Deltas = std::vector<std::pair<int64_t, int64_t>>;   // (time, reserved bytes added)

// The reserved peak of a device's segment deltas (sorted here: at one time, frees first).
int64_t peak_of(Deltas& d) {
    std::sort(d.begin(), d.end());
    int64_t cur = 0, peak = 0;
    for (size_t k = 0; k < d.size(); ++k) {
        cur += d[k].second;
        if (k + 1 == d.size() || d[k + 1].first != d[k].first) peak = std::max(peak, cur);
    }
    return peak;
}

// The recorded segment deltas of `device` (-1: the device with the largest recorded reserved
// peak, which `device` is set to).
Deltas recorded_deltas(const trace::TraceData& t, const std::vector<trace::Segment>& segments, int32_t& device) {
    if (segments.empty())
        throw Error(t.path + ": no segments recorded: import a PyTorch memory snapshot (mhc import), or record "
                             "with the CUPTI recorder without --torch, to compare the allocator model with");
    // A stream-ordered pool's reserved memory (mhc record --torch: cudaMallocAsync) is not what
    // PyTorch's caching allocator holds: the model has nothing to be compared with there.
    if (auto it = t.meta.find("segments.from_pools"); it != t.meta.end() && it->second != "0")
        throw Error(t.path + ": " + it->second +
                    " of its segments rows are a stream-ordered pool's reserved memory (cudaMallocAsync, recorded "
                    "with --torch), not PyTorch's caching allocator's segments: record without --torch to compare "
                    "the allocator model with");
    std::map<int32_t, Deltas> deltas;
    for (const auto& s : segments) {
        deltas[s.device].push_back({s.t_alloc, s.bytes});
        if (s.t_free != trace::kNoTime) deltas[s.device].push_back({s.t_free, -s.bytes});
    }
    if (device < 0) {
        int64_t best = -1;
        for (auto& [dev, d] : deltas) {
            int64_t p = peak_of(d);
            if (p > best) {
                best = p;
                device = dev;
            }
        }
    }
    if (!deltas.count(device))
        throw Error(t.path + ": no segments recorded on device " + std::to_string(device));
    Deltas rec = std::move(deltas[device]);
    std::sort(rec.begin(), rec.end());
    return rec;
}

// The settings the model runs under: recorded, else inferred from expandable segments, then the
// override; where they came from in c.settings_source.
AllocatorSettings model_settings(const trace::TraceData& t, const std::vector<const trace::Segment*>& segments,
                                 const std::string& conf_override, AllocatorComparison& c) {
    AllocatorSettings base;
    bool any_expandable = false;
    for (const auto* s : segments) any_expandable |= s->expandable;
    auto mc = t.meta.find("allocator.conf");
    if (mc != t.meta.end()) {
        base = allocator_settings_for(t, "");
        c.settings_source = "recorded (meta allocator.conf)";
    } else if (any_expandable) {
        base.expandable_segments = true;
        c.settings_source = "inferred: the recorded segments are expandable (no settings recorded)";
    } else {
        c.settings_source = "defaults (no settings recorded)";
    }
    AllocatorSettings set = parse_allocator_conf(conf_override, "--allocator-conf", base);
    if (!conf_override.empty()) c.settings_source += ", then --allocator-conf";
    c.settings = set.conf();
    return set;
}

// Consistency of the recording: allocations of the device whose bytes lie in no segment alive
// when they were made, by mhc check's rule outside-segment itself (one reading of the instant:
// a segment made or freed at a block's time holds it; adjacent rows are one range; address 0,
// not known, is not judged).
int64_t blocks_outside_segments(const trace::TraceData& t, const std::vector<const trace::Segment*>& segments,
                                int32_t device) {
    std::vector<trace::Segment> rows;
    rows.reserve(segments.size());
    for (const auto* segment : segments) rows.push_back(*segment);
    int64_t outside = 0;
    for (size_t row : trace::allocations_outside_segments(t.allocations, rows))
        outside += t.allocations.device[row] == device;
    return outside;
}

// What the model replays: allocations of the device, and the recording's torch.cuda.empty_cache()
// calls (segment frees that no allocation explains), mirrored at each call's last segment free.
std::vector<Ev> model_events(const trace::TraceData& t, const std::vector<const trace::Segment*>& segments,
                             int32_t device, const PrivatePools& pools, std::vector<CacheCall>& calls,
                             AllocatorComparison& cmp) {
    const auto& a = t.allocations;
    std::vector<Ev> evs;
    std::set<int64_t> alloc_times;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a.device[i] != device) continue;
        ++cmp.allocations;
        evs.push_back({a.t_alloc[i], 2, static_cast<int64_t>(i)});
        alloc_times.insert(a.t_alloc[i]);
        if (a.t_free[i] == a.t_alloc[i]) evs.push_back({a.t_free[i], 2, static_cast<int64_t>(i), true});
        else if (a.t_free[i] != trace::kNoTime) evs.push_back({a.t_free[i], 0, static_cast<int64_t>(i)});
    }
    calls = empty_cache_calls(segments, alloc_times, pools);
    for (size_t k = 0; k < calls.size(); ++k) {
        const CacheCall& call = calls[k];
        evs.push_back({call.last, 1, static_cast<int64_t>(k)});
        cmp.empty_cache_segment_frees += call.frees;
        cmp.empty_cache_span_ns += call.last - call.first;
    }
    cmp.empty_cache_calls = static_cast<int64_t>(calls.size());
    // A private pool the recording gave back is given back at its last segment free, also where
    // that free is no empty_cache call (an allocation made at the same time).
    for (size_t pool = 1; pool < pools.given_back_at.size(); ++pool)
        if (pools.given_back_at[pool] != trace::kNoTime)
            evs.push_back({pools.given_back_at[pool], 1, -static_cast<int64_t>(pool)});
    std::sort(evs.begin(), evs.end());
    return evs;
}

// The model's run over the events, sampled after each of `times`; warm: starting from the
// segments the recording held when it began, their blocks placed where recorded.
class ModelRun {
public:
    ModelRun(const trace::TraceData& trace_data, const std::vector<const trace::Segment*>& segments,
             const AllocatorSettings& set, bool warm, const PrivatePools& pools, const std::vector<CacheCall>& calls)
        : t_(trace_data), warm_(warm), pools_(pools), calls_(calls), ca_(INT64_MAX / 2, set), block_(trace_data.allocations.size(), -1) {
        ca_.set_log(&r_.log);
        if (warm)
            for (const auto* s : segments)
                if (s->reconstructed && !s->expandable && s->t_alloc == 0) {
                    auto p = pools_.segment.find(s);
                    int32_t id = ca_.add_cached_segment(s->bytes, s->stream, s->bytes == CachingAllocator::kSmallBuffer,
                                                        p == pools_.segment.end() ? 0 : p->second);
                    seeded_[s->address] = {id, s->bytes};
                    ++r_.seeded;
                    r_.seeded_bytes += s->bytes;
                }
    }

    Run run(const std::vector<Ev>& evs, const std::vector<int64_t>& times) {
        r_.peak = ca_.reserved();
        size_t k = 0;
        for (int64_t tm : times) {
            const size_t log0 = r_.log.size();
            int64_t first_alloc = -1;
            for (; k < evs.size() && evs[k].t == tm; ++k) {
                const Ev& e = evs[k];
                if (e.kind == 0 || e.free_at_once) {
                    if (block_[static_cast<size_t>(e.i)] >= 0) ca_.free(block_[static_cast<size_t>(e.i)]);
                    block_[static_cast<size_t>(e.i)] = -1;
                } else if (e.kind == 1 && e.i < 0) {
                    ca_.release_pool(-e.i);
                } else if (e.kind == 1) {
                    // The call's pools: the default one (empty_cache), private ones let go of.
                    const CacheCall& call = calls_[static_cast<size_t>(e.i)];
                    if (call.of_default || call.pools.empty()) ca_.empty_cache();
                    for (int64_t pool : call.pools) ca_.release_pool(pool);
                } else {
                    if (first_alloc < 0) first_alloc = e.i;
                    allocate(static_cast<size_t>(e.i));
                }
                r_.peak = std::max(r_.peak, ca_.reserved());
            }
            r_.reserved_at.push_back(ca_.reserved());
            r_.log_at.push_back({log0, r_.log.size()});
            r_.alloc_at.push_back(first_alloc);
        }
        r_.mallocs = ca_.device_allocs();
        r_.frees = ca_.device_frees();
        r_.segments = r_.seeded + r_.mallocs;
        return std::move(r_);
    }

private:
    // An allocation made before the recording began goes where it was, inside its seeded segment.
    void allocate(size_t i) {
        const auto& a = t_.allocations;
        int32_t b = -1;
        if (warm_ && a.t_alloc[i] == 0 && !seeded_.empty()) {
            auto it = seeded_.upper_bound(a.address[i]);
            if (it != seeded_.begin()) {
                --it;
                if (a.address[i] + a.bytes[i] <= it->first + it->second.second) {
                    b = ca_.allocate_at(it->second.first, a.address[i] - it->first, a.bytes[i]);
                    if (b >= 0) ++r_.seeded_blocks;
                }
            }
        }
        if (b < 0) b = ca_.allocate(a.bytes[i], a.stream[i], pools_.allocation[i]);
        block_[i] = b;
    }

    const trace::TraceData& t_;
    const bool warm_;
    const PrivatePools& pools_;
    const std::vector<CacheCall>& calls_;
    Run r_;
    CachingAllocator ca_;
    std::map<int64_t, std::pair<int32_t, int64_t>> seeded_;   // address -> (segment, bytes)
    std::vector<int32_t> block_;
};

// The first divergence in words: what the model and the recording did to their segments in
// (since, tm], and the likely reason.
std::string explain_divergence(const trace::TraceData& t, const std::vector<const trace::Segment*>& segments,
                               const Run& w, size_t k, int64_t since, int64_t tm, int64_t recorded) {
    const auto& a = t.allocations;
    const int64_t ai = w.alloc_at[k];
    std::string model;
    for (size_t q = w.log_at[k].first; q < w.log_at[k].second; ++q) model += (model.empty() ? "" : ", ") + seg_words(w.log[q]);
    std::string recd;
    int64_t rec_alloc = 0, rec_free = 0;
    for (const auto* s : segments) {
        if (s->t_alloc > since && s->t_alloc <= tm && !s->reconstructed) {
            recd += (recd.empty() ? "" : ", ") + seg_words(s->expandable, true, s->bytes, s->stream);
            ++rec_alloc;
        }
        if (s->t_free != trace::kNoTime && s->t_free > since && s->t_free <= tm) {
            recd += (recd.empty() ? "" : ", ") + seg_words(s->expandable, false, s->bytes, s->stream);
            ++rec_free;
        }
    }
    std::string at = t.order_only() ? "at event #" + std::to_string(tm) : "at " + std::to_string(tm) + " ns";
    if (ai >= 0)
        at += " (allocation " + std::to_string(a.id[static_cast<size_t>(ai)]) + ", " +
              format_bytes(a.bytes[static_cast<size_t>(ai)]) + ", stream " + std::to_string(a.stream[static_cast<size_t>(ai)]) +
              ")";
    std::string hint;
    if (model.empty() && rec_alloc > 0)
        hint = "the recording made a segment where the model reused a cached block: the blocks were placed "
               "differently before, or the recording's cache had been emptied";
    else if (!model.empty() && rec_alloc == 0 && rec_free == 0)
        hint = "the model made a segment where the recording had cached room: the blocks were placed "
               "differently before (best-fit ties, rounding, or streams)";
    else if (rec_free > 0 && w.log_at[k].first == w.log_at[k].second)
        hint = "the recording gave segments back (an out-of-memory retry or garbage collection) that the "
               "model keeps at unlimited capacity";
    else
        hint = "both changed their segments, by different amounts";
    return at + ": model " + (model.empty() ? "no segment change" : model) + "; recording " +
           (recd.empty() ? "no segment change" : recd) + "; reserved " + format_bytes(w.reserved_at[k]) + " (model) vs " +
           format_bytes(recorded) + " (recorded): " + hint;
}

// Reserved over time, model against recording, outside the empty_cache calls' spans
// [first, last): there the recording has freed part of the call's segments and the model none yet.
void compare_reserved(const trace::TraceData& t, const std::vector<const trace::Segment*>& segments, const Deltas& rec,
                      const std::vector<CacheCall>& calls, const std::vector<int64_t>& times, const Run& w,
                      AllocatorComparison& c) {
    int64_t cur = 0;
    size_t j = 0, call = 0;
    double weighted = 0, plain = 0, covered = 0;
    int64_t compared = 0;
    for (size_t k = 0; k < times.size(); ++k) {
        const int64_t tm = times[k], since = k > 0 ? times[k - 1] : INT64_MIN;   // recorded events in (since, tm]
        for (; j < rec.size() && rec[j].first <= tm; ++j) cur += rec[j].second;
        while (call < calls.size() && calls[call].last <= tm) ++call;
        if (call < calls.size() && calls[call].first <= tm) continue;
        const int64_t diff = w.reserved_at[k] - cur;
        const int64_t ad = diff < 0 ? -diff : diff;
        c.max_abs_diff = std::max(c.max_abs_diff, ad);
        plain += static_cast<double>(ad);
        ++compared;
        if (k + 1 < times.size()) {
            // The diff holds until the next sample, outside the calls' spans: a span after tm
            // (before the next sample) is left out of the mean as its samples are.
            int64_t held = times[k + 1] - tm;
            for (size_t q = call; q < calls.size() && calls[q].first < times[k + 1]; ++q)
                held -= std::max<int64_t>(0, std::min(calls[q].last, times[k + 1]) - std::max(calls[q].first, tm));
            weighted += static_cast<double>(ad) * static_cast<double>(held);
            covered += static_cast<double>(held);
        }
        if (diff != 0 && !c.diverged) {
            c.diverged = true;
            c.diverge_time = tm;
            const int64_t ai = w.alloc_at[k];
            c.diverge_allocation = ai >= 0 ? t.allocations.id[static_cast<size_t>(ai)] : 0;
            c.why = explain_divergence(t, segments, w, k, since, tm, cur);
        }
    }
    c.mean_abs_diff = covered > 0 ? weighted / covered : (compared > 0 ? plain / static_cast<double>(compared) : 0);
}

}  // namespace

namespace {

using PoolRows = std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>>>;

// meta snapshot.allocation_pools or snapshot.segment_row_pools: per pool, its row id ranges.
PoolRows parse_pool_rows(const trace::TraceData& trace_data, const char* key) {
    PoolRows out;
    auto it = trace_data.meta.find(key);
    if (it == trace_data.meta.end()) return out;
    std::istringstream in(it->second);
    std::string entry;
    auto bad = [&](const std::string& why) {
        return Error(trace_data.path + ": meta " + key + ": entry '" + entry + "' " + why + " (import the snapshot again)");
    };
    while (in >> entry) {
        long long first = 0, second = 0;
        int used = 0;
        if (std::sscanf(entry.c_str(), "%lld,%lld:%n", &first, &second, &used) != 2 || used == 0)
            throw bad("is not FIRST,SECOND:ID-ID,ID...");
        auto& rows = out.emplace_back(std::make_pair(first, second), std::vector<std::pair<int64_t, int64_t>>{}).second;
        std::istringstream list(entry.substr(static_cast<size_t>(used)));
        std::string range;
        while (std::getline(list, range, ',')) {
            // LO or LO-HI, digits only.
            auto number = [](const std::string& text, int64_t& value) {
                if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
                    return false;
                value = std::stoll(text);
                return value > 0;
            };
            const size_t dash = range.find('-');
            int64_t lo = 0, hi = 0;
            const bool ok = dash == std::string::npos
                                ? number(range, lo) && number(range, hi)
                                : number(range.substr(0, dash), lo) && number(range.substr(dash + 1), hi) && hi >= lo;
            if (!ok) throw bad("has a bad id range '" + range + "'");
            rows.emplace_back(lo, hi);
        }
    }
    return out;
}

// The exact rule: each row in the pool the trace events named (pool_id).
PrivatePools exact_pools(const trace::TraceData& trace_data, const std::vector<const trace::Segment*>& segments,
                         int32_t device) {
    PrivatePools pools;
    pools.exact = true;
    pools.allocation.assign(trace_data.allocations.size(), 0);
    std::map<std::pair<int64_t, int64_t>, int64_t> number;
    auto number_of = [&](const std::pair<int64_t, int64_t>& id) {
        return number.try_emplace(id, static_cast<int64_t>(number.size()) + 1).first->second;
    };
    const auto& allocs = trace_data.allocations;
    for (const auto& [id, ranges] : parse_pool_rows(trace_data, "snapshot.allocation_pools"))
        for (auto [lo, hi] : ranges) {
            auto at = std::lower_bound(allocs.id.begin(), allocs.id.end(), lo);   // ids ascend with the rows
            for (; at != allocs.id.end() && *at <= hi; ++at) {
                const auto row = static_cast<size_t>(at - allocs.id.begin());
                if (allocs.device[row] != device) continue;
                pools.allocation[row] = number_of(id);
                ++pools.allocations;
            }
        }
    std::map<int64_t, const trace::Segment*> by_id;
    for (const auto* seg : segments) by_id[seg->id] = seg;
    std::vector<std::pair<const trace::Segment*, int64_t>> seg_rows;
    for (const auto& [id, ranges] : parse_pool_rows(trace_data, "snapshot.segment_row_pools"))
        for (auto [lo, hi] : ranges)
            for (auto it = by_id.lower_bound(lo); it != by_id.end() && it->first <= hi; ++it)
                seg_rows.emplace_back(it->second, number_of(id));
    pools.pools = static_cast<int64_t>(number.size());
    pools.given_back_at.assign(static_cast<size_t>(pools.pools) + 1, trace::kNoTime);
    pools.ids.assign(static_cast<size_t>(pools.pools) + 1, {0, 0});
    for (const auto& [id, pool_no] : number) pools.ids[static_cast<size_t>(pool_no)] = id;
    std::vector<bool> held(static_cast<size_t>(pools.pools) + 1, false);
    std::vector<int64_t> last_free(static_cast<size_t>(pools.pools) + 1, trace::kNoTime);
    for (auto [seg, pool] : seg_rows) {
        pools.segment[seg] = pool;
        const auto pool_no = static_cast<size_t>(pool);
        if (seg->t_free == trace::kNoTime) {
            held[pool_no] = true;
            ++pools.segments_held;
        } else {
            last_free[pool_no] = last_free[pool_no] == trace::kNoTime ? seg->t_free : std::max(last_free[pool_no], seg->t_free);
        }
    }
    for (size_t pool_no = 1; pool_no < held.size(); ++pool_no)
        if (!held[pool_no]) pools.given_back_at[pool_no] = last_free[pool_no];
    return pools;
}

}   // namespace

PrivatePools private_pools(const trace::TraceData& t, const std::vector<const trace::Segment*>& S, int32_t device) {
    if (auto from = t.meta.find("snapshot.pools_from");
        from != t.meta.end() && from->second.rfind("trace events", 0) == 0)
        return exact_pools(t, S, device);
    PrivatePools m;
    m.allocation.assign(t.allocations.size(), 0);
    auto it = t.meta.find("snapshot.segment_pools");
    if (it == t.meta.end()) return m;
    struct Range {
        int64_t bytes, pool, since;
    };
    std::map<std::pair<int64_t, int64_t>, int64_t> number;
    std::map<int64_t, Range> at;   // address -> the end-state segment
    std::istringstream in(it->second);
    std::string entry;
    while (in >> entry) {
        long long dev = 0, first = 0, second = 0, address = 0, bytes = 0;
        char tail = 0;
        if (std::sscanf(entry.c_str(), "%lld:%lld,%lld:%lld:%lld%c", &dev, &first, &second, &address, &bytes, &tail) != 5 ||
            bytes <= 0)
            throw Error(t.path + ": meta snapshot.segment_pools: entry '" + entry +
                        "' is not DEVICE:FIRST,SECOND:ADDRESS:BYTES (import the snapshot again)");
        if (dev != device) continue;
        auto n = number.try_emplace({first, second}, static_cast<int64_t>(number.size()) + 1).first;
        at[address] = {bytes, n->second, trace::kNoTime};
    }
    m.pools = static_cast<int64_t>(number.size());
    auto range_of = [&](int64_t address) -> Range* {
        auto u = at.upper_bound(address);
        if (u == at.begin()) return nullptr;
        --u;
        return address < u->first + u->second.bytes ? &u->second : nullptr;
    };
    for (const auto* s : S) {
        if (s->t_free != trace::kNoTime && !s->expandable) continue;
        Range* r = range_of(s->address);
        if (!r) continue;
        m.segment[s] = r->pool;
        r->since = std::min(r->since, s->t_alloc);
        if (s->t_free == trace::kNoTime) ++m.segments_held;
    }
    const auto& a = t.allocations;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a.device[i] != device) continue;
        const Range* r = range_of(a.address[i]);
        if (!r || r->since == trace::kNoTime || a.t_alloc[i] < r->since) continue;
        m.allocation[i] = r->pool;
        ++m.allocations;
    }
    m.given_back_at.assign(static_cast<size_t>(m.pools) + 1, trace::kNoTime);   // end-state pools are held
    m.ids.assign(static_cast<size_t>(m.pools) + 1, {0, 0});
    for (const auto& [id, pool_no] : number) m.ids[static_cast<size_t>(pool_no)] = id;
    return m;
}

PrivatePools private_pools(const trace::TraceData& t, int32_t device) {
    std::vector<const trace::Segment*> S;
    for (const auto& s : t.segments)
        if (s.device == device) S.push_back(&s);
    return private_pools(t, S, device);
}

AllocatorComparison compare_allocator(const trace::TraceData& t, const std::vector<trace::Segment>& segments,
                                      int32_t device, const std::string& conf_override) {
    Deltas rec = recorded_deltas(t, segments, device);
    AllocatorComparison c;
    c.device = device;
    std::vector<const trace::Segment*> S;
    for (const auto& s : segments)
        if (s.device == device) S.push_back(&s);
    const AllocatorSettings set = model_settings(t, S, conf_override, c);

    // Recorded figures.
    c.recorded_peak = peak_of(rec);
    c.recorded_segments = static_cast<int64_t>(S.size());
    for (const auto* s : S) {
        if (!s->reconstructed) ++c.recorded_mallocs;
        if (s->t_free != trace::kNoTime) ++c.recorded_frees;
    }
    c.blocks_outside_segments = blocks_outside_segments(t, S, device);

    const PrivatePools pools = private_pools(t, S, device);
    std::vector<CacheCall> calls;
    const std::vector<Ev> evs = model_events(t, S, device, pools, calls, c);
    // Samples at the model's events. A recorded segment event counts at the next of them: a
    // snapshot records the cudaMalloc an allocation needs (and the frees of an out-of-memory
    // retry) just before that allocation, 1 ns apart in the trace (docs/import.md).
    std::vector<int64_t> times;
    for (const auto& e : evs) times.push_back(e.t);
    times.erase(std::unique(times.begin(), times.end()), times.end());
    if (!rec.empty() && (times.empty() || rec.back().first > times.back())) times.push_back(rec.back().first);

    c.private_pools = pools.pools;
    c.private_pool_segments = pools.segments_held;
    c.private_pool_allocations = pools.allocations;
    c.private_pools_exact = pools.exact;
    for (int64_t at : pools.given_back_at) c.private_pools_given_back += at != trace::kNoTime;
    Run warm = ModelRun(t, S, set, true, pools, calls).run(evs, times);
    c.seeded_segments = warm.seeded;
    c.seeded_bytes = warm.seeded_bytes;
    c.seeded_blocks = warm.seeded_blocks;
    c.model_peak = warm.peak;
    c.model_segments = warm.segments;
    c.model_mallocs = warm.mallocs;
    c.model_frees = warm.frees;
    c.sample_times = times;
    c.model_reserved = warm.reserved_at;
    Run cold = ModelRun(t, S, set, false, pools, calls).run(evs, times);
    c.cold_peak = cold.peak;
    c.cold_segments = cold.segments;
    compare_reserved(t, S, rec, calls, times, warm, c);
    return c;
}

std::string to_text(const AllocatorComparison& c) {
    std::ostringstream o;
    char b[256];
    auto pct = [](double x) {
        char s[32];
        std::snprintf(s, sizeof s, "%+.2f%%", x * 100);
        return std::string(s);
    };
    o << "device        " << c.device << "\n";
    o << "settings      " << (c.settings.empty() ? std::string("(PyTorch defaults)") : c.settings) << "  ["
      << c.settings_source << "]\n";
    o << "replayed      " << c.allocations << " allocations at unlimited capacity; warm start: " << c.seeded_segments
      << " segments (" << format_bytes(c.seeded_bytes) << ") held before recording, " << c.seeded_blocks
      << " blocks placed where recorded; " << c.empty_cache_calls << " empty_cache calls mirrored";
    if (c.empty_cache_calls > 0)
        o << " (" << c.empty_cache_segment_frees << " segment frees over " << format_ns(c.empty_cache_span_ns)
          << "; the model empties its cache at each call's last free)";
    o << "\n";
    if (c.private_pools > 0 && c.private_pools_exact)
        o << "private pools " << c.private_pools << " (CUDA graph or torch.cuda.MemPool, as the trace events name them): "
          << c.private_pool_allocations << " allocations modelled in their pool; " << c.private_pool_segments
          << " of their segments held at the end (empty_cache keeps their memory); " << c.private_pools_given_back
          << " pools given back during the trace, released by the model too\n";
    else if (c.private_pools > 0)
        o << "private pools " << c.private_pools << " (CUDA graph or torch.cuda.MemPool): " << c.private_pool_allocations
          << " allocations lie in their " << c.private_pool_segments
          << " segments held at the end and are modelled in their pool (empty_cache keeps its memory)\n";
    if (c.blocks_outside_segments > 0)
        o << "recording inconsistent: " << c.blocks_outside_segments << " of " << c.allocations
          << " allocations lie outside every recorded segment alive when they were made: no allocator can "
             "reproduce these segments (a synthetic or damaged snapshot?)\n";
    std::snprintf(b, sizeof b, "%-16s %16s %16s %12s\n", "", "recorded", "model", "difference");
    o << b;
    std::snprintf(b, sizeof b, "%-16s %16s %16s %12s\n", "reserved peak", format_bytes(c.recorded_peak).c_str(),
                  format_bytes(c.model_peak).c_str(), pct(c.peak_error()).c_str());
    o << b;
    std::snprintf(b, sizeof b, "%-16s %16lld %16lld %12s\n", "segments", static_cast<long long>(c.recorded_segments),
                  static_cast<long long>(c.model_segments), pct(c.segment_error()).c_str());
    o << b;
    std::snprintf(b, sizeof b, "%-16s %16lld %16lld\n", "cudaMalloc/map", static_cast<long long>(c.recorded_mallocs),
                  static_cast<long long>(c.model_mallocs));
    o << b;
    std::snprintf(b, sizeof b, "%-16s %16lld %16lld\n", "cudaFree/unmap", static_cast<long long>(c.recorded_frees),
                  static_cast<long long>(c.model_frees));
    o << b;
    o << "reserved over time (model - recorded";
    if (c.empty_cache_span_ns > 0) o << ", outside the empty_cache calls' " << format_ns(c.empty_cache_span_ns);
    o << "): max |diff| " << format_bytes(c.max_abs_diff) << ", mean |diff| "
      << format_bytes(static_cast<int64_t>(std::llround(c.mean_abs_diff))) << "\n";
    o << "first divergence: " << (c.diverged ? c.why : std::string("none")) << "\n";
    o << "cold start (the model from an empty cache): reserved peak " << format_bytes(c.cold_peak) << ", "
      << c.cold_segments << " segments\n";
    return o.str();
}

std::string to_json(const AllocatorComparison& c) {
    std::ostringstream o;
    o.precision(17);
    o << "{\"device\":" << c.device << ",\"settings\":" << json_string(c.settings)
      << ",\"settings_source\":" << json_string(c.settings_source) << ",\"allocations\":" << c.allocations
      << ",\"seeded_segments\":" << c.seeded_segments << ",\"seeded_bytes\":" << c.seeded_bytes
      << ",\"seeded_blocks\":" << c.seeded_blocks << ",\"empty_cache_calls\":" << c.empty_cache_calls
      << ",\"empty_cache_segment_frees\":" << c.empty_cache_segment_frees << ",\"empty_cache_span_ns\":" << c.empty_cache_span_ns
      << ",\"blocks_outside_segments\":" << c.blocks_outside_segments;
    if (c.private_pools > 0)
        o << ",\"private_pools\":" << c.private_pools << ",\"private_pool_segments\":" << c.private_pool_segments
          << ",\"private_pool_allocations\":" << c.private_pool_allocations
          << ",\"private_pools_given_back\":" << c.private_pools_given_back
          << ",\"private_pools_exact\":" << (c.private_pools_exact ? "true" : "false");
    o
      << ",\"recorded\":{\"reserved_peak\":" << c.recorded_peak << ",\"segments\":" << c.recorded_segments
      << ",\"device_allocs\":" << c.recorded_mallocs << ",\"device_frees\":" << c.recorded_frees << "}"
      << ",\"model\":{\"reserved_peak\":" << c.model_peak << ",\"segments\":" << c.model_segments
      << ",\"device_allocs\":" << c.model_mallocs << ",\"device_frees\":" << c.model_frees << "}"
      << ",\"reserved_peak_error\":" << c.peak_error() << ",\"segment_count_error\":" << c.segment_error()
      << ",\"reserved_diff\":{\"max_abs\":" << c.max_abs_diff << ",\"mean_abs\":" << c.mean_abs_diff << "}"
      << ",\"first_divergence\":";
    if (c.diverged)
        o << "{\"t\":" << c.diverge_time << ",\"allocation\":" << c.diverge_allocation << ",\"why\":" << json_string(c.why)
          << "}";
    else
        o << "null";
    o << ",\"cold_start\":{\"reserved_peak\":" << c.cold_peak << ",\"segments\":" << c.cold_segments << "}}";
    return o.str();
}

}  // namespace mhc::sim
