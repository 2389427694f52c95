#pragma once
// Eviction policies. Each is a small concrete type with the same four members, so that the
// engine (a template over the policy) calls them without virtual dispatch:
//   insert(a)   allocation a became evictable (resident, unpinned, not in transfer)
//   erase(a)    it no longer is
//   pick()      the victim the policy prefers now, or -1 (not removed)
//   may_drop(a) evict by dropping (recompute later) rather than swapping
// Heap policies keep an indexed binary heap keyed when the allocation is inserted (keys
// only change on access, and an accessed allocation is pinned, hence out of the heap).
// Score policies whose order changes with time (dtr, cost_aware) scan a bounded random
// sample of the evictable set, as DTR's own implementation does.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "prepared.hpp"

namespace mhc::sim {

// What the engine exposes to policies (read-only for them).
struct Ctx {
    const Prepared* P = nullptr;
    const int64_t* bytes = nullptr;
    const trace::Category* category = nullptr;
    std::vector<int64_t> last_touch;      // logical clock of the last access/allocation
    std::vector<int64_t> last_time;       // simulated ns of the last access/allocation
    std::vector<int32_t> next_of;         // seq of the next access, kNever
    std::vector<int32_t> writer;          // seq of the last kernel that wrote it, -1
    std::vector<uint8_t> host_valid;
    int64_t now = 0;                      // simulated ns
    int32_t cur_seq = 0;                  // the kernel started last (0 before any)
    // The last transfer's end in each direction, and the end of the queue a swap-out waits for
    // (with one copy engine the queue both directions share): free at every time before its first
    // transfer, also before 0 (traces may hold negative times, down to -2^62 ns).
    int64_t h2d_busy_until = INT64_MIN / 2, d2h_busy_until = INT64_MIN / 2, d2h_queue_busy_until = INT64_MIN / 2;
    // Beyond now, at least 0: the last swap-out's end (forecast's backlog) and the D2H queue's
    // (cost_aware's: a swap-out issued now starts after the swap-ins of a shared queue too).
    int64_t d2h_backlog() const { return d2h_busy_until > now ? d2h_busy_until - now : 0; }
    int64_t d2h_queue_backlog() const { return d2h_queue_busy_until > now ? d2h_queue_busy_until - now : 0; }
    double h2d_ns_per_byte = 0, d2h_ns_per_byte = 0, h2d_lat_ns = 0, d2h_lat_ns = 0;

