// The paged arena (arena.hpp, pages.hpp): segments take whole 2 MiB pages from anywhere in a
// pool of the capacity, so a pattern that fragments a contiguous arena fits; the pool never
// exceeds the capacity; and on the host the pages are really mapped (data written through one
// virtual range is read back through another mapping of the same page).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "mhc/replay/arena.hpp"
#include "mhc/replay/pages.hpp"
#include "mhc/trace/model.hpp"

using namespace mhc;
using replay::Arena;
constexpr int64_t MiB = 1 << 20, kPage = replay::PageMapper::kPage;

namespace {
// Fills [p, p + bytes) with words derived from seed; checks them back.
void fill(unsigned char* p, int64_t bytes, uint64_t seed) {
    for (int64_t o = 0; o + 8 <= bytes; o += 8) {
        uint64_t v = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(o);
        std::memcpy(p + o, &v, 8);
    }
}
bool same(const unsigned char* p, int64_t bytes, uint64_t seed) {
    for (int64_t o = 0; o + 8 <= bytes; o += 8) {
        uint64_t v = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(o), w;
        std::memcpy(&w, p + o, 8);
        if (v != w) return false;
    }
    return true;
}
}  // namespace

TEST_CASE("host page mapper: pages are shared memory of the pool, mapped anywhere", "[replay][arena]") {
    auto vm = replay::make_host_mapper(4, 16 * kPage);
    unsigned char* b = vm->base();
    int32_t p2 = 2;
    vm->map(0, &p2, 1);                    // pool page 2 at virtual page 0
    fill(b, kPage, 7);
    vm->map(5 * kPage, &p2, 1);            // and again at virtual page 5: the same memory
    CHECK(same(b + 5 * kPage, kPage, 7));
    CHECK(vm->mapped_pages() == 2);
    vm->unmap(0, 1);
    CHECK(same(b + 5 * kPage, kPage, 7));  // the page keeps its data
    int32_t bad = 4;
    CHECK_THROWS(vm->map(0, &bad, 1));     // outside the pool
    CHECK_THROWS(vm->map(16 * kPage, &p2, 1));   // outside the reservation
    CHECK_THROWS(vm->map(MiB, &p2, 1));    // not page-aligned
}

TEST_CASE("host page mapper: a range unmapped and mapped again shows the pages asked for", "[replay][arena]") {
    // Unmapping keeps the mapping until the range gets other pages (page tables cost most of a
    // validation otherwise): what the range shows must still be exactly what map() asked.
    auto vm = replay::make_host_mapper(4, 16 * kPage);
    unsigned char* b = vm->base();
    int32_t pages[2] = {0, 1};
    vm->map(0, pages, 2);
    fill(b, kPage, 10);
    fill(b + kPage, kPage, 11);
    CHECK_THROWS(vm->map(kPage, pages, 1));   // mapped already
    vm->unmap(0, 2);
    CHECK(vm->mapped_pages() == 0);
    CHECK_THROWS(vm->unmap(0, 1));            // not mapped
    int32_t swapped[2] = {1, 0};              // the same range, the pages the other way round
    vm->map(0, swapped, 2);
    CHECK(same(b, kPage, 11));
    CHECK(same(b + kPage, kPage, 10));
    vm->unmap(0, 2);
    int32_t again[2] = {1, 3};                // one page as it was, one new
    vm->map(0, again, 2);
    CHECK(same(b, kPage, 11));
    vm->map(4 * kPage, pages + 1, 1);         // pool page 1 elsewhere too: the same memory
    fill(b + 4 * kPage, kPage, 12);
    CHECK(same(b, kPage, 12));
    CHECK(vm->mapped_pages() == 3);
}

