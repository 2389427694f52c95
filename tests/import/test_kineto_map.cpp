// Golden cases of the Kineto mapping rules (trace/import/src/kineto_map.hpp), one rule per
// case: a few JSON events in, the rows KinetoData keeps out. The whole-file public traces
// (test_formats.cpp) check the rules together; these say which rule gives which row.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "kineto_map.hpp"
#include "kineto_parse.hpp"
#include "util.hpp"

using namespace mhc::trace::import;
using mhc::trace::CopyKind;

namespace {

// The events, comma-separated, inside a minimal Kineto document.
KinetoData parse_events(const std::string& events) {
    test::TempDir dir;
    test::write_file(dir.file("t.json"), "{\"traceEvents\": [" + events + "]}");
    return parse_kineto(dir.file("t.json"));
}

std::string name_of(const KinetoData& d, uint32_t id) { return d.strings.list.at(id); }

}  // namespace

TEST_CASE("kineto map: a kernel event is a kernel row with its launch geometry", "[import][kineto-map]") {
    KinetoData d = parse_events(
        R"j({"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":10.5,"dur":2.25,)j"
        R"j("args":{"device":1,"stream":7,"correlation":42,"External id":5,"registers per thread":32,)j"
        R"j("shared memory":1024,"grid":[4,2,1],"block":[128,1,1]}},)j"
        R"j({"ph":"X","cat":"Kernel","name":"old_cat","ts":20,"dur":-3})j");
    CHECK(d.events == 2);
    REQUIRE(d.kernels.size() == 2);
    const KKernel& k = d.kernels[0];
    CHECK(name_of(d, k.name) == "gemm");
    CHECK(k.ts == 10500);   // microseconds as written -> ns, exactly
    CHECK(k.dur == 2250);
    CHECK(k.device == 1);
    CHECK(k.stream == 7);
    CHECK(k.correlation == 42);
    CHECK(k.external == 5);
    CHECK(k.tid == 7);
    CHECK(k.registers == 32);
    CHECK(k.shared_mem == 1024);
    CHECK((k.grid[0] == 4 && k.grid[1] == 2 && k.grid[2] == 1));
    CHECK((k.block[0] == 128 && k.block[1] == 1 && k.block[2] == 1));
    CHECK(!k.is_copy);
    CHECK(!k.is_memset);
    // The older category name maps the same way; a negative duration becomes 0.
    CHECK(name_of(d, d.kernels[1].name) == "old_cat");
    CHECK(d.kernels[1].dur == 0);
    CHECK(d.kernels[1].correlation == -1);   // absent
    CHECK(d.t_min == 10500);
}

TEST_CASE("kineto map: a memcpy's name gives its direction, a memset is a memset", "[import][kineto-map]") {
    KinetoData d = parse_events(
        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","ts":1,"dur":1,"args":{"bytes":4096}},)j"
        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy DtoH (Device -> Pinned)","ts":2,"dur":1,"args":{"bytes":8}},)j"
        R"j({"ph":"X","cat":"Memcpy","name":"Memcpy DtoD (Device -> Device)","ts":3,"dur":1},)j"
        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy PtoP (Device -> Device)","ts":4,"dur":1},)j"
        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoH (Pinned -> Pinned)","ts":5,"dur":1},)j"
        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy","ts":6,"dur":1},)j"
        R"j({"ph":"X","cat":"gpu_memset","name":"Memset (Device)","ts":7,"dur":1,"args":{"bytes":64}})j");
    REQUIRE(d.kernels.size() == 7);
    const CopyKind want[] = {CopyKind::H2D, CopyKind::D2H, CopyKind::D2D, CopyKind::P2P,
                             CopyKind::H2H, CopyKind::D2D, CopyKind::Memset};
    for (size_t i = 0; i < 7; ++i) {
        INFO("event " << i);
        CHECK(d.kernels[i].copy_kind == want[i]);
        CHECK(d.kernels[i].is_copy == (i < 6));
        CHECK(d.kernels[i].is_memset == (i == 6));
    }
    CHECK(d.kernels[0].bytes == 4096);
    CHECK(d.kernels[6].bytes == 64);
    CHECK(copy_kind_of("Memcpy HtoD") == CopyKind::H2D);
    CHECK(copy_kind_of("something else") == CopyKind::D2D);
}

