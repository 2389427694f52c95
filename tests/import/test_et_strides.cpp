// An execution trace's storage bytes from the shapes and strides the trace writes beside each tensor
// (schema 1.1.1, PyTorch 2.5 on): an expanded view (stride 0) has more elements than its storage
// holds, a strided slice spans more than its elements. tests/import/public_traces.py and
// et_kineto_pairs.py recompute every public and writer trace's storages the same way in Python.
#include <algorithm>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

// A leaf op of schema 1.1.1 reading one tensor `value` with `shape` and `strides` (JSON text;
// strides "" writes no strides key, as schemas before 1.1.1).
std::string leaf(int id, const std::string& value, const std::string& shape, const std::string& strides) {
    const std::string side = "{\"values\":[" + value + "],\"shapes\":[" + shape + "],\"types\":[\"Tensor(float)\"]" +
                             (strides.empty() ? "" : ",\"strides\":[" + strides + "]") + "}";
    return "{\"id\":" + std::to_string(id) + ",\"name\":\"aten::sum\",\"ctrl_deps\":1,\"inputs\":" + side +
           ",\"outputs\":{\"values\":[],\"shapes\":[],\"types\":[]" + (strides.empty() ? "" : ",\"strides\":[]") +
           "},\"attrs\":[{\"name\":\"rf_id\",\"type\":\"uint64\",\"value\":" + std::to_string(id) + "}]}";
}

std::map<std::string, int64_t> storage_bytes(const TraceData& trace) {
    std::map<std::string, int64_t> bytes;
    for (size_t a = 0; a < trace.allocations.size(); ++a)
        bytes[trace.str(trace.allocations.label[a])] = trace.allocations.bytes[a];
    return bytes;
}

}   // namespace

TEST_CASE("execution trace: a storage's bytes are what its tensors span by their strides, not their numel",
          "[import][et]") {
    // Storage 7: a [128] float tensor (512 B) and a view of it expanded to [32, 128] (strides
    // [0, 1], numel 4096), as ResNet's and every writer fixture's backward of a sum writes it (the
    // 2.15 writer's aten::as_strided). Storage 8: seen only as a [4, 4] slice with strides [8, 2]
    // from offset 1: it spans elements 1 to 31, 128 B. Before 2026-12-06 the bytes were (offset +
    // numel) * 4: 16,384 B and 68 B.
    test::TempDir dir;
    const std::string nodes = leaf(2, "[1,7,0,128,4,\"cuda:0\"]", "[128]", "[1]") + "," +
                              leaf(3, "[2,7,0,4096,4,\"cuda:0\"]", "[32,128]", "[0,1]") + "," +
                              leaf(4, "[3,8,1,16,4,\"cuda:0\"]", "[4,4]", "[8,2]");
    const std::string in = dir.file("strided_et.json"), out = dir.file("t.db");
    test::write_file(in, "{\"schema\":\"1.1.1-chakra.0.0.4\",\"pid\":1,\"nodes\":[" + nodes + "]}");
    imp::Options opt;
    opt.warn = false;
    imp::import_file(in, out, opt);
    const TraceData trace = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(trace).ok());
    CHECK(storage_bytes(trace) == std::map<std::string, int64_t>{{"storage 7", 512}, {"storage 8", 128}});

    // Without strides (schemas before 1.1.1 write shapes alone) the elements are numel: the same
    // ops give 16,384 B and 68 B, as the file says nothing more. The aten::expand that made tensor
    // 2 (an output with an id of its own on its input's storage, larger than it) is said, with the
    // 15,872 B storage 7 counts above its [128] tensor.
    const std::string expand =
        "{\"id\":5,\"name\":\"aten::expand\",\"ctrl_deps\":1,\"inputs\":{\"values\":[[1,7,0,128,4,\"cuda:0\"]],"
        "\"shapes\":[[128]],\"types\":[\"Tensor(float)\"]},\"outputs\":{\"values\":[[2,7,0,4096,4,\"cuda:0\"]],"
        "\"shapes\":[[32,128]],\"types\":[\"Tensor(float)\"]},\"attrs\":[]}";
    const std::string no_strides = leaf(2, "[1,7,0,128,4,\"cuda:0\"]", "[128]", "") + "," + expand + "," +
                                   leaf(3, "[2,7,0,4096,4,\"cuda:0\"]", "[32,128]", "") + "," +
                                   leaf(4, "[3,8,1,16,4,\"cuda:0\"]", "[4,4]", "");
    test::write_file(in, "{\"schema\":\"1.1.0-chakra.0.0.4\",\"pid\":1,\"nodes\":[" + no_strides + "]}");
    const imp::Result result = imp::import_file(in, out + "2", opt);
    const TraceData numel = mhc::trace::load_trace(out + "2");
    CHECK(storage_bytes(numel) == std::map<std::string, int64_t>{{"storage 7", 16384}, {"storage 8", 68}});
    const std::string said = "1 view larger than the tensor viewed (the first made by aten::expand, node id 5): "
                             "without strides (written from schema 1.1.1 on) their storages count the views' "
                             "elements, 15872 B more than their other tensors span";
    CHECK(numel.meta.at("et.broadcast_views") == said);
    CHECK(std::find(result.warnings.begin(), result.warnings.end(),
                    said + ": those storages' bytes may be too large by as much") != result.warnings.end());
    // With strides the view is spanned right and nothing is said.
    CHECK(trace.meta.count("et.broadcast_views") == 0);
}