TEST_CASE("host page mapper: a premapped pool shows page i at virtual page i and maps only what differs",
          "[replay][arena]") {
    auto vm = replay::make_host_mapper(4, 16 * kPage, true);
    unsigned char* base = vm->base();
    CHECK(vm->mapped_pages() == 0);           // premapped is not mapped: nothing is in use
    int32_t first[2] = {0, 1};
    vm->map(0, first, 2);                     // what the premap shows already: no page tables built
    CHECK(vm->pages_remapped() == 0);
    fill(base, kPage, 21);
    fill(base + kPage, kPage, 22);
    int32_t third = 2;
    vm->map(2 * kPage, &third, 1);
    CHECK(vm->pages_remapped() == 0);
    int32_t other = 0;                        // pool page 0 at virtual page 5: mapped, the same memory
    vm->map(5 * kPage, &other, 1);
    CHECK(vm->pages_remapped() == 1);
    CHECK(same(base + 5 * kPage, kPage, 21));
    vm->unmap(0, 2);
    int32_t swapped[2] = {1, 0};              // the premapped range with other pages: remapped
    vm->map(0, swapped, 2);
    CHECK(vm->pages_remapped() == 3);
    CHECK(same(base, kPage, 22));
    CHECK(same(base + kPage, kPage, 21));
    // Without the premap every page is mapped when first asked for.
    auto plain = replay::make_host_mapper(4, 16 * kPage);
    plain->map(0, first, 2);
    CHECK(plain->pages_remapped() == 2);
}

TEST_CASE("host page mapper: pages beyond the distinct ones alias them", "[replay][arena]") {
    auto vm = replay::make_host_mapper(4, 16 * kPage, false, 2);
    CHECK(vm->pool_pages() == 4);
    CHECK(vm->distinct_pages() == 2);
    unsigned char* base = vm->base();
    int32_t p0 = 0, p1 = 1, p2 = 2, p3 = 3;
    vm->map(0, &p0, 1);
    vm->map(kPage, &p1, 1);
    fill(base, kPage, 41);
    fill(base + kPage, kPage, 42);
    vm->map(4 * kPage, &p2, 1);   // page 2 shows page 0's memory, page 3 page 1's
    vm->map(5 * kPage, &p3, 1);
    CHECK(same(base + 4 * kPage, kPage, 41));
    CHECK(same(base + 5 * kPage, kPage, 42));
    CHECK(vm->mapped_pages() == 4);   // still four pages in use: counts are not aliased
    // Premapped: virtual pages 2 and 3 show pages 2 and 3, i.e. the memory of 0 and 1.
    auto pm = replay::make_host_mapper(4, 16 * kPage, true, 2);
    fill(pm->base(), 2 * kPage, 43);
    CHECK(same(pm->base() + 2 * kPage, 2 * kPage, 43));
    CHECK(pm->shown_page(3 * kPage) == 3);
    CHECK(replay::make_host_mapper(4, 16 * kPage)->distinct_pages() == 4);
    // Premapped in two halves (two threads) across the alias boundary: 5 pages over 2 distinct.
    auto odd = replay::make_host_mapper(5, 16 * kPage, true, 2);
    fill(odd->base(), kPage, 44);
    fill(odd->base() + kPage, kPage, 45);
    CHECK(same(odd->base() + 2 * kPage, kPage, 44));
    CHECK(same(odd->base() + 3 * kPage, kPage, 45));
    CHECK(same(odd->base() + 4 * kPage, kPage, 44));
}

TEST_CASE("a pattern that fragments a contiguous arena fits in pages", "[replay][arena]") {
    // ideal: ten 2 MiB allocations fill 20 MiB, every other one is freed; a 10 MiB one fits
    // only because its pages need not be contiguous.
    const int64_t cap = 10 * kPage;
    replay::FreeList contiguous(cap, 512);
    auto vm = replay::make_host_mapper(Arena::pool_pages(cap), Arena::default_va(cap));
    Arena a("ideal", cap, vm.get());
    std::vector<int64_t> off(10), va(10);
    for (int32_t k = 0; k < 10; ++k) {
        off[static_cast<size_t>(k)] = contiguous.allocate(kPage);
        va[static_cast<size_t>(k)] = a.allocate(k, kPage);
        REQUIRE(va[static_cast<size_t>(k)] >= 0);
        fill(vm->base() + va[static_cast<size_t>(k)], kPage, static_cast<uint64_t>(k));
    }
    CHECK(a.in_use() == cap);
    CHECK(a.allocate(99, 512) < 0);   // the pool is full
    CHECK(a.last_failure_fragmentation() == false);
    for (int32_t k = 0; k < 10; k += 2) {
        contiguous.free(off[static_cast<size_t>(k)]);
        a.free(k);
    }
    CHECK(contiguous.allocate(5 * kPage) < 0);   // contiguous: 5 holes of 2 MiB
    int64_t v = a.allocate(50, 5 * kPage - 4096);
    REQUIRE(v >= 0);
    // The whole range is usable memory and the other allocations are untouched by it.
    fill(vm->base() + v, 5 * kPage - 4096, 50);
    CHECK(same(vm->base() + v, 5 * kPage - 4096, 50));
    for (int32_t k = 1; k < 10; k += 2) CHECK(same(vm->base() + va[static_cast<size_t>(k)], kPage, static_cast<uint64_t>(k)));
    CHECK(a.in_use() <= cap);
    CHECK(a.high_water() <= cap);
    CHECK(vm->mapped_pages() * kPage == a.in_use());
}

