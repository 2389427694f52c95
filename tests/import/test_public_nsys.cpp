// Real public Nsight Systems exports (2021 to 2025.5 schemas) and variants of them made with SQL:
// NVTX rows, memory kinds and GPU tables mhc does not read, CUDA graphs traced whole, two
// processes on one GPU, unified-memory migrations, exports without GPU tables and launches
// without their kernel rows. The figures were read from the files with Python's sqlite3
// (tests/data/public/SOURCES.md); tests/import/public_traces.py checks the same files against their
// own accounting.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "public_variants.hpp"
#include "sqlite_input.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

TEST_CASE("nsys: a 2024.5 export (META_DATA_EXPORT, four A100s, one MPI rank's kernels)", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = test::import_public(dir, "nsys/pipit-perlmutter-cloverleaf-cuda.sqlite", result);
    CHECK(trace.kernels.size() == 1312);
    REQUIRE(trace.copies.size() == 279);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::H2D) == 254);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::D2H) == 25);
    CHECK(trace.meta.at("device_name") == "NVIDIA A100-SXM4-80GB");
    CHECK(trace.meta.at("device_memory") == "84990623744");
    // The version table was renamed META_DATA_EXPORT; it was read as "unknown" before.
    CHECK(trace.meta.at("nsys.version") == "2024.5.1.113");
    CHECK(trace.meta.at("nsys.schema_version") == "3.13.2");
    int64_t kernel_ns = 0;
    for (size_t i = 0; i < trace.kernels.size(); ++i) kernel_ns += trace.kernels.t_end[i] - trace.kernels.t_start[i];
    CHECK(kernel_ns == 294404540);
}

TEST_CASE("nsys: NVTX rows that are no range or mark (a domain's creation, thread names) are not markers",
          "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // extra-p's export: 76 push/pop ranges (eventType 59) and the creation of the domain
    // de.tu-darmstadt.parallel.extra_prof (75), which was a zero-length range at t = 0.
    TraceData trace = test::import_public(dir, "nsys/extrap-concurrent-16-streams.sqlite", result);
    CHECK(trace.markers.size() == 76);
    for (size_t i = 0; i < trace.markers.size(); ++i)
        CHECK(trace.str(trace.markers.name[i]) != "de.tu-darmstadt.parallel.extra_prof");
    CHECK(trace.meta.at("nsys.nvtx_rows_not_ranges") == "1 (domain, category and thread names: not markers)");
    // Time 0 is the earliest range ('main'), no longer the domain's creation 8,209 ns before it.
    auto first = std::min_element(trace.markers.t_start.begin(), trace.markers.t_start.end());
    CHECK(*first == 0);
    CHECK(trace.str(trace.markers.name[static_cast<size_t>(first - trace.markers.t_start.begin())]) == "main");
}

TEST_CASE("nsys: a 2024.6 export of an H200 run with NVTX ranges", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // nvFuser's report1.sqlite: schema 3.16.1, 19 kernels (393,539 ns), one DtoH memcpy of 1 B and
    // one memset of 4 B, 652 NVTX push/pop ranges (eventType 59), no CUDA_GPU_MEMORY_USAGE_EVENTS.
    TraceData trace = test::import_public(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", result);
    CHECK(trace.kernels.size() == 19);
    CHECK(test::kernel_time(trace) == 393539);
    REQUIRE(trace.copies.size() == 2);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::D2H) == 1);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::Memset) == 1);
    CHECK(trace.markers.size() == 652);
    CHECK(trace.meta.at("nsys.version") == "2024.6.2.25");
    CHECK(trace.meta.at("nsys.schema_version") == "3.16.1");
    CHECK(trace.meta.at("device_name") == "NVIDIA H200");
    CHECK(trace.meta.at("device_memory") == "150137864192");
    CHECK(trace.meta.at("nsys.missing_tables") == "CUDA_GPU_MEMORY_USAGE_EVENTS");
}

TEST_CASE("nsys: a 2025.1 export (schema 3.17.1) of an H200 run with 13,513 NVTX ranges", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // nvFuser's report1.sqlite of March 2025: 18 kernels on stream 7 (10,167,602 ns), memcpys of
    // 394,002,432 B and 2 B HtoD (copyKind 1) and 62,914,560 B DtoD (copyKind 8), three 4 B memsets.
    TraceData trace = test::import_public(dir, "nsys/fuser-h200-nsys-2025.1.sqlite", result);
    CHECK(trace.kernels.size() == 18);
    CHECK(test::kernel_time(trace) == 10167602);
    REQUIRE(trace.copies.size() == 6);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::H2D) == 2);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::D2D) == 1);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::Memset) == 3);
    CHECK(std::accumulate(trace.copies.bytes.begin(), trace.copies.bytes.end(), int64_t{0}) ==
          394002432 + 2 + 62914560 + 3 * 4);
    CHECK(trace.markers.size() == 13513);
    CHECK(trace.meta.at("nsys.version") == "2025.1.1.110");
    CHECK(trace.meta.at("nsys.schema_version") == "3.17.1");
    CHECK(trace.meta.at("device_memory") == "150121545728");
    // Its META_DATA_CAPTURE row PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:MODE is Graph: a graph launch
    // would be one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row (it has none).
    CHECK(trace.meta.at("nsys.cuda_graph_trace").rfind("Graph (META_DATA_CAPTURE", 0) == 0);
    CHECK(trace.meta.count("nsys.graph_launches") == 0);
}

// A memory event's memKind is host memory (0 pageable, 1 pinned) or the GPU's (2-7: device,
// array, managed, static, unknown; ENUM_CUDA_MEM_KIND of nsys 2022 to 2026). A kind a later nsys
// adds is read as the GPU's, as before, but said: extra-p's con_kernel export (no enum table: the
// eight kinds) with its first device allocation and its free (rowids 2 and 11, 40,000 B at
// 47,315,943,424) of kind 9.
TEST_CASE("nsys: a memory event of a memKind the export does not list is said", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = test::import_variant(
        dir, "nsys/con_kernel.sqlite",
        "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET memKind = 9 WHERE address = 47315943424;", result);
    CHECK(mhc::trace::live_peak(trace, 0).bytes == 40160000);   // as the original: the GPU's
    CHECK(trace.meta.at("nsys.unknown_memory_kinds") ==
          "2 memory events of a memKind the export's ENUM_CUDA_MEM_KIND does not list (the first: 9) were read as "
          "the GPU's memory");
    CHECK(test::warned(result, "does not list"));
    CHECK(test::unsaid(dir, "nsys/con_kernel.sqlite", "nsys.unknown_memory_kinds"));
}

