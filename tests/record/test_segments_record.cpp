// The recorder without --torch: driver allocations (PyTorch's cudaMalloc'd segments) are also
// written as segments rows; pool allocations (--torch: cudaMallocAsync per tensor) are not.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "mhc/record/translator.hpp"
#include "mhc/trace/store.hpp"

using namespace mhc;
using namespace mhc::record;

TEST_CASE("recorder: driver allocations are segments, pool allocations are not", "[record][segments]") {
    const uint64_t T0 = 1'000'000'000;
    std::string path = (std::filesystem::temp_directory_path() / ("mhc-seg-" + std::to_string(getpid()) + ".db")).string();
    {
        trace::Writer w(path);
        Translator tr(w, TranslatorOptions{static_cast<int64_t>(T0)});
        AllocEvent seg;
        seg.address = 0x7f0000000000;
        seg.bytes = 20 << 20;
        seg.t = seg.t_enter = T0 + 100;
        seg.stream = 3;
        seg.api = "cuMemAlloc";
        tr.on_alloc(seg);
        AllocEvent pooled = seg;
        pooled.address = 0x7f1000000000;
        pooled.bytes = 4096;
        pooled.pool = true;
        pooled.api = "cuMemAllocAsync";
        tr.on_alloc(pooled);
        AllocEvent mapped = seg;
        mapped.address = 0x7f2000000000;
        mapped.bytes = 2 << 20;
        mapped.source = AllocSource::Vmm;
        mapped.api = "cuMemMap";
        tr.on_alloc(mapped);
        FreeEvent f;
        f.address = seg.address;
        f.t = T0 + 500;
        tr.on_free(f);
        tr.finish();
        w.finish();
    }
    std::vector<trace::Segment> s;
    trace::Reader(path).for_each([&](const trace::Segment& g) { s.push_back(g); });
    std::filesystem::remove(path);
    REQUIRE(s.size() == 2);
    CHECK(s[0].address == 0x7f0000000000);
    CHECK(s[0].bytes == 20 << 20);
    CHECK(s[0].t_alloc == 100);
    CHECK(s[0].t_free == 500);
    CHECK(s[0].stream == 3);
    CHECK_FALSE(s[0].expandable);
    CHECK(s[1].address == 0x7f2000000000);
    CHECK(s[1].expandable);
    CHECK(s[1].t_free == trace::kNoTime);
}
