// CUPTI activity records built by hand (the real structs from the CUDA 13 headers) ->
// trace rows. Built only with the CUDA toolkit; needs no GPU and no libcupti.
#include <catch2/catch.hpp>

#include <cstring>

#include "helpers.hpp"
#include "translated.hpp"
#include "mhc/record/cupti_decode.hpp"

using mhc::record::AllocEvent;
using mhc::record::copy_kind;
using mhc::record::decode_record;
using mhc::record::FreeEvent;
using mhc::record::Translator;
using mhc::record::TranslatorOptions;
using mhc::record::test::require_valid;
using mhc::record::test::translate;
using mhc::record::test::translate_to_file;
namespace trace = mhc::trace;

namespace {
constexpr uint64_t T0 = 5'000'000'000;

template <typename T>
T zeroed() {
    T value;
    std::memset(&value, 0, sizeof value);
    return value;
}

CUpti_ActivityKernel10 kernel_record(uint32_t corr, uint64_t start, uint64_t end, const char* name) {
    auto kernel = zeroed<CUpti_ActivityKernel10>();
    kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    kernel.start = T0 + start;
    kernel.end = T0 + end;
    kernel.deviceId = 0;
    kernel.streamId = 7;
    kernel.gridX = 108, kernel.gridY = 4, kernel.gridZ = 1;
    kernel.blockX = 128, kernel.blockY = 2, kernel.blockZ = 1;
    kernel.staticSharedMemory = 1024;
    kernel.dynamicSharedMemory = 48 * 1024;
    kernel.registersPerThread = 96;
    kernel.correlationId = corr;
    kernel.name = name;
    return kernel;
}

CUpti_ActivityMemory4 memory_record(CUpti_ActivityMemoryOperationType op, uint64_t addr,
                                    uint64_t bytes, uint64_t time, bool pool,
                                    CUpti_ActivityMemoryKind kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
    auto memory = zeroed<CUpti_ActivityMemory4>();
    memory.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    memory.memoryOperationType = op;
    memory.memoryKind = kind;
    memory.address = addr;
    memory.bytes = bytes;
    memory.timestamp = T0 + time;
    memory.deviceId = 0;
    memory.streamId = 13;
    if (pool) {
        memory.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        memory.isAsync = 1;
    }
    return memory;
}

const CUpti_Activity* as_record(const void* raw) { return static_cast<const CUpti_Activity*>(raw); }

// Whether the translator took `record` (a CUPTI activity record struct).
template <typename Record>
bool decode(const Record& record, Translator& translator) {
    return decode_record(as_record(&record), translator);
}

// An NVTX marker record at `time` ns after T0.
CUpti_ActivityMarker2 marker_record(CUpti_ActivityFlag flags, uint32_t id, uint64_t time, const char* name = nullptr) {
    auto marker = zeroed<CUpti_ActivityMarker2>();
    marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
    marker.flags = flags;
    marker.id = id;
    marker.timestamp = T0 + time;
    marker.name = name;
    return marker;
}

// A record of `kind` that runs from `start` to `end` ns after T0 (a synchronization, an overhead).
template <typename Record>
Record span_record(CUpti_ActivityKind kind, uint64_t start, uint64_t end) {
    auto record = zeroed<Record>();
    record.kind = kind;
    record.start = T0 + start;
    record.end = T0 + end;
    return record;
}

// A copy or memset of `bytes` on `stream`.
template <typename Record>
Record transfer_record(CUpti_ActivityKind kind, uint64_t bytes, uint64_t start, uint64_t end, uint32_t stream) {
    auto record = span_record<Record>(kind, start, end);
    record.bytes = bytes;
    record.streamId = stream;
    return record;
}

TranslatorOptions at_origin() { return mhc::record::test::origin_at(T0); }
}  // namespace

TEST_CASE("decode: memcpy kinds") {
    CHECK(copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) == trace::CopyKind::H2D);
    CHECK(copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH) == trace::CopyKind::D2H);
    CHECK(copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD) == trace::CopyKind::D2D);
    CHECK(copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH) == trace::CopyKind::H2H);
    CHECK(copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP) == trace::CopyKind::P2P);
    CHECK(copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOA) == trace::CopyKind::H2D);
    CHECK(copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_ATOH) == trace::CopyKind::D2H);
    CHECK(copy_kind(CUPTI_ACTIVITY_MEMCPY_KIND_ATOD) == trace::CopyKind::D2D);
}