// CUDA_GPU_MEMORY_USAGE_EVENTS.streamId (nsys 2023 on) is the stream of a stream-ordered
// allocation (cudaMallocAsync, cudaFreeAsync); cudaMalloc's rows have none. extra-p's con_kernel
// export (2022.1, no such column; kernels on streams 14-18) with it added: its 5 device
// allocations made on stream 14, its 5 pinned host ones without a stream (CUPTI_INVALID_STREAM_ID,
// 0xFFFFFFFF, CUPTI's value for a memory operation that is not async); then again with a second
// process (globalPid + 1) holding a copy of its kernels and memory rows, whose stream 14 is not the
// first's (numbered as its kernels are). Before 2026-12-08 every allocation was on stream 0.
TEST_CASE("nsys: a stream-ordered allocation is on its stream", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    using Lanes = std::map<std::pair<int32_t, int64_t>, int>;   // (device, stream) -> allocations
    auto lanes = [](const TraceData& trace) {
        Lanes by_lane;
        for (size_t i = 0; i < trace.allocations.size(); ++i)
            ++by_lane[{trace.allocations.device[i], trace.allocations.stream[i]}];
        return by_lane;
    };
    const std::string add_stream =
        "ALTER TABLE CUDA_GPU_MEMORY_USAGE_EVENTS ADD COLUMN streamId INTEGER; "
        "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET streamId = CASE memKind WHEN 2 THEN 14 ELSE 4294967295 END; ";
    TraceData one = test::import_variant(dir, "nsys/con_kernel.sqlite", add_stream, result);
    CHECK(lanes(one) == Lanes{{{-1, 0}, 5}, {{0, 14}, 5}});
    CHECK(mhc::trace::live_peak(one, 0).bytes == 40160000);   // as the original
    std::string second;
    for (const char* table : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUDA_GPU_MEMORY_USAGE_EVENTS"})
        second += std::string("CREATE TEMP TABLE t AS SELECT * FROM ") + table +
                  "; UPDATE t SET globalPid = globalPid + 1, start = start + 1" +
                  (std::string(table) == "CUPTI_ACTIVITY_KIND_KERNEL" ? ", end = end + 1" : "") + "; INSERT INTO " +
                  table + " SELECT * FROM t; DROP TABLE t; ";
    TraceData two = test::import_variant(dir, "nsys/con_kernel.sqlite", add_stream + second, result);
    CHECK(lanes(two) == Lanes{{{-1, 0}, 10}, {{0, 14}, 5}, {{0, (int64_t{1} << 40) + 14}, 5}});
    CHECK(std::count(two.kernels.stream.begin(), two.kernels.stream.end(), (int64_t{1} << 40) + 14) == 3);
}

// CUDA gives out no address a process still holds, so an allocation at one means its free was not
// recorded, and a free of 0 bytes at an address the export never allocated cannot be a block.
// Both were read in silence: the first block ended at the second allocation, the free was dropped.
// con_kernel without the free of its first device block (rowid 11, 47,315,943,424, at 788,503,508
// ns), that address allocated again at 790,000,000 ns and freed at 795,000,000 ns, and a free of
// 0 bytes elsewhere.
TEST_CASE("nsys: memory events the export cannot have recorded as they are are said", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    const std::string copy_of_row_2 =
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, bytes, "
        "memKind, memoryOperationType, name, correlationId) SELECT %T, globalPid, deviceId, contextId, address "
        "+ %A, pc, %B, memKind, %O, name, correlationId FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE rowid = 2; ";
    auto row = [&](const char* t, const char* a, const char* b, const char* op) {
        std::string sql = copy_of_row_2;
        for (auto [key, value] : {std::pair{"%T", t}, {"%A", a}, {"%B", b}, {"%O", op}})
            sql.replace(sql.find(key), 2, value);
        return sql;
    };
    TraceData trace = test::import_variant(dir, "nsys/con_kernel.sqlite",
                                           "DELETE FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE rowid = 11; " +
                                               row("790000000", "0", "bytes", "0") +
                                               row("795000000", "0", "bytes", "1") +
                                               row("796000000", "1000000000", "0", "1"),
                                           result);
    CHECK(trace.allocations.size() == 11);
    CHECK(trace.meta.at("nsys.memory_events_unpaired") ==
          "1 allocations at an address their process still held (the free before each was not recorded: the "
          "earlier block is taken as freed when its address was allocated again); 1 frees of 0 bytes at an "
          "address not allocated in the export (a block from before recording of unknown size: left out)");
    CHECK(test::warned(result, "the free before each was not recorded"));
    CHECK(test::unsaid(dir, "nsys/con_kernel.sqlite", "nsys.memory_events_unpaired"));
}

// A refused memory row is named by its rowid (its globalPid was named for a few hours of 2026-12-08,
// when the query's columns moved for streamId).
TEST_CASE("nsys: an allocation of 0 bytes is refused naming its row", "[import][nsys][public]") {
    test::TempDir dir;
    CHECK_THAT(test::variant_error(dir, "nsys/con_kernel.sqlite",
                                   "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET bytes = 0 WHERE rowid = 3"),
               Catch::EndsWith("CUDA_GPU_MEMORY_USAGE_EVENTS row 3: allocation of 0 bytes"));
}

// NVTX_EVENTS.end may be NULL (the schema allows it): a mark has none, and a range that was
// pushed or started and never ended while nsys recorded has none either. Such a range is a
// marker of no length at its start, as before, but no longer in silence. The 2024.6 export's
// first push/pop range (rowid 1, 'Fusion::resetTvUses', 4,130 ns) without its end, and a mark.
// Tables of GPU memory and GPU samples the trace has no rows for are named with their row
// counts: extra-p's 2022.1 exports hold Windows' per-process video memory usage and budget
// (219 and 130 rows in con_kernel, sqlite3 2026-12-03), left out in silence before; a CUDA memory
// pool's reservations (cudaMallocAsync: CUDA_GPU_MEMORY_POOL_EVENTS, added to a copy) likewise.
TEST_CASE("nsys: rows of GPU memory tables mhc does not read are named and counted", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData plain = test::import_public(dir, "nsys/con_kernel.sqlite", result);
    CHECK(plain.meta.at("nsys.unread_tables") == "GPU_MEMORY_USAGE_EVENTS 219, GPU_MEMORY_BUDGET_EVENTS 130");
    CHECK(test::warned(result, "rows of tables mhc does not read were left out (GPU_MEMORY_USAGE_EVENTS 219"));
    TraceData pool = test::import_variant(
        dir, "nsys/con_kernel.sqlite",
        "CREATE TABLE CUDA_GPU_MEMORY_POOL_EVENTS (start INTEGER NOT NULL, globalPid INTEGER, deviceId "
        "INTEGER, address INTEGER, operationType INTEGER, poolType INTEGER, size INTEGER); INSERT INTO "
        "CUDA_GPU_MEMORY_POOL_EVENTS VALUES (1, 1, 0, 4096, 0, 0, 33554432), (2, 1, 0, 4096, 1, 0, 0);",
        result);
    CHECK(pool.meta.at("nsys.unread_tables") ==
          "CUDA_GPU_MEMORY_POOL_EVENTS 2, GPU_MEMORY_USAGE_EVENTS 219, GPU_MEMORY_BUDGET_EVENTS 130");
    CHECK(pool.allocations.size() == plain.allocations.size());
    // A 2025.1 export holds none of them: no line.
    test::import_public(dir, "nsys/fuser-h200-nsys-2025.1.sqlite", result);
    CHECK(!test::warned(result, "tables mhc does not read"));
}

TEST_CASE("nsys: an NVTX range without an end is said", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite",
                                           "UPDATE NVTX_EVENTS SET end = NULL WHERE rowid = 1;"
                                           "UPDATE NVTX_EVENTS SET end = NULL, eventType = 34 WHERE rowid = 2;",
                                           result);
    CHECK(trace.markers.size() == 652);
    CHECK(trace.meta.at("nsys.nvtx_unended_ranges") ==
          "1 NVTX ranges have no end (pushed or started and never ended while nsys recorded; the first: "
          "'Fusion::resetTvUses'): each is a marker of no length at its start");
    CHECK(test::warned(result, "NVTX ranges have no end"));
    CHECK(test::unsaid(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", "nsys.nvtx_unended_ranges"));
}

// Nsight Systems exports of 2021 and before declared every column NOT NULL and wrote a default value
// where a field had none (nsys's export documentation of 2020 and 2021.5): a mark's end and an open
// range's. The 2024.6 export with NVTX_EVENTS declared so, its first range ('Fusion::resetTvUses')
// never ended and a mark, both with end 0: read as the NULL later exports write, not refused. Before
// 2026-12-05: 'NVTX_EVENTS row 1: end 0 is before start 635655591', exit 2. In a table that allows
// NULL an end of 0 stays a corrupt row.
TEST_CASE("nsys: an NVTX end of 0 in an export that declares end NOT NULL is no end", "[import][nsys][public]") {
    const std::string not_null =
        "ALTER TABLE NVTX_EVENTS RENAME TO nvtx_old; CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER "
        "NOT NULL, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid "
        "INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, "
        "doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText "
        "TEXT, binaryData TEXT); INSERT INTO NVTX_EVENTS (rowid, start, end, eventType, rangeId, category, color, "
        "text, globalTid, endGlobalTid, textId, domainId, uint64Value, int64Value, doubleValue, uint32Value, "
        "int32Value, floatValue, jsonTextId, jsonText, binaryData) SELECT rowid, * FROM nvtx_old; DROP TABLE "
        "nvtx_old;";
    const std::string defaults =
        "UPDATE NVTX_EVENTS SET end = 0 WHERE rowid = 1; UPDATE NVTX_EVENTS SET end = 0, eventType = 34 WHERE rowid = 2;";
    test::TempDir dir;
    imp::Result result;
    TraceData trace = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", not_null + defaults, result);
    CHECK(trace.markers.size() == 652);
    CHECK(trace.meta.at("nsys.nvtx_unended_ranges") ==
          "1 NVTX ranges have no end (pushed or started and never ended while nsys recorded; the first: "
          "'Fusion::resetTvUses'): each is a marker of no length at its start");
    CHECK(trace.meta.at("nsys.nvtx_default_ends").rfind("2 NVTX marks or ranges with end 0", 0) == 0);
    const std::string error = test::variant_error(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", defaults);
    CHECK(error.find("end 0 is before start") != std::string::npos);
}

// nsys --cuda-graph-trace=graph writes each CUDA graph launch as one row of
// CUPTI_ACTIVITY_KIND_GRAPH_TRACE and none of the graph's kernels in CUPTI_ACTIVITY_KIND_KERNEL:
// read alone, such an export lost every graph's GPU time without a word.
TEST_CASE("nsys: CUDA graph launches traced whole are kernel rows, said, not dropped", "[import][nsys][public]") {
    test::TempDir dir;
    // The 2025.1 export (18 kernels on device 0, stream 7, the last ending at 9,034,955,316 ns,
    // correlation ids 167 to 2200, globalPid 282323165642752) with the table and columns CUPTI_ActivityGraphTrace2 gives it:
    // graph 4 twice (10,000 and 20,000 ns), graph 6 once (15,000 ns, starting 5,000 ns before
    // graph 4's second launch ends: clamped to 10,000 ns), one launch of correlation 2200, whose
    // kernel the kernel table holds (node-level tracing: not added again), and one launch that
    // CUPTI could not time (start = end = 0: left out).
    const std::string table =
        "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER "
        "NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "graphId INTEGER NOT NULL);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (9034956316, 9034966316, 0, 1, 7, 3001, 282323165642752, 4),"
        "(9034970000, 9034990000, 0, 1, 7, 3002, 282323165642752, 4), (9034985000, 9035000000, 0, 1, 7, 3004, 282323165642752, 6),"
        "(9032815243, 9034955316, 0, 1, 7, 2200, 282323165642752, 5), (0, 0, 0, 1, 7, 3003, 282323165642752, 4);";
    const std::string in = dir.file("graphs.sqlite");
    test::public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", in, table);
    imp::Options opt;
    opt.warn = false;
    imp::Result result = imp::import_file(in, dir.file("graphs.db"), opt);
    TraceData trace = mhc::trace::load_trace(dir.file("graphs.db"));
    REQUIRE(mhc::trace::check_trace(trace).ok());
    REQUIRE(trace.kernels.size() == 18 + 3);
    CHECK(test::kernel_time(trace) == 10167602 + 10000 + 20000 + 10000);
    int graph4 = 0, graph6 = 0;
    for (size_t i = 0; i < trace.kernels.size(); ++i) {
        graph4 += trace.str(trace.kernels.name[i]) == "CUDA graph 4";
        graph6 += trace.str(trace.kernels.name[i]) == "CUDA graph 6";
    }
    CHECK(graph4 == 2);
    CHECK(graph6 == 1);
    CHECK(trace.meta.at("nsys.kernel_starts_clamped") == "1");
    CHECK(trace.meta.at("nsys.graph_launches") ==
          "3 CUDA graph launches of 2 graphs traced whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, nsys "
          "--cuda-graph-trace=graph; 45000 ns on the GPU): each is one kernel row named 'CUDA graph G'; 1 more whose "
          "kernels the kernel table holds were not added; 1 without timestamps (start and end 0) left out");
    CHECK(test::warned(result, "the graphs' own kernels are not in the file"));

    // An export whose only GPU table is the graph trace is read, not refused for having none.
    TraceData only = test::import_variant(
        dir, "nsys/fuser-h200-nsys-2025.1.sqlite",
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY; "
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET;" +
            table,
        result);
    CHECK(only.kernels.size() == 4);   // with the launch of correlation 2200: no kernel holds it now
    CHECK(only.meta.at("nsys.missing_tables").find("CUPTI_ACTIVITY_KIND_KERNEL") != std::string::npos);
}

// A CUDA graph launch traced whole is a kernel row, in the step its cudaGraphLaunch call (the
// CUPTI_ACTIVITY_KIND_RUNTIME row of its correlationId and process) fell in, else its start's, as
// every kernel. Before 2026-12-06 every such row was in no step.
TEST_CASE("nsys: CUDA graph launches traced whole are in their steps", "[import][nsys][public][steps]") {
    test::TempDir dir;
    imp::Result result;
    // The 2025.1 export (process 282323165642752, thread 282323165693308) with ProfilerStep#6 from
    // 9,032,000,000 to 9,034,950,000 ns of its clock and #7 to 9,035,010,000; its last kernel
    // (correlation 2200, launched at 9,032,767,796: step 6) and three graph launches on the GPU at
    // 9,034,956,316 (graph 4), 9,034,970,000 (graph 4) and 9,034,985,000 (graph 6), all in step 7's
    // span; the first's cudaGraphLaunch call at 9,034,940,000 (step 6), the others without a call row.
    TraceData trace = test::import_variant(
        dir, "nsys/fuser-h200-nsys-2025.1.sqlite",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId "
        "INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid "
        "INTEGER, graphId INTEGER NOT NULL);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (9034956316, 9034966316, 0, 1, 7, 3001, "
        "282323165642752, 4), (9034970000, 9034980000, 0, 1, 7, 3002, 282323165642752, 4), (9034985000, 9035000000, "
        "0, 1, 7, 3004, 282323165642752, 6);"
        "INSERT INTO StringIds (id, value) VALUES (100000, 'cudaGraphLaunch_v10000');"
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
        "returnValue) VALUES (9034940000, 9034945000, 1, 282323165693308, 3001, 100000, 0);"
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (9032000000, 9034950000, 59, "
        "'ProfilerStep#6', 282323165693308), (9034950000, 9035010000, 59, 'ProfilerStep#7', 282323165693308);",
        result);
    std::map<std::string, std::vector<int32_t>> steps;
    for (size_t i = 0; i < trace.kernels.size(); ++i)
        if (trace.str(trace.kernels.name[i]).rfind("CUDA graph", 0) == 0)
            steps[trace.str(trace.kernels.name[i])].push_back(trace.kernels.step[i]);
    CHECK(steps == std::map<std::string, std::vector<int32_t>>{{"CUDA graph 4", {6, 7}}, {"CUDA graph 6", {7}}});
    CHECK(test::kernels_per_step(trace) == test::Steps{{-1, 17}, {6, 2}, {7, 2}});
}

// nsys profile over a launcher records several processes in one export (globalPid): each numbers
// its streams and holds its address space on its own. Two processes on one GPU both had stream 7
// (one lane: the second's kernels clamped behind the first's) and the same addresses (one
// process's allocation freed the other's block).
TEST_CASE("nsys: two processes on one GPU keep their own lanes and their own allocations", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // The 2025.1 export's 18 kernels (device 0, stream 7, 10,167,602 ns, none clamped) again as a
    // second process's, 1,000 ns later: they overlap the first process's on the same stream number.
    TraceData two = test::import_variant(
        dir, "nsys/fuser-h200-nsys-2025.1.sqlite",
        "CREATE TEMP TABLE second AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL; UPDATE second SET globalPid = "
        "globalPid + 1, start = start + 1000, end = end + 1000, correlationId = correlationId + 100000; "
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM second;",
        result);
    REQUIRE(two.kernels.size() == 36);
    CHECK(test::kernel_time(two) == 2 * 10167602);
    CHECK(two.meta.at("nsys.kernel_starts_clamped") == "0");
    CHECK(std::count(two.kernels.stream.begin(), two.kernels.stream.end(), 7) == 18);
    CHECK(std::count(two.kernels.stream.begin(), two.kernels.stream.end(), (int64_t{1} << 40) + 7) == 18);
    CHECK(two.meta.at("nsys.processes").rfind("2 processes (globalPid) in the export; 2 on device 0: ", 0) == 0);
    CHECK(test::warned(result, "streams are per process"));

    // extra-p's con_kernel export: 20 memory events of one process (device 0 and pinned host
    // memory, each peaking at 40,160,000 B) again as a second process's, 1 ns later, at the same
    // addresses. The file's own signed sum (frees first at one start) peaks at 80,320,000 B on
    // each and ends at 0.
    TraceData mem = test::import_variant(
        dir, "nsys/con_kernel.sqlite",
        "CREATE TEMP TABLE second AS SELECT * FROM CUDA_GPU_MEMORY_USAGE_EVENTS; UPDATE second SET globalPid = "
        "globalPid + 1, start = start + 1; INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS SELECT * FROM second;",
        result);
    for (int32_t device : {-1, 0}) {
        std::vector<std::pair<int64_t, int64_t>> changes;   // frees before allocations at one instant
        for (size_t i = 0; i < mem.allocations.size(); ++i) {
            if (mem.allocations.device[i] != device) continue;
            changes.emplace_back(mem.allocations.t_alloc[i], mem.allocations.bytes[i]);
            if (mem.allocations.t_free[i] != mhc::trace::kNoTime)
                changes.emplace_back(mem.allocations.t_free[i], -mem.allocations.bytes[i]);
        }
        std::sort(changes.begin(), changes.end());
        int64_t live = 0, peak = 0;
        for (const auto& change : changes) peak = std::max(peak, live += change.second);
        INFO("device " << device);
        CHECK(peak == 80320000);
        CHECK(live == 0);
    }
    CHECK(mem.meta.at("nsys.memory_processes").rfind("20 memory events of processes after the first", 0) == 0);
}

// CUPTI numbers correlation ids per process: in an export of several processes one id names a
// call in each. Matched by the id alone, a second process's CUDA graph launch whose id a kernel of
// the first process held was dropped as "held by the kernel table", and its launch call whose GPU
// row nsys lost counted as run: kernel time short by the graphs, no warning.
TEST_CASE("nsys: correlation ids are matched within their process", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // The 2025.1 export (globalPid 282323165642752: 18 kernels, 10,167,602 ns, correlation ids 167
    // to 2200, 990 runtime calls) and a second process (globalPid + 2^24, 1,000 ns later) as CUPTI
    // numbers it, with the same ids: its calls are the first's; its kernels of correlations 2156,
    // 2178 and 2200 (383,931 + 2,115,529 + 2,140,073 ns) ran as launches of graph 1 (GRAPH_TRACE
    // rows, nsys --cuda-graph-trace=graph) and its kernel of 2130 (901,303 ns) was not recorded.
    TraceData two = test::import_variant(
        dir, "nsys/fuser-h200-nsys-2025.1.sqlite",
        "CREATE TEMP TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL; UPDATE k2 SET globalPid = globalPid + "
        "16777216, start = start + 1000, end = end + 1000;"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId "
        "INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid "
        "INTEGER, graphId INTEGER NOT NULL);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE SELECT start, end, deviceId, contextId, streamId, correlationId, "
        "globalPid, 1 FROM k2 WHERE correlationId IN (2156, 2178, 2200);"
        "DELETE FROM k2 WHERE correlationId IN (2130, 2156, 2178, 2200);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM k2;"
        "CREATE TEMP TABLE r2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME; UPDATE r2 SET globalTid = globalTid + "
        "16777216, start = start + 1000, end = end + 1000; INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT * FROM r2;",
        result);
    CHECK(two.kernels.size() == 18 + 14 + 3);
    CHECK(test::kernel_time(two) == 2 * 10167602 - 901303);
    CHECK(two.meta.at("nsys.kernel_starts_clamped") == "0");
    CHECK(two.meta.at("nsys.graph_launches").rfind("3 CUDA graph launches of 1 graphs traced whole", 0) == 0);
    CHECK(two.meta.at("nsys.graph_launches").find("more whose kernels") == std::string::npos);
    CHECK(two.meta.at("nsys.launches_without_kernel") ==
          "1 of 36 kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME calls that launch kernels or CUDA graphs, "
          "returning success) have no kernel, memcpy, memset or graph row of their correlationId: 1 not recorded "
          "(the first: CUPTI_ACTIVITY_KIND_RUNTIME row 1961 'cuLaunchKernel')");
    CHECK(test::warned(result, "1 of the export's 36 kernel launches have no kernel"));
}

TEST_CASE("nsys: a 2021 export without a version table, with memcpys, memsets and synchronisation rows",
          "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // Mordred's report1.sqlite (July 2021, a Quadro RTX 6000): no EXPORT_META_DATA, 12 kernels on
    // one stream (8,544,420 ns), 48 memcpys (45 HtoD of 126,162 B, 3 DtoH of 504,000 B), 12 memsets
    // (21,651,120 B), CUPTI_ACTIVITY_KIND_SYNCHRONIZATION rows (not device work), no NVTX or memory table.
    TraceData trace = test::import_public(dir, "nsys/mordred-quadro-rtx6000-nsys-2021.sqlite", result);
    CHECK(trace.kernels.size() == 12);
    CHECK(test::kernel_time(trace) == 8544420);
    REQUIRE(trace.copies.size() == 60);
    int64_t h2d = 0, d2h = 0, memset = 0;
    for (size_t i = 0; i < trace.copies.size(); ++i) {
        const auto kind = trace.copies.kind[i];
        (kind == mhc::trace::CopyKind::H2D ? h2d : kind == mhc::trace::CopyKind::D2H ? d2h : memset) += trace.copies.bytes[i];
    }
    CHECK(h2d == 126162);
    CHECK(d2h == 504000);
    CHECK(memset == 21651120);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::Memset) == 12);
    CHECK(trace.meta.at("nsys.schema_version") == "unknown");
    CHECK(trace.meta.at("device_name") == "Quadro RTX 6000");
    CHECK(trace.meta.at("device_memory") == "25396838400");
    CHECK(trace.meta.at("nsys.missing_tables") == "CUDA_GPU_MEMORY_USAGE_EVENTS,NVTX_EVENTS");
}

TEST_CASE("nsys: a 2025.5 export (schema 3.23.3) whose run made one memset and no kernel", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // WeatherBench2's report1.sqlite (November 2025, a GeForce RTX 4060): 23 CUDA API calls, one
    // cudaMemsetAsync (4,608 B, 1,472 ns on the GPU), no kernel, memcpy, memory or NVTX table;
    // recorded with CUDA_GRAPH_TRACE_OPTIONS:MODE Graph and COLLECT_GPU_MEMORY_USAGE false.
    TraceData trace = test::import_public(dir, "nsys/weatherbench2-rtx4060-nsys-2025.5.sqlite", result);
    CHECK(trace.kernels.size() == 0);
    REQUIRE(trace.copies.size() == 1);
    CHECK(trace.copies.kind[0] == mhc::trace::CopyKind::Memset);
    CHECK(trace.copies.bytes[0] == 4608);
    CHECK(trace.copies.t_end[0] - trace.copies.t_start[0] == 1472);
    CHECK(trace.meta.at("nsys.version") == "2025.5.1.121");
    CHECK(trace.meta.at("nsys.schema_version") == "3.23.3");
    CHECK(trace.meta.at("device_name") == "NVIDIA GeForce RTX 4060");
    CHECK(trace.meta.at("nsys.cuda_graph_trace").rfind("Graph", 0) == 0);
    CHECK(trace.meta.at("allocations").find("COLLECT_GPU_MEMORY_USAGE=false") != std::string::npos);
}

TEST_CASE("nsys: an export without GPU tables says whether CUDA was traced, from its capture options",
          "[import][nsys][public]") {
    test::TempDir dir;
    // nsys 2025.1's META_DATA_CAPTURE has PROCESS_0:COLLECT_CUDA_TRACE=true and
    // PROCESS_0:COLLECT_GPU_MEMORY_USAGE=false (sqlite3, SOURCES.md): no memory table, and why.
    imp::Result result;
    TraceData trace = test::import_public(dir, "nsys/fuser-h200-nsys-2025.1.sqlite", result);
    CHECK(trace.meta.at("allocations").find("COLLECT_GPU_MEMORY_USAGE=false") != std::string::npos);
    const std::string no_gpu_tables =
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY;"
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET;";
    SECTION("memory usage recorded, nothing allocated: the advice to record it is not given") {
        const std::string in = dir.file("memory-on.sqlite");
        test::public_variant(
            "nsys/fuser-h200-nsys-2025.1.sqlite", in,
            "UPDATE META_DATA_CAPTURE SET value = 'true' WHERE name LIKE '%COLLECT_GPU_MEMORY_USAGE';");
        imp::Options opt;
        opt.warn = false;
        imp::import_file(in, dir.file("memory-on.db"), opt);
        const TraceData on = mhc::trace::load_trace(dir.file("memory-on.db"));
        CHECK(on.meta.at("allocations").rfind("none (GPU memory usage was recorded", 0) == 0);
        CHECK(on.meta.at("allocations").find("--cuda-memory-usage") == std::string::npos);
    }
    SECTION("CUDA traced, no GPU work recorded (as an RTX 5060 Ti run of nsys 2025.1 whose kernels never ran)") {
        const std::string error = test::variant_error(dir, "nsys/fuser-h200-nsys-2025.1.sqlite", no_gpu_tables);
        CHECK(error.find("none of the tables mhc reads") != std::string::npos);
        CHECK(error.find("CUDA was traced (CUPTI_ACTIVITY_KIND_RUNTIME holds its API calls)") != std::string::npos);
    }
    SECTION("CUDA tracing on, nothing recorded (as a 2023.3 export of an OpenMP offload run)") {
        const std::string error = test::variant_error(dir, "nsys/fuser-h200-nsys-2025.1.sqlite",
                                                      no_gpu_tables + "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME;");
        CHECK(error.find(
                  "CUDA tracing was on (META_DATA_CAPTURE COLLECT_CUDA_TRACE=true) but nsys recorded no CUDA call") !=
              std::string::npos);
    }
    SECTION("CUDA not traced (as nsys 2026.1 and 2026.2 exports of NVTX only)") {
        const std::string error = test::variant_error(
            dir, "nsys/fuser-h200-nsys-2025.1.sqlite",
            no_gpu_tables +
                "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME;"
                "UPDATE META_DATA_CAPTURE SET value = 'false' WHERE name LIKE '%COLLECT_CUDA_TRACE';");
        CHECK(error.find("CUDA was not traced (META_DATA_CAPTURE COLLECT_CUDA_TRACE=false") != std::string::npos);
    }
    // nsys 2023.1 (schema 3.1.2) writes its version and no capture options: three such exports
    // of a Python process whose CUDA calls were not traced (nikitinvv/recon-stream, not kept: no
    // licence) were refused as "unknown version or nothing was traced", their version in the file.
    SECTION("a known version without capture options, nothing traced (as three nsys 2023.1 exports)") {
        const std::string error = test::variant_error(
            dir, "nsys/fuser-h200-nsys-2025.1.sqlite",
            no_gpu_tables + "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME; DROP TABLE META_DATA_CAPTURE;");
        CHECK(error.find("(schema 3.17.1) has none of the tables mhc reads") != std::string::npos);
        CHECK(error.find("no CUDA call and no GPU activity was traced (no CUPTI_ACTIVITY_KIND_RUNTIME: record with "
                         "nsys profile --trace=cuda)") != std::string::npos);
        CHECK(error.find("unknown version") == std::string::npos);
        // Without its version table too, the version is unknown, and the refusal says so.
        const std::string unknown = dir.file("unknown-version.sqlite");
        test::public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", unknown,
                             no_gpu_tables +
                                 "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME; DROP TABLE META_DATA_CAPTURE; DROP TABLE "
                                 "META_DATA_EXPORT;");
        CHECK(test::import_error(dir, unknown).find("unknown version or nothing was traced") != std::string::npos);
    }
}

