// The sampling primitives of the score policies and the forecast (sim/src/policies.hpp): the
// remainder without a division equals %, and the xorshift blocks give SampledSet::next()'s
// sequence, across blocks and from any seed.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "policies.hpp"

namespace sim = mhc::sim;

TEST_CASE("Remainder gives x % d for every 64-bit x and 32-bit d", "[sim][policies]") {
    std::mt19937_64 rng(5);
    const uint64_t top = std::numeric_limits<uint64_t>::max();
    std::vector<uint64_t> divisors = {1, 2, 3, 7, 64, 65, 80, 97, 1000, 65'537, (uint64_t{1} << 31) - 1,
                                      uint64_t{1} << 31, (uint64_t{1} << 32) - 1};
    for (int i = 0; i < 40; ++i) divisors.push_back(1 + rng() % 100'000);
    for (int i = 0; i < 20; ++i) divisors.push_back(1 + (rng() >> 32));
    for (const uint64_t divisor : divisors) {
        const sim::Remainder remainder(divisor);
        std::vector<uint64_t> values = {0, 1, divisor - 1, divisor, divisor + 1, top, top - 1, top - divisor,
                                        top / divisor * divisor, top / divisor * divisor - 1, uint64_t{1} << 63,
                                        (uint64_t{1} << 63) - 1};
        for (int i = 0; i < 2000; ++i) values.push_back(rng());
        for (const uint64_t value : values) {
            INFO("value " << value << " divisor " << divisor);
            REQUIRE(remainder.of(value) == value % divisor);
        }
    }
}

TEST_CASE("XorshiftBlocks gives SampledSet::next()'s sequence", "[sim][policies]") {
    for (const uint64_t seed : {sim::SampledSet::kSeed, uint64_t{1}, uint64_t{0x8000000000000000}, uint64_t{12345}})
        for (const size_t piece : {size_t{1}, size_t{2}, size_t{64}, size_t{256}, sim::XorshiftBlocks::kBlock}) {
            sim::SampledSet set;
            set.rng = seed;
            sim::XorshiftBlocks blocks(seed);
            for (size_t taken = 0; taken < 5 * sim::XorshiftBlocks::kBlock; taken += piece) {   // across blocks
                const uint64_t* got = blocks.take(piece);
                for (size_t i = 0; i < piece; ++i) {
                    INFO("seed " << seed << " piece " << piece << " output " << taken + i);
                    REQUIRE(got[i] == set.next());
                }
            }
        }
}