// The word after "Memcpy " is CUPTI's (libkineto's memcpyKindString: HtoD, DtoH, HtoA, AtoH, AtoA,
// AtoD, DtoA, DtoD, HtoH, PtoP; ROCm's the same four words) or, on Intel XPU, PTI's
// (ptiViewMemcpyTypeToString: X2Y of M system memory, H USM host, D USM device, S USM shared).
// Before 2026-12-03 only the CUDA words were known: every XPU copy, and CUDA's array copies, were
// device to device, in silence. A name that gives no direction is still device to device, but
// counted and its first name kept (said in meta and a warning).
TEST_CASE("kineto map: CUDA's array copies and XPU's PTI names give their direction", "[import][kineto-map]") {
    const std::pair<const char*, CopyKind> names[] = {
        {"Memcpy HtoA (Pageable -> Array)", CopyKind::H2D},
        {"Memcpy AtoH (Array -> Pinned)", CopyKind::D2H},
        {"Memcpy AtoA (Array -> Array)", CopyKind::D2D},
        {"Memcpy AtoD (Array -> Device)", CopyKind::D2D},
        {"Memcpy DtoA (Device -> Array)", CopyKind::D2D},
        {"Memcpy M2D (MEMORY(Unknown) -> DEVICE)", CopyKind::H2D},
        {"Memcpy H2D (HOST -> DEVICE)", CopyKind::H2D},
        {"Memcpy D2M (DEVICE -> MEMORY(Unknown))", CopyKind::D2H},
        {"Memcpy D2H (DEVICE -> HOST)", CopyKind::D2H},
        {"Memcpy D2D (DEVICE -> DEVICE)", CopyKind::D2D},
        {"Memcpy M2M (MEMORY(Unknown) -> MEMORY(Unknown))", CopyKind::H2H},
        {"Memcpy H2H (HOST -> HOST)", CopyKind::H2H},
        {"Memcpy M2H (MEMORY(Unknown) -> HOST)", CopyKind::H2H},
        {"Memcpy S2D (SHARED -> DEVICE)", CopyKind::D2D},
        {"Memcpy H2S (HOST -> SHARED)", CopyKind::H2D},
        {"Memcpy S2M (SHARED -> MEMORY(Unknown))", CopyKind::D2H}};
    std::string events;
    for (const auto& [name, kind] : names) {
        CHECK(copy_direction(name) == kind);
        events += std::string(events.empty() ? "" : ",") + R"j({"ph":"X","cat":"gpu_memcpy","name":")j" + name +
                  R"j(","ts":1,"dur":1,"args":{"bytes":8}})j";
    }
    KinetoData data = parse_events(events);
    CHECK(data.kernels.size() == std::size(names));
    CHECK(data.copies_without_direction == 0);
    // No direction in the name: device to device, counted, the first name kept.
    for (const char* name :
         {"Memcpy <unknown> (? -> ?)", "Memcpy INVALID (INVALID -> INVALID)", "Memcpy", "HtoD", "Memcpy X2Y (A -> B)"})
        CHECK(!copy_direction(name));
    data = parse_events(R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy <unknown> (? -> ?)","ts":1,"dur":1},)j"
                        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pinned -> Device)","ts":2,"dur":1},)j"
                        R"j({"ph":"X","cat":"Memcpy","name":"Memcpy INVALID (INVALID -> INVALID)","ts":3,"dur":1})j");
    REQUIRE(data.kernels.size() == 3);
    CHECK(data.kernels[0].copy_kind == CopyKind::D2D);
    CHECK(data.kernels[1].copy_kind == CopyKind::H2D);
    CHECK(data.copies_without_direction == 2);
    CHECK(data.first_copy_without_direction == "Memcpy <unknown> (? -> ?)");
    // The name as the warning quotes it: one line, at most 80 bytes cut where a UTF-8 character
    // begins (60 two-byte characters after "Memcpy ": 36 of them fit, not 36 and a half). The
    // newline is written \u000a: a name's \n is read as a Windows path's backslash and n
    // (kineto_repair.hpp).
    std::string accents, cut;
    for (int i = 0; i < 60; ++i) accents += "\\u00e9";   // a JSON escape
    for (int i = 0; i < 36; ++i) cut += "\xc3\xa9";      // U+00E9 in UTF-8
    data = parse_events(R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy )j" + accents +
                        R"j(","ts":1,"dur":1},)j"
                        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy\u000aHtoD","ts":2,"dur":-1})j");
    CHECK(data.first_copy_without_direction == "Memcpy " + cut);
    CHECK(data.copies_without_direction == 2);
    CHECK(data.first_negative_name == "Memcpy?HtoD");
}