TEST_CASE("nsys: unified-memory page migrations (memcpy copyKind 11-13) are copies on stream 0, said",
          "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // cestwc/balinski-and-gomory-cuda's Nsight Systems 2025.5.1 export (schema 3.23.3) of a
    // cudaMallocManaged solver on one of two RTX 3090s (Python's sqlite3): 86 kernels on stream 7
    // of device 0 (4,566,039 ns), 56 memcpy rows and 2 memsets; 49 of the memcpys are unified
    // memory's migrations (copyKind 11 UVM HtoD: 25 rows, 274,432 B; 12 UVM DtoH: 24, 212,992 B;
    // migrationCause 2 "Page fault" 44, 3 "Speculative prefecth" 5, as the export's
    // ENUM_CUDA_UNIF_MEM_MIGRATION spells it), all with streamId 0; the other 7 are cudaMemcpy
    // calls on stream 7 (4 HtoD, 160 B; 3 DtoH, 72 B). Before 2026-12-05 the migrations were read
    // as the program's copies without a word.
    TraceData uvm = test::import_public(dir, "nsys/cestwc-rtx3090-uvm-nsys-2025.5.sqlite", result);
    CHECK(uvm.kernels.size() == 86);
    int64_t kernel_ns = 0;
    for (size_t i = 0; i < uvm.kernels.size(); ++i) kernel_ns += uvm.kernels.t_end[i] - uvm.kernels.t_start[i];
    CHECK(kernel_ns == 4566039);
    CHECK(uvm.copies.size() == 58);
    std::map<std::tuple<int, int64_t>, std::pair<int64_t, int64_t>> lanes;   // (kind, stream) -> rows, bytes
    for (size_t i = 0; i < uvm.copies.size(); ++i) {
        auto& lane = lanes[{static_cast<int>(uvm.copies.kind[i]), uvm.copies.stream[i]}];
        ++lane.first;
        lane.second += uvm.copies.bytes[i];
    }
    const int h2d = static_cast<int>(mhc::trace::CopyKind::H2D), d2h = static_cast<int>(mhc::trace::CopyKind::D2H);
    CHECK(lanes.at({h2d, 0}) == std::pair<int64_t, int64_t>{25, 274432});
    CHECK(lanes.at({d2h, 0}) == std::pair<int64_t, int64_t>{24, 212992});
    CHECK(lanes.at({h2d, 7}) == std::pair<int64_t, int64_t>{4, 160});
    CHECK(lanes.at({d2h, 7}) == std::pair<int64_t, int64_t>{3, 72});
    CHECK(uvm.meta.at("nsys.version") == "2025.5.1.121");
    CHECK(uvm.meta.at("nsys.uvm_migrations") ==
          "49 memcpy rows are unified-memory page migrations (25 UVM HtoD (274432 B), 24 UVM DtoH (212992 B); "
          "migration cause: 44 Page fault, 5 Speculative prefecth): the driver moving managed memory, not "
          "cudaMemcpy calls; imported as copies on stream 0 (CUPTI gives them no stream)");
    CHECK(test::warned(result, "49 memcpy rows are unified-memory page migrations"));
    // An export without such rows says nothing of them (the 2024.6 H200 export: a DtoH memcpy).
    CHECK(test::unsaid(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", "nsys.uvm_migrations"));
}

// The same for an Nsight Systems export: a CUPTI_ACTIVITY_KIND_RUNTIME launch that returned success
// and whose correlationId no kernel, memcpy, memset or graph row carries. None in any export read
// here; con_kernel (extra-p, nsys 2022.1: 7 cudaLaunchKernel_v7000 calls, correlation ids 122, 124,
// 129, 133, 135, 138, 141, Python's sqlite3) with the kernels of 124 and 133 deleted, as a recording
// that lost them; then with a stream capture begun before the first launch (captured, not run).
TEST_CASE("nsys: kernel launches without their kernel rows are said (captured ones apart)", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    const std::string key = "nsys.launches_without_kernel";
    TraceData whole = test::import_public(dir, "nsys/con_kernel.sqlite", result);
    CHECK(whole.meta.count(key) == 0);
    TraceData missing = test::import_variant(
        dir, "nsys/con_kernel.sqlite", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN (124, 133);",
        result);
    CHECK(missing.kernels.size() == whole.kernels.size() - 2);
    CHECK(missing.meta.at(key) ==
          "2 of 7 kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME calls that launch kernels or CUDA graphs, returning "
          "success) have no kernel, memcpy, memset or graph row of their correlationId: 2 not recorded (the first: "
          "CUPTI_ACTIVITY_KIND_RUNTIME row 25 'cudaLaunchKernel_v7000')");
    CHECK(test::warned(result, "2 of the export's 7 kernel launches have no kernel, memcpy, memset or graph row"));
    TraceData in_capture = test::import_variant(
        dir, "nsys/con_kernel.sqlite",
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN (124, 133);"
        "INSERT INTO StringIds (id, value) VALUES (99999, 'cudaStreamBeginCapture_v10000');"
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
        "returnValue) SELECT MIN(start) - 1, MIN(start) - 1, 0, 72058132318159760, 0, 99999, 0 "
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME;",
        result);
    CHECK(in_capture.meta.at(key) ==
          "2 of 7 kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME calls that launch kernels or CUDA graphs, returning "
          "success) have no kernel, memcpy, memset or graph row of their correlationId: 2 made while a stream capture "
          "was open (captured into a CUDA graph, not run)");
    CHECK_FALSE(test::warned(result, "kernel launches have no kernel"));
}

TEST_CASE("nsys: steps from NVTX ProfilerStep#N ranges, else from the optimizer's step ranges",
          "[import][nsys][public][steps]") {
    // The 2024.6 export's 19 kernels with two Optimizer.step#AdamW.step ranges added as emit_nvtx
    // writes them (", op_id = N" appended), from 1.0 to 1.1 s and 1.2 to 1.25 s of its clock. A
    // kernel is in the step its launch (the runtime call of its correlationId) fell in; counted with
    // sqlite3 (2026-12-05): launches up to 1,100,000,000 ns: 2 kernels (step 0), up to
    // 1,250,000,000: 6 (step 1; by the kernels' own starts 5: the one launched at 1,248,567,740
    // starts at 1,250,330,764), after: 11 in no step. Before 2026-12-05 an nsys export had no steps.
    test::TempDir dir;
    imp::Result result;
    TraceData trace = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite",
                                           "INSERT INTO NVTX_EVENTS (start, end, eventType, text) VALUES "
                                           "(1000000000, 1100000000, 59, 'Optimizer.step#AdamW.step, op_id = 12'), "
                                           "(1200000000, 1250000000, 59, 'Optimizer.step#AdamW.step, op_id = 40');",
                                           result);
    CHECK(test::kernels_per_step(trace) == test::Steps{{-1, 11}, {0, 2}, {1, 6}});
    CHECK(mhc::trace::summarize(trace).steps == 2);
    CHECK(trace.meta.at("steps_from") == "Optimizer.step#AdamW.step ranges (no ProfilerStep#N in the trace)");
    // A ProfilerStep#N range is the step N itself (the optimizer's ranges then delimit nothing):
    // from 1.0 to 1.25 s, the 6 kernels launched in it; the 2 launched before 1.0 s are in none.
    TraceData marked = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite",
                                            "INSERT INTO NVTX_EVENTS (start, end, eventType, text) VALUES "
                                            "(1000000000, 1250000000, 59, 'ProfilerStep#3'), "
                                            "(1200000000, 1250000000, 59, 'Optimizer.step#AdamW.step, op_id = 40');",
                                            result);
    CHECK(test::kernels_per_step(marked) == test::Steps{{-1, 13}, {3, 6}});
    CHECK(mhc::trace::summarize(marked).steps == 1);
    CHECK(marked.meta.at("steps_from") == "ProfilerStep#N ranges (the profiler's step markers)");
    // The export as recorded: no step, nothing said.
    TraceData plain = test::import_public(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", result);
    CHECK(plain.meta.count("steps_from") == 0);
    CHECK(test::all_are(plain.kernels.step, -1));
}

// nsys over a launcher records every rank's ProfilerStep#N in one export: each range was a step of
// its own, and two ranks' four steps read as `steps 8`. Joined per N across processes, as a Kineto
// file of merged ranks is read.
TEST_CASE("nsys: several processes' ProfilerStep#N are one step each", "[import][nsys][public][steps]") {
    // The 2024.6 export (19 kernels; thread globalTid 281980910466509) with ProfilerStep#1..4 of
    // 20 ms each at 1.16 s + 25 ms (N - 1) on its thread and, 5 ms later, on a second process's
    // (globalTid + 2^24). Its kernels' launches (sqlite3): 1,164.4 and 1,167.9 ms (step 1 of both
    // processes), 1,234.1 and 1,234.4 (the second's step 3 only), 1,243.9 to 1,250.5 (3, step 4 of
    // both), 1,257.3 to 1,257.5 (7, the second's step 4 only), 5 more in none.
    auto steps = [](int processes) {
        std::string rows;
        for (int p = 0; p < processes; ++p)
            for (int n = 1; n <= 4; ++n) {
                const int64_t at = 1160000000 + 25000000LL * (n - 1) + 5000000LL * p;
                rows += std::string(rows.empty() ? "" : ", ") + "(" + std::to_string(at) + ", " +
                        std::to_string(at + 20000000) + ", 59, 'ProfilerStep#" + std::to_string(n) + "', " +
                        std::to_string(281980910466509LL + (int64_t{p} << 24)) + ")";
            }
        return "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES " + rows + ";";
    };
    test::TempDir dir;
    imp::Result result;
    auto step_lengths = [](const TraceData& trace) {
        std::map<int32_t, std::vector<int64_t>> out;
        for (size_t i = 0; i < trace.markers.size(); ++i)
            if (trace.markers.kind[i] == mhc::trace::MarkerKind::Step)
                out[trace.markers.index[i]].push_back(trace.markers.t_end[i] - trace.markers.t_start[i]);
        return out;
    };
    const TraceData one = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", steps(1), result);
    CHECK(mhc::trace::summarize(one).steps == 4);
    CHECK(step_lengths(one) == std::map<int32_t, std::vector<int64_t>>{
                                   {1, {20000000}}, {2, {20000000}}, {3, {20000000}}, {4, {20000000}}});
    CHECK(test::kernels_per_step(one) == test::Steps{{-1, 14}, {1, 2}, {4, 3}});
    CHECK(one.meta.count("nsys.step_processes") == 0);
    // Each step from its first range's start to its last range's end; a kernel in the step its
    // launch falls in among its own process's ranges. Every kernel is the first process's, so its
    // steps are those of the export alone. Before 2026-12-06 (twenty-fifth audit) they were looked
    // up in the joined ranges, which the second process, 5 ms behind, kept open after the first's
    // had ended: {-1: 5, 1: 2, 3: 2, 4: 10}, the two launches at 1,234 ms in step 3 and the seven
    // at 1,257 ms in step 4, where the first process was in no step.
    const TraceData two = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", steps(2), result);
    CHECK(mhc::trace::summarize(two).steps == 4);
    CHECK(step_lengths(two) == std::map<int32_t, std::vector<int64_t>>{
                                   {1, {25000000}}, {2, {25000000}}, {3, {25000000}}, {4, {25000000}}});
    CHECK(test::kernels_per_step(two) == test::Steps{{-1, 14}, {1, 2}, {4, 3}});
    CHECK(two.markers.size() == one.markers.size() + 4 + 4);   // the 8 ranges stay, as ranges
    CHECK(two.meta.at("nsys.step_processes") ==
          "ProfilerStep#N ranges of 2 processes (globalPid) in the export: 4 ranges of the same N joined, one step "
          "marker each; the ranges of one step begin up to 5000000 ns apart across processes: each marker spans them "
          "all (the first start to the last end), and a kernel is in the step its launch fell in among its own "
          "process's ranges");
    CHECK(test::warned(result, "4 ranges of the same N joined"));
}

// The optimizer's NVTX ranges of two ranks in one export (emit_nvtx in each process) were read as
// one process's: where they took turns, two ranks' four steps were `steps 8`. Found per process,
// the k-th of each joined into step k, as in Kineto files of merged ranks.
TEST_CASE("nsys: several processes' optimizer steps are found per process and joined",
          "[import][nsys][public][steps]") {
    // The 2024.6 export with four Optimizer.step#Adam.step ranges of 2 ms at 1.00 s + 10 ms i on its
    // thread (globalTid 281980910466509) and, 3 ms later, on a second process's (+ 2^24), each with
    // 2 cudaStreamIsCapturing calls (nameId 59) of its thread inside.
    auto variant = [](int processes) {
        std::string ranges, calls;
        for (int p = 0; p < processes; ++p)
            for (int i = 0; i < 4; ++i) {
                const int64_t at = 1000000000 + 10000000LL * i + 3000000LL * p;
                const std::string tid = std::to_string(281980910466509LL + (int64_t{p} << 24));
                ranges += std::string(ranges.empty() ? "" : ", ") + "(" + std::to_string(at) + ", " +
                          std::to_string(at + 2000000) + ", 59, 'Optimizer.step#Adam.step', " + tid + ")";
                for (int call = 0; call < 2; ++call) {
                    const int64_t when = at + 100000 + 150000LL * call;
                    calls += std::string(calls.empty() ? "" : ", ") + "(" + std::to_string(when) + ", " +
                             std::to_string(when + 50000) + ", 0, " + tid + ", 59, 0)";
                }
            }
        return "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES " + ranges +
               "; INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, nameId, returnValue) "
               "VALUES " +
               calls + ";";
    };
    auto lengths = [](const TraceData& trace) {   // steps 1-3 (step 0 holds the trace's start)
        std::vector<int64_t> out;
        for (size_t i = 0; i < trace.markers.size(); ++i)
            if (trace.markers.kind[i] == mhc::trace::MarkerKind::Step && trace.markers.index[i] > 0)
                out.push_back(trace.markers.t_end[i] - trace.markers.t_start[i]);
        return out;
    };
    test::TempDir dir;
    imp::Result result;
    const TraceData one = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", variant(1), result);
    CHECK(mhc::trace::summarize(one).steps == 4);
    CHECK(lengths(one) == std::vector<int64_t>{10000000, 10000000, 10000000});
    CHECK(one.meta.count("nsys.step_processes") == 0);
    // Each step from the first process's start (the end of its range before) to the second's end.
    const TraceData two = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", variant(2), result);
    CHECK(mhc::trace::summarize(two).steps == 4);
    CHECK(lengths(two) == std::vector<int64_t>{13000000, 13000000, 13000000});
    CHECK(two.meta.at("nsys.step_processes") ==
          "optimizer steps of 2 processes (globalPid) in the export, found per process: 4 steps of the same number "
          "joined, one step marker each; the ranges of one step begin up to 3000000 ns apart across processes: each "
          "marker spans them all (the first start to the last end), and a kernel is in the step its launch fell in "
          "among its own process's ranges");
    CHECK(two.meta.at("steps_from") == "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace)");
}

TEST_CASE("nsys: one optimizer whose NVTX steps alternate in duration makes a step per range",
          "[import][nsys][public][steps]") {
    // The 2024.6 export with eight Optimizer.step#Adam.step NVTX ranges on a thread of its process
    // (globalTid 281980910466509) at 1.00 s + 10 ms i, lasting 1 ms (even i) or 4 ms (odd i), and
    // cudaStreamIsCapturing calls (nameId 59) of that thread inside each: 2 in every range. The
    // durations take turns (4 times) but every range runs the same 2 runtime calls: one optimizer
    // stepping unevenly, 8 steps. Before 2026-12-05 (later): 5 steps, as a GAN's two Adam. With 5
    // calls in the long ones (two optimizers, each its own work): the period of 2 stands, 5 steps
    // (ends after ranges 0, 2, 4, 6 and 7: the gaps after the short ones, 9 ms, are the longer).
    auto variant = [](int even_calls, int odd_calls) {
        std::string ranges, calls;
        for (int i = 0; i < 8; ++i) {
            const int64_t at = 1000000000 + 10000000LL * i, length = i % 2 ? 4000000 : 1000000;
            ranges += std::string(i ? ", " : "") + "(" + std::to_string(at) + ", " + std::to_string(at + length) +
                      ", 59, 'Optimizer.step#Adam.step', 281980910466509)";
            for (int call = 0; call < (i % 2 ? odd_calls : even_calls); ++call) {
                const int64_t when = at + 100000 + 150000LL * call;
                calls += std::string(calls.empty() ? "" : ", ") + "(" + std::to_string(when) + ", " +
                         std::to_string(when + 50000) + ", 0, 281980910466509, 59, 0)";
            }
        }
        return "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES " + ranges +
               "; INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, nameId, returnValue) "
               "VALUES " +
               calls + ";";
    };
    test::TempDir dir;
    imp::Result result;
    TraceData one = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", variant(2, 2), result);
    CHECK(mhc::trace::summarize(one).steps == 8);
    CHECK(one.meta.at("steps_from") ==
          "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace): a step per Optimizer.step#Adam.step "
          "range (their durations take turns with a period of 2 but each runs the same 2 ops and calls: one "
          "optimizer stepping unevenly)");
    TraceData two = test::import_variant(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", variant(2, 5), result);
    CHECK(mhc::trace::summarize(two).steps == 5);
    CHECK(two.meta.at("steps_from") ==
          "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace): a step per 2 Optimizer.step#Adam.step "
          "ranges (their durations take turns)");
}

TEST_CASE("nsys: another file's write-ahead log beside the export is refused, not read over its rows",
          "[import][nsys][public]") {
    // A copy of the export put in WAL mode and changed (every kernel 1 ms longer) leaves its log;
    // copied beside the export as FILE-wal, SQLite read its pages as the export's: the import took
    // the changed kernel times (276.75 ms of kernel time where the export holds 270.74 ms), exit 0,
    // and left FILE-shm beside the input.
    test::TempDir dir;
    const std::string in = dir.file("con_kernel.sqlite"), other = dir.file("other.sqlite");
    test::write_file(in, test::read_file(test::pub("nsys/con_kernel.sqlite")));
    test::write_file(other, test::read_file(in));
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(other.c_str(), &db) == SQLITE_OK);
    const char* change = "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; "
                         "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + 1000000;";
    REQUIRE(sqlite3_exec(db, change, nullptr, nullptr, nullptr) == SQLITE_OK);
    test::write_file(in + "-wal", test::read_file(other + "-wal"));   // before the close checkpoints it
    sqlite3_close(db);
    const std::string said = in + ": " + in + "-wal is there, a write-ahead log that " + in +
                             " (not in SQLite's WAL mode) did not leave";
    for (const auto format : {imp::Format::Auto, imp::Format::Nsys}) {
        imp::Options opt;
        opt.warn = false;
        opt.format = format;
        CHECK_THROWS_WITH(imp::import_file(in, dir.file("t.db"), opt), Catch::StartsWith(said));
    }
    CHECK_FALSE(std::filesystem::exists(in + "-shm"));
    CHECK_FALSE(std::filesystem::exists(dir.file("t.db")));
    std::string err;
    CHECK(test::run_mhc("import " + in + " -o " + dir.file("t.db"), &err) == 2);
    CHECK(err.rfind("mhc: " + said, 0) == 0);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    // Moved away, the export imports as it is.
    std::filesystem::remove(in + "-wal");
    imp::Result result;
    CHECK(test::kernel_time(test::import_public_path(dir, in, result)) == 270740082);
}

TEST_CASE("nsys: an export left with a hot journal by an interrupted write is refused saying so",
          "[import][nsys][public]") {
    // A process that changed the export inside a transaction and died before it committed leaves
    // FILE-journal, which SQLite rolls back before any read; a read-only connection cannot, and the
    // import said "the SQLite file is corrupt or truncated: attempt to write a readonly database".
    test::TempDir dir;
    const std::string in = dir.file("con_kernel.sqlite");
    test::write_file(in, test::read_file(test::pub("nsys/con_kernel.sqlite")));
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        sqlite3* db = nullptr;
        sqlite3_open(in.c_str(), &db);
        // A one-page cache spills the changed pages into the file before the commit.
        sqlite3_exec(db, "PRAGMA cache_size=1; BEGIN; UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + 1; "
                         "CREATE TABLE junk(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                         "WHERE i < 200) INSERT INTO junk SELECT zeroblob(4000) FROM n;",
                     nullptr, nullptr, nullptr);
        _exit(0);   // no commit, no rollback: the journal stays hot
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(std::filesystem::exists(in + "-journal"));
    for (const auto format : {imp::Format::Auto, imp::Format::Nsys}) {
        imp::Options opt;
        opt.warn = false;
        opt.format = format;
        CHECK_THROWS_WITH(imp::import_file(in, dir.file("t.db"), opt),
                          Catch::Contains("an interrupted write left " + in + "-journal, which SQLite must roll back"));
    }
    CHECK(std::filesystem::exists(in + "-journal"));   // the input is left as it is
    // Rolled back (what sqlite3 does when it opens the file), the export imports as it was.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(in.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    imp::Result result;
    CHECK(test::kernel_time(test::import_public_path(dir, in, result)) == 270740082);
}

