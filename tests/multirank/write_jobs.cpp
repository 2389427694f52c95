// Writes the hand-built multi-rank jobs that tests/multirank/failures_test.sh runs with and
// without mpirun (their figures are worked out in tests/sim/test_multirank.cpp):
//   DIR/oom3.rank{0,1,2}.db  rank 2 runs out of memory at 1500 B; rank 0 waits for it on
//                            communicator a, rank 1 for rank 0 on communicator b
//   DIR/p2p.rank{0,1}.db     one SendRecv each; rank 1 has no accesses at all
//   DIR/mismatch.rank{0,1}.db an AllReduce on rank 0 where rank 1 has an AllGather
//   DIR/slow.rank{0,1}.db    rank 1 must swap out 8 TiB: at 1 kB/s, past the time range
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "mhc/trace/store.hpp"

using namespace mhc;

namespace {

constexpr const char* kAllReduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
constexpr const char* kAllGather = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
constexpr const char* kSendRecv = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)";

struct Alloc { int64_t bytes, t_alloc, t_free; };
struct Use { int alloc; trace::AccessMode mode; };
struct Kern { int64_t start, end, stream; std::string name; std::vector<Use> uses; };

void write_rank(const std::string& path, int rank, const std::map<std::string, std::string>& meta,
                const std::vector<Alloc>& allocs, const std::vector<Kern>& kernels) {
    std::filesystem::remove(path);
    trace::Writer w(path);
    w.set_meta("source", "tests/multirank/write_jobs");
    // The job identity (docs/trace-format.md): the file name's job, its ranks on one clock.
    const std::string name = std::filesystem::path(path).filename().string();
    const std::string job = name.substr(0, name.find('.'));
    w.set_meta("job.id", "tests/multirank/" + job);
    w.set_meta("world_size", job == "oom3" ? "3" : "2");
    w.set_meta("time_origin_ns", "0");
    w.set_meta("rank", std::to_string(rank));
    for (const auto& [k, v] : meta) w.set_meta(k, v);
    for (size_t i = 0; i < allocs.size(); ++i) {
        trace::Allocation a;
        a.id = static_cast<int64_t>(i) + 1;
        a.bytes = allocs[i].bytes;
        a.t_alloc = allocs[i].t_alloc;
        a.t_free = allocs[i].t_free;
        w.add(a);
    }
    for (size_t i = 0; i < kernels.size(); ++i) {
        trace::Kernel k;
        k.id = static_cast<int64_t>(i) + 1;
        k.stream = kernels[i].stream;
        k.name = w.intern(kernels[i].name);
        k.t_start = kernels[i].start;
        k.t_end = kernels[i].end;
        w.add(k);
        for (const Use& u : kernels[i].uses) w.add(trace::Access{k.id, u.alloc + 1, u.mode});
    }
    w.finish();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: write_jobs DIR\n");
        return 2;
    }
    const std::string d = std::string(argv[1]) + "/";
    const int64_t never = trace::kNoTime;
    const std::map<std::string, std::string> a = {{"nccl.stream.13", "a:0,2"}};
    const std::map<std::string, std::string> ab = {{"nccl.stream.13", "a:0,2"}, {"nccl.stream.21", "b:0,1"}};
    const std::map<std::string, std::string> b = {{"nccl.stream.21", "b:0,1"}};
    write_rank(d + "oom3.rank0.db", 0, ab, {{100, 0, never}}, {{10, 20, 13, kAllReduce, {}}, {30, 40, 21, kAllReduce, {}}});
    write_rank(d + "oom3.rank1.db", 1, b, {{100, 0, never}}, {{30, 40, 21, kAllReduce, {}}});
    write_rank(d + "oom3.rank2.db", 2, a, {{2000, 0, never}}, {{10, 20, 13, kAllReduce, {}}});

    const std::map<std::string, std::string> pp = {{"nccl.stream.23", "pp:0,1"}};
    write_rank(d + "p2p.rank0.db", 0, pp, {{1 << 20, 0, never}},
               {{10, 20, 23, kSendRecv, {}}, {30, 40, 0, "gemm", {{0, trace::AccessMode::Read}}}});
    write_rank(d + "p2p.rank1.db", 1, pp, {{1 << 20, 0, never}}, {{10, 20, 23, kSendRecv, {}}});

    const std::map<std::string, std::string> dp = {{"nccl.stream.5", "dp:0,1"}};
    write_rank(d + "mismatch.rank0.db", 0, dp, {{100, 0, never}}, {{10, 20, 5, kAllReduce, {}}});
    write_rank(d + "mismatch.rank1.db", 1, dp, {{100, 0, never}}, {{10, 20, 5, kAllGather, {}}});

    // Rank 1: T (8 TiB) written at [1, 2]; U (8 TiB) at 3 evicts it in 8 TiB of capacity.
    const int64_t big = int64_t{1} << 43;
    write_rank(d + "slow.rank0.db", 0, dp, {{100, 0, never}}, {{10, 20, 5, kAllReduce, {}}});
    write_rank(d + "slow.rank1.db", 1, dp, {{big, 0, never}, {big, 3, never}},
               {{1, 2, 0, "gemm", {{0, trace::AccessMode::Write}}}, {10, 20, 5, kAllReduce, {}}});
    return 0;
}
