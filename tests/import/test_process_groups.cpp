// The communicator of a Kineto trace's NCCL kernels, read from the process group PyTorch's
// profiler writes on each (args.Process Group Name and Ranks, copied by Kineto from the
// collective's record_param_comms op): meta nccl.stream.N, by which simulate --ranks matches
// cross-rank kernels (docs/trace-format.md). Before 2026-12-07 no Kineto import wrote it, and a
// stream number stood for a communicator across ranks: two groups of the same stream number on
// different ranks (a TP group [0, 1] and [2, 3]) were one communicator of four.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

std::string meta_of(const TraceData& trace, const std::string& key) {
    auto it = trace.meta.find(key);
    return it == trace.meta.end() ? std::string("(absent)") : it->second;
}

// nccl_data.json.gz (rank 0 of 2, one process group) as rank `rank` of a job of four in two
// groups of two, [0, 1] named "1" and [2, 3] named "2", each on the stream the file's kernels run
// on (40), as a tensor-parallel group is on every rank of a symmetric program. Ranks 2 and 3 run
// their first `drop` collectives fewer (another pipeline stage's work): each group matches within
// itself, not with the other.
void write_rank(const std::string& path, int rank, int drop) {
    auto doc = nlohmann::json::parse(test::gunzip(test::pub("kineto/nccl_data.json.gz")));
    doc["distributedInfo"]["rank"] = rank;
    doc["distributedInfo"]["world_size"] = 4;
    const bool low = rank < 2;
    auto& events = doc["traceEvents"];
    int dropped = 0;
    std::vector<int64_t> gone;
    for (auto& event : events) {
        if (event.value("cat", "") != "kernel" || event.value("name", "").rfind("nccl", 0) != 0) continue;
        auto& args = event["args"];
        args["Process Group Name"] = low ? "1" : "2";
        args["Process Group Ranks"] = low ? "[0, 1]" : "[2, 3]";
        if (!low && dropped < drop) {
            gone.push_back(args["correlation"].get<int64_t>());
            ++dropped;
        }
    }
    // A dropped collective: its kernel and its launch (the call of its correlation id).
    events.erase(std::remove_if(events.begin(), events.end(),
                                [&](const nlohmann::json& event) {
                                    if (!event.contains("args") || !event["args"].contains("correlation")) return false;
                                    const auto& id = event["args"]["correlation"];
                                    return id.is_number_integer() &&
                                           std::find(gone.begin(), gone.end(), id.get<int64_t>()) != gone.end();
                                }),
                 events.end());
    // One allocation (the file records no memory; simulate needs some): 1 MiB at the first kernel.
    int64_t first = INT64_MAX;
    for (const auto& event : events)
        if (event.value("cat", "") == "kernel") first = std::min(first, event["ts"].get<int64_t>());
    events.push_back({{"ph", "i"}, {"s", "t"}, {"cat", "cpu_instant_event"}, {"name", "[memory]"}, {"pid", 1}, {"tid", 1},
                      {"ts", first},
                      {"args", {{"Device Type", 1}, {"Device Id", 0}, {"Addr", 4096}, {"Bytes", 1 << 20},
                                {"Total Allocated", 1 << 20}, {"Total Reserved", 2 << 20}}}});
    test::write_file(path, doc.dump());
}

}   // namespace

TEST_CASE("kineto: NCCL kernels' process groups name their stream's communicator", "[import][kineto][comm][public]") {
    test::TempDir dir;
    imp::Result result;
    // HTA's 2-rank NCCL run (nccl 2.17.1): 21 kernels on stream 40, group "0" (default_pg) of ranks 0 and 1.
    const TraceData nccl = test::import_public(dir, "kineto/nccl_data.json.gz", result);
    CHECK(meta_of(nccl, "nccl.stream.40") == "pg 0:0,1");
    CHECK(meta_of(nccl, "kineto.process_groups") ==
          "21 of 21 NCCL kernels name their process group: stream 40: process group 0 (ranks 0,1) 21 kernels");
    CHECK_FALSE(test::warned(result, "process group"));
    // TraceLens's B200 rank 0 of 8 (71 process groups in distributedInfo): one all-gather of group 3 on stream 7.
    const TraceData b200 = test::import_public(dir, "kineto/tracelens-b200-eager.json.gz", result);
    CHECK(meta_of(b200, "nccl.stream.7") == "pg 3:0,1,2,3,4,5,6,7");
    // TraceLens's MI300X DDP rank (ROCm, RCCL's Generic kernel): 12 of its 17 NCCL kernels on
    // stream 4 name group 0; the 5 others (no collective metadata) are on the same stream.
    const TraceData mi300x = test::import_public(dir, "kineto/tracelens-mi300x-resnet-act-checkpoint-ddp.json.gz", result);
    CHECK(meta_of(mi300x, "nccl.stream.4") == "pg 0:0,1,2,3,4,5,6,7");
    CHECK(meta_of(mi300x, "kineto.process_groups").rfind("12 of 17 NCCL kernels name their process group: stream 4: "
                                                         "process group 0 (ranks 0,1,2,3,4,5,6,7) 12 kernels; 5 naming none",
                                                         0) == 0);
    // A 2022 trace (HTA's df-index-resolver): its kernels name no group; nothing written, said.
    const TraceData old = test::import_public(dir, "kineto/hta-df-index-resolver.json.gz", result);
    CHECK(meta_of(old, "nccl.stream.14") == "(absent)");
    CHECK(meta_of(old, "kineto.process_groups").rfind("none of the 2020 NCCL kernels names its process group", 0) == 0);
    // No NCCL kernel: no key.
    const TraceData plain = test::import_public(dir, "kineto/simple_add_trace.json.gz", result);
    CHECK(meta_of(plain, "kineto.process_groups") == "(absent)");
}