namespace {
// A device, allocations (pool, plain, pinned host), a pool, an NVTX step range, a kernel, copies,
// a memset, a synchronization, CUPTI overhead, a free, and a record the recorder does not use.
void feed_hand_built_stream(Translator& translator) {
    auto dev = zeroed<CUpti_ActivityDevice5>();
    dev.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    dev.id = 0;
    dev.name = "NVIDIA H200";
    dev.globalMemorySize = 150ull << 30;
    dev.computeCapabilityMajor = 9;
    dev.numMultiprocessors = 132;
    CHECK(decode(dev, translator));

    // cudaMallocAsync (pool) allocation and a plain device allocation.
    auto a1 = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000000000, 1 << 20, 100, true);
    auto a2 = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000200000, 4096, 150, false);
    auto pinned = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x500000, 4096, 160, false,
                                CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
    CHECK(decode(a1, translator));
    CHECK(decode(a2, translator));
    CHECK(decode(pinned, translator));

    auto pool = zeroed<CUpti_ActivityMemoryPool3>();
    pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
    pool.size = 32 << 20;
    pool.timestamp = T0 + 90;
    CHECK(decode(pool, translator));

    CHECK(decode(marker_record(CUPTI_ACTIVITY_FLAG_MARKER_START, 77, 120, "train step 3"), translator));
    CHECK(decode(kernel_record(42, 200, 900, "ampere_sgemm_128x64_nn"), translator));

    auto cpy = transfer_record<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY, 4096, 950, 1000, 7);
    cpy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    CHECK(decode(cpy, translator));
    auto p2p = transfer_record<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2, 1 << 20, 1000, 1100, 9);
    p2p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    p2p.deviceId = 1;
    CHECK(decode(p2p, translator));
    CHECK(decode(transfer_record<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET, 1 << 20, 180, 190, 7), translator));

    auto sync = span_record<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, 905, 940);
    sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    CHECK(decode(sync, translator));
    CHECK(decode(marker_record(CUPTI_ACTIVITY_FLAG_MARKER_END, 77, 1200), translator));
    auto ovh = span_record<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD, 1300, 1550);
    ovh.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    CHECK(decode(ovh, translator));

    CHECK(decode(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x7f0000000000, 1 << 20, 1250, true),
                 translator));

    auto api = zeroed<CUpti_ActivityAPI>();
    api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    CHECK_FALSE(decode(api, translator));   // not used by the recorder
}
}  // namespace

TEST_CASE("decode: a hand-built CUPTI activity stream becomes a valid trace") {
    std::string path = translate_to_file(feed_hand_built_stream, at_origin());
    trace::TraceData data = trace::load_trace(path);
    std::vector<trace::Kernel> rows;
    trace::Reader(path).for_each([&](const trace::Kernel& kernel) { rows.push_back(kernel); });
    std::filesystem::remove(path);
    require_valid(data);

    REQUIRE(data.kernels.size() == 1);
    CHECK(data.str(data.kernels.name[0]) == "ampere_sgemm_128x64_nn");
    CHECK(data.kernels.t_start[0] == 200);
    CHECK(data.kernels.t_end[0] == 900);
    CHECK(data.kernels.stream[0] == 7);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].shared_mem == 1024 + 48 * 1024);
    CHECK(rows[0].registers == 96);
    CHECK(rows[0].grid[0] == 108);
    CHECK(rows[0].grid[1] == 4);
    CHECK(rows[0].grid[2] == 1);
    CHECK(rows[0].block[0] == 128);
    CHECK(rows[0].block[1] == 2);
    CHECK(data.kernels.correlation[0] == 42);
    CHECK(data.kernels.step[0] == 3);   // inside "train step 3"

    REQUIRE(data.allocations.size() == 2);   // pinned host memory is not a GPU allocation
    CHECK(data.allocations.address[0] == 0x7f0000000000);
    CHECK(data.allocations.bytes[0] == 1 << 20);
    CHECK(data.allocations.t_alloc[0] == 100);
    CHECK(data.allocations.t_free[0] == 1250);
    CHECK(data.allocations.stream[0] == 13);
    CHECK(data.str(data.allocations.label[0]) == "memory:pool");
    CHECK(data.str(data.allocations.label[1]) == "memory:device");
    CHECK(data.allocations.t_free[1] == trace::kNoTime);

    REQUIRE(data.copies.size() == 3);
    CHECK(data.copies.kind[0] == trace::CopyKind::D2H);
    CHECK(data.copies.kind[1] == trace::CopyKind::P2P);
    CHECK(data.copies.device[1] == 1);
    CHECK(data.copies.kind[2] == trace::CopyKind::Memset);
    CHECK(data.copies.bytes[2] == 1 << 20);

    REQUIRE(data.markers.size() == 2);
    CHECK(data.str(data.markers.name[0]) == "cuda-sync:context");
    CHECK(data.markers.kind[1] == trace::MarkerKind::Step);
    CHECK(data.markers.index[1] == 3);
    CHECK(data.markers.t_start[1] == 120);
    CHECK(data.markers.t_end[1] == 1200);

    CHECK(data.meta.at("device_name") == "NVIDIA H200");
    CHECK(data.meta.at("device_memory") == std::to_string(150ull << 30));
    CHECK(data.meta.at("device.0.compute_capability") == "9.0");
    CHECK(data.meta.at("cupti_overhead_records") == "1");
    CHECK(data.meta.at("cupti_overhead_ns") == "250");
    CHECK(data.meta.at("record.host_allocations_skipped") == "1");
    CHECK(data.meta.at("record.pools_created") == "1");
    CHECK(data.meta.at("record.pool_max_bytes") == std::to_string(32 << 20));
}