// PyTorch writes an [OutOfMemory] instant where its allocator failed (profiler_kineto.cpp: args
// Device Type, Device Id, Bytes asked for, Total Allocated, Total Reserved; no Addr): no
// allocation, so no row, but never left out in silence (before 2026-12-03 it was).
TEST_CASE("kineto map: an [OutOfMemory] instant is counted, the first kept", "[import][kineto-map]") {
    KinetoData data = parse_events(
        R"j({"ph":"i","cat":"cpu_instant_event","s":"t","name":"[OutOfMemory]","pid":5,"tid":5,"ts":10,)j"
        R"j("args":{"Device Type":1,"Device Id":1,"Bytes":1073741824,"Total Allocated":512,"Total Reserved":2048}},)j"
        R"j({"ph":"i","cat":"cpu_instant_event","s":"t","name":"[OutOfMemory]","pid":5,"tid":5,"ts":11,)j"
        R"j("args":{"Device Type":0,"Device Id":-1,"Bytes":64}})j");
    CHECK(data.memory.empty());
    CHECK(data.out_of_memory == 2);
    const KMemory& first = data.first_out_of_memory;
    CHECK(first.index == 0);
    CHECK(first.device == 1);
    CHECK(first.bytes == 1073741824);
    CHECK(first.total == 512);
    CHECK(first.reserved == 2048);
}

TEST_CASE("kineto map: a runtime or driver call with a correlation id is that kernel's launch", "[import][kineto-map]") {
    KinetoData d = parse_events(
        R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","tid":3,"ts":100,"dur":5,"args":{"correlation":42}},)j"
        R"j({"ph":"X","cat":"cuda_driver","name":"cuLaunchKernel","tid":4,"ts":200,"dur":5,"args":{"correlation":43}},)j"
        R"j({"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","tid":3,"ts":300,"dur":5})j");
    CHECK(d.kernels.empty());
    CHECK(d.ops.empty());
    REQUIRE(d.launches.size() == 2);   // the call without a correlation id launches nothing
    CHECK(d.launches.at(42).ts == 100000);
    CHECK(d.launches.at(42).tid == 3);
    CHECK(d.launches.at(43).tid == 4);
}

