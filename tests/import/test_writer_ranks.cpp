// The writer matrix, round 2 (tests/import/fixtures/writers/README.md): every rank of a gloo job
// recorded by torch 2.15 on the CPU (make_ranks.py), and the writer paths a user has besides a
// plain profile() (make_paths.py). mhc's figures against each file's own accounting.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "kineto_memory.hpp"
#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

TraceData import_writer(const test::TempDir& dir, const std::string& name, imp::Result& result) {
    return test::import_public_path(dir, test::fixture("writers/" + name), result, name + ".db");
}

// (start, end) on the job's clock (meta time_origin_ns + the row's times) of the markers whose
// name starts with `prefix`, in start order.
std::vector<std::pair<int64_t, int64_t>> on_job_clock(const TraceData& trace, const std::string& prefix) {
    const int64_t origin = std::stoll(trace.meta.at("time_origin_ns"));
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (size_t i = 0; i < trace.markers.size(); ++i)
        if (trace.strings[static_cast<size_t>(trace.markers.name[i])].rfind(prefix, 0) == 0)
            spans.emplace_back(origin + trace.markers.t_start[i], origin + trace.markers.t_end[i]);
    std::sort(spans.begin(), spans.end());
    return spans;
}

}   // namespace

TEST_CASE("kineto: a gloo job's ranks lie on one clock: each collective begins on every rank before it ends on any",
          "[import][kineto][ranks][writers]") {
    // make_ranks.py: DDP and FSDP2 (fully_shard) on 2 processes, gloo. Kineto writes every ts (us)
    // from baseTimeNanoseconds on the Unix epoch's clock, which both processes read: the ranks'
    // time 0s (mhc's: its first kept event) are 1.52 ms (DDP) and 3.65 ms (FSDP2) apart. On that clock every gloo
    // collective's latest start precedes its earliest end (by 222 us at least); on each file's own time 0 (how ranks
    // were placed before 2026-12-06: no time_origin_ns) 13 of the 14 do not (by up to 3.3 ms). torch 2.4.1's FSDP1
    // (baseTimeNanoseconds after traceEvents): time 0s 3.97 ms apart, 2 of its 4 collectives inconsistent on them, none
    // on the shared clock (192 us at least).
    test::TempDir dir;
    for (const char* job : {"2.15.0-ddp", "2.15.0-fsdp2", "2.4.1-fsdp1"}) {
        INFO(job);
        imp::Result r0, r1;
        const std::string name = std::string("torch-") + job + "-w2-rank";
        const TraceData rank0 = import_writer(dir, name + "0-kineto.json.gz", r0);
        const TraceData rank1 = import_writer(dir, name + "1-kineto.json.gz", r1);
        CHECK(rank0.meta.at("rank") == "0");
        CHECK(rank1.meta.at("rank") == "1");
        CHECK(rank0.meta.at("world_size") == "2");
        REQUIRE(rank0.meta.count("time_origin_ns") == 1);
        REQUIRE(rank1.meta.count("time_origin_ns") == 1);
        const auto on_rank0 = on_job_clock(rank0, "gloo:"), on_rank1 = on_job_clock(rank1, "gloo:");
        REQUIRE(on_rank0.size() == on_rank1.size());
        REQUIRE(on_rank0.size() >= 2);
        for (size_t k = 0; k < on_rank0.size(); ++k) {
            INFO("collective " << k);
            CHECK(std::max(on_rank0[k].first, on_rank1[k].first) < std::min(on_rank0[k].second, on_rank1[k].second));
        }
    }
}