TEST_CASE("nsys: an export another process holds locked is waited for, then refused saying so",
          "[import][nsys][public]") {
    // An export still being written (its writer holds the lock): the import said at once "the SQLite
    // file is corrupt or truncated: database is locked", or under --format nsys that the file "stayed
    // locked by another process for 600 s" after 0.02 s, no wait at all.
    test::TempDir dir;
    const std::string in = dir.file("con_kernel.sqlite");
    test::write_file(in, test::read_file(test::pub("nsys/con_kernel.sqlite")));
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        sqlite3* db = nullptr;
        sqlite3_open(in.c_str(), &db);
        sqlite3_exec(db, "BEGIN EXCLUSIVE; UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + 1;", nullptr,
                     nullptr, nullptr);
        (void)!write(ready[1], "x", 1);
        sleep(5);
        _exit(0);
    }
    char byte = 0;
    REQUIRE(read(ready[0], &byte, 1) == 1);
    setenv("MHC_BUSY_TIMEOUT_MS", "300", 1);
    for (const auto format : {imp::Format::Auto, imp::Format::Nsys}) {
        imp::Options opt;
        opt.warn = false;
        opt.format = format;
        const auto start = std::chrono::steady_clock::now();
        CHECK_THROWS_WITH(imp::import_file(in, dir.file("t.db"), opt),
                          Catch::StartsWith(in + ": cannot read: the file stayed locked by another process for 0.3 s"));
        CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
    }
    unsetenv("MHC_BUSY_TIMEOUT_MS");
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    close(ready[0]);
    close(ready[1]);
}