TEST_CASE("kineto map: annotations and ProfilerStep#N are ranges, CPU operators are ops", "[import][kineto-map]") {
    KinetoData d = parse_events(
        R"j({"ph":"X","cat":"cpu_op","name":"aten::mm","tid":1,"ts":10,"dur":4,)j"
        R"j("args":{"External id":7,"Record function id":11,"Ev Idx":2}},)j"
        R"j({"ph":"X","cat":"user_annotation","name":"forward","tid":1,"ts":9,"dur":8},)j"
        R"j({"ph":"X","cat":"gpu_user_annotation","name":"forward","tid":9,"ts":12,"dur":3},)j"
        R"j({"ph":"X","cat":"cpu_op","name":"ProfilerStep#3","tid":1,"ts":8,"dur":20},)j"
        R"j({"ph":"X","cat":"python_function","name":"model.py(12): forward","tid":1,"ts":9,"dur":1},)j"
        R"j({"ph":"X","cat":"python_function","name":"ProfilerStep#4","tid":1,"ts":30,"dur":20})j");
    // Ranges: the annotation, the GPU annotation, both steps (a python_function only when it is a step).
    REQUIRE(d.ranges.size() == 4);
    CHECK(name_of(d, d.ranges[0].name) == "forward");
    CHECK(!d.ranges[0].gpu);
    CHECK(d.ranges[0].step == -1);
    CHECK(d.ranges[1].gpu);
    CHECK(d.ranges[1].ts == 12000);
    CHECK(d.ranges[1].dur == 3000);
    CHECK(name_of(d, d.ranges[2].name) == "ProfilerStep#3");
    CHECK(d.ranges[2].step == 3);
    CHECK(d.ranges[3].step == 4);
    // Ops: cpu_op and user_annotation (the step op too); not python_function, not the GPU annotation.
    REQUIRE(d.ops.size() == 3);
    CHECK(name_of(d, d.ops[0].name) == "aten::mm");
    CHECK(d.ops[0].external == 7);
    CHECK(d.ops[0].rf_id == 11);
    CHECK(d.ops[0].ev_idx == 2);
    CHECK(d.has_rf_id);
    CHECK(name_of(d, d.ops[1].name) == "forward");
    CHECK(name_of(d, d.ops[2].name) == "ProfilerStep#3");
    CHECK(d.t_min == 8000);   // ranges count, ops alone do not
}

TEST_CASE("kineto map: [memory] instants are allocator events on the GPU or the host", "[import][kineto-map]") {
    KinetoData d = parse_events(
        R"j({"ph":"i","s":"t","name":"[memory]","ts":5,"args":{"Addr":140000000000000,"Bytes":512,)j"
        R"j("Total Allocated":1024,"Device Type":1,"Device Id":2}},)j"
        R"j({"ph":"I","name":"[memory]","ts":6,"args":{"Addr":4096,"Bytes":-512,"Device Type":0,"Device Id":-1}},)j"
        R"j({"ph":"i","name":"[memory]","ts":7,"args":{"Device Type":1}},)j"
        R"j({"ph":"X","name":"[memory]","ts":8,"dur":1,"args":{"Addr":1,"Bytes":1,"Device Type":1}})j");
    REQUIRE(d.memory.size() == 2);   // without Addr or Bytes, or not an instant: no row
    CHECK(d.memory[0].ts == 5000);
    CHECK(d.memory[0].addr == 140000000000000);
    CHECK(d.memory[0].bytes == 512);
    CHECK(d.memory[0].total == 1024);
    CHECK(d.memory[0].device == 2);
    CHECK(d.memory[1].device == -1);   // Device Type 0: host memory
    CHECK(d.memory[1].bytes == -512);
    CHECK(d.memory[1].total == -1);    // absent
    CHECK(d.host_memory_events == 1);
}

// Kineto writes a CUPTI peer-to-peer memcpy (memcpy2: cudaMemcpyPeer, NVLink copies of a process
// driving several GPUs) with args fromDevice, inDevice and toDevice and no args.device
// (libkineto's CuptiActivity.h, GpuActivity<CUpti_ActivityMemcpyPtoPType>; its pid is the
// inDevice). They were all placed on device 0.
TEST_CASE("kineto map: a peer copy without args.device is on its inDevice", "[import][kineto-map]") {
    KinetoData data = parse_events(
        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy PtoP (Device -> Device)","pid":1,"tid":13,"ts":10,)j"
        R"j("dur":5,"args":{"fromDevice":0,"inDevice":1,"toDevice":1,"fromContext":1,"inContext":2,)j"
        R"j("toContext":2,"stream":13,"correlation":9,"bytes":4096,"memory bandwidth (GB/s)":0.8}},)j"
        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy DtoD (Device -> Device)","pid":3,"tid":7,"ts":20,)j"
        R"j("dur":5,"args":{"device":3,"stream":7,"correlation":10,"bytes":64}},)j"
        R"j({"ph":"X","cat":"kernel","name":"k","pid":2,"tid":7,"ts":30,"dur":5,"args":{"stream":7}})j");
    REQUIRE(data.kernels.size() == 3);
    CHECK(data.kernels[0].device == 1);   // inDevice, the device that ran it
    CHECK(data.kernels[0].copy_kind == CopyKind::P2P);
    CHECK(data.kernels[0].bytes == 4096);
    CHECK(data.kernels[0].stream == 13);
    CHECK(data.kernels[1].device == 3);   // args.device where it is written
    CHECK(data.copies_on_in_device == 1);
    CHECK(data.kernels[2].device == 0);   // neither: device 0, counted and said
    CHECK(data.activities_without_device == 1);
    CHECK(data.first_without_device == "k");
}

// c10::DeviceType numbers a device's memory for every back-end, not only those mhc had seen
// (CUDA, HIP, XPU, MPS, HPU, MTIA, PrivateUse1): XLA's (9) was read as host memory, in silence.
// Host memory by another rule than Device Type 0 (a CPU-side type such as MKLDNN 2, a type
// PyTorch does not define, an accelerator's Device Id -1) is counted by type and id and said.
TEST_CASE("kineto map: [memory] of every c10 device type is a device's, other host memory is said",
          "[import][kineto-map]") {
    KinetoData data = parse_events(
        R"j({"ph":"i","name":"[memory]","ts":1,"args":{"Addr":1,"Bytes":8,"Device Type":9,"Device Id":0}},)j"
        R"j({"ph":"i","name":"[memory]","ts":2,"args":{"Addr":2,"Bytes":8,"Device Type":18,"Device Id":1}},)j"
        R"j({"ph":"i","name":"[memory]","ts":3,"args":{"Addr":3,"Bytes":8,"Device Type":0,"Device Id":-1}},)j"
        R"j({"ph":"i","name":"[memory]","ts":4,"args":{"Addr":4,"Bytes":8,"Device Type":2,"Device Id":-1}},)j"
        R"j({"ph":"i","name":"[memory]","ts":5,"args":{"Addr":5,"Bytes":8,"Device Type":1,"Device Id":-1}},)j"
        R"j({"ph":"i","name":"[memory]","ts":6,"args":{"Addr":6,"Bytes":8,"Device Type":-3,"Device Id":0}},)j"
        R"j({"ph":"i","name":"[memory]","ts":7,"args":{"Addr":7,"Bytes":8,"Device Type":21,"Device Id":0}})j");
    REQUIRE(data.memory.size() == 7);
    CHECK(data.memory[0].device == 0);   // XLA
    CHECK(data.memory[1].device == 1);   // IPU
    for (size_t i = 2; i < 7; ++i) CHECK(data.memory[i].device == -1);
    CHECK(data.host_memory_events == 5);
    const std::map<std::string, int64_t, std::less<>> odd = {
        {"Device Type -3 Id 0", 1}, {"Device Type 1 Id -1", 1}, {"Device Type 2 Id -1", 1}, {"Device Type 21 Id 0", 1}};
    CHECK(data.odd_memory_devices == odd);   // Device Type 0 is the host's own: not listed
}

// Kineto writes hardware_counters, mtia_counters and xpu_scope_profiler samples as counter
// events (ph C, output_json.cpp writeCounterEvent); a trace has no counters: counted by category.
TEST_CASE("kineto map: counter events are counted by category, not dropped in silence", "[import][kineto-map]") {
    KinetoData data = parse_events(
        R"j({"ph":"C","cat":"hardware_counters","name":"sm__cycles","pid":"GPU 0 Counters","tid":0,"ts":1,)j"
        R"j("args":{"":5}},)j"
        R"j({"ph":"C","cat":"hardware_counters","name":"dram__bytes","pid":"GPU 0 Counters","tid":0,"ts":1,)j"
        R"j("args":{"":7}},)j"
        R"j({"ph":"C","cat":"xpu_scope_profiler","name":"scope","pid":0,"tid":0,"ts":2,"args":{"a":1}})j");
    const std::map<std::string, int64_t, std::less<>> counters = {{"hardware_counters", 2}, {"xpu_scope_profiler", 1}};
    CHECK(data.counter_categories == counters);
    CHECK(data.kernels.empty());
    CHECK(data.unread_categories.empty());
}

TEST_CASE("kineto map: ac2g flows link a kernel to its CPU op when no runtime call does", "[import][kineto-map]") {
    KinetoData d = parse_events(
        R"j({"ph":"X","cat":"cpu_op","name":"aten::add","tid":1,"ts":10,"dur":10},)j"
        R"j({"ph":"s","cat":"ac2g","name":"launch","id":77,"tid":1,"ts":15},)j"
        R"j({"ph":"f","cat":"ac2g","name":"launch","id":77,"tid":7,"ts":30},)j"
        R"j({"ph":"X","cat":"kernel","name":"add_kernel","tid":7,"ts":30,"dur":1,"args":{"correlation":77}})j");
    CHECK(d.flows == 2);
    REQUIRE(d.flow_starts.size() == 1);   // only the start is kept, by flow id
    CHECK(d.flow_starts.at(77).ts == 15000);
    d.link_ops();
    REQUIRE(d.kernels.size() == 1);
    int32_t op = d.launcher(d.kernels[0]);
    REQUIRE(op >= 0);
    CHECK(name_of(d, d.ops[static_cast<size_t>(op)].name) == "aten::add");
}

TEST_CASE("kineto map: an event without 'ts' is counted and dropped", "[import][kineto-map]") {
    KinetoData d = parse_events(R"j({"ph":"X","cat":"kernel","name":"k","dur":1},{"ph":"M","name":"process_name"})j");
    CHECK(d.events == 2);
    CHECK(d.kernels.empty());
    CHECK(d.t_min == INT64_MAX);
}

TEST_CASE("kineto map: events of categories not read are counted by category, not dropped in silence",
          "[import][kineto-map]") {
    // MTIA's device events and CUPTI range-profiler kernels (as in HolisticTraceAnalysis's
    // mtia_inference and cupti_profiler traces); the profiler's span, overhead, host instants
    // and cuda_sync waits hold no device work and are not counted.
    KinetoData data = parse_events(
        R"j({"ph":"X","cat":"mtia_ccp_events","name":"pe_exe","pid":17,"ts":1,"dur":7,"args":{"stream":112}},)j"
        R"j({"ph":"X","cat":"mtia_ccp_events","name":"event_wait","pid":17,"ts":9,"dur":1},)j"
        R"j({"ph":"X","cat":"cuda_profiler_range","name":"gemm","pid":0,"ts":2,"dur":3},)j"
        R"j({"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","ts":0,"dur":50},)j"
        R"j({"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"ts":4,"dur":1},)j"
        R"j({"ph":"X","cat":"overhead","name":"Buffer Flush","ts":5,"dur":1},)j"
        R"j({"ph":"i","cat":"mtia_ccp_events","name":"instant","ts":6},)j"
        R"j({"ph":"X","cat":"kernel","name":"k","ts":3,"dur":1})j");
    CHECK(data.kernels.size() == 1);
    CHECK(data.unread_categories == std::map<std::string, int64_t, std::less<>>{{"cuda_profiler_range", 1}, {"mtia_ccp_events", 2}});
}

