// The collectives' time (comm.hpp; docs/advise.md, "Data parallelism: communication time").
#include "mhc/advise/comm.hpp"

#include <algorithm>
#include <cmath>

#include "mhc/advise/gpus.hpp"
#include "mhc/advise/plan.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/trace/data_parallel.hpp"

namespace mhc::advise {

namespace {

// NCCL's ring figures (NVIDIA/nccl src/graph/tuning.cc, ring with the Simple protocol that
// large messages use): 8.4 us base latency, 3.4 us per step over NVLink, 9.6 us over the network.
constexpr double kNvlinkStep = 3.4e-6, kNetStep = 9.6e-6;
// Inter-node bandwidth per GPU: one NIC per GPU, as DGX H100 (8 x ConnectX-7 400 Gb/s) and DGX A100
// (8 x ConnectX-6 200 Gb/s) have: 400 Gb/s = 50 GB/s (InfiniBand NDR), 200 Gb/s = 25 GB/s (HDR).
constexpr double kNdr = 50e9, kHdr = 25e9;
constexpr int kGpusPerNode = 8;

// DDP's gradient buckets of bucket_cap_mb MiB (25 when the capture does not say); `first`: the first's.
int64_t bucket_bytes(double mb, int64_t& first) {
    if (mb < 0) mb = 25;
    // mb <= 2^36 (data_parallel_sizes): at most 2^56 bytes, no overflow in the cast.
    const auto cap = static_cast<int64_t>(mb * 1024 * 1024);
    // DDP's first bucket is 1 MiB when bucket_cap_mb is left at 25 (torch/nn/parallel/distributed.py,
    // _DEFAULT_FIRST_BUCKET_BYTES), else bucket_cap_mb too
    first = mb == 25 ? static_cast<int64_t>(1) << 20 : cap;
    return cap;
}

}   // namespace

Collective collective_of(const std::string& name) {
    if (name == "c10d::_allgather_base_" || name == "c10d::allgather_") return Collective::AllGather;
    if (name == "c10d::_reduce_scatter_base_" || name == "c10d::reduce_scatter_") return Collective::ReduceScatter;
    if (name.rfind("c10d::allreduce_", 0) == 0) return Collective::AllReduce;
    return Collective::None;
}

int64_t CommModel::ns(Collective kind, int64_t bytes) const {
    const int ranks = kind == Collective::AllReduce ? replicate : world;
    if (kind == Collective::None || ranks <= 1 || bus_Bps <= 0 || bytes <= 0) return 0;
    const int steps = kind == Collective::AllReduce ? 2 * (ranks - 1) : ranks - 1;
    const double seconds = base_latency_s + steps * step_latency_s +
                           static_cast<double>(bytes) * steps / ranks / bus_Bps;
    return static_cast<int64_t>(std::ceil(seconds * 1e9 - 1e-6));   // whole ns; rounding noise below 1e-6 ns dropped
}

void check_comm_link(const std::string& link) {
    if (link == "nvlink" || link == "ib-ndr" || link == "ib-hdr") return;
    double bps = 0;
    try {
        bps = parse_bandwidth(link);
    } catch (const Error&) {
        throw Error(refused_value("--comm-link", link, "not nvlink, ib-ndr, ib-hdr or a bandwidth such as 200GB/s"));
    }
    // The link's bounds (docs/simulator.md): 0.001B/s made a collective last past 2^63 ns.
    if (bps < sim::kMinBandwidthBps || bps > sim::kMaxBandwidthBps)
        throw Error(refused_value("--comm-link", link, "not in [1kB/s, 1000TB/s]"));
}

CommModel comm_model(const trace::TraceData& trace_data, const CaptureInfo& info, const std::string& link) {
    CommModel model;
    if (info.data_parallel.empty()) return model;
    const trace::DataParallelSizes sizes = trace::data_parallel_sizes(info.data_parallel_detail);
    if (!sizes.error.empty())   // mhc check refuses it first, with the same words
        throw Error(trace_data.path + ": meta capture." + (info.data_parallel == "ddp" ? "ddp" : "fsdp2") + ": " +
                    sizes.error);
    int shard = sizes.world;
    const int replicate = sizes.replicate;
    std::string assumed;
    if (shard <= 0) {
        shard = 8;
        assumed = "world 8 (the capture does not say)";
    }
    model.world = shard;
    model.replicate = info.data_parallel == "ddp" ? shard : std::max(1, replicate);
    model.hsdp = info.data_parallel != "ddp" && replicate > 1;
    if (info.data_parallel == "ddp")
        model.ddp_bucket_bytes = bucket_bytes(sizes.bucket_cap_mb, model.ddp_first_bucket_bytes);
    const int ranks = info.data_parallel == "ddp" ? shard : shard * std::max(1, replicate);
    std::string kind = link;
    if (kind.empty()) {
        kind = ranks <= kGpusPerNode ? "nvlink" : "ib-ndr";
        assumed += std::string(assumed.empty() ? "" : "; ") +
                   (ranks <= kGpusPerNode ? "one node (NVLink)" : "nodes of 8 GPUs joined by InfiniBand NDR");
    }
    if (kind == "nvlink") {
        std::string gpu = trace_data.meta_or("capture.gpu", "");
        const GpuMemory* spec = find_gpu(gpu);
        if (spec == nullptr) {
            spec = &gpu_memory("h100-sxm");
            assumed += std::string(assumed.empty() ? "" : "; ") + "an H100 SXM's NVLink (the capture names no GPU)";
            gpu = "h100-sxm";
        }
        model.bus_Bps = spec->link_Bps;
        model.step_latency_s = kNvlinkStep;
        model.link = gpu + " " + spec->link_name;
    } else if (kind == "ib-ndr" || kind == "ib-hdr") {
        model.bus_Bps = kind == "ib-ndr" ? kNdr : kHdr;
        model.step_latency_s = kNetStep;
        model.link = kind == "ib-ndr" ? "InfiniBand NDR, 400 Gb/s per GPU" : "InfiniBand HDR, 200 Gb/s per GPU";
    } else {
        check_comm_link(link);
        model.bus_Bps = parse_bandwidth(kind);
        model.step_latency_s = ranks <= kGpusPerNode ? kNvlinkStep : kNetStep;
        model.link = "--comm-link " + link;
    }
    model.assumed = assumed;
    return model;
}

namespace {

// The largest buffer a collective accesses: what NCCL is given (all-gather output, reduce-scatter input).
int64_t collective_bytes(const Plan& plan, const Op& op) {
    int64_t bytes = 0;
    for (const PlanAccess& access : op.acc)
        bytes = std::max(bytes, plan.allocs[static_cast<size_t>(access.alloc)].bytes);
    return bytes;
}

}   // namespace

// FSDP2's all-gathers (with their copy-in) are issued when the step's previous all-gather's copy-out
// is done, among the ops the plan still runs: a setting that removed a group's backward gather
// (reshard_after_forward false) leaves no copy-out at its place, so the next gather waits for the
// copy-out of the gather before it, as FSDP2 itself runs a step captured with that group kept.
void issue_all_gathers(const Base& base, Plan& plan) {
    int32_t prev_output = -1, prev_step = -1;
    for (int32_t s = 0; s < plan.recorded; ++s) {
        Op& op = plan.ops[static_cast<size_t>(s)];
        if (op.kind != OpKind::Kernel ||
            collective_of(plan.strings[static_cast<size_t>(op.name)]) != Collective::AllGather || op.acc.empty())
            continue;
        const int32_t output = op.acc.front().alloc;
        const int32_t made_by = base.creator[static_cast<size_t>(output)];
        int32_t after = -1;   // the previous all-gather's copy-out: its last reader before this one's copy-in
        if (prev_output >= 0 && base.step[static_cast<size_t>(s)] == prev_step)
            base.for_acc(prev_output, [&](int32_t seq, trace::AccessMode mode) {
                const Op& reader = plan.ops[static_cast<size_t>(seq)];
                if (seq < (made_by >= 0 ? made_by : s) && mode == trace::AccessMode::Read && reader.lane == 0 &&
                    reader.kind != OpKind::Mark)
                    after = seq;
            });
        op.issue_after = after;
        if (made_by >= 0 && made_by < s && plan.ops[static_cast<size_t>(made_by)].lane == 1)
            plan.ops[static_cast<size_t>(made_by)].issue_after = after;
        prev_output = output;
        prev_step = base.step[static_cast<size_t>(s)];
    }
}

namespace {

// DDP's all-reduce as buckets: the capture's one bucket (DDP's first step) split, in the order the
// backward writes gradients into it, into buckets of bucket_cap_mb (the first of 1 MiB by default),
// each issued after the write that fills it; the recorded all-reduce carries the rest.
void split_ddp_buckets(Base& base, const CommModel& model) {
    Plan& plan = base.plan;
    const std::string prefix = "DDP gradient bucket";
    for (int32_t s = 0; s < plan.recorded; ++s) {
        const Op& ar = plan.ops[static_cast<size_t>(s)];   // (add_op below moves the ops: not used after it)
        if (collective_of(plan.strings[static_cast<size_t>(ar.name)]) != Collective::AllReduce || ar.acc.size() != 1)
            continue;
        const int32_t bucket = ar.acc.front().alloc, step = ar.step;
        if (plan.strings[static_cast<size_t>(plan.allocs[static_cast<size_t>(bucket)].label)].rfind(prefix, 0) != 0)
            continue;
        std::vector<std::pair<int32_t, int64_t>> writes;   // (seq, gradient bytes) in this pass's backward
        base.for_acc(bucket, [&](int32_t seq, trace::AccessMode mode) {
            if (seq >= s || mode == trace::AccessMode::Read ||
                base.pass[static_cast<size_t>(seq)] != base.pass[static_cast<size_t>(s)] ||
                base.phase[static_cast<size_t>(seq)] != Phase::Backward ||
                collective_of(plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(seq)].name)]) !=
                    Collective::None)
                return;
            int64_t bytes = 0;
            for (const PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc)
                if (access.alloc != bucket &&
                    plan.allocs[static_cast<size_t>(access.alloc)].category == trace::Category::Grad)
                    bytes += plan.allocs[static_cast<size_t>(access.alloc)].bytes;
            writes.emplace_back(seq, bytes);
        });
        int64_t total = ar.bytes, filled = 0, cap = model.ddp_first_bucket_bytes;
        const auto name = plan.intern("c10d::allreduce_ (DDP bucket)");
        for (auto [seq, bytes] : writes) {
            filled += bytes;
            // a bucket holds one gradient at least: with bucket_cap_mb 0 (DDP then makes a bucket
            // per gradient) a write of no gradient bytes (the hook's div_) closes none
            if (filled <= 0 || filled < cap || filled >= total) continue;
            Op chunk;
            chunk.name = name;
            chunk.lane = 2;
            chunk.bytes = filled;
            chunk.step = step;
            chunk.phase = Phase::Backward;
            chunk.anchor = seq;
            const int32_t op = plan.add_op(chunk);
            plan.insert_after(seq, op);
            base.comm_chunks.push_back(op);
            total -= filled;
            filled = 0;
            cap = model.ddp_bucket_bytes;
        }
        plan.ops[static_cast<size_t>(s)].bytes = total;
    }
}

}   // namespace