TEST_CASE("nsys: an export is read in one read transaction, whole", "[import][nsys][public]") {
    // Each query of the importer had a snapshot of its own: a writer committing between two of them
    // made one import read two versions of the file. The connection now keeps one read transaction.
    test::TempDir dir;
    const std::string in = dir.file("con_kernel.sqlite");
    test::write_file(in, test::read_file(test::pub("nsys/con_kernel.sqlite")));
    sqlite3* reader = imp::open_sqlite_input(in);
    CHECK(sqlite3_get_autocommit(reader) == 0);
    sqlite3* writer = nullptr;
    REQUIRE(sqlite3_open(in.c_str(), &writer) == SQLITE_OK);
    const char* change = "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + 1";
    CHECK(sqlite3_exec(writer, change, nullptr, nullptr, nullptr) == SQLITE_BUSY);   // no commit while it reads
    sqlite3_close(reader);
    CHECK(sqlite3_exec(writer, change, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(writer);
}

// A kernel that ran in the capture but was launched before it began (the GPU runs behind the host):
// its runtime row is not in the export, and CUPTI numbers a process's calls in order, so its
// correlationId is below every call of its process the export holds. None of the kept exports has
// one (con_kernel's two kernels without a runtime row are above every call); the premise is built
// on the 2025.1 export as if the capture had begun at 9,032,000,000 ns (nsys --capture-range): its
// process's calls before then and its kernels ended by then removed, ProfilerStep#6 from there to
// 9,034,950,000 and #7 to 9,035,010,000. Left: kernel 2178 (launched at 9,030,581,328, started
// before the step), 2200 (launched at 9,032,767,796: step 6), and two added on its stream: 2179,
// queued behind 2178 and run at 9,032,756,108 (in step 6's span), and 2214, started at
// 9,034,960,000 (in step 7's) with no runtime row but above the first call 2192 (its call lost).
// Before 2026-12-07 kernel 2179 took step 6, the step of its start.
TEST_CASE("nsys: a kernel launched before the capture began is in no step, said", "[import][nsys][public][steps]") {
    test::TempDir dir;
    imp::Result result;
    const std::string copy = "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
                             "correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY, "
                             "gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
                             "localMemoryPerThread, localMemoryTotal, gridId) SELECT ";
    const std::string of_2200 = ", deviceId, contextId, streamId, ?, globalPid, demangledName, shortName, "
                                "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, "
                                "dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId FROM "
                                "CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 2200;";
    auto added = [&](const std::string& times, const std::string& id) {
        std::string sql = copy + times + of_2200;
        sql.replace(sql.find('?'), 1, id);
        return sql;
    };
    TraceData trace = test::import_variant(
        dir, "nsys/fuser-h200-nsys-2025.1.sqlite",
        "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start < 9032000000 AND globalTid >= 282323165642752 AND "
        "globalTid < 282323165642752 + 16777216;"
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end < 9032000000;" +
            added("9032756108, 9032800000", "2179") + added("9034960000, 9034970000", "2214") +
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (9032000000, 9034950000, 59, "
            "'ProfilerStep#6', 282323165693308), (9034950000, 9035010000, 59, 'ProfilerStep#7', 282323165693308);",
        result);
    std::map<int64_t, int32_t> step_of;   // by start (relative): 2178, 2179, 2200, 2214
    for (size_t i = 0; i < trace.kernels.size(); ++i) step_of[trace.kernels.t_start[i]] = trace.kernels.step[i];
    std::vector<int32_t> steps;
    steps.reserve(step_of.size());
    for (const auto& [start, step] : step_of) steps.push_back(step);
    CHECK(steps == std::vector<int32_t>{-1, -1, 6, 7});
    CHECK(trace.meta.at("nsys.kernels_launched_before_recording") ==
          "2 kernels whose launch the file lacks, of correlation ids 2178 to 2179, below every call the file holds "
          "of their process: launched before recording began, so in no step (their start fell in step 6: 1)");
    // The export as recorded (every call from id 1 on): nothing said.
    CHECK(test::unsaid(dir, "nsys/fuser-h200-nsys-2025.1.sqlite", "nsys.kernels_launched_before_recording"));
}