TEST_CASE("kineto: time_origin_ns is the Unix-epoch time of the trace's time 0, only where ts are on that clock",
          "[import][kineto][ranks]") {
    test::TempDir dir;
    imp::Result result;
    // torch 2.15 (make_ranks.py's DDP rank 0): ProfilerStep#2 written at baseTimeNanoseconds
    // 1790857026000000000 + its ts (us, three decimals) lies at time_origin_ns + its marker's start.
    const std::string text = test::gunzip(test::fixture("writers/torch-2.15.0-ddp-w2-rank0-kineto.json.gz"));
    const size_t step = text.find("\"name\": \"ProfilerStep#2\"");
    REQUIRE(step != std::string::npos);
    const size_t ts = text.find("\"ts\": ", step) + 6, dot = text.find('.', ts);
    REQUIRE(dot - ts < 20);
    std::string frac;   // up to three decimals (ns), padded
    for (size_t i = dot + 1; i < text.size() && frac.size() < 3 && text[i] >= '0' && text[i] <= '9'; ++i)
        frac += text[i];
    frac.resize(3, '0');
    const int64_t step_ns = INT64_C(1790857026000000000) + std::stoll(text.substr(ts, dot - ts)) * 1000 +
                            std::stoll(frac);
    const TraceData ddp = import_writer(dir, "torch-2.15.0-ddp-w2-rank0-kineto.json.gz", result);
    int64_t marker = -1;
    for (size_t i = 0; i < ddp.markers.size(); ++i)
        if (ddp.strings[static_cast<size_t>(ddp.markers.name[i])] == "ProfilerStep#2") marker = ddp.markers.t_start[i];
    REQUIRE(marker >= 0);
    CHECK(std::stoll(ddp.meta.at("time_origin_ns")) + marker == step_ns);
    // HTA's sampled ranks (2023): epoch ts (us since 1970) without baseTimeNanoseconds.
    const TraceData h0 = test::import_public(dir, "kineto/hta-sampled-rank-0.json.gz", result);
    const TraceData h1 = test::import_public(dir, "kineto/hta-sampled-rank-1.json.gz", result);
    // Their time 0 (the earliest kernel, copy, memory event or CPU op kept) at 2023-04-28 23:51:38.079292
    // and .079484 UTC: rank 1's 192 us after rank 0's.
    CHECK(std::stoll(h0.meta.at("time_origin_ns")) / 1000 == INT64_C(1682725898079292));
    CHECK(std::stoll(h1.meta.at("time_origin_ns")) / 1000 == INT64_C(1682725898079484));
    // torch 2.0.1 to 2.3.1 write no baseTimeNanoseconds and ts as us since 1970 (the writers of
    // round 1, recorded on 2026-12-05): the same clock.
    imp::Result old;
    const TraceData t201 = import_writer(dir, "torch-2.0.1-kineto.json.gz", old);
    const int64_t origin201 = std::stoll(t201.meta.at("time_origin_ns"));
    CHECK(origin201 >= INT64_C(1796428800) * 1000000000);   // 2026-12-05 00:00 UTC
    CHECK(origin201 < INT64_C(1796515200) * 1000000000);    // 2026-12-06 00:00 UTC
    // ts from 0 (a tool's rewrite; a hand-written trace): no clock the ranks share, nothing said.
    const std::string zero = dir.file("zero.json");
    test::write_file(zero, R"({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 11,
         "args": {"Device Type": 0, "Device Id": -1, "Addr": 4096, "Bytes": 64, "Total Allocated": 64}}]})");
    imp::Options opt;
    opt.warn = false;
    imp::import_file(zero, dir.file("zero.db"), opt);
    CHECK(mhc::trace::load_trace(dir.file("zero.db")).meta.count("time_origin_ns") == 0);
    // The same with baseTimeNanoseconds: time 0 (the op at 10 us) at base + 10,000 ns.
    const std::string based = dir.file("based.json");
    std::string doc = test::read_file(zero);
    doc.insert(1, R"("baseTimeNanoseconds": 1790857026000000000, )");
    test::write_file(based, doc);
    imp::import_file(based, dir.file("based.db"), opt);
    CHECK(mhc::trace::load_trace(dir.file("based.db")).meta.at("time_origin_ns") == "1790857026000010000");
}

TEST_CASE("kineto: a gloo rank's collectives are said to couple nothing, an NCCL rank's are not",
          "[import][kineto][ranks][writers]") {
    test::TempDir dir;
    imp::Result result;
    const TraceData ddp = import_writer(dir, "torch-2.15.0-ddp-w2-rank0-kineto.json.gz", result);
    // DDP's one gradient bucket a step (10,384 floats), 2 profiled steps.
    CHECK(
        ddp.meta.at("kineto.host_collectives").rfind("2 collective ops of torch.distributed (2 c10d::allreduce_)", 0) ==
        0);
    CHECK(test::warned(result, "simulate --ranks couples ranks at NCCL kernels only"));
    const TraceData fsdp = import_writer(dir, "torch-2.15.0-fsdp2-w2-rank0-kineto.json.gz", result);
    CHECK(fsdp.meta.at("kineto.host_collectives")
              .rfind("12 collective ops of torch.distributed (8 c10d::_allgather_base_, 4 c10d::_reduce_scatter_base_)",
                     0) == 0);
    // HTA's sampled rank: NCCL kernels, coupled by simulate --ranks: nothing to say.
    imp::Result nccl;
    const TraceData h0 = test::import_public(dir, "kineto/hta-sampled-rank-0.json.gz", nccl);
    CHECK(h0.meta.count("kineto.host_collectives") == 0);
}

