// The caching allocator model. Every rule names the function of PyTorch's
// c10/cuda/CUDACachingAllocator.cpp (or CUDAAllocatorConfig.cpp) it follows; docs/simulator.md
// lists them with the commit read.
#include "mhc/sim/allocator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "mhc/common/error.hpp"
#include "mhc/trace/columns.hpp"

namespace mhc::sim {

// ---- settings -----------------------------------------------------------------------------

int32_t AllocatorSettings::divisions_for(int64_t size) const {
    return roundup_power2_divisions[static_cast<size_t>(trace::torch::roundup_interval(size))];
}

std::string AllocatorSettings::conf() const {
    std::string out;
    auto put = [&](const std::string& kv) { out += (out.empty() ? "" : ",") + kv; };
    if (expandable_segments) put("expandable_segments:True");
    if (max_split_size != kNoLimit) put("max_split_size_mb:" + std::to_string(max_split_size >> 20));
    if (max_non_split_rounding != (20 << 20)) put("max_non_split_rounding_mb:" + std::to_string(max_non_split_rounding >> 20));
    bool any = false, same = true;
    for (int32_t d : roundup_power2_divisions) {
        any |= d != 0;
        same &= d == roundup_power2_divisions[0];
    }
    if (any) {
        if (same) {
            put("roundup_power2_divisions:" + std::to_string(roundup_power2_divisions[0]));
        } else {
            std::string l;
            for (int i = 0; i < kIntervals; ++i)
                l += (i ? "," : "") + std::to_string(int64_t{1} << i) + ":" + std::to_string(roundup_power2_divisions[static_cast<size_t>(i)]);
            put("roundup_power2_divisions:[" + l + "]");
        }
    }
    if (garbage_collection_threshold > 0) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", garbage_collection_threshold);
        put(std::string("garbage_collection_threshold:") + b);
    }
    return out;
}

namespace {

std::string trim(std::string_view s) {
    size_t a = 0, b = s.size();
    while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
    return std::string(s.substr(a, b - a));
}

bool parse_u64(const std::string& s, uint64_t& v) {
    if (s.empty() || s.size() > 18) return false;
    v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return true;
}

bool pow2(uint64_t v) { return v && !(v & (v - 1)); }

}  // namespace