TEST_CASE("kineto map: device work without args.stream is on the stream its numeric tid names, else said",
          "[import][kineto-map]") {
    // As a converter of nsys exports to Chrome traces writes them (pid the device, tid the stream,
    // no args.device or args.stream): before 2026-12-04 every such kernel was on stream 0, in silence.
    KinetoData d = parse_events(
        R"j({"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":1,"dur":5,"args":{"correlation":1}},)j"
        R"j({"ph":"X","cat":"kernel","name":"b","pid":0,"tid":13,"ts":2,"dur":5,"args":{"correlation":2}},)j"
        R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":"stream 9","ts":3,"dur":1,"args":{"bytes":64}},)j"
        R"j({"ph":"X","cat":"kernel","name":"c","pid":0,"tid":7,"ts":8,"dur":1,"args":{"device":0,"stream":20}},)j"
        R"j({"ph":"X","cat":"kernel","name":"d","pid":"Device 0","tid":"Stream 21","ts":9,"dur":1},)j"
        R"j({"ph":"X","cat":"kernel","name":"e","pid":0,"tid":"GPU lane","ts":10,"dur":1})j");
    REQUIRE(d.kernels.size() == 6);
    CHECK(d.kernels[0].stream == 7);
    CHECK(d.kernels[1].stream == 13);
    CHECK(d.kernels[2].stream == 9);    // PyTorch 1.9 wrote a GPU lane's tid as "stream 9"
    CHECK(d.kernels[3].stream == 20);   // args.stream where written, whatever the tid
    CHECK(d.kernels[4].stream == 21);   // nsys2chrome's "Stream 21"
    CHECK(d.kernels[5].stream == 0);    // nothing names a stream: 0, counted
    CHECK(d.streams_from_tid == 4);
    CHECK(d.activities_without_stream == 1);
}

