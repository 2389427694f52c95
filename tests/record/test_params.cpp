// Argument scanning: aligned words of the parameter buffer against live allocations.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "mhc/record/params.hpp"

using mhc::record::gather_words;
using mhc::record::gather_words_packed;
using mhc::record::LiveMap;
using mhc::record::ParamSlot;
using mhc::record::scan_words;

namespace {
LiveMap three_allocations() {
    LiveMap live;
    live.insert(0x10000, 0x1000, 1);   // [0x10000, 0x11000)
    live.insert(0x20000, 0x100, 2);    // [0x20000, 0x20100)
    live.insert(0x30000, 8, 3);        // [0x30000, 0x30008)
    return live;
}
}  // namespace

TEST_CASE("live map: lookups inside, at the ends and between allocations") {
    LiveMap live = three_allocations();
    CHECK(live.find(0x10000) == 1);     // first byte
    CHECK(live.find(0x10fff) == 1);     // last byte
    CHECK(live.find(0x11000) == -1);    // one past the end
    CHECK(live.find(0xffff) == -1);     // one before the start
    CHECK(live.find(0x200ff) == 2);
    CHECK(live.find(0x20100) == -1);
    CHECK(live.find(0x30007) == 3);
    CHECK(live.find(0x30008) == -1);
    CHECK(live.find(0) == -1);
    CHECK(live.find(UINT64_MAX) == -1);
    CHECK(live.erase(0x20000) == 2);
    CHECK(live.find(0x20010) == -1);
    CHECK(live.erase(0x20000) == -1);
    CHECK(live.size() == 2);
}

TEST_CASE("live map: a second allocation at a live start replaces it and reports it") {
    LiveMap live;
    CHECK(live.insert(0x1000, 64, 7) == -1);
    CHECK(live.insert(0x1000, 32, 8) == 7);
    CHECK(live.find(0x1000 + 40) == -1);   // the new, shorter range
    CHECK(live.find(0x1000 + 31) == 8);
    CHECK(live.at(0x1000) == 8);
    CHECK(live.at(0x1001) == -1);
}

TEST_CASE("live map: fine allocations win over the VMM mapping that contains them") {
    LiveMap live;
    live.insert(0x100000, 0x200000, 50, LiveMap::Layer::Vmm);
    live.insert(0x180000, 0x1000, 5);
    CHECK(live.find(0x180010) == 5);
    CHECK(live.find(0x100010) == 50);
    CHECK(live.find(0x2fffff) == 50);
    CHECK(live.find(0x300000) == -1);
    std::vector<int64_t> ids;
    live.insert(0x300000, 0x1000, 51, LiveMap::Layer::Vmm);
    live.erase_range(0x100000, 0x200000, ids);   // unmaps only the first mapping
    REQUIRE(ids == std::vector<int64_t>{50});
    CHECK(live.find(0x100010) == -1);
    CHECK(live.find(0x300010) == 51);
    CHECK(live.find(0x180010) == 5);
}

TEST_CASE("gather: aligned words of each parameter, from kernelParams") {
    // Layout of a kernel (float* input, int count, const float* output, struct {int x; void* p;} pair,
    // short flag): input at 0 (8), count at 8 (4), output at 16 (8), pair at 24 (16: x at 24, pad, p at
    // 32), flag at 40 (2).
    uint64_t input = 0x10010, output = 0x20000, pointee = 0x300000;
    int32_t count = 0x10000;   // looks like an address if read alone, but is never a whole word
    struct S { int32_t x; uint64_t p; } pair{0x20004, pointee};   // p: a pointer's 8 bytes
    int16_t flag = 3;
    void* values[] = {&input, &count, &output, &pair, &flag};
    std::vector<ParamSlot> slots = {{0, 8}, {8, 4}, {16, 8}, {24, 16}, {40, 2}};
    std::vector<uint64_t> words;
    gather_words(slots.data(), slots.size(), values, words);
    // input, output, and pair's two words (x + padding, then p); count and flag are shorter than a word.
    REQUIRE(words.size() == 4);
    CHECK(words[0] == input);
    CHECK(words[1] == output);
    CHECK((words[2] & 0xffffffffu) == 0x20004u);
    CHECK(words[3] == pointee);
}

TEST_CASE("gather: a parameter at an unaligned offset yields only its aligned words") {
    // A 16-byte struct at offset 4: only the word at offset 8 lies wholly inside it.
    unsigned char raw[16];
    uint64_t inner = 0x10020;
    std::memset(raw, 0xab, sizeof raw);
    std::memcpy(raw + 4, &inner, 8);   // buffer offsets 8..16: unaligned inside the parameter
    void* values[] = {raw};
    ParamSlot slot{4, 16};
    std::vector<uint64_t> words;
    gather_words(&slot, 1, values, words);
    REQUIRE(words.size() == 1);
    uint64_t expect;
    std::memcpy(&expect, raw + 4, 8);   // buffer offset 8 = parameter byte 4
    CHECK(words[0] == expect);
}

TEST_CASE("gather: packed parameter buffer (extra), short buffers are not overrun") {
    alignas(8) unsigned char buf[32] = {};
    uint64_t p0 = 0x10000, p1 = 0x30000;
    std::memcpy(buf + 0, &p0, 8);
    std::memcpy(buf + 24, &p1, 8);
    std::vector<ParamSlot> slots = {{0, 8}, {8, 4}, {24, 8}};
    std::vector<uint64_t> words;
    gather_words_packed(slots.data(), slots.size(), buf, sizeof buf, words);
    REQUIRE(words == std::vector<uint64_t>{p0, p1});
    words.clear();
    gather_words_packed(slots.data(), slots.size(), buf, 24, words);   // p1 does not fit
    CHECK(words == std::vector<uint64_t>{p0});
    words.clear();
    gather_words_packed(slots.data(), slots.size(), nullptr, 32, words);
    CHECK(words.empty());
}

TEST_CASE("scan: words inside live allocations, deduplicated and sorted") {
    LiveMap live = three_allocations();
    std::vector<uint64_t> words = {
        0x30000,   // allocation 3, first byte
        0x10ff8,   // allocation 1, near the end
        0x11000,   // one past allocation 1: not an access
        0x10000,   // allocation 1 again
        0,         // null pointer
        42,        // a small integer
        0x20100,   // one past allocation 2
        0x200ff};  // allocation 2, last byte
    std::vector<int64_t> ids;
    scan_words(words, live, ids);
    CHECK(ids == std::vector<int64_t>{1, 2, 3});
    scan_words({0x11000, 0x20100, 7}, live, ids);
    CHECK(ids.empty());
}