TEST_CASE("simulate --ranks: a gloo job's ranks on their shared clock, said to be uncoupled",
          "[import][kineto][ranks][writers][cli]") {
    // The two DDP ranks imported by mhc and simulated together: every identity key the Kineto
    // importer writes is there (no job id: assumed, said), time 0s placed by time_origin_ns (before
    // 2026-12-06: 'no meta time_origin_ns: every trace's time 0 is taken to be the same instant'),
    // and the host collectives said (before: '0 cross-rank kernels' alone).
    test::TempDir dir;
    std::string dbs;
    for (const char* rank : {"0", "1"}) {
        const std::string db = dir.file(std::string("r") + rank + ".db");
        REQUIRE(test::run_mhc("-q import " +
                              test::fixture(std::string("writers/torch-2.15.0-ddp-w2-rank") + rank + "-kineto.json.gz") +
                              " -o " + db) == 0);
        dbs += " " + db;
    }
    std::string err;
    REQUIRE(test::run_mhc("simulate --ranks" + dbs + " --device -1 --capacity unlimited --no-store", &err) == 0);
    CHECK(err.find("no meta job.id") != std::string::npos);
    CHECK(err.find("time_origin_ns") == std::string::npos);
    CHECK(err.find("r0.db (rank 0), " + dir.file("r1.db") +
                   " (rank 1): torch.distributed's collectives ran on the host") != std::string::npos);
}

TEST_CASE("et: a gloo rank's collectives on gloo's worker thread are not parent disagreements",
          "[import][et][ranks][writers]") {
    // The execution trace records gloo:all_reduce as a child of c10d::allreduce_, which enqueued
    // it; Kineto times it on gloo's worker thread, where it may run past its parent's end. Before
    // 2026-12-06: '6 joined ops are not inside their joined parent op' on FSDP2's rank 0, warned on
    // every gloo rank whose execution trace holds gloo's ops, the join being right (by rf_id, every
    // op). DDP's execution trace of its last step holds no gloo:all_reduce (gloo's thread recorded
    // it after the observer stopped, as the recording goes): nothing to hold, nothing said.
    test::TempDir dir;
    imp::Options opt;
    opt.warn = false;
    for (const auto& [job, other] : {std::pair{"ddp", ""}, std::pair{"fsdp2", "6 "}}) {
        INFO(job);
        const std::string name = test::fixture(std::string("writers/torch-2.15.0-") + job + "-w2-rank0");
        opt.kineto_path = name + "-kineto.json.gz";
        const std::string out = dir.file(std::string(job) + "-et.db");
        const imp::Result result = imp::import_file(name + "-et.json.gz", out, opt);
        const TraceData trace = mhc::trace::load_trace(out);
        CHECK(trace.meta.at("et.join_parent_disagreements") == "0");
        if (*other != 0) CHECK(trace.meta.at("et.join_parent_on_other_thread").rfind(other, 0) == 0);
        CHECK(trace.meta.at("et.join").find("joined") != std::string::npos);
        CHECK_FALSE(test::warned(result, "not inside their joined parent"));
        // The job identity and its clock come with the Kineto trace.
        CHECK(trace.meta.at("rank") == "0");
        CHECK(trace.meta.at("world_size") == "2");
        CHECK(trace.meta.count("time_origin_ns") == 1);
    }
}

TEST_CASE("et: torch 2.4.1's gloo worker-thread ops, which its Kineto trace does not hold, are said to be left out",
          "[import][et][ranks][writers]") {
    // FSDP1 rank 0 (make_ranks.py with 2.4.1): the execution trace records gloo's worker thread
    // (8 ops, rf_ids 18 to 25: the all-gather's copies) and Kineto only the gloo:all_gather range
    // there; the thread is not joined, its one storage left out, both said (2.15 records the
    // thread's ops: everything joined).
    test::TempDir dir;
    imp::Options opt;
    opt.warn = false;
    const std::string name = test::fixture("writers/torch-2.4.1-fsdp1-w2-rank0");
    opt.kineto_path = name + "-kineto.json.gz";
    const imp::Result result = imp::import_file(name + "-et.json.gz", dir.file("f1.db"), opt);
    const TraceData trace = mhc::trace::load_trace(dir.file("f1.db"));
    CHECK(trace.meta.at("et.threads_not_joined") == "1");
    CHECK(trace.meta.at("et.storages_left_out").rfind('1', 0) == 0);
    CHECK(trace.meta.at("et.join").rfind("253 of 261 ops joined (1 of 2 threads)", 0) == 0);
    CHECK(test::warned(result, "execution-trace thread 2 (8 ops): not joined"));
    CHECK(trace.meta.at("et.join_parent_disagreements") == "0");
    CHECK(trace.meta.at("rank") == "0");
}

