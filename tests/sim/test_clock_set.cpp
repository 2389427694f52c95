// LRU's evictable set (ClockSet, sim/src/policies.hpp) against std::set on random operations:
// the smallest key after every insert and erase, the next member after a random key, keys
// inserted below the current minimum (an operand unpinned at its kernel's end keeps the tick
// of its access), and keys past the size it was built for (it grows).
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <set>

#include "policies.hpp"

TEST_CASE("ClockSet gives the smallest key and the next one after a key, as an ordered set does", "[sim][policies]") {
    for (uint64_t seed : {1, 2, 3}) {
        std::mt19937_64 rng(seed);
        const int n_alloc = 300;
        mhc::sim::ClockSet set;
        set.init(n_alloc, 1000);   // keys run to 20000: it grows on the way
        std::set<std::pair<int64_t, int32_t>> ref;   // (key, allocation)
        std::map<int32_t, int64_t> key_of;
        int64_t tick = 0;
        for (int op = 0; op < 20000; ++op) {
            const auto alloc = static_cast<int32_t>(rng() % n_alloc);
            if (key_of.count(alloc)) {
                ref.erase({key_of[alloc], alloc});
                key_of.erase(alloc);
                set.erase(alloc);
            } else {
                // a fresh tick, or (one time in four) an old one no member holds
                int64_t key = ++tick;
                if (rng() % 4 == 0) {
                    key = static_cast<int64_t>(rng() % static_cast<uint64_t>(tick)) + 1;
                    bool taken = false;
                    for (const auto& [k, b] : ref) taken |= k == key;
                    if (taken) key = ++tick;
                }
                ref.insert({key, alloc});
                key_of[alloc] = key;
                set.insert(alloc, key);
            }
            REQUIRE(set.contains(alloc) == (key_of.count(alloc) == 1));
            REQUIRE(set.min() == (ref.empty() ? -1 : ref.begin()->second));
            // the walk in key order from any key (early swap-out passes over victims so)
            const int64_t from = static_cast<int64_t>(rng() % static_cast<uint64_t>(tick + 2));
            const auto after = ref.upper_bound({from, INT32_MAX});
            REQUIRE(set.next_after(from) == (after == ref.end() ? -1 : after->second));
        }
    }
}