TEST_CASE("execution trace: strides that do not describe their tensor are refused, one line naming the node",
          "[import][et]") {
    test::TempDir dir;
    const std::string in = dir.file("bad_strides_et.json");
    auto refused = [&](const std::string& shape, const std::string& strides) {
        test::write_file(in, "{\"schema\":\"1.1.1-chakra.0.0.4\",\"pid\":1,\"nodes\":[" +
                                 leaf(2, "[1,7,0,16,4,\"cuda:0\"]", shape, strides) + "]}");
        std::string err;
        CHECK(test::run_mhc("import " + in + " -o " + dir.file("t.db") + " --force", &err) == 2);
        CHECK(err.find(in) != std::string::npos);
        CHECK(err.find("nodes[0]: tensor shape " + shape) != std::string::npos);
        CHECK(err.find("(inputs.values[0])") != std::string::npos);
        CHECK(std::count(err.begin(), err.end(), '\n') == 1);
        return err;
    };
    CHECK(refused("[4,4]", "[4]").find("are not one stride per dimension") != std::string::npos);
    CHECK(refused("[4,4]", "[4,-1]").find("are not sizes and strides in [0, 2^40]") != std::string::npos);
    CHECK(refused("[4,4]", "[4,\"1\"]").find("are not sizes and strides in [0, 2^40]") != std::string::npos);
    CHECK(refused("[4,5]", "[5,1]").find("do not hold numel 16 elements") != std::string::npos);
    CHECK(refused("[2,8]", "[1099511627776,1]").find("span more than 2^40 elements") != std::string::npos);
}

TEST_CASE("execution trace: ResNet's expanded gradients (schema 1.1.1) count their storage's bytes once",
          "[import][et][public]") {
    // param's resnet_1gpu_et (1.1.1): storage 3207 is a [32, 2048] gradient (262,144 B) expanded to
    // [32, 2048, 7, 7] (strides [2048, 1, 0, 0]) by the backward of the average pool; in 3164 and
    // 8993 the loss's one-element gradient is expanded to [32, 1000] (strides [0, 0]), storages
    // whose other tensors span 512 and 4,000 B. Read with Python's json from the file. Before
    // 2026-12-06: 12,845,056, 128,000 and 128,000 B, and the device's peak 3.46 GiB, not 3.44 GiB.
    test::TempDir dir;
    imp::Result result;
    const TraceData trace = test::import_public(dir, "chakra/param-resnet-1gpu-et-1.1.1.json.gz", result);
    // The largest allocation of each id (its address is given again over the steps: "storage N #2").
    auto largest = [&](const std::string& storage) {
        int64_t most = 0;
        for (const auto& [label, bytes] : storage_bytes(trace))
            if (label == storage || label.rfind(storage + " #", 0) == 0) most = std::max(most, bytes);
        return most;
    };
    CHECK(largest("storage 3207") == 262144);
    CHECK(largest("storage 3164") == 512);
    CHECK(largest("storage 8993") == 4000);
    // param's trace of another run of the same ResNet in schema 1.1.0 (no strides) counts those
    // views' elements, and says so with the bytes the 1.1.1 trace's strides take off: 12,834,400 B,
    // from its six aten::expand outputs.
    const TraceData older = test::import_public(dir, "chakra/param-resnet-et-1.1.0-chakra.0.0.4.json.gz", result);
    const std::string& said = older.meta.at("et.broadcast_views");
    CHECK(said.rfind("6 views larger than the tensor viewed (the first made by aten::expand", 0) == 0);
    CHECK(said.find(", 12834400 B more than their other tensors span") != std::string::npos);
}