TEST_CASE("caching segments are placed by pages, the pool never exceeds the capacity", "[replay][arena]") {
    // Eight 12 MiB blocks (one 12 MiB segment each) in a 100 MiB pool; freeing every other one
    // leaves 48 MiB in four holes; a 40 MiB block makes the model release the free segments and
    // add a 40 MiB one: contiguous placement has no 40 MiB hole, pages do.
    const int64_t cap = 100 * MiB;
    replay::FreeList contiguous(cap, 512);
    auto vm = replay::make_host_mapper(Arena::pool_pages(cap), Arena::default_va(cap));
    Arena a("caching", cap, vm.get());
    std::vector<int64_t> off(8), va(8);
    for (int32_t k = 0; k < 8; ++k) {
        off[static_cast<size_t>(k)] = contiguous.allocate(12 * MiB);
        va[static_cast<size_t>(k)] = a.allocate(k, 12 * MiB);
        REQUIRE(va[static_cast<size_t>(k)] >= 0);
        fill(vm->base() + va[static_cast<size_t>(k)], 12 * MiB, static_cast<uint64_t>(k));
    }
    CHECK(a.in_use() == 96 * MiB);
    for (int32_t k = 0; k < 8; k += 2) {
        contiguous.free(off[static_cast<size_t>(k)]);
        a.free(k);
    }
    CHECK(a.in_use() == 96 * MiB);   // cached, as the model keeps them
    CHECK(contiguous.allocate(40 * MiB) < 0);
    int64_t v = a.allocate(100, 40 * MiB);
    REQUIRE(v >= 0);
    CHECK(a.in_use() == 88 * MiB);   // 4 x 12 MiB live + 40 MiB
    fill(vm->base() + v, 40 * MiB, 100);
    CHECK(same(vm->base() + v, 40 * MiB, 100));
    for (int32_t k = 1; k < 8; k += 2) CHECK(same(vm->base() + va[static_cast<size_t>(k)], 12 * MiB, static_cast<uint64_t>(k)));
    CHECK(a.peak() <= cap);
    CHECK(a.high_water() <= cap);
    CHECK(vm->mapped_pages() * kPage == a.in_use());
    // Beyond the pool: the model says no, as the simulator would.
    CHECK(a.allocate(101, 20 * MiB) < 0);
}

