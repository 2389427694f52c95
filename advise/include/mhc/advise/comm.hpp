#pragma once
// The collectives' time (docs/advise.md, "Data parallelism: communication time"): NCCL's ring
// model, t = base latency + steps x latency per step + S x steps / W / bus bandwidth, where S is
// the buffer NCCL is given (an all-gather's output, a reduce-scatter's input, an all-reduce's
// tensor), W the group's ranks and steps W-1 for an all-gather or reduce-scatter, 2(W-1) for an
// all-reduce (nccl-tests' busBw: algBw x (W-1)/W, x 2(W-1)/W for an all-reduce). Each collective
// runs on a stream of its own beside the compute stream (plan.hpp, Op::lane).
#include <cstdint>
#include <string>

namespace mhc::trace {
struct TraceData;
}

namespace mhc::advise {

struct CaptureInfo;
struct Base;
struct Plan;

enum class Collective : uint8_t { None, AllGather, ReduceScatter, AllReduce };

struct CommModel {
    int world = 1;                    // ranks of an all-gather / reduce-scatter (FSDP2's shard group)
    int replicate = 1;                // ranks of an all-reduce (DDP's group; HSDP's replicate group)
    bool hsdp = false;                // FSDP2 over shard x replicate groups (the line says both)
    double bus_Bps = 0;               // bus bandwidth per GPU (nccl-tests' busBw); 0: no collectives timed
    double base_latency_s = 8.4e-6;   // NCCL ring/Simple base latency (src/graph/tuning.cc)
    double step_latency_s = 3.4e-6;   // per ring step: NVLink 3.4 us, network 9.6 us (same file)
    int64_t ddp_bucket_bytes = -1;    // DDP's bucket_cap_mb in bytes (its all-reduce is split so); -1: no DDP
    int64_t ddp_first_bucket_bytes = 0;
    std::string link;      // where the bandwidth comes from, in words
    std::string assumed;   // what was assumed (world size or link), "" when all known

    int64_t ns(Collective kind, int64_t bytes) const;   // the time of one collective of `bytes`
};

// The model of a capture: world sizes from its meta (capture.fsdp2, capture.ddp), bandwidth from
// the capture's GPU (capture.gpu) over NVLink within a node, or `link` ("nvlink", "ib-ndr",
// "ib-hdr", or a bus bandwidth such as "200GB/s"); `link` empty: NVLink up to 8 ranks, else
// ib-ndr (both said in `assumed`). Throws mhc::Error (bad input) for a link it cannot read.
// Refuses (mhc::Error naming --comm-link) a link that is not nvlink, ib-ndr, ib-hdr or a
// bandwidth; front-ends call it before reading the trace.
void check_comm_link(const std::string& link);

CommModel comm_model(const trace::TraceData& trace_data, const CaptureInfo& info, const std::string& link);

// The collective a recorded kernel is, by name (c10d::_allgather_base_, ...).
Collective collective_of(const std::string& kernel_name);

// Puts the base's collectives on their streams with their modelled durations, FSDP2's
// all-gathers (and their copy-in) issued as soon as the previous group's copy-out is done (the
// CPU runs ahead of the GPU; FSDP2's rate limit), and DDP's all-reduce split into buckets of
// bucket_cap_mb issued as their gradients are ready. Called again after the model changes.
void apply_comm_model(Base& base, const CommModel& model);

// FSDP2's all-gathers (and their copy-in) issued when the step's previous all-gather's copy-out
// ends, over the ops `plan` still runs (a removed op is no copy-out; reshard.cpp calls it again
// after removing a group's backward gather). apply_comm_model calls it on the base.
void issue_all_gathers(const Base& base, Plan& plan);

std::string describe(const CommModel& model);

}   // namespace mhc::advise
