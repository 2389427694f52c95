// The one answer to "is this an NCCL (or RCCL) kernel?" (mhc/trace/comm_kernels.hpp) over the
// kernel names of real public traces (tests/data/public, SOURCES.md): every NCCL kernel the
// files hold, counted by `zcat FILE | grep -c '"name": "nccl[A-Z]'` on their kernel events,
// and none of the rest, on NVIDIA and AMD (MI300X) runs alike.
#include <catch2/catch.hpp>

#include <map>

#include "mhc/trace/comm_kernels.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::comm_kernel_op;
using mhc::trace::is_comm_kernel;

namespace {

// Kernels by operation ("" for kernels that are not communication) in an imported public trace.
std::map<std::string, int> ops_of(const std::string& public_file) {
    test::TempDir dir;
    imp::Options opt;
    opt.warn = false;
    const std::string out = dir.file("t.db");
    imp::import_file(test::pub(public_file), out, opt);
    const mhc::trace::TraceData trace = mhc::trace::load_trace(out);
    std::map<std::string, int> ops;
    for (size_t k = 0; k < trace.kernels.size(); ++k) {
        const std::string& name = trace.str(trace.kernels.name[k]);
        const std::string op = comm_kernel_op(name);
        CHECK(is_comm_kernel(name) == !op.empty());
        ++ops[op];
    }
    return ops;
}

}  // namespace

TEST_CASE("NCCL kernels of real public traces are found, with their operation", "[comm]") {
    // PyTorch profiler, 2 ranks' NCCL run: 2700 kernels, of which 15 all-reduces and 6 broadcasts.
    const auto nccl = ops_of("kineto/nccl_data.json.gz");
    CHECK(nccl.size() == 3);
    CHECK(nccl.at("AllReduce") == 15);
    CHECK(nccl.at("Broadcast") == 6);
    CHECK(nccl.at("") == 2700 - 21);
    // Holistic Trace Analysis's test trace: 2020 ncclKernel_AllReduce_RING_LL_Sum_float.
    const auto hta = ops_of("kineto/hta-df-index-resolver.json.gz");
    CHECK(hta.size() == 2);
    CHECK(hta.at("AllReduce") == 2020);
    // An AMD MI300X run (TraceLens) and a ResNet-50 run without communication: none.
    CHECK(ops_of("kineto/tracelens-mi300x-normalization-layer-test.json.gz").size() == 1);
    CHECK(ops_of("kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz").size() == 1);
}

TEST_CASE("NCCL and RCCL kernel names as profilers spell them", "[comm]") {
    // The two forms of the public traces above; newer NCCL's ncclDevKernel_* (whose Generic
    // kernel is also what RCCL, which keeps NCCL's kernel names, shows in AMD profiles).
    CHECK(comm_kernel_op("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == "AllReduce");
    CHECK(comm_kernel_op("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)") == "Broadcast");
    CHECK(comm_kernel_op("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == "SendRecv");
    CHECK(comm_kernel_op("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
          "ReduceScatter");
    // Communication kernels, but not NCCL's own spelling of a device kernel: no operation.
    CHECK(is_comm_kernel("void ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
    CHECK(comm_kernel_op("void ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)").empty());
    CHECK(is_comm_kernel("NCCLDevKernel_AllReduce_Sum_f32_RING_LL"));
    CHECK(comm_kernel_op("NCCLDevKernel_AllReduce_Sum_f32_RING_LL").empty());
    CHECK(comm_kernel_op("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)") == "Generic");
    CHECK(is_comm_kernel("rcclGenericKernel"));   // made up: no public trace here has an rccl-named kernel
    CHECK(is_comm_kernel("NCCL_AllGather"));
    CHECK(comm_kernel_op("NCCL_AllGather").empty());
    CHECK(comm_kernel_op("nccl:all_reduce").empty());   // the CPU op of a collective
    CHECK(comm_kernel_op("my_ncclKernel_AllReduce").empty());
    // Operation names alone, and kernels that merely reduce, are not communication kernels.
    CHECK_FALSE(is_comm_kernel("AllReduce"));
    CHECK_FALSE(is_comm_kernel("void at::native::reduce_kernel<512, 1>(...)"));
    CHECK_FALSE(is_comm_kernel("ampere_sgemm_128x64_nn"));
    CHECK(comm_kernel_op("ampere_sgemm_128x64_nn").empty());
}