namespace {

// Options are separated by commas outside brackets (a roundup list holds commas).
std::vector<std::string> split_options(std::string_view text, const std::string& what) {
    std::vector<std::string> opts;
    std::string cur;
    int depth = 0;
    for (char c : text) {
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if (c == ',' && depth == 0) {
            opts.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (depth != 0)
        throw Error(what + ": '" + std::string(text) +
                    "': its brackets do not balance; a list, as roundup_power2_divisions takes, is [MiB:divisions,...]");
    opts.push_back(cur);
    return opts;
}

using Divisions = std::array<int32_t, AllocatorSettings::kIntervals>;
using Refusal = std::function<Error(const std::string&)>;

// parseRoundUpPower2Divisions: one power of two for every size, or
// [MiB:divisions,...,>:divisions]; the first entry also covers the intervals below it, and
// `>` fills from the last entry's own interval on (PyTorch's std::fill from last_index, which
// starts at 0): it overwrites that entry's value, and alone it sets every interval.
Divisions parse_roundup_divisions(const std::string& val, const Divisions& current, const Refusal& bad) {
    Divisions divisions{};
    uint64_t every = 0;
    if (val.empty() || val.front() != '[') {
        if (!parse_u64(val, every) || (every != 0 && !pow2(every)) || every > (1u << 20))
            throw bad("the divisions '" + val + "' are not a power of 2 (or 0)");
        divisions.fill(static_cast<int32_t>(every));
        return divisions;
    }
    if (val.back() != ']') throw bad("the list '" + val + "' does not end with ']'");
    const std::string body = val.substr(1, val.size() - 2);
    const std::string_view entries = body;
    divisions = current;
    bool first = true;
    size_t last = 0;
    size_t pos = 0;
    while (pos <= body.size()) {
        size_t comma = body.find(',', pos);
        std::string item = trim(entries.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
        pos = comma == std::string::npos ? body.size() + 1 : comma + 1;
        if (item.empty()) throw bad("the list '" + val + "' has an empty entry");
        const std::string_view entry = item;
        size_t colon = entry.find(':');
        if (colon == std::string::npos) throw bad("the entry '" + item + "' is not MiB:divisions");
        std::string interval = trim(entry.substr(0, colon)), count = trim(entry.substr(colon + 1));
        uint64_t div = 0;
        if (!parse_u64(count, div) || (div != 0 && !pow2(div)) || div > (1u << 20))
            throw bad("the divisions '" + count + "' are not a power of 2 (or 0)");
        if (interval == ">") {
            for (size_t i = last; i < divisions.size(); ++i) divisions[i] = static_cast<int32_t>(div);
            continue;
        }
        uint64_t mb = 0;
        if (!parse_u64(interval, mb) || !pow2(mb))
            throw bad("the interval '" + interval + "' is not a power of 2 (MiB)");
        size_t idx = std::min<size_t>(static_cast<size_t>(63 - __builtin_clzll(mb)), divisions.size() - 1);
        if (first) {
            for (size_t i = 0; i < idx; ++i) divisions[i] = static_cast<int32_t>(div);
            first = false;
        }
        divisions[idx] = static_cast<int32_t>(div);
        last = idx;
    }
    return divisions;
}

// One key:value option applied to `settings`. A refusal is said in the one form of a refused value
// (docs/cli.md), the option quoted whole as an item of a list is: "--allocator-conf:
// 'max_split_size_mb:abc': not a whole number of MiB; max_split_size_mb takes 20 to 1073741824",
// `what` naming the option or the file and its field ("t.db: meta allocator.conf").
void apply_option(AllocatorSettings& settings, const std::string& opt, const std::string& what) {
    const std::string_view option = opt;
    size_t colon = option.find(':');
    if (colon == std::string::npos)
        throw Error(what + ": '" + opt + "': expected key:value (PYTORCH_CUDA_ALLOC_CONF syntax)");
    std::string key = trim(option.substr(0, colon));
    std::string val = trim(option.substr(colon + 1));
    // What each key takes, said after what is wrong.
    const auto takes = [&]() -> std::string {
        if (key == "expandable_segments") return "expandable_segments takes True or False";
        if (key == "garbage_collection_threshold") return key + " takes a number strictly between 0 and 1";
        if (key == "roundup_power2_divisions")
            return "roundup_power2_divisions takes a power of 2 (or 0), or a list [MiB:divisions,...,>:divisions] of them";
        if (key == "backend") return "backend takes native (the caching allocator)";
        return key + " takes a whole number of MiB, 20 to 1073741824";
    };
    const Refusal bad = [&](const std::string& why) { return Error(what + ": '" + opt + "': " + why + "; " + takes()); };
    uint64_t mib = 0;
    if (key == "expandable_segments") {
        if (val != "True" && val != "False") throw bad("'" + val + "' is not True or False");
        settings.expandable_segments = val == "True";
    } else if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
        // parseMaxSplitSize / parseMaxNonSplitRoundingSize: MiB, at least kLargeBuffer (20 MiB), as
        // torch 2.15 (c10/core/AllocatorConfig.cpp: val_env >= kLargeBuffer / kMB) takes them;
        // earlier releases refused 20 too, and so did the model before 2026-12-05, which refused a
        // torch 2.15 snapshot recorded with max_split_size_mb:20 that PyTorch had run.
        if (!parse_u64(val, mib)) throw bad("'" + val + "' is not a whole number");
        if (mib < 20) throw bad(std::to_string(mib) + " is below 20");
        if (mib > (uint64_t{1} << 30)) throw bad(std::to_string(mib) + " MiB is more than 2^50 bytes");
        (key == "max_split_size_mb" ? settings.max_split_size
                                    : settings.max_non_split_rounding) = static_cast<int64_t>(mib) << 20;
    } else if (key == "garbage_collection_threshold") {
        // parseGarbageCollectionThreshold: a fraction strictly between 0 and 1.
        char* end = nullptr;
        double threshold = std::strtod(val.c_str(), &end);
        if (val.empty() || *end != '\0' || !std::isfinite(threshold)) throw bad("'" + val + "' is not a number");
        if (!(threshold > 0 && threshold < 1)) throw bad(val + " is not strictly between 0 and 1");
        settings.garbage_collection_threshold = threshold;
    } else if (key == "roundup_power2_divisions") {
        settings.roundup_power2_divisions = parse_roundup_divisions(val, settings.roundup_power2_divisions, bad);
    } else if (key == "backend") {
        if (val == "cudaMallocAsync") throw bad("cudaMallocAsync is not the caching allocator this model follows");
        if (val != "native") throw bad("'" + val + "' is not native or cudaMallocAsync");
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_num_register_threads" || key == "pinned_use_background_threads" ||
               key == "graph_capture_record_stream_reuse" || key == "pinned_reserve_segment_size_mb" ||
               key == "per_process_memory_fraction") {
        // Accepted by PyTorch; no effect on where blocks go.
    } else {
        const std::vector<std::string> known{"expandable_segments", "max_split_size_mb", "roundup_power2_divisions",
                                             "garbage_collection_threshold", "max_non_split_rounding_mb"};
        throw Error(what + ": '" + opt + "': " + key +
                    " is not an option of PYTORCH_CUDA_ALLOC_CONF this model knows; use expandable_segments, "
                    "max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold or "
                    "max_non_split_rounding_mb" +
                    did_you_mean(key, known));
    }
}

}   // namespace

AllocatorSettings parse_allocator_conf(std::string_view text, const std::string& what, const AllocatorSettings& base) {
    AllocatorSettings settings = base;
    for (const std::string& raw : split_options(text, what)) {
        std::string opt = trim(raw);
        if (!opt.empty()) apply_option(settings, opt, what);
    }
    return settings;
}

AllocatorSettings allocator_settings_for(const trace::TraceData& t, const std::string& override_conf) {
    AllocatorSettings s;
    auto it = t.meta.find("allocator.conf");
    // Named by its file (it was "trace meta allocator.conf", whichever trace).
    if (it != t.meta.end())
        s = parse_allocator_conf(it->second, (t.path.empty() ? "trace" : t.path) + ": meta allocator.conf");
    return parse_allocator_conf(override_conf, "--allocator-conf", s);
}

// ---- sizes --------------------------------------------------------------------------------

int64_t CachingAllocator::round_size(int64_t bytes) { return trace::torch::round_size(bytes, 0); }

int64_t CachingAllocator::rounded(int64_t bytes) const {
    return trace::torch::round_size(bytes, bytes < kMinBlock ? 0 : set_.divisions_for(bytes));
}

// An expandable segment's page: 2 MiB in the small pool, 20 MiB in the large one.
static int64_t page_of(bool small) { return small ? CachingAllocator::kSmallBuffer : CachingAllocator::kLargeBuffer; }

int64_t CachingAllocator::growth_for(int64_t rounded) const {
    if (!set_.expandable_segments) return segment_size(rounded);
    const int64_t page = page_of(rounded <= kSmallSize);
    return (rounded + page - 1) / page * page;
}

int64_t CachingAllocator::segment_size(int64_t rounded) {
    // get_allocation_size.
    if (rounded <= kSmallSize) return kSmallBuffer;
    if (rounded < kMinLargeAlloc) return kLargeBuffer;
    return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

// ---- blocks -------------------------------------------------------------------------------

CachingAllocator::CachingAllocator(int64_t capacity, AllocatorSettings settings)
    : capacity_(capacity), set_(std::move(settings)) {}

int32_t CachingAllocator::new_block() {
    if (!spare_.empty()) {
        int32_t b = spare_.back();
        spare_.pop_back();
        blocks_[static_cast<size_t>(b)] = Block{};
        return b;
    }
    blocks_.push_back(Block{});
    return static_cast<int32_t>(blocks_.size() - 1);
}

void CachingAllocator::drop_block(int32_t b) {
    blocks_[static_cast<size_t>(b)].alive = false;
    spare_.push_back(b);
}

CachingAllocator::Key CachingAllocator::key(int32_t b) const {
    const Block& x = blocks_[static_cast<size_t>(b)];
    return {x.stream, x.mapped ? x.size : 0, x.segment, x.offset, b};
}

void CachingAllocator::to_pool(int32_t b) {
    Block& x = blocks_[static_cast<size_t>(b)];
    if (x.mapped) {
        x.gc_base = gc_calls_[x.small ? 1 : 0];   // BlockPool::insert_into_blocks
        put(pool_of(b), key(b));
        if (whole(b)) put(whole_[x.small ? 1 : 0], key(b));
    } else {
        put(unmapped_of(b), key(b));
    }
}

void CachingAllocator::put(KeySet& set, const Key& entry) {
    if (nodes_.empty()) {
        set.insert(entry);
        return;
    }
    nodes_.back().value() = entry;
    set.insert(std::move(nodes_.back()));
    nodes_.pop_back();
}

void CachingAllocator::take(KeySet& set, const Key& entry) {
    auto it = set.find(entry);   // one descent (erase(key) makes two, for a range)
    if (it != set.end()) nodes_.push_back(set.extract(it));
}

bool CachingAllocator::whole(int32_t block) const {
    const Block& blk = blocks_[static_cast<size_t>(block)];
    return blk.prev < 0 && blk.next < 0 && !segs_[static_cast<size_t>(blk.segment)].expandable;
}

void CachingAllocator::pool_erase(int32_t block) {
    if (whole(block)) take(whole_[blocks_[static_cast<size_t>(block)].small ? 1 : 0], key(block));
    take(pool_of(block), key(block));
}

bool CachingAllocator::free_here(int32_t b) const {
    return b >= 0 && !blocks_[static_cast<size_t>(b)].in_use;
}

int32_t CachingAllocator::merge(int32_t dst, int32_t src) {
    // try_merge_blocks: only a free neighbour of the same mapped state is absorbed.
    if (src < 0) return dst;
    Block& s = blocks_[static_cast<size_t>(src)];
    if (s.in_use || s.mapped != blocks_[static_cast<size_t>(dst)].mapped) return dst;
    if (s.mapped) pool_erase(src);
    else take(unmapped_of(src), key(src));
    Block& d = blocks_[static_cast<size_t>(dst)];
    if (d.prev == src) {
        d.offset = s.offset;
        d.prev = s.prev;
        if (s.prev >= 0) blocks_[static_cast<size_t>(s.prev)].next = dst;
    } else {
        d.next = s.next;
        if (s.next >= 0) blocks_[static_cast<size_t>(s.next)].prev = dst;
    }
    d.size += s.size;
    drop_block(src);
    return dst;
}

int32_t CachingAllocator::get_free_block(int p, int64_t stream, int64_t size) {
    auto& pool = free_[p];
    // get_free_blocks_call_count is the BlockPool's: garbage collection ages the default pool's.
    if (set_.garbage_collection_threshold > 0 && !private_lane(stream)) ++gc_calls_[p];
    const Key want{stream, size, INT32_MIN, INT64_MIN, -1};
    // Nothing as large: the usual answer when memory is short, without a descent of the tree.
    if (pool.empty() || *pool.rbegin() < want) return -1;
    auto it = pool.lower_bound(want);
    if (it->stream != stream) return -1;
    auto expandable = [&](int32_t b) { return segs_[static_cast<size_t>(blocks_[static_cast<size_t>(b)].segment)].expandable; };
    if (expandable(it->block)) {
        if (set_.expandable_segments) {
            // Best fit counts a block followed by unmapped space at the size it can grow to.
            auto grow = [&](int32_t b) {
                const Block& x = blocks_[static_cast<size_t>(b)];
                return x.size + (x.next >= 0 && !blocks_[static_cast<size_t>(x.next)].mapped ? blocks_[static_cast<size_t>(x.next)].size : 0);
            };
            auto next = std::next(it);
            while (expandable(it->block) && next != pool.end() && next->stream == stream &&
                   grow(next->block) < grow(it->block))
                it = next++;
        } else {
            do ++it;
            while (it != pool.end() && it->stream == stream && expandable(it->block));
            if (it == pool.end() || it->stream != stream) return -1;
        }
    }
    const int64_t found = blocks_[static_cast<size_t>(it->block)].size;
    // No oversize block for a request under max_split_size; an oversize request takes an
    // oversize block at most max_non_split_rounding larger.
    if (size < set_.max_split_size && found >= set_.max_split_size) return -1;
    if (size >= set_.max_split_size && found >= size + set_.max_non_split_rounding) return -1;
    int32_t b = it->block;
    if (whole(b)) take(whole_[p], *it);
    nodes_.push_back(pool.extract(it));
    return b;
}

bool CachingAllocator::should_split(int32_t b, int64_t size) const {
    const Block& x = blocks_[static_cast<size_t>(b)];
    int64_t remaining = x.size - size;
    if (x.small || set_.expandable_segments) return remaining >= kMinBlock;
    return size < set_.max_split_size && remaining > kSmallSize;
}

// Cuts block b after its first `size` bytes: the rest becomes a new block of the same segment,
// stream, pool and mapping, linked after b. Returns it, not yet in a pool.
int32_t CachingAllocator::split_off(int32_t b, int64_t size) {
    int32_t r = new_block();   // may move blocks_: references are taken after it
    Block& x = blocks_[static_cast<size_t>(b)];
    Block& rb = blocks_[static_cast<size_t>(r)];
    rb.size = x.size - size;
    rb.offset = x.offset + size;
    rb.segment = x.segment;
    rb.stream = x.stream;
    rb.small = x.small;
    rb.mapped = x.mapped;
    rb.alive = true;
    rb.prev = b;
    rb.next = x.next;
    if (x.next >= 0) blocks_[static_cast<size_t>(x.next)].prev = r;
    x.next = r;
    x.size = size;
    return r;
}

void CachingAllocator::split(int32_t b, int64_t size) {
    // alloc_found_block: the request takes the front, the rest goes back to the pool.
    to_pool(split_off(b, size));
}

void CachingAllocator::log(bool alloc, int32_t seg, int64_t offset, int64_t bytes) {
    (alloc ? device_allocs_ : device_frees_)++;
    (alloc ? device_alloc_bytes_ : device_free_bytes_) += bytes;
    if (log_) {
        const Segment& s = segs_[static_cast<size_t>(seg)];
        log_->push_back({alloc, s.expandable, bytes, stream_of_lane(s.stream), offset, seg, s.pool});
    }
}

int32_t CachingAllocator::alloc_block(int p, int64_t stream, int64_t size, int64_t alloc_size) {
    // A private pool's segments too are expandable under the setting (alloc_block at the commit
    // read; PyTorch 2.1-2.3 made them with cudaMalloc), with their own unmapped ranges (the
    // BlockPool's `unmapped`): the lane keeps them apart.
    if (set_.expandable_segments) return try_allocate_expandable(p, stream, size);
    if (!draw(alloc_size)) return -1;   // cudaMalloc fails
    const int32_t b = new_segment_block(p, stream, alloc_size, 0, false);
    log(true, blocks_[static_cast<size_t>(b)].segment, 0, alloc_size);
    return b;
}

int32_t CachingAllocator::new_segment_block(int p, int64_t stream, int64_t size, int64_t page, bool expandable) {
    const int32_t b = new_block();
    Block& x = blocks_[static_cast<size_t>(b)];
    x.size = size;
    x.segment = static_cast<int32_t>(segs_.size());
    x.stream = stream;
    x.small = p == 1;
    x.alive = true;
    segs_.push_back({stream, page, p == 1, expandable, true, pool_of_lane(stream)});
    ++live_segments_;
    return b;
}

int32_t CachingAllocator::find_expandable_block(int p, int64_t stream, int64_t size) {
    // find_expandable_block: the lowest unmapped range of the stream's segments with room,
    // starting at the free block before it when there is one; else a new segment.
    auto& un = unmapped_[p];
    for (auto it = un.lower_bound(Key{stream, 0, INT32_MIN, INT64_MIN, -1}); it != un.end() && it->stream == stream; ++it) {
        int32_t c = it->block;
        int32_t prev = blocks_[static_cast<size_t>(c)].prev;
        if (free_here(prev)) c = prev;
        int64_t room = 0;
        for (int32_t x = c; room < size && free_here(x); x = blocks_[static_cast<size_t>(x)].next)
            room += blocks_[static_cast<size_t>(x)].size;
        if (room >= size) return c;
    }
    // Address space: 1 1/8 of the device memory (ExpandableSegment); past 2^62 bytes (an unlimited
    // capacity) 2^62, room for any trace (its allocations together are at most 2^62 bytes) with
    // no overflow of an offset plus a size. It stopped at 2^50 bytes before 2026-12-05: a request
    // larger than that never fitted, an out of memory at unlimited capacity.
    const int64_t page = page_of(p == 1);
    constexpr int64_t kMostSpace = int64_t{1} << 62;
    int64_t va = capacity_ >= kMostSpace / 9 * 8 ? kMostSpace : capacity_ + capacity_ / 8;
    va = std::max(page, (va + page - 1) / page * page);
    const int32_t b = new_segment_block(p, stream, va, page, true);
    blocks_[static_cast<size_t>(b)].mapped = false;   // reserved address space, no pages yet
    to_pool(b);
    return b;
}

bool CachingAllocator::map_block(int32_t b, int64_t size) {
    // map_block / ExpandableSegment::map: whole pages from the block's (page-aligned) start;
    // all or nothing.
    Block& x = blocks_[static_cast<size_t>(b)];
    const int64_t page = segs_[static_cast<size_t>(x.segment)].page;
    const int64_t bytes = std::min(x.size, (size + page - 1) / page * page);
    if (!draw(bytes)) return false;
    take(unmapped_of(b), key(b));
    x.mapped = true;
    if (bytes < x.size) {   // the pages past the request stay unmapped
        int32_t r = split_off(b, bytes);
        blocks_[static_cast<size_t>(r)].mapped = false;
        to_pool(r);
    }
    const int64_t offset = blocks_[static_cast<size_t>(b)].offset;
    merge(b, blocks_[static_cast<size_t>(b)].prev);
    merge(b, blocks_[static_cast<size_t>(b)].next);
    to_pool(b);
    log(true, blocks_[static_cast<size_t>(b)].segment, offset, bytes);
    return true;
}

int32_t CachingAllocator::try_allocate_expandable(int p, int64_t stream, int64_t size) {
    // try_allocate_expandable_block: map the candidate, then the unmapped space after it,
    // until the free block holds `size`.
    int32_t c = find_expandable_block(p, stream, size);
    if (!blocks_[static_cast<size_t>(c)].mapped && !map_block(c, std::min(blocks_[static_cast<size_t>(c)].size, size)))
        return -1;
    while (blocks_[static_cast<size_t>(c)].size < size) {
        int32_t n = blocks_[static_cast<size_t>(c)].next;
        if (n < 0) return -1;   // the request is larger than the segment's address space
        int64_t remaining = size - blocks_[static_cast<size_t>(c)].size;
        if (!map_block(n, std::min(remaining, blocks_[static_cast<size_t>(n)].size))) return -1;
        c = n;   // n absorbed c
    }
    pool_erase(c);
    return c;
}

void CachingAllocator::unmap_block(int32_t b) {
    // unmap_block / ExpandableSegment::unmap: the whole pages inside a free block; what is left
    // on either side stays mapped and free.
    Block x = blocks_[static_cast<size_t>(b)];
    const int64_t page = segs_[static_cast<size_t>(x.segment)].page;
    const int64_t begin = (x.offset + page - 1) / page * page, end = (x.offset + x.size) / page * page;
    if (begin >= end) return;
    pool_erase(b);
    auto piece = [&](int64_t off, int64_t size) {
        int32_t r = new_block();
        Block& y = blocks_[static_cast<size_t>(r)];
        y.size = size;
        y.offset = off;
        y.segment = x.segment;
        y.stream = x.stream;
        y.small = x.small;
        y.alive = true;
        return r;
    };
    if (begin > x.offset) {
        int32_t r = piece(x.offset, begin - x.offset);
        Block& y = blocks_[static_cast<size_t>(r)];
        y.prev = x.prev;
        y.next = b;
        if (x.prev >= 0) blocks_[static_cast<size_t>(x.prev)].next = r;
        blocks_[static_cast<size_t>(b)].prev = r;
        to_pool(r);
    }
    if (end < x.offset + x.size) {
        int32_t r = piece(end, x.offset + x.size - end);
        Block& y = blocks_[static_cast<size_t>(r)];
        y.prev = b;
        y.next = x.next;
        if (x.next >= 0) blocks_[static_cast<size_t>(x.next)].prev = r;
        blocks_[static_cast<size_t>(b)].next = r;
        to_pool(r);
    }
    Block& z = blocks_[static_cast<size_t>(b)];
    z.offset = begin;
    z.size = end - begin;
    z.mapped = false;
    merge(b, blocks_[static_cast<size_t>(b)].prev);
    merge(b, blocks_[static_cast<size_t>(b)].next);
    to_pool(b);
    reserved_ -= end - begin;
    log(false, x.segment, begin, end - begin);
}

void CachingAllocator::release_block(int32_t b) {
    // release_block: cudaFree of a whole free segment.
    pool_erase(b);
    Block& x = blocks_[static_cast<size_t>(b)];
    reserved_ -= x.size;
    --live_segments_;
    segs_[static_cast<size_t>(x.segment)].alive = false;
    log(false, x.segment, 0, x.size);
    drop_block(b);
}

bool CachingAllocator::release_available(int p, int64_t stream, int64_t size) {
    // release_available_cached_blocks: with max_split_size set, free one oversize block that
    // covers the request, else oversize blocks from the largest down until enough is freed.
    if (set_.max_split_size == AllocatorSettings::kNoLimit) return false;
    auto& pool = free_[p];
    const int64_t want = std::max(size, set_.max_split_size);
    auto it = pool.lower_bound(Key{stream, want, INT32_MIN, INT64_MIN, -1});
    if (it != pool.end() && it->stream == stream) {
        if (!whole(it->block)) return false;
        release_block(it->block);
        return true;
    }
    if (it == pool.begin()) return false;
    --it;
    std::vector<int32_t> victims;
    int64_t total = 0;
    while (total < want && it->stream == stream && it->size >= set_.max_split_size && whole(it->block)) {
        victims.push_back(it->block);
        total += it->size;
        if (it == pool.begin()) break;
        --it;
    }
    for (int32_t v : victims) release_block(v);
    return total >= want;
}

void CachingAllocator::release_cached(int64_t pool) {
    // release_cached_blocks / release_blocks: every free whole segment; the free pages of
    // expandable segments are unmapped, and a segment left wholly unmapped goes too.
    // The whole segments are kept apart (whole_) in the pool's order, so that a failed
    // allocation does not walk every free block. The held bytes (top_up) are free: they go first.
    if (pool == 0) {
        reserved_ -= held_;
        held_ = 0;
    }
    for (int p = 0; p < 2; ++p) {
        std::vector<int32_t> segments, unmap;
        // release_cached_blocks((0, 0)): the default pool's blocks; a private pool's only once the
        // program has let go of the pool (graph_pools_freeable): release_pool says when.
        auto of_default = [&](int32_t block) {
            return segs_[static_cast<size_t>(blocks_[static_cast<size_t>(block)].segment)].pool == pool;
        };
        for (const Key& entry : whole_[p])
            if (of_default(entry.block)) segments.push_back(entry.block);
        if (set_.expandable_segments)   // only then are there expandable segments
            for (const Key& entry : free_[p])
                if (segs_[static_cast<size_t>(blocks_[static_cast<size_t>(entry.block)].segment)].expandable &&
                    of_default(entry.block))
                    unmap.push_back(entry.block);
        for (int32_t block : segments) release_block(block);
        for (int32_t b : unmap) {
            if (!blocks_[static_cast<size_t>(b)].alive || blocks_[static_cast<size_t>(b)].in_use) continue;
            unmap_block(b);
        }
    }
    for (auto& un : unmapped_) {
        std::vector<int32_t> gone;
        for (const Key& k : un) {
            const Block& x = blocks_[static_cast<size_t>(k.block)];
            if (x.prev < 0 && x.next < 0 && segs_[static_cast<size_t>(x.segment)].pool == pool) gone.push_back(k.block);
        }
        for (int32_t b : gone) {   // release_expandable_segment: address space only, no event
            take(un, key(b));
            segs_[static_cast<size_t>(blocks_[static_cast<size_t>(b)].segment)].alive = false;
            --live_segments_;
            drop_block(b);
        }
    }
}

void CachingAllocator::garbage_collect() {
    // garbage_collect_cached_blocks: above threshold x capacity, free whole large-pool blocks
    // whose age (get_free_block calls since they were freed) is at least the average, until
    // reserved is back under the threshold.
    const auto threshold = static_cast<int64_t>(set_.garbage_collection_threshold * static_cast<double>(capacity_));
    if (reserved_ <= threshold) return;
    // The held bytes (top_up) are the oldest free memory: given back first.
    const int64_t back = std::min(held_, reserved_ - threshold);
    held_ -= back;
    reserved_ -= back;
    if (reserved_ <= threshold) return;
    const int64_t target = reserved_ - threshold;
    double total_age = 0;
    int count = 0;
    // garbage_collect_cached_blocks walks the default large pool only (large_blocks).
    auto of_default = [&](int32_t b) { return segs_[static_cast<size_t>(blocks_[static_cast<size_t>(b)].segment)].pool == 0; };
    for (const Key& entry : whole_[0]) {
        if (!of_default(entry.block)) continue;
        total_age += static_cast<double>(gc_calls_[0] - blocks_[static_cast<size_t>(entry.block)].gc_base);
        ++count;
    }
    int64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && count > 0) {
        const double threshold_age = total_age / count;
        freed = false;
        std::vector<int32_t> go;
        for (const Key& entry : whole_[0]) {
            if (!of_default(entry.block)) continue;
            double age = static_cast<double>(gc_calls_[0] - blocks_[static_cast<size_t>(entry.block)].gc_base);
            if (age >= threshold_age) {
                go.push_back(entry.block);
                reclaimed += entry.size;
                total_age -= age;
                --count;
                freed = true;
            }
        }
        for (int32_t b : go) release_block(b);
    }
}

int32_t CachingAllocator::add_cached_segment(int64_t bytes, int64_t stream, bool small, int64_t pool) {
    stream = lane(stream, pool);
    int32_t b = new_block();
    Block& x = blocks_[static_cast<size_t>(b)];
    x.size = bytes;
    x.segment = static_cast<int32_t>(segs_.size());
    x.stream = stream;
    x.small = small;
    x.alive = true;
    segs_.push_back({stream, 0, small, false, true, pool});
    reserved_ += bytes;
    ++live_segments_;
    to_pool(b);
    return x.segment;
}

int64_t CachingAllocator::top_up(int64_t bytes) {
    const int64_t add = std::min(bytes, capacity_) - reserved_;
    if (add <= 0) return 0;
    held_ += add;
    reserved_ += add;
    return add;
}

bool CachingAllocator::draw(int64_t bytes) {
    // New device memory: the held bytes first, the rest from the GPU (within the capacity).
    const int64_t from_held = std::min(held_, bytes);
    if (bytes - from_held > capacity_ - reserved_) return false;
    held_ -= from_held;
    reserved_ += bytes - from_held;
    return true;
}

int32_t CachingAllocator::allocate_at(int32_t segment, int64_t offset, int64_t bytes) {
    const int64_t size = rounded(bytes);
    for (auto& pool : free_) {
        for (const Key& k : pool) {
            const Block& x = blocks_[static_cast<size_t>(k.block)];
            if (x.segment != segment || offset < x.offset || offset + size > x.offset + x.size) continue;
            int32_t b = k.block;
            pool_erase(b);
            if (offset > blocks_[static_cast<size_t>(b)].offset) {   // the free part before stays in the pool
                split(b, offset - blocks_[static_cast<size_t>(b)].offset);
                int32_t front = b;
                b = blocks_[static_cast<size_t>(front)].next;
                pool_erase(b);
                to_pool(front);
            }
            if (blocks_[static_cast<size_t>(b)].size > size) split(b, size);
            blocks_[static_cast<size_t>(b)].in_use = true;
            allocated_ += blocks_[static_cast<size_t>(b)].size;
            return b;
        }
    }
    return -1;
}

int64_t CachingAllocator::lane(int64_t stream, int64_t pool) {
    if (pool == 0) return stream;
    auto [it, fresh] = lanes_.try_emplace({stream, pool}, kPrivateLane + static_cast<int64_t>(lane_keys_.size()));
    if (fresh) lane_keys_.push_back({stream, pool});
    return it->second;
}

int64_t CachingAllocator::reserved_private() const {
    int64_t bytes = 0;
    for (const Block& x : blocks_)
        if (x.alive && x.mapped && segs_[static_cast<size_t>(x.segment)].pool != 0) bytes += x.size;
    return bytes;
}

int64_t CachingAllocator::pool_of_lane(int64_t l) const {
    return private_lane(l) ? lane_keys_[static_cast<size_t>(l - kPrivateLane)].second : 0;
}

int64_t CachingAllocator::stream_of_lane(int64_t l) const {
    return private_lane(l) ? lane_keys_[static_cast<size_t>(l - kPrivateLane)].first : l;
}

int32_t CachingAllocator::allocate(int64_t bytes, int64_t stream, int64_t pool) {
    stream = lane(stream, pool);   // from here on the lane: the pool's blocks of that stream
    if (!any_alloc_) {
        first_stream_ = stream;
        any_alloc_ = true;
    } else if (stream != first_stream_) {
        many_streams_ = true;
    }
    const int64_t size = rounded(bytes);
    const int p = size <= kSmallSize ? 1 : 0;
    const int64_t alloc_size = segment_size(size);
    int32_t b = get_free_block(p, stream, size);
    if (b < 0) {
        if (set_.garbage_collection_threshold > 0) garbage_collect();
        b = alloc_block(p, stream, size, alloc_size);
        if (b < 0) {
            const int64_t frees = device_frees_;
            if (release_available(p, stream, size)) b = alloc_block(p, stream, size, alloc_size);
            if (b < 0) {
                ++full_releases_;
                release_cached(0);
                b = alloc_block(p, stream, size, alloc_size);
            }
            if (b < 0) return -1;
            if (device_frees_ > frees) ++retried_requests_;
        }
    }
    if (should_split(b, size)) split(b, size);
    Block& x = blocks_[static_cast<size_t>(b)];
    x.in_use = true;
    allocated_ += x.size;
    return b;
}

void CachingAllocator::free(int32_t b) {
    // free_block: merge with free neighbours, back to the pool (nothing is given back here).
    Block& x = blocks_[static_cast<size_t>(b)];
    allocated_ -= x.size;
    x.in_use = false;
    merge(b, blocks_[static_cast<size_t>(b)].prev);
    merge(b, blocks_[static_cast<size_t>(b)].next);
    to_pool(b);
}

bool CachingAllocator::pools_due(int64_t recorded_time) {
    bool any = false;
    while (!give_back_.empty() && give_back_.begin()->first < recorded_time) {
        release_pool(give_back_.begin()->second);
        give_back_.erase(give_back_.begin());
        any = true;
    }
    return any;
}

int64_t CachingAllocator::largest_free_block() const {
    int64_t m = 0;
    for (const auto& pool : free_) {
        if (pool.empty()) continue;
        if (!many_streams_) {
            m = std::max(m, pool.rbegin()->size);
        } else {
            for (const Key& k : pool) m = std::max(m, k.size);
        }
    }
    return m;
}

}  // namespace mhc::sim