TEST_CASE("kineto: a stream's communicator is written only where its kernels name one known group",
          "[import][kineto][comm]") {
    // Rank 0 of 64: group 5 of all 64 on stream 7 (its kernels list 30 ranks, then "...": the
    // members from distributedInfo.pg_config); groups 6 and 7 on stream 9 (streams of the pool
    // given again past 32 groups); group 8 cut short and not in pg_config (stream 11); group 9 not
    // holding rank 0 (stream 13); a kernel naming none (stream 15).
    std::string cut = "[";
    for (int r = 0; r < 30; ++r) cut += std::to_string(r) + ", ";
    cut += "...]";
    std::string all;
    for (int r = 0; r < 64; ++r) all += (r ? ", " : "") + std::to_string(r);
    auto kernel = [](int stream, int ts, const std::string& group) {
        return R"J({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": )J" +
               std::to_string(stream) + R"J(, "ts": )J" + std::to_string(ts) +
               R"J(, "dur": 5, "args": {"device": 0, "stream": )J" + std::to_string(stream) + group + "}}";
    };
    auto group = [](const std::string& name, const std::string& ranks) {
        return R"J(, "Process Group Name": ")J" + name + R"J(", "Process Group Ranks": ")J" + ranks + "\"";
    };
    const std::string doc = R"J({"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 64, "pg_config": [
        {"pg_name": "0", "pg_desc": "default_pg", "ranks": [)J" + all + R"J(]},
        {"pg_name": "5", "pg_desc": "undefined", "ranks": [)J" + all + R"J(]}]},
        "traceEvents": [)J" + kernel(7, 10, group("5", cut)) + ", " + kernel(9, 20, group("6", "[0, 2]")) + ", " +
                            kernel(9, 30, group("7", "[0, 4]")) + ", " + kernel(11, 40, group("8", cut)) + ", " +
                            kernel(13, 50, group("9", "[1, 2]")) + ", " + kernel(15, 60, "") + "]}";
    test::TempDir dir;
    test::write_file(dir.file("t.json"), doc);
    imp::Options opt;
    opt.warn = false;
    const imp::Result result = imp::import_file(dir.file("t.json"), dir.file("t.db"), opt);
    const TraceData trace = mhc::trace::load_trace(dir.file("t.db"));
    std::string members;
    for (int r = 0; r < 64; ++r) members += (r ? "," : "") + std::to_string(r);
    CHECK(meta_of(trace, "nccl.stream.7") == "pg 5:" + members);
    for (const char* stream : {"9", "11", "13", "15"}) CHECK(meta_of(trace, std::string("nccl.stream.") + stream) == "(absent)");
    CHECK(test::warned(result, "stream 9 carries the NCCL kernels of 2 process groups"));
    CHECK(test::warned(result, "stream 11's process group 8 lists its ranks cut short"));
    CHECK(test::warned(result, "stream 13's process group 9 does not list the trace's own rank 0"));
    const std::string said = meta_of(trace, "kineto.process_groups");
    CHECK(said.rfind("5 of 6 NCCL kernels name their process group: stream 7: process group 5 (ranks 0,1,", 0) == 0);
    CHECK(said.find("stream 9: process group 6 (ranks 0,2) 1 kernels; process group 7 (ranks 0,4) 1 kernels") !=
          std::string::npos);
    CHECK(said.find("stream 11: process group 8 (ranks not known) 1 kernels") != std::string::npos);
    CHECK(said.find("; stream 15: 1 naming none") != std::string::npos);
}

TEST_CASE("simulate --ranks: Kineto ranks of two process groups on one stream number are matched per group",
          "[import][kineto][comm][public][cli]") {
    // Four ranks in two groups of two on stream 40, ranks 2 and 3 running one collective fewer.
    // Before 2026-12-07 stream 40 was one communicator of all four ranks and the job was refused
    // (its ranks' collective counts differ); now each group matches its own two ranks.
    test::TempDir dir;
    std::string dbs;
    for (int rank = 0; rank < 4; ++rank) {
        const std::string json = dir.file("r" + std::to_string(rank) + ".json");
        write_rank(json, rank, 1);
        const std::string db = dir.file("r" + std::to_string(rank) + ".db");
        REQUIRE(test::run_mhc("-q import " + json + " -o " + db) == 0);
        dbs += " " + db;
        const TraceData trace = mhc::trace::load_trace(db);
        CHECK(meta_of(trace, "nccl.stream.40") == (rank < 2 ? "pg 1:0,1" : "pg 2:2,3"));
    }
    std::string err;
    CHECK(test::run_mhc("simulate --ranks" + dbs + " --capacity unlimited --no-store", &err) == 0);
    INFO(err);
    CHECK(err.find("stream 40") == std::string::npos);
}