TEST_CASE("kineto map: complete events without a category are counted as such", "[import][kineto-map]") {
    // Before 2026-12-04 counted under an empty name: the warning read "(2 ): only kernel, ...".
    KinetoData data = parse_events(R"j({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":4},)j"
                                   R"j({"ph":"X","name":"volta_sgemm","pid":1,"tid":13,"ts":2,"dur":1},)j"
                                   R"j({"ph":"X","cat":"","name":"other","pid":1,"tid":13,"ts":3,"dur":1})j");
    CHECK(data.unread_categories == std::map<std::string, int64_t, std::less<>>{{"(no category)", 2}});
    CHECK(data.profiler_events == 1);
    CHECK(data.foreign_events == 2);
}

TEST_CASE("kineto map: the processes TensorFlow's and JAX's profiler name are kept, a Kineto trace's not",
          "[import][kineto-map]") {
    KinetoData xprof = parse_events(R"j({"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:TPU:0"}},)j"
                                    R"j({"ph":"X","pid":1,"tid":2,"ts":1,"dur":1,"name":"fusion.1"})j");
    CHECK(xprof.xprof_process == "/device:TPU:0");
    CHECK(xprof.profiler_events == 0);
    KinetoData kineto = parse_events(
        R"j({"ph":"M","pid":4,"ts":0,"name":"process_name","args":{"name":"python3"}},)j"
        R"j({"ph":"M","pid":0,"ts":0,"name":"process_name","args":{"name":"GPU 0"}},)j"
        R"j({"ph":"i","s":"t","name":"Iteration Start: PyTorch Profiler","pid":4,"tid":4,"ts":1},)j"
        R"j({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":3,"dur":1,"args":{"device":0,"stream":7}})j");
    CHECK(kineto.xprof_process.empty());
    CHECK(kineto.profiler_events == 2);
    CHECK(kineto.foreign_events == 0);
    // Kineto's instants and its own flows make no row but are the profiler's.
    KinetoData instants = parse_events(
        R"j({"ph":"i","s":"t","cat":"cpu_instant_event","name":"record_param_comms","pid":4,"tid":4,"ts":1},)j"
        R"j({"ph":"s","cat":"fwdbwd","name":"fwdbwd","id":3,"pid":4,"tid":4,"ts":2},)j"
        R"j({"ph":"f","cat":"fwdbwd","name":"fwdbwd","id":3,"bp":"e","pid":4,"tid":5,"ts":3})j");
    CHECK(instants.profiler_events == 3);
    CHECK(instants.foreign_events == 0);
}