    double swap_in_ns(int32_t a) const { return h2d_lat_ns + bytes[a] * h2d_ns_per_byte; }
    double swap_out_ns(int32_t a) const { return d2h_lat_ns + bytes[a] * d2h_ns_per_byte; }
    // Recompute cost: the duration of the kernel that last wrote it (activations only). That
    // kernel reruns on what it accessed, so every other buffer it touched must still exist
    // when `a` is next needed; if one is freed before then, `a` cannot be recomputed
    // (INFINITY: the policies swap it instead). Bringing those buffers back if they are not
    // resident is not charged (docs/simulator.md).
    double recompute_ns(int32_t a) const {
        if (category[a] != trace::Category::Activation || writer[a] < 0) return INFINITY;
        const int32_t w = writer[a];
        if (next_of[a] != kNever) {
            const int64_t others_free = P->operand_free1_alloc[w] == a ? P->operand_free2[w] : P->operand_free1[w];
            if (others_free <= P->kstart[next_of[a]]) return INFINITY;
        }
        return static_cast<double>(P->kend[w] - P->kstart[w]);
    }
};

// A binary min-heap of allocations with a position index, so that any member is erased in
// O(log n). Each entry carries its keys, so that sifting compares neighbouring entries instead
// of reading the keys of two allocations at random places.
class IndexedHeap {
public:
    void init(size_t n) { pos_.assign(n, -1); heap_.clear(); }
    bool contains(int32_t a) const { return pos_[a] >= 0; }
    int32_t top() const { return heap_.empty() ? -1 : heap_[0].a; }
    size_t size() const { return heap_.size(); }
    void push(int32_t a, int64_t k1, int64_t k2) {
        pos_[a] = static_cast<int32_t>(heap_.size());
        heap_.push_back({k1, k2, a});
        up(pos_[a]);
    }
    void erase(int32_t a) {
        int32_t i = pos_[a];
        if (i < 0) return;
        const Entry last = heap_.back();
        heap_.pop_back();
        pos_[a] = -1;
        if (last.a == a) return;
        heap_[i] = last;
        pos_[last.a] = i;
        up(i);
        down(pos_[last.a]);
    }

private:
    struct Entry {
        int64_t k1, k2;
        int32_t a;
        bool operator<(const Entry& other) const { return k1 != other.k1 ? k1 < other.k1 : k2 < other.k2; }
    };
    void up(int32_t i) {
        const Entry moving = heap_[i];
        while (i > 0) {
            int32_t p = (i - 1) / 2;
            if (!(moving < heap_[p])) break;
            heap_[i] = heap_[p]; pos_[heap_[i].a] = i; i = p;
        }
        heap_[i] = moving; pos_[moving.a] = i;
    }
    void down(int32_t i) {
        int32_t n = static_cast<int32_t>(heap_.size());
        const Entry moving = heap_[i];
        for (;;) {
            int32_t c = 2 * i + 1;
            if (c >= n) break;
            if (c + 1 < n && heap_[c + 1] < heap_[c]) ++c;
            if (!(heap_[c] < moving)) break;
            heap_[i] = heap_[c]; pos_[heap_[i].a] = i; i = c;
        }
        heap_[i] = moving; pos_[moving.a] = i;
    }
    std::vector<Entry> heap_;
    std::vector<int32_t> pos_;
};

// A set of allocations ordered by a key that no two members share (LRU's clock: each tick
// belongs to one allocation), with insert, erase and the minimum in a few word operations:
// one bit per key, and above it levels of one bit per non-zero word (a 64-ary tree of
// occupancy bits; 4 levels cover 16 M keys), plus the owner of each key. Replaces a heap
// whose erase (every operand of every kernel is erased when pinned) was a fifth of the run.
class ClockSet {
public:
    void init(size_t n_alloc, size_t n_keys) {
        key_.assign(n_alloc, -1);
        resize(n_keys);
    }
    bool contains(int32_t alloc) const { return key_[alloc] >= 0; }
    void insert(int32_t alloc, int64_t key) {
        if (static_cast<size_t>(key) >= owner_.size()) grow(static_cast<size_t>(key) + 1);
        key_[alloc] = key;
        owner_[static_cast<size_t>(key)] = alloc;
        low_ = std::min(low_, static_cast<size_t>(key));
        auto bit = static_cast<size_t>(key);
        for (auto& level : levels_) {
            uint64_t& word = level[bit >> 6];
            const bool was_empty = word == 0;
            word |= uint64_t{1} << (bit & 63);
            if (!was_empty) break;
            bit >>= 6;
        }
    }
    void erase(int32_t alloc) {
        if (key_[alloc] < 0) return;
        auto bit = static_cast<size_t>(key_[alloc]);
        key_[alloc] = -1;
        for (auto& level : levels_) {
            uint64_t& word = level[bit >> 6];
            word &= ~(uint64_t{1} << (bit & 63));
            if (word != 0) break;
            bit >>= 6;
        }
    }
    // The member with the smallest key, -1 when empty: the first key at or after low_ (no
    // member is below it), found upwards from low_'s word, as the minimum mostly stays near.
    int32_t min() {
        low_ = first_from(low_);
        return low_ < owner_.size() ? owner_[low_] : -1;
    }
    // The member with the smallest key above `key`, -1 when none: the walk over the members
    // in order without erasing them.
    int32_t next_after(int64_t key) const {
        const size_t bit = first_from(static_cast<size_t>(key) + 1);
        return bit < owner_.size() ? owner_[bit] : -1;
    }

private:
    // The first key at or after `from` that has a member (owner_.size() when none): up the
    // levels from `from`'s word until a word has a bit at or after it, then down to the key.
    size_t first_from(size_t from) const {
        size_t bit = from;
        for (size_t level = 0; level < levels_.size(); ++level) {
            const size_t index = bit >> 6;
            if (index >= levels_[level].size()) break;
            const uint64_t word = levels_[level][index] & (~uint64_t{0} << (bit & 63));
            if (word != 0) {
                bit = (index << 6) | static_cast<size_t>(__builtin_ctzll(word));
                while (level-- > 0) bit = (bit << 6) | static_cast<size_t>(__builtin_ctzll(levels_[level][bit]));
                return bit;
            }
            bit = index + 1;   // the next word of this level: a bit of the level above
        }
        return owner_.size();
    }
    void resize(size_t n_keys) {
        owner_.assign(std::max<size_t>(n_keys, 1), -1);
        low_ = owner_.size();
        levels_.clear();
        size_t words = (owner_.size() + 63) / 64;
        for (;;) {
            levels_.emplace_back(words, 0);
            if (words == 1) break;
            words = (words + 63) / 64;
        }
    }
    void grow(size_t n_keys) {   // keys past the estimate: rebuild, larger, with the members
        std::vector<int64_t> keys = key_;
        resize(std::max(n_keys, owner_.size() * 2));
        std::fill(key_.begin(), key_.end(), -1);
        for (size_t a = 0; a < keys.size(); ++a)
            if (keys[a] >= 0) insert(static_cast<int32_t>(a), keys[a]);
    }
    std::vector<std::vector<uint64_t>> levels_;   // [0]: one bit per key; the last is one word
    std::vector<int32_t> owner_;                  // per key: the allocation that holds it
    std::vector<int64_t> key_;                    // per allocation: its key, -1 when absent
    size_t low_ = 0;                              // no member has a smaller key
};

// Least recently used first: the smallest last_touch, a clock no two allocations share.
struct LruPolicy {
    const Ctx* c = nullptr;
    ClockSet s;
    void init(const Ctx* ctx, size_t n) { c = ctx; s.init(n, n + ctx->P->acc_alloc.size() + 1); }
    bool contains(int32_t alloc) const { return s.contains(alloc); }
    void insert(int32_t alloc) { s.insert(alloc, c->last_touch[alloc]); }
    void erase(int32_t alloc) { s.erase(alloc); }
    int32_t pick() { return s.min(); }
    // The next member in LRU order after `alloc` (a member, or one erased since with its
    // key unchanged): early swap-out passes over victims without erasing them.
    int32_t pick_after(int32_t alloc) const { return s.next_after(c->last_touch[alloc]); }
    bool may_drop(int32_t) const { return false; }
};

// The policies ordered by keys fixed when an allocation becomes evictable: a heap.
struct HeapPolicy {
    const Ctx* c = nullptr;
    IndexedHeap h;
    void init(const Ctx* ctx, size_t n) { c = ctx; h.init(n); }
    bool contains(int32_t a) const { return h.contains(a); }
    void erase(int32_t a) { h.erase(a); }
    int32_t pick() const { return h.top(); }
    bool may_drop(int32_t) const { return false; }
};

// Largest first (vDNN offloads the big feature maps); ties least recently used.
struct LargestPolicy : HeapPolicy {
    void insert(int32_t a) { h.push(a, -c->bytes[a], c->last_touch[a]); }
};

// Farthest next use first (Belady's MIN); never-used-again first of all.
struct BeladyPolicy : HeapPolicy {
    void insert(int32_t a) { h.push(a, -static_cast<int64_t>(c->next_of[a]), a); }
};

// Dense evictable set with O(1) insert/erase and a sampled scan for time-varying scores.
// x mod d for any 64-bit x and a divisor d fixed over many calls (1 <= d < 2^32), without a
// division: with c = ceil(2^128 / d), the remainder is the high 64 bits of the 192-bit
// ((c x) mod 2^128) x d (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
// Software: Practice and Experience 49(6), 2019; exact when 128 >= 64 + log2 d). A sample of 64
// draws divides 64 times by the same size: a 64-bit division each costs tens of cycles.
class Remainder {
public:
    explicit Remainder(uint64_t divisor) : c(~U128{0} / divisor + 1), d(divisor) {}
    uint64_t of(uint64_t value) const {
        const U128 low = c * value;   // the fraction value / d, mod 1, in 128 bits
        const U128 bottom = static_cast<U128>(static_cast<uint64_t>(low)) * d;
        const U128 top = (low >> 64) * d;
        return static_cast<uint64_t>((top + (bottom >> 64)) >> 64);
    }

private:
    __extension__ using U128 = unsigned __int128;
    U128 c;
    uint64_t d;
};

struct SampledSet {
    static constexpr uint64_t kSeed = 0x9E3779B97F4A7C15ull;
    std::vector<int32_t> items, pos;
    uint64_t rng = kSeed;
    static constexpr size_t kSample = 64;
    void init(size_t n) { pos.assign(n, -1); items.clear(); }
    bool contains(int32_t a) const { return pos[a] >= 0; }
    void insert(int32_t a) { pos[a] = static_cast<int32_t>(items.size()); items.push_back(a); }
    void erase(int32_t a) {
        int32_t i = pos[a];
        if (i < 0) return;
        int32_t last = items.back();
        items[i] = last; pos[last] = i;
        items.pop_back(); pos[a] = -1;
    }
    uint64_t next() { rng = step(rng); return rng; }
    static uint64_t step(uint64_t word) {   // xorshift64
        word ^= word << 13;
        word ^= word >> 7;
        word ^= word << 17;
        return word;
    }
    // Calls score(a) on every item (small sets) or kSample random ones; returns the best
    // (largest score), ties by smaller index for determinism.
    template <class Score>
    int32_t best(Score score) {
        if (items.empty()) return -1;
        int32_t arg = -1;
        double b = -INFINITY;
        auto consider = [&](int32_t a) {
            double s = score(a);
            if (arg < 0 || s > b || (s == b && a < arg)) { b = s; arg = a; }
        };
        if (items.size() <= kSample) {
            for (int32_t a : items) consider(a);
        } else {
            for (size_t i = 0; i < kSample; ++i) consider(items[next() % items.size()]);
        }
        return arg;
    }
};

// The outputs of SampledSet::next() from `seed`, taken n at a time and made kLanes at once.
// xorshift64 is linear over GF(2): its state k steps ahead is a fixed 64x64 bit matrix times the
// state (Marsaglia, "Xorshift RNGs", J. Stat. Software 8(14), 2003). So lanes that start
// kLaneSteps apart (each start that matrix times the one before) make a block of the sequence
// side by side, instead of each output waiting on the previous one's six shifts and xors.
class XorshiftBlocks {
public:
    static constexpr size_t kLanes = 4, kLaneSteps = 256, kBlock = kLanes * kLaneSteps;
    explicit XorshiftBlocks(uint64_t seed) : state(seed) {
        for (size_t bit = 0; bit < 64; ++bit) {   // column `bit` of the matrix: where that bit goes
            uint64_t column = uint64_t{1} << bit;
            for (size_t i = 0; i < kLaneSteps; ++i) column = SampledSet::step(column);
            ahead[bit] = column;
        }
    }
    // The next n outputs, n the same at every call and a divisor of kBlock.
    const uint64_t* take(size_t n) {
        if (used + n > kBlock) refill();
        const uint64_t* out = block.data() + used;
        used += n;
        return out;
    }

private:
    uint64_t jump(uint64_t from) const {   // kLaneSteps steps at once
        uint64_t to = 0;
        for (size_t bit = 0; bit < 64; ++bit) to ^= ahead[bit] & (0 - ((from >> bit) & 1));
        return to;
    }
    void refill() {
        std::array<uint64_t, kLanes> lane{};
        lane[0] = state;
        for (size_t l = 1; l < kLanes; ++l) lane[l] = jump(lane[l - 1]);
        for (size_t i = 0; i < kLaneSteps; ++i)
            for (size_t l = 0; l < kLanes; ++l) {
                lane[l] = SampledSet::step(lane[l]);
                block[l * kLaneSteps + i] = lane[l];
            }
        state = lane[kLanes - 1];
        used = 0;
    }
    std::array<uint64_t, kBlock> block{};
    std::array<uint64_t, 64> ahead{};
    uint64_t state;
    size_t used = kBlock;
};

// The evictable set of a score policy, scored when a victim is picked: SampledSet's order and
// sample (every member while there are at most kSample, else kSample drawn from
// SampledSet::next()'s sequence), each member kept with the parts of its score that cannot change
// while it is a member. Those parts read its size, its last access (time and next use) and its
// producer, and an allocation is evictable only while no kernel uses it: the engine pins a kernel's
// operands (erasing them) before it stamps them, and inserts only after the stamps. So a pick scores
// one record per candidate, read from one place, instead of gathering from a dozen arrays, and draws
// its sample in blocks (XorshiftBlocks) with the remainder by multiplication (Remainder): the same
// candidates, the same scores, bit for bit.
template <class Record> struct ScoredSet {
    std::vector<Record> items;   // Record::a is the allocation
    std::vector<int32_t> pos;
    XorshiftBlocks draws{SampledSet::kSeed};
    static constexpr size_t kSample = SampledSet::kSample;
    void init(size_t n) {
        pos.assign(n, -1);
        items.clear();
    }
    bool contains(int32_t alloc) const { return pos[alloc] >= 0; }
    void insert(const Record& rec) {
        pos[rec.a] = static_cast<int32_t>(items.size());
        items.push_back(rec);
    }
    void erase(int32_t alloc) {
        const int32_t at = pos[alloc];
        if (at < 0) return;
        const Record last = items.back();
        items[at] = last;
        pos[last.a] = at;
        items.pop_back();
        pos[alloc] = -1;
    }
    // SampledSet::best over the records: the largest score(record), ties by smaller allocation.
    template <class Score> int32_t best(Score score) {
        if (items.empty()) return -1;
        int32_t arg = -1;
        double top = -INFINITY;
        auto consider = [&](const Record& rec) {
            double value = score(rec);
            if (arg < 0 || value > top || (value == top && rec.a < arg)) {
                top = value;
                arg = rec.a;
            }
        };
        if (items.size() <= kSample) {
            for (const Record& rec : items) consider(rec);
        } else {
            const uint64_t* drawn = draws.take(kSample);
            const Remainder within(items.size());
            for (size_t i = 0; i < kSample; ++i) consider(items[within.of(drawn[i])]);
        }
        return arg;
    }
};

template <class Record> struct SampledPolicy {
    const Ctx* c = nullptr;
    ScoredSet<Record> set;
    void init(const Ctx* ctx, size_t n) {
        c = ctx;
        set.init(n);
    }
    bool contains(int32_t alloc) const { return set.contains(alloc); }
    void erase(int32_t alloc) { set.erase(alloc); }
};

// DTR (Kirisame et al., ICLR 2021): evict the smallest h = cost / (size x staleness).
// cost = recompute time for an activation with a known producer, else the swap round trip.
struct DtrRecord {
    double cost, bytes;
    int64_t last_time;
    int32_t a;
};
struct DtrPolicy : SampledPolicy<DtrRecord> {
    double cost(int32_t a) const {
        return std::min(c->recompute_ns(a), c->swap_out_ns(a) + c->swap_in_ns(a));
    }
    void insert(int32_t alloc) {
        set.insert({cost(alloc), static_cast<double>(c->bytes[alloc]), c->last_time[alloc], alloc});
    }
    int32_t pick() {
        const int64_t now = c->now;
        return set.best([now](const DtrRecord& rec) {
            double staleness = static_cast<double>(now - rec.last_time) + 1.0;
            return -rec.cost / (rec.bytes * staleness);
        });
    }
    bool may_drop(int32_t a) const {
        return c->recompute_ns(a) <= c->swap_out_ns(a) + c->swap_in_ns(a);
    }
};

// The cost-aware scheduler claimed for mHC: prefer allocations whose next use is far
// relative to what bringing them back costs, that were produced early in the step, and
// whose round trip hides behind the time until their next use (link backlog included).
struct CostAwareRecord {
    int64_t next_start;   // kstart of its next use; never used again: `never`
    double reload, swap_out, depth_factor;
    int32_t a;
    bool never;
};
struct CostAwarePolicy : SampledPolicy<CostAwareRecord> {
    double reload_ns(int32_t a) const { return std::min(c->swap_in_ns(a), c->recompute_ns(a)); }
    void insert(int32_t alloc) {
        const Prepared& prep = *c->P;
        const int32_t nu = c->next_of[alloc];
        double depth = 0.5;   // position in its step of its producer, 0 first .. 1 last
        const int32_t producer = c->writer[alloc];
        if (producer >= 0 && prep.step_of[producer] >= 0) {
            const int32_t st = prep.step_of[producer];
            double len = prep.step_begin[st + 1] - prep.step_begin[st];
            depth = (producer - prep.step_begin[st]) / std::max(len, 1.0);
        }
        set.insert({nu == kNever ? 0 : prep.kstart[nu], std::max(reload_ns(alloc), 1.0), c->swap_out_ns(alloc),
                    1.25 - 0.5 * depth, alloc, nu == kNever});
    }
    int32_t pick() {
        const std::vector<int64_t>& kstart = c->P->kstart;
        // a trace without kernels has no next use to measure from (every record is `never`)
        const int64_t current = kstart.empty() ? 0 : kstart[std::min<size_t>(c->cur_seq, kstart.size() - 1)];
        const double backlog = static_cast<double>(c->d2h_queue_backlog());
        return set.best([current, backlog](const CostAwareRecord& rec) {
            double ttnu = rec.never ? 1e18 : static_cast<double>(rec.next_start - current);
            ttnu = std::max(ttnu, 1.0);
            bool hides = ttnu >= backlog + rec.swap_out + rec.reload;
            return ttnu / rec.reload * (hides ? 1.0 : 0.1) * rec.depth_factor;
        });
    }
    bool may_drop(int32_t a) const { return c->recompute_ns(a) < c->swap_in_ns(a); }
};

}  // namespace mhc::sim