TEST_CASE("execution trace: a storage id given again to new memory is a new allocation", "[import][et]") {
    // The observer names a storage by its address (checked on the torch 2.15 writer pair: the
    // aten::empty_strided that gives storage 386 again allocates 4 B at the address where
    // aten::sqrt's 64 B of that id were, in the Kineto trace). Ops 2-3 use storage 7, op 4 makes
    // it again (an output none of its inputs holds), op 5 reads that one. A record_param_comms
    // range writing its collective's output list, and an in-place op, begin nothing. Before
    // 2026-12-06 storage 7 was one allocation alive from op 2 to op 7.
    test::TempDir dir;
    auto op = [](int id, const std::string& name, const std::string& in, const std::string& out) {
        auto side = [](const std::string& tensor) {
            return "{\"values\":[" + tensor + "],\"shapes\":[" + (tensor.empty() ? "" : "[16]") + "],\"types\":[" +
                   (tensor.empty() ? "" : "\"Tensor(float)\"") + "]}";
        };
        return "{\"id\":" + std::to_string(id) + ",\"name\":\"" + name + "\",\"ctrl_deps\":1,\"inputs\":" + side(in) +
               ",\"outputs\":" + side(out) + ",\"attrs\":[]}";
    };
    const std::string t7a = "[1,7,0,16,4,\"cuda:0\"]", t7b = "[2,7,0,16,4,\"cuda:0\"]";
    const std::string nodes = op(2, "aten::empty", "", t7a) + "," + op(3, "aten::relu_", t7a, t7a) + "," +
                              op(4, "aten::empty", "", t7b) + "," + op(5, "aten::relu_", t7b, t7b) + "," +
                              op(6, "record_param_comms", "", t7b) + "," + op(7, "aten::neg", t7b, "");
    const std::string in = dir.file("again_et.json"), out = dir.file("t.db");
    test::write_file(in, "{\"schema\":\"1.1.0-chakra.0.0.4\",\"pid\":1,\"nodes\":[" + nodes + "]}");
    imp::Options opt;
    opt.warn = false;
    imp::import_file(in, out, opt);
    const TraceData trace = mhc::trace::load_trace(out);
    REQUIRE(trace.allocations.size() == 2);
    std::map<std::string, std::pair<int64_t, int64_t>> lives;
    for (size_t a = 0; a < trace.allocations.size(); ++a)
        lives[trace.str(trace.allocations.label[a])] = {trace.allocations.t_alloc[a], trace.allocations.t_free[a]};
    // The k-th leaf op (from 1) is [k, k + 1) in an execution trace alone.
    CHECK(lives == std::map<std::string, std::pair<int64_t, int64_t>>{{"storage 7", {1, 3}}, {"storage 7 #2", {3, 7}}});
    CHECK(trace.meta.at("et.storage_ids_given_again").rfind("1 allocations on a storage id an earlier op used", 0) == 0);
}

TEST_CASE("execution trace: ResNet's storage ids given again over its three steps are allocations of their own",
          "[import][et][public]") {
    // param's resnet_1gpu_et (1.1.1): 340 storage ids begin 1,098 allocations after their first
    // (aten::empty 810, threshold_backward 140, cudnn_convolution 109, ...; counted with Python's
    // json, tests/import/public_traces.py et_allocations). Before 2026-12-06 its 1,312 ids were
    // 1,312 allocations, each alive from its first use to its last, and the device's peak was
    // 3.44 GiB where its allocations' is 1,990,891,304 B (1.85 GiB).
    test::TempDir dir;
    imp::Result result;
    const TraceData trace = test::import_public(dir, "chakra/param-resnet-1gpu-et-1.1.1.json.gz", result);
    CHECK(trace.allocations.size() == 2410);
    CHECK(trace.meta.at("et.storage_ids_given_again").rfind("1098 allocations", 0) == 0);
    std::vector<std::pair<int64_t, int64_t>> changes;
    for (size_t a = 0; a < trace.allocations.size(); ++a)
        if (trace.allocations.device[a] == 0) {
            changes.emplace_back(trace.allocations.t_alloc[a], trace.allocations.bytes[a]);
            changes.emplace_back(trace.allocations.t_free[a], -trace.allocations.bytes[a]);
        }
    std::sort(changes.begin(), changes.end());   // a free before an allocation at one instant
    int64_t live = 0, peak = 0;
    for (const auto& [t, bytes] : changes) peak = std::max(peak, live += bytes);
    CHECK(peak == 1990891304);
}