// The arena follows the simulator's model exactly, whatever its settings and streams: on random
// sequences of allocations and frees over two streams, every call succeeds or fails as the
// model's does, and the pages in use (and mapped) are the model's reserved bytes after each call.
// Expandable segments map pages in place inside one virtual range, so a block's bytes are
// contiguous and survive the segment growing around them.
TEST_CASE("the caching arena follows the model's settings and streams call by call", "[replay][arena][caching]") {
    const int64_t cap = 256 * MiB;
    for (const char* conf : {"", "expandable_segments:True", "roundup_power2_divisions:4,max_split_size_mb:40",
                             "garbage_collection_threshold:0.6"}) {
        INFO("allocator conf '" << conf << "'");
        const sim::AllocatorSettings set = sim::parse_allocator_conf(conf, "test");
        auto vm = replay::make_host_mapper(Arena::pool_pages(cap), Arena::default_va(cap));
        Arena a("caching", cap, vm.get(), set);
        sim::CachingAllocator ref(cap, set);
        std::vector<std::pair<int32_t, int32_t>> live;   // (key, model block)
        std::vector<int64_t> va_of(4000, -1), bytes_of(4000, 0);
        uint64_t x = 12345;
        auto rnd = [&x] { x = x * 6364136223846793005ull + 1442695040888963407ull; return x >> 33; };
        for (int32_t key = 0; key < 4000; ++key) {
            if (!live.empty() && rnd() % 3 == 0) {   // free a random live block
                size_t i = rnd() % live.size();
                auto [k, b] = live[i];
                REQUIRE(same(vm->base() + va_of[static_cast<size_t>(k)], bytes_of[static_cast<size_t>(k)], static_cast<uint64_t>(k)));
                a.free(k);
                ref.free(b);
                live[i] = live.back();
                live.pop_back();
            } else {
                const int64_t bytes = rnd() % 4 == 0 ? static_cast<int64_t>(rnd() % (48 * MiB)) + 1
                                                     : static_cast<int64_t>(rnd() % (900 << 10)) + 1;
                const int64_t stream = static_cast<int64_t>(rnd() % 2);
                const int32_t b = ref.allocate(bytes, stream);
                const int64_t v = a.allocate(key, bytes, stream);
                REQUIRE((b >= 0) == (v >= 0));
                if (b >= 0) {
                    live.push_back({key, b});
                    va_of[static_cast<size_t>(key)] = v;
                    bytes_of[static_cast<size_t>(key)] = bytes;
                    fill(vm->base() + v, bytes, static_cast<uint64_t>(key));
                }
            }
            REQUIRE(a.in_use() == ref.reserved());
            REQUIRE(vm->mapped_pages() * kPage == a.in_use());
        }
        for (auto [k, b] : live)
            CHECK(same(vm->base() + va_of[static_cast<size_t>(k)], bytes_of[static_cast<size_t>(k)], static_cast<uint64_t>(k)));
        CHECK(a.peak() <= cap);
    }
}

TEST_CASE("the caching arena keeps a pool per stream, as the model does", "[replay][arena][caching]") {
    // A 12 MiB block freed on stream 0 is cached for stream 0 only: the same request on
    // stream 1 takes a new segment (24 MiB in use), on stream 0 it reuses the cached one.
    const int64_t cap = 100 * MiB;
    Arena a("caching", cap);
    REQUIRE(a.allocate(1, 12 * MiB, 0) >= 0);
    a.free(1);
    CHECK(a.in_use() == 12 * MiB);
    REQUIRE(a.allocate(2, 12 * MiB, 1) >= 0);
    CHECK(a.in_use() == 24 * MiB);
    REQUIRE(a.allocate(3, 12 * MiB, 0) >= 0);
    CHECK(a.in_use() == 24 * MiB);
}

TEST_CASE("the caching arena keeps a private pool's blocks apart, as the model does", "[replay][arena][caching]") {
    // A 12 MiB block freed in private pool 1 is cached for that pool only: the same request of the
    // default pool (same stream) takes a new segment, the pool's own request reuses it.
    const int64_t cap = 100 * MiB;
    Arena a("caching", cap);
    REQUIRE(a.allocate(1, 12 * MiB, 0, 1) >= 0);
    a.free(1);
    CHECK(a.in_use() == 12 * MiB);
    REQUIRE(a.allocate(2, 12 * MiB, 0, 0) >= 0);
    CHECK(a.in_use() == 24 * MiB);
    REQUIRE(a.allocate(3, 12 * MiB, 0, 1) >= 0);
    CHECK(a.in_use() == 24 * MiB);
}

TEST_CASE("the caching arena gives arena private pool back after the time the recording did, as the model does",
          "[replay][arena][caching][pools]") {
    // Pool 1 was given back at recorded time 100 (its last segment freed: a MemPool destroyed).
    // Its 12 MiB block is freed at 50 and stays cached for the pool (24 MiB in use with the default
    // pool's); an event recorded at 100 gives nothing back yet (after it, not at it); one at 101
    // gives the pool's free segment back: its pages return (12 MiB in use).
    Arena arena("caching", 100 * MiB);
    arena.give_pools_back({mhc::trace::kNoTime, 100});
    REQUIRE(arena.allocate(1, 12 * MiB, 0, 1) >= 0);
    REQUIRE(arena.allocate(2, 12 * MiB, 0, 0) >= 0);
    arena.free(1);
    CHECK(arena.in_use() == 24 * MiB);
    arena.pools_due(100);
    CHECK(arena.in_use() == 24 * MiB);
    arena.pools_due(101);
    CHECK(arena.in_use() == 12 * MiB);
    arena.pools_due(200);   // once
    CHECK(arena.in_use() == 12 * MiB);
}