TEST_CASE("kineto map: past 32 unread categories the rest are counted as one", "[import][kineto-map]") {
    std::string events;
    for (int i = 0; i < 40; ++i)
        events += std::string(i ? "," : "") + R"j({"ph":"X","cat":"c)j" + std::to_string(i) + R"j(","name":"e","ts":1,"dur":1})j";
    KinetoData data = parse_events(events);
    CHECK(data.unread_categories.size() == 33);
    CHECK(data.unread_categories.at("(other categories)") == 8);
}

TEST_CASE("kineto map: durations written as begin/end halves are counted, not dropped in silence", "[import][kineto-map]") {
    // Chrome's trace format also writes a duration as a B and an E event (other tools' exports);
    // Kineto writes complete events only, so halves are counted and said, never read as rows.
    KinetoData data = parse_events(
        R"j({"ph":"B","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":1,"args":{"device":0,"stream":7}},)j"
        R"j({"ph":"E","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":4},)j"
        R"j({"ph":"B","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0},)j"
        R"j({"ph":"X","cat":"kernel","name":"k","ts":5,"dur":1,"args":{"device":0,"stream":7}})j");
    CHECK(data.kernels.size() == 1);
    CHECK(data.ops.empty());
    CHECK(data.begin_end_events == 3);
}

