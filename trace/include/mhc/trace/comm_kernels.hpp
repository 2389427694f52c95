#pragma once
// Kernels of a collective-communication library, known by their names: NVIDIA's NCCL
// ("ncclKernel_AllReduce_RING_LL_Sum_float", "ncclDevKernel_SendRecv(...)") and AMD's RCCL,
// a port of NCCL that keeps its kernel names and whose own additions say "rccl". The one answer
// for the simulator (link contention, cross-rank matching) and the viewer (kernel families).
#include <string>
#include <string_view>

namespace mhc::trace {

// True when `name` contains "nccl" or "rccl", in any case ("void ncclDevKernel_...",
// "rcclGenericKernel", "NCCL_AllReduce"). Names of the operations alone ("AllReduce") are not.
bool is_comm_kernel(std::string_view name);

// The operation a communication kernel runs, as its name says after "Kernel_":
// "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)" -> "AllReduce", "ncclKernel_SendRecv" ->
// "SendRecv"; "" when `name` is not a communication kernel or says no operation.
std::string comm_kernel_op(std::string_view name);

}  // namespace mhc::trace