void apply_comm_model(Base& base, const CommModel& model) {
    Plan& plan = base.plan;
    if (!base.comm_placed) {
        for (int32_t s = 0; s < plan.recorded; ++s) {
            Op& op = plan.ops[static_cast<size_t>(s)];
            const std::string& name = plan.strings[static_cast<size_t>(op.name)];
            const Collective kind = collective_of(name);
            if (kind == Collective::None && name != "fsdp::all_gather_copy_in") continue;
            op.lane = kind == Collective::AllGather || kind == Collective::None ? 1 : 2;
            if (kind != Collective::None) op.bytes = collective_bytes(plan, op);
            // launched from the host as the compute stream runs: no host time of its own (the
            // copy-in too: before 2026-12-06 it kept its recorded gap when issued at the compute
            // stream, so a gap before the step's first copy-in delayed the gathers by it)
            op.gap = 0;
        }
        issue_all_gathers(base, plan);
        // bucket_cap_mb 0 splits too, a bucket per gradient (before 2026-12-06 it left the capture's
        // one all-reduce whole, as if DDP overlapped nothing)
        if (model.ddp_bucket_bytes >= 0) split_ddp_buckets(base, model);
        base.comm_placed = true;
    }
    for (size_t i = 0; i < plan.ops.size(); ++i) {
        Op& op = plan.ops[i];
        const Collective kind = collective_of(plan.strings[static_cast<size_t>(op.name)]);
        if (kind != Collective::None && op.kind == OpKind::Kernel && model.bus_Bps > 0)
            op.duration = model.ns(kind, op.bytes);
    }
    base.comm = model;
}

std::string describe(const CommModel& model) {
    if (model.bus_Bps <= 0) return "";
    char line[256];
    std::snprintf(line, sizeof line, "ring, world %d%s, %s bus bandwidth, %.1f us + %.1f us per ring step", model.world,
                  model.hsdp ? (" x " + std::to_string(model.replicate)).c_str() : "",
                  format_rate(model.bus_Bps).c_str(), model.base_latency_s * 1e6, model.step_latency_s * 1e6);
    return std::string(line) + " (" + model.link + ")" + (model.assumed.empty() ? "" : "; assumed: " + model.assumed);
}

}   // namespace mhc::advise