// Ranks merged into one file: correlation ids are per process, so two processes' launches can
// carry one id. Process 100 drives GPU 0 (kernel pid 0), process 200 GPU 1; id 5 and 6 are each
// one process's (they tell which process drove which GPU), id 9 both's, process 200's call read
// last. GPU 0's kernel of id 9 takes process 100's call (at 20 us), GPU 1's process 200's (at
// 40 us); GPU 2's process is not known: its kernel of id 9 (at 45 us) takes the latest call
// before it, process 200's at 40 us. The same by ac2g flows alone (ids 15, 16, 19).
TEST_CASE("kineto map: a correlation id two processes used joins each kernel to its own process's launch",
          "[import][kineto-map]") {
    for (const bool flows : {false, true}) {
        auto call = [&](int pid, int id, int ts) {
            const std::string at = R"("pid":)" + std::to_string(pid) + R"(,"tid":)" + std::to_string(pid + 1) +
                                   R"(,"ts":)" + std::to_string(ts);
            if (flows)
                return R"({"ph":"s","cat":"ac2g","name":"launch","id":)" + std::to_string(id + 10) + "," + at + "},";
            return R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","dur":1,)" + at +
                   R"(,"args":{"correlation":)" + std::to_string(id) + "}},";
        };
        auto kernel = [&](int gpu, int id, int ts) {
            return R"({"ph":"X","cat":"kernel","name":"k","pid":)" + std::to_string(gpu) + R"(,"tid":7,"ts":)" +
                   std::to_string(ts) + R"(,"dur":1,"args":{"device":)" + std::to_string(gpu) +
                   R"(,"stream":7,"correlation":)" + std::to_string(id + (flows ? 10 : 0)) + "}}";
        };
        KinetoData data = parse_events(call(100, 5, 10) + call(100, 9, 20) + call(200, 6, 30) + call(200, 9, 40) +
                                    kernel(0, 5, 50) + "," + kernel(0, 9, 51) + "," + kernel(1, 6, 52) + "," +
                                    kernel(1, 9, 53) + "," + kernel(2, 9, 45));
        INFO((flows ? "ac2g flows" : "runtime calls"));
        CHECK((flows ? data.shared_flows : data.shared_launches).size() == 1);
        CHECK(data.launch_pids == std::set<int64_t>{100, 200});
        REQUIRE(data.kernels.size() == 5);
        std::vector<std::pair<int64_t, LaunchPick>> got;
        for (const KKernel& kernel : data.kernels) {
            LaunchPick how = LaunchPick::None;
            const KLaunch* launch = data.launch_of(kernel, &how);
            REQUIRE(launch != nullptr);
            got.emplace_back(launch->ts, how);
        }
        CHECK(got == std::vector<std::pair<int64_t, LaunchPick>>{{10000, LaunchPick::Only},
                                                                 {20000, LaunchPick::ByProcess},
                                                                 {30000, LaunchPick::Only},
                                                                 {40000, LaunchPick::ByProcess},
                                                                 {40000, LaunchPick::ByTime}});
    }
}