TEST_CASE(
    "kineto: a DataLoader's shared-memory batches (MapAllocator) are host memory of their own, not the CPU "
    "allocator's",
    "[import][kineto][memory][writers]") {
    // make_paths.py dataloader: batches from DataLoader(num_workers=2). The main process maps each
    // batch the workers wrote (8,192 and 2,048 B: at/MapAllocator.cpp reports Bytes = size, Total
    // Allocated 0, Total Reserved = size; unmapped: -size, 0, 0), among the CPU allocator's events
    // (Total Reserved 0, its own running Total Allocated, 41,536 B before the first). Its peak, the
    // CPU allocator's Total Allocated plus the mappings live then: 150,668 B. Before 2026-12-06
    // one allocator: the first event (a batch's unmapping, Total Allocated 0) made the baseline
    // 10,240 B, the CPU allocator's 41,536 B were lost: peak 109,132 B, Total Allocated disagreeing
    // at 253 of 254 events, and a reserved peak of 8,192 B (one mapping's size).
    test::TempDir dir;
    imp::Result result;
    const TraceData trace = import_writer(dir, "torch-2.15.0-dataloader-kineto.json.gz", result);
    CHECK(mhc::trace::live_peak(trace, -1).bytes == 150668);
    CHECK(trace.meta.at("kineto.total_allocated.device-1") == "agrees at all 248 events");
    CHECK(trace.meta.at("kineto.baseline.device-1") == "41536 (Total Allocated before the first event)");
    CHECK(trace.meta.at("kineto.baseline.device-1.mapped") == "10240 (the least the signed sum of Bytes requires)");
    CHECK(trace.meta.at("kineto.mapped_memory").rfind("6 host [memory] events are PyTorch's file and shared-memory", 0) ==
          0);
    CHECK(trace.meta.at("kineto.reserved_peak.device-1") == "0");
    CHECK(trace.meta.count("kineto.reserved_peak.device-1.mapped") == 0);
    // Those 41,536 B are not this run's: make_paths.py records its modes in one process, and the dataloader mode
    // recorded alone counts 0 B before its first event (Total Allocated peaks at 109,132 B). They are bytes of the
    // compile mode before it (41,536 B, one model's gradients), freed while the profiler did not record, which the
    // CPU allocator's count keeps (make_options.py `twice`): said since 2026-12-06.
    REQUIRE(result.warnings.size() == 1);
    CHECK_THAT(result.warnings[0], Catch::Contains("of its 41536 B before the first host event (Total Allocated), "
                                                   "41536 B no free of the trace shows live"));
    // torch 2.4.1 writes the same (make_paths.py dataloader with 2.4.1): its CPU allocator's Total
    // Allocated agrees at every one of its events, and with the mappings live then peaks at 109,132 B
    // (the figure one allocator gave too, by chance; Total Allocated disagreed at its mappings' events).
    imp::Result old;
    const TraceData t241 = import_writer(dir, "torch-2.4.1-dataloader-kineto.json.gz", old);
    CHECK(mhc::trace::live_peak(t241, -1).bytes == 109132);
    CHECK(t241.meta.at("kineto.total_allocated.device-1") == "agrees at all 248 events");
    CHECK(t241.meta.at("kineto.mapped_memory").rfind("6 host", 0) == 0);
    // The same loop without workers has no mapping: nothing said.
    imp::Result plain;
    const TraceData cycle = import_writer(dir, "torch-2.15.0-repeat2-cycle1-kineto.json.gz", plain);
    CHECK(cycle.meta.count("kineto.mapped_memory") == 0);
}

TEST_CASE("kineto: which host [memory] events are MapAllocator's", "[import][kineto][memory]") {
    using imp::is_mapping;
    imp::KMemory event;
    event.device = -1;
    event.has_addr = true;
    event.addr = 4096;
    event.total = 0;
    event.bytes = 8192;
    event.reserved = 8192;
    CHECK(is_mapping(event, false, false, -1));   // a mapping: Total Reserved its size
    event.reserved = 0;
    CHECK_FALSE(is_mapping(event, false, false, -1));   // the CPU allocator's first allocation after all was freed
    event.bytes = -8192;
    CHECK(is_mapping(event, true, false, 100));           // the end of a live mapping
    CHECK_FALSE(is_mapping(event, false, true, 8192));    // the CPU allocator freeing its last block
    CHECK(is_mapping(event, false, false, -1));           // a mapping made before recording, the first event
    CHECK(is_mapping(event, false, false, 100));          // the same, the CPU allocator holding 100 B
    CHECK_FALSE(is_mapping(event, false, false, 8192));   // its 8,192 B freed: the CPU allocator's
    event.total = 64;
    CHECK_FALSE(is_mapping(event, true, false, 100));   // a running total: the CPU allocator's
    event.total = 0;
    event.device = 0;
    CHECK_FALSE(is_mapping(event, true, false, 100));   // GPU memory: never
}
