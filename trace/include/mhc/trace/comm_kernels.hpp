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

// The operation of one of NCCL's own device kernels, the kernels matched across ranks: a name
// that starts with "nccl" in that case (NCCL 2.x's "ncclKernel_" and "ncclDevKernel_"; RCCL keeps
// them) and contains "Kernel_", the operation being the letters and digits after it:
// "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)" -> "AllReduce", "ncclKernel_SendRecv" ->
// "SendRecv". "" for every other name, a communication kernel or not ("nccl:all_reduce", a CPU
// op; "NCCL_AllGather"; "my_ncclKernel_AllReduce").
std::string comm_kernel_op(std::string_view name);

}  // namespace mhc::trace