TEST_CASE("decode: NVTX sync-object markers are not ranges") {
    auto data = translate([](Translator& translator) {
        const auto acquire = static_cast<CUpti_ActivityFlag>(CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE);
        CHECK(decode(marker_record(acquire, 0, 0, "mutex"), translator));
    });
    CHECK(data.markers.size() == 0);
}

// A memory record carries the correlation id of the API call that made the operation: it is
// merged into that call's callback allocation (or free) whatever its timestamp says.
TEST_CASE("decode: memory records paired with their callbacks by correlation id") {
    auto data = translate(
        [](Translator& tr) {
            AllocEvent alloc;   // cuMemAllocAsync's callback, inside cudaMallocAsync (runtime id 700)
            alloc.address = 0x7f0000000000;
            alloc.bytes = 4096;
            alloc.t = T0 + 200;
            alloc.t_enter = T0 + 150;
            alloc.pool = true;
            alloc.api = "cuMemAllocAsync";
            alloc.correlation = 701;
            alloc.runtime_correlation = 700;
            tr.on_alloc(alloc);
            FreeEvent free_call;   // cuMemFreeAsync's callback
            free_call.address = alloc.address;
            free_call.t = T0 + 400;
            free_call.correlation = 711;
            free_call.runtime_correlation = 710;
            tr.on_free(free_call);
            // Stamped outside the calls (at 5000 and 6000): the ids still pair them.
            auto rec = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, alloc.address, 4096, 5000, true);
            rec.correlationId = 700;
            CHECK(decode(rec, tr));
            auto rel = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, alloc.address, 4096, 6000, true);
            rel.correlationId = 711;
            CHECK(decode(rel, tr));
        },
        at_origin());
    require_valid(data);
    REQUIRE(data.allocations.size() == 1);
    CHECK(data.allocations.t_alloc[0] == 200);
    CHECK(data.allocations.t_free[0] == 400);
    CHECK(data.allocations.stream[0] == 13);   // from the record
    CHECK(data.meta.at("record.activity_merged") == "1");
    CHECK(data.meta.at("record.activity_by_correlation") == "2");
    CHECK(data.meta.at("record.frees_unmatched") == "0");
}

// The pool's figures in CUpti_ActivityMemory4::memoryPoolConfig and CUpti_ActivityMemoryPool3 are
// the reserved memory of a cudaMallocAsync run (segments rows); static module memory is no segment.
TEST_CASE("decode: pool sizes from memory and pool records become segments and static memory does not") {
    constexpr uint64_t kBase = 0x7e0000000000;
    trace::TraceData data = translate([&](Translator& translator) {
        auto created = zeroed<CUpti_ActivityMemoryPool3>();
        created.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
        created.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
        created.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        created.address = kBase;
        created.timestamp = T0 + 50;
        CHECK(decode(created, translator));

        auto st = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7d0000000000, 4096, 60, false,
                                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC);
        st.streamId = CUPTI_INVALID_STREAM_ID;   // not an async operation
        CHECK(decode(st, translator));

        auto alloc = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, kBase, 1 << 20, 100, true);
        alloc.memoryPoolConfig.address = kBase;
        alloc.memoryPoolConfig.pool.size = 2 << 20;
        alloc.memoryPoolConfig.utilizedSize = 1 << 20;
        CHECK(decode(alloc, translator));
        auto release = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, kBase, 1 << 20, 300, true);
        release.memoryPoolConfig.address = kBase;
        release.memoryPoolConfig.pool.size = 2 << 20;
        CHECK(decode(release, translator));

        auto trim = created;
        trim.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
        trim.size = 0;
        trim.timestamp = T0 + 400;
        CHECK(decode(trim, translator));
    }, at_origin());
    require_valid(data);
    REQUIRE(data.allocations.size() == 2);
    CHECK(data.str(data.allocations.label[0]) == "memory:static");
    CHECK(data.allocations.stream[0] == 0);   // not 4294967295, as the H200 recordings' rows had
    REQUIRE(data.segments.size() == 1);
    CHECK(data.segments[0].address == static_cast<int64_t>(kBase));
    CHECK(data.segments[0].bytes == 2 << 20);
    CHECK(data.segments[0].t_alloc == 100);
    CHECK(data.segments[0].t_free == 400);
    CHECK(data.meta.at("record.pool_samples") == "2");
    CHECK(data.meta.at("record.pool_utilized_max_bytes") == std::to_string(1 << 20));
    CHECK(data.meta.at("record.static_allocations") == "1");
    CHECK(data.meta.at("record.pool_max_bytes") == std::to_string(2 << 20));
}
