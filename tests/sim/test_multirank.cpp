// Coupled multi-rank simulation (docs/simulator.md, "Coupled ranks"): hand-built two-rank
// traces with the figures worked out by hand, mismatched collectives, and the identity on
// every rank of generated pipeline and data-parallel jobs.
#include <catch2/catch.hpp>

#include <algorithm>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/sim/coupled.hpp"
#include "mhc/sim/simulate.hpp"
#ifdef MHC_HAVE_DATASETS
#include "mhc/datasets/generate.hpp"
#include "mhc/trace/store.hpp"
#endif

using namespace mhc;
using namespace simtest;
using trace::kNoTime;

namespace {

constexpr const char* kAllReduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
constexpr const char* kAllGather = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
constexpr const char* kSendRecv = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)";

// A rank's trace: build() with real kernel names, its rank and communicators in meta.
trace::TraceData rank_trace(int rank, const std::vector<Tensor>& tensors, const std::vector<K>& kernels,
                            const std::map<std::string, std::string>& meta) {
    trace::TraceData t = build(tensors, kernels);
    for (size_t i = 0; i < kernels.size(); ++i)
        if (kernels[i].name != "k") {
            t.strings.push_back(kernels[i].name);
            t.kernels.name[i] = static_cast<int64_t>(t.strings.size() - 1);
        }
    t.path = "rank" + std::to_string(rank) + ".db";
    t.meta = meta;
    t.meta["rank"] = std::to_string(rank);
    return t;
}

struct Job {
    std::vector<trace::TraceData> traces;
    std::vector<sim::RankTrace> ranks;
    explicit Job(std::vector<trace::TraceData> ts) : traces(std::move(ts)) {
        for (auto& t : traces) ranks.push_back({t.path, &t, sim::prepare(t)});
    }
};

// Rank 0: T0 (1 MiB) written at 1-2 ms; T1 (1 MiB) allocated at 3 ms. At a capacity of
// 1 MiB, T1's allocation evicts T0 (a dirty swap-out of 1 ms on the test link) and waits
// for it: one stall of 1 ms, so everything after 3 ms runs 1 ms late. Its collective is
// recorded at [ar0, 6 ms], a last kernel at [7, 8] ms.
trace::TraceData stalling_rank(int64_t ar0, const char* op, int64_t stream, const std::map<std::string, std::string>& meta,
                               bool send = false) {
    std::vector<Tensor> ts = {{MiB, 0, 9 * ms}, {MiB, 3 * ms, 9 * ms}};
    std::vector<K> ks = {{1 * ms, 2 * ms, {{0, 'w'}}},
                         {3 * ms, 4 * ms, {{1, 'w'}}},
                         {ar0, 6 * ms, send ? std::vector<Use>{{1, 'r'}} : std::vector<Use>{}, -1, stream, op},
                         {7 * ms, 8 * ms, {{1, 'r'}}}};
    return rank_trace(0, ts, ks, meta);
}

// Rank 1: one tensor U (1 MiB) for the whole run: no stall at 1 MiB. Its collective is
// recorded at [ar1, 6 ms].
trace::TraceData quiet_rank(int64_t ar1, const char* op, int64_t stream, const std::map<std::string, std::string>& meta,
                            bool recv = false) {
    std::vector<Tensor> ts = {{MiB, 0, 9 * ms}};
    std::vector<K> ks = {{1 * ms, 2 * ms, {{0, 'w'}}},
                         {ar1, 6 * ms, recv ? std::vector<Use>{{0, 'w'}} : std::vector<Use>{}, -1, stream, op},
                         {7 * ms, 8 * ms, {{0, 'r'}}}};
    return rank_trace(1, ts, ks, meta);
}

const std::map<std::string, std::string> kDpMeta = {{"nccl.stream.5", "dp:0,1"}};

}  // namespace

TEST_CASE("coupled: a stall on one rank delays the other at the all-reduce, by hand", "[sim][multirank]") {
    Job job({stalling_rank(5 * ms, kAllReduce, 5, kDpMeta), quiet_rank(5 * ms, kAllReduce, 5, kDpMeta)});
    sim::JobPlan plan = sim::plan_job(job.ranks);
    REQUIRE(plan.comm_names == std::vector<std::string>{"dp"});
    REQUIRE(plan.cross_events() == 2);
    sim::CoupledResult r = sim::simulate_coupled(job.ranks, plan, config("lru", MiB));
    const sim::Result& a = r.ranks[0];
    const sim::Result& b = r.ranks[1];
    // Makespans run from the first allocation (0) to the last free (9 ms).
    // Rank 0: its own 1 ms stall, no wait (it is the last to arrive), 9 ms -> 10 ms.
    CHECK(a.stall_time == 1 * ms);
    CHECK(a.stall_count == 1);
    CHECK(a.coupled_wait_time == 0);
    CHECK(a.simulated_makespan == 10 * ms);
    // Rank 1: no stall of its own, but its all-reduce ends 1 ms late: 9 ms -> 10 ms.
    CHECK(b.stall_time == 0);
    CHECK(b.coupled_wait_time == 1 * ms);
    CHECK(b.coupled_wait_count == 1);
    CHECK(b.simulated_makespan == 10 * ms);
    CHECK(b.throughput_loss == Approx(1.0 / 9));
    CHECK(r.job_baseline_makespan == 9 * ms);
    CHECK(r.job_simulated_makespan == 10 * ms);
    CHECK(r.job_loss == Approx(1.0 / 9));
    CHECK(r.limiting == 0);
    CHECK(r.oom == -1);
    // Uncoupled, rank 1 alone would have lost nothing.
    CHECK(sim::simulate(*job.ranks[1].prepared, config("lru", MiB)).simulated_makespan == 9 * ms);
}

TEST_CASE("coupled: time a rank waited in the recording absorbs the other's delay, by hand", "[sim][multirank]") {
    // Rank 1 reached the all-reduce at 5.5 ms, rank 0 at 5 ms: rank 0 was 0.5 ms early, so
    // of its 1 ms delay only 0.5 ms reaches rank 1 (its end 9 ms -> 9.5 ms, not 10 ms).
    Job job({stalling_rank(5 * ms, kAllReduce, 5, kDpMeta), quiet_rank(5 * ms + ms / 2, kAllReduce, 5, kDpMeta)});
    sim::CoupledResult r = sim::simulate_coupled(job.ranks, sim::plan_job(job.ranks), config("lru", MiB));
    CHECK(r.ranks[1].coupled_wait_time == ms / 2);
    CHECK(r.ranks[1].simulated_makespan == 9 * ms + ms / 2);
    CHECK(r.ranks[0].coupled_wait_time == 0);
    CHECK(r.ranks[0].simulated_makespan == 10 * ms);
    CHECK(r.job_simulated_makespan == 10 * ms);
    CHECK(r.last == 0);
}

TEST_CASE("coupled: a receive waits for its send, a send for nobody, by hand", "[sim][multirank]") {
    const std::map<std::string, std::string> pp = {{"nccl.stream.23", "pp:0,1"}};
    SECTION("the sender stalls: the receiver's receive ends 1 ms late") {
        // Rank 0's SendRecv reads T1 (a send), rank 1's writes U (a receive).
        Job job({stalling_rank(5 * ms, kSendRecv, 23, pp, true), quiet_rank(5 * ms, kSendRecv, 23, pp, true)});
        sim::JobPlan plan = sim::plan_job(job.ranks);
        REQUIRE(plan.events[0][0].role == sim::CrossRole::Send);
        REQUIRE(plan.events[1][0].role == sim::CrossRole::Recv);
        CHECK(plan.waits[0][0].empty());
        REQUIRE(plan.waits[1][0].size() == 1);
        sim::CoupledResult r = sim::simulate_coupled(job.ranks, plan, config("lru", MiB));
        CHECK(r.ranks[1].coupled_wait_time == 1 * ms);
        CHECK(r.ranks[1].simulated_makespan == 10 * ms);
    }
    SECTION("the receiver stalls: the sender goes on") {
        // The same stall on the receiving side (rank 0 receives into T1, rank 1 sends U).
        std::vector<Tensor> ts = {{MiB, 0, 9 * ms}, {MiB, 3 * ms, 9 * ms}};
        std::vector<K> ks = {{1 * ms, 2 * ms, {{0, 'w'}}},
                             {3 * ms, 4 * ms, {{1, 'w'}}},
                             {5 * ms, 6 * ms, {{1, 'w'}}, -1, 23, kSendRecv},
                             {7 * ms, 8 * ms, {{1, 'r'}}}};
        std::vector<Tensor> us = {{MiB, 0, 9 * ms}};
        std::vector<K> ls = {{1 * ms, 2 * ms, {{0, 'w'}}},
                             {5 * ms, 6 * ms, {{0, 'r'}}, -1, 23, kSendRecv},
                             {7 * ms, 8 * ms, {{0, 'r'}}}};
        Job job({rank_trace(0, ts, ks, pp), rank_trace(1, us, ls, pp)});
        sim::CoupledResult r = sim::simulate_coupled(job.ranks, sim::plan_job(job.ranks), config("lru", MiB));
        CHECK(r.ranks[0].stall_time == 1 * ms);
        CHECK(r.ranks[0].coupled_wait_time == 0);
        CHECK(r.ranks[1].coupled_wait_time == 0);
        CHECK(r.ranks[1].simulated_makespan == 9 * ms);
        CHECK(r.job_simulated_makespan == 10 * ms);
    }
}

TEST_CASE("coupled: mismatched collectives are one line naming the rank and the collective", "[sim][multirank]") {
    SECTION("a different operation") {
        Job job({stalling_rank(5 * ms, kAllReduce, 5, kDpMeta), quiet_rank(5 * ms, kAllGather, 5, kDpMeta)});
        try {
            sim::plan_job(job.ranks);
            FAIL("no error");
        } catch (const Error& e) {
            std::string m = e.what();
            CHECK(e.kind() == Error::Kind::BadInput);
            CHECK(m.find('\n') == std::string::npos);
            CHECK_THAT(m, Catch::Contains("rank1.db (rank 1)") && Catch::Contains("AllGather") &&
                              Catch::Contains("AllReduce") && Catch::Contains("communicator dp"));
        }
    }
    SECTION("a different count") {
        std::vector<Tensor> us = {{MiB, 0, 9 * ms}};
        std::vector<K> ls = {{1 * ms, 2 * ms, {{0, 'w'}}},
                             {5 * ms, 6 * ms, {}, -1, 5, kAllReduce},
                             {6 * ms, 7 * ms, {}, -1, 5, kAllReduce},
                             {7 * ms, 8 * ms, {{0, 'r'}}}};
        Job job({stalling_rank(5 * ms, kAllReduce, 5, kDpMeta), rank_trace(1, us, ls, kDpMeta)});
        CHECK_THROWS_WITH(sim::plan_job(job.ranks),
                          Catch::Contains("rank1.db (rank 1): 2 collectives on communicator dp, but 1 on rank0.db (rank 0)") &&
                              Catch::Contains("AllReduce #1 of rank 1"));
    }
    SECTION("a communicator naming a rank that is not given") {
        Job job({stalling_rank(5 * ms, kAllReduce, 5, {{"nccl.stream.5", "dp:0,1,2"}}),
                 quiet_rank(5 * ms, kAllReduce, 5, {{"nccl.stream.5", "dp:0,1,2"}})});
        CHECK_THROWS_WITH(sim::plan_job(job.ranks), Catch::Contains("includes rank 2"));
    }
    SECTION("without meta, the stream number is the communicator") {
        Job job({stalling_rank(5 * ms, kAllReduce, 5, {}), quiet_rank(5 * ms, kAllReduce, 5, {})});
        sim::JobPlan plan = sim::plan_job(job.ranks);
        CHECK(plan.comm_names == std::vector<std::string>{"stream 5"});
        CHECK(sim::simulate_coupled(job.ranks, plan, config("lru", MiB)).ranks[1].coupled_wait_time == 1 * ms);
    }
}

TEST_CASE("coupled: a rank that waits through another for a rank out of memory stops, the job is out of memory",
          "[sim][multirank]") {
    // Capacity 1500 B. Rank 2 allocates 2000 B at 0: out of memory at 0, before its
    // all-reduce on communicator a (ranks 0, 2). Rank 0 reaches that all-reduce at [10, 20]
    // and cannot finish it: it stops there, before its all-reduce on b (ranks 0, 1) at
    // [30, 40], for which rank 1 waits in turn: rank 1 stops too. One rank ran out of
    // memory, rank 2; no rank is left waiting (the job is out of memory, not a deadlock).
    const std::map<std::string, std::string> a = {{"nccl.stream.13", "a:0,2"}};
    const std::map<std::string, std::string> ab = {{"nccl.stream.13", "a:0,2"}, {"nccl.stream.21", "b:0,1"}};
    const std::map<std::string, std::string> b = {{"nccl.stream.21", "b:0,1"}};
    Job job({rank_trace(0, {{100, 0, kNoTime}}, {{10, 20, {}, -1, 13, kAllReduce}, {30, 40, {}, -1, 21, kAllReduce}}, ab),
             rank_trace(1, {{100, 0, kNoTime}}, {{30, 40, {}, -1, 21, kAllReduce}}, b),
             rank_trace(2, {{2000, 0, kNoTime}}, {{10, 20, {}, -1, 13, kAllReduce}}, a)});
    sim::JobPlan plan = sim::plan_job(job.ranks);
    sim::CoupledResult r = sim::simulate_coupled(job.ranks, plan, config("lru", 1500));
    REQUIRE(r.oom == 2);
    CHECK(r.ranks[2].oom.happened);
    CHECK(r.ranks[2].oom.time == 0);
    CHECK(r.ranks[2].oom.bytes_short == 500);
    CHECK_FALSE(r.ranks[0].oom.happened);
    CHECK_FALSE(r.ranks[1].oom.happened);
    // Ranks 0 and 1 stopped where they waited: at the ends of their all-reduces (20 and 40);
    // none finished, so neither they nor the job have a loss.
    CHECK(r.stopped == std::vector<uint8_t>{1, 1, 0});
    CHECK(r.ranks[0].simulated_makespan == 20);
    CHECK(r.ranks[1].simulated_makespan == 40);
    CHECK(r.ranks[2].simulated_makespan == 0);
    CHECK(r.job_simulated_makespan == 40);
    // Four cross-rank kernels (two all-reduces on a, one on b, counted on each rank).
    CHECK(r.cross_events == 4);
    const std::string j = sim::to_json(r);
    CHECK_THAT(j, Catch::Contains("\"oom_rank\":2") && Catch::Contains("\"stopped\":true"));
    CHECK_THAT(j, !Catch::Contains("\"throughput_loss\":0") && !Catch::Contains("\"throughput_loss\":-"));
    CHECK_THAT(sim::to_text(r), Catch::Contains("out of memory  rank 2:") && Catch::Contains(" STOPPED ") &&
                                    Catch::Contains("stopped        ranks 0, 1: waited for rank 2, out of memory"));
    // A kernel's name as long as a real trace's templated ones (and a long trace path): rank 2
    // runs out of memory at that kernel (its second operand was swapped out for the first), and
    // the out-of-memory line is printed whole, then the next line (the lines were cut at 511
    // characters, the newline with them).
    const std::string long_name = std::string(kAllReduce) + std::string(600, 'x');
    Job longer({rank_trace(0, {{100, 0, kNoTime}}, {{10, 20, {}, -1, 13, kAllReduce}, {30, 40, {}, -1, 21, kAllReduce}}, ab),
                rank_trace(1, {{100, 0, kNoTime}}, {{30, 40, {}, -1, 21, kAllReduce}}, b),
                rank_trace(2, {{1000, 0, kNoTime}, {1000, 5, kNoTime}},
                           {{10, 20, {{0, 'r'}, {1, 'r'}}, -1, 13, long_name}}, a)});
    longer.ranks[0].path = std::string(700, 'p') + ".db";
    sim::CoupledResult lr = sim::simulate_coupled(longer.ranks, sim::plan_job(longer.ranks), config("lru", 1500));
    REQUIRE(lr.oom == 2);
    const std::string lt = sim::to_text(lr);
    CHECK_THAT(lt, Catch::Contains(long_name + ") needs allocation") &&
                       Catch::Contains("short by 500 B\nstopped        ranks 0, 1: waited for rank 2, out of memory\n") &&
                       Catch::Contains(std::string(700, 'p') + ".db\n"));
    // The same with the ranks given in another order: the rank out of memory is named by
    // its global rank.
    Job rev({rank_trace(2, {{2000, 0, kNoTime}}, {{10, 20, {}, -1, 13, kAllReduce}}, a),
             rank_trace(1, {{100, 0, kNoTime}}, {{30, 40, {}, -1, 21, kAllReduce}}, b),
             rank_trace(0, {{100, 0, kNoTime}}, {{10, 20, {}, -1, 13, kAllReduce}, {30, 40, {}, -1, 21, kAllReduce}}, ab)});
    sim::CoupledResult q = sim::simulate_coupled(rev.ranks, sim::plan_job(rev.ranks), config("lru", 1500));
    REQUIRE(q.oom == 0);
    CHECK(q.global_rank[size_t(q.oom)] == 2);
}

TEST_CASE("coupled: a SendRecv kernel without accesses is a send-receive, even where accesses are assumed",
          "[sim][multirank]") {
    // Two ranks, one SendRecv each on stream 23 at [10, 20]. Rank 0 has accesses (a GEMM
    // reads its allocation 1 at [30, 40]; the SendRecv accesses nothing); rank 1 has none at
    // all, so its allocation is assumed written by its first kernel, the SendRecv. Roles come
    // from the recorded accesses only: both are send-receives, matched with each other.
    const std::map<std::string, std::string> pp = {{"nccl.stream.23", "pp:0,1"}};
    Job job({rank_trace(0, {{MiB, 0, kNoTime}}, {{10, 20, {}, -1, 23, kSendRecv}, {30, 40, {{0, 'r'}}}}, pp),
             rank_trace(1, {{MiB, 0, kNoTime}}, {{10, 20, {}, -1, 23, kSendRecv}}, pp)});
    REQUIRE(sim::assumed_accesses(*job.ranks[1].prepared));
    sim::JobPlan plan = sim::plan_job(job.ranks);
    CHECK(plan.events[0][0].role == sim::CrossRole::SendRecv);
    CHECK(plan.events[1][0].role == sim::CrossRole::SendRecv);
    REQUIRE(plan.waits[0][0].size() == 1);
    REQUIRE(plan.waits[1][0].size() == 1);
    CHECK(plan.waits[0][0][0].rank == 1);
    CHECK(plan.waits[1][0][0].rank == 0);
    sim::CoupledResult r = sim::simulate_coupled(job.ranks, plan, config("lru", sim::kUnlimited));
    CHECK(r.job_loss == 0);
    CHECK(r.job_simulated_makespan == 40);
}

TEST_CASE("coupled: a wait is up to the bound, not the bound on top of the rank's own delay, by hand",
          "[sim][multirank][decided]") {
    // Rank 0 reaches the all-reduce 1 ms late (its stall), rank 1 0.5 ms late (its own stall:
    // two 512 KiB tensors in 512 KiB, a 0.5 ms swap-out). Rank 1's all-reduce ends at
    // 6 + max(0.5, 1) = 7 ms: a wait of 0.5 ms, not 1 ms (bound plus own delay would end it at
    // 7.5 ms). Rank 0's bound (0.5 ms) is below its own delay: no wait. Both end at 10 ms.
    std::vector<Tensor> ts = {{MiB / 2, 0, 9 * ms}, {MiB / 2, 3 * ms, 9 * ms}};
    std::vector<K> ks = {{1 * ms, 2 * ms, {{0, 'w'}}},
                         {3 * ms, 4 * ms, {{1, 'w'}}},
                         {5 * ms, 6 * ms, {}, -1, 5, kAllReduce},
                         {7 * ms, 8 * ms, {{1, 'r'}}}};
    Job job({stalling_rank(5 * ms, kAllReduce, 5, kDpMeta), rank_trace(1, ts, ks, kDpMeta)});
    sim::CoupledResult r = sim::simulate_coupled(job.ranks, sim::plan_job(job.ranks),
                                                 std::vector<sim::Config>{config("lru", MiB), config("lru", MiB / 2)});
    CHECK(r.ranks[0].stall_time == 1 * ms);
    CHECK(r.ranks[0].coupled_wait_time == 0);
    CHECK(r.ranks[1].stall_time == ms / 2);
    CHECK(r.ranks[1].coupled_wait_time == ms / 2);
    CHECK(r.ranks[1].simulated_makespan == 10 * ms);
    CHECK(r.ranks[0].simulated_makespan == 10 * ms);
    CHECK(r.limiting == 0);
}

TEST_CASE("coupled: a send-receive matches only a send-receive, not a receive and a send", "[sim][multirank][decided]") {
    // Rank 0's SendRecv reads X and writes Y (both directions in one kernel); rank 1 sends U
    // and then receives into V in two kernels. Refused, naming the communicator.
    const std::map<std::string, std::string> pp = {{"nccl.stream.23", "pp:0,1"}};
    Job job({rank_trace(0, {{MiB, 0, kNoTime}, {MiB, 0, kNoTime}}, {{10, 20, {{0, 'r'}, {1, 'w'}}, -1, 23, kSendRecv}}, pp),
             rank_trace(1, {{MiB, 0, kNoTime}, {MiB, 0, kNoTime}},
                        {{10, 20, {{0, 'r'}}, -1, 23, kSendRecv}, {30, 40, {{1, 'w'}}, -1, 23, kSendRecv}}, pp)});
    try {
        sim::plan_job(job.ranks);
        FAIL("a send-receive matched a receive and a send");
    } catch (const Error& e) {
        CHECK(e.kind() == Error::Kind::BadInput);
        CHECK_THAT(std::string(e.what()), Catch::Contains("communicator pp") && Catch::Contains("rank1.db (rank 1)"));
    }
}

TEST_CASE("coupled: ties between ranks go to the lowest global rank, no stall, no limiting rank", "[sim][multirank][decided]") {
    // Two ranks that stall 1 ms each before an all-reduce recorded at [5, 6] ms by both, given
    // rank 1 first: both stall as much and end at 10 ms; the limiting and the last rank are 0.
    trace::TraceData one = stalling_rank(5 * ms, kAllReduce, 5, kDpMeta);
    one.meta["rank"] = "1";
    one.path = "rank1.db";
    Job job({std::move(one), stalling_rank(5 * ms, kAllReduce, 5, kDpMeta)});
    sim::JobPlan plan = sim::plan_job(job.ranks);
    sim::CoupledResult r = sim::simulate_coupled(job.ranks, plan, config("lru", MiB));
    CHECK(r.ranks[0].stall_time == 1 * ms);
    CHECK(r.ranks[1].stall_time == 1 * ms);
    CHECK(r.ranks[0].simulated_makespan == r.ranks[1].simulated_makespan);
    REQUIRE(r.limiting == 1);
    CHECK(r.global_rank[1] == 0);
    CHECK(r.last == 1);
    CHECK_THAT(sim::to_text(r), Catch::Contains("limiting rank  0 (1.00 ms of its own stalls; rank 0 finishes last)"));
    // Unlimited: nobody stalls, no limiting rank (-1 in --json).
    sim::CoupledResult u = sim::simulate_coupled(job.ranks, plan, config("lru", sim::kUnlimited));
    CHECK(u.limiting == -1);
    // The rank that finishes last is said even then (ties: the lowest global rank).
    CHECK_THAT(sim::to_text(u), Catch::Contains("limiting rank  none (no rank stalls; rank 0 finishes last)"));
    CHECK_THAT(sim::to_json(u), Catch::Contains("\"limiting_rank\":-1"));
    // An unlimited capacity is -1 (as the stored capacity_bytes), not the engine's sentinel; the
    // device each rank simulated is given.
    CHECK_THAT(sim::to_json(u), Catch::Contains("\"device\":0,\"capacity\":-1,"));
    CHECK_THAT(sim::to_json(u), !Catch::Contains(std::to_string(sim::kUnlimited)));
}

TEST_CASE("coupled: of several ranks out of memory, the first on the shared clock is reported", "[sim][multirank][decided]") {
    // 1500 B. Rank 0 allocates 2000 B at 50 ns (its clock starts at 0 on the shared clock),
    // rank 1 at 5 ns of its own clock, which starts at 100: 105 on the shared clock. Both run
    // out before their all-reduce; rank 0 ran out first (given second).
    auto job_with = [](int64_t origin1) {
        std::map<std::string, std::string> m0 = kDpMeta, m1 = kDpMeta;
        m0["time_origin_ns"] = "0";
        m1["time_origin_ns"] = std::to_string(origin1);
        return Job({rank_trace(1, {{2000, 5, kNoTime}}, {{10, 20, {}, -1, 5, kAllReduce}}, m1),
                    rank_trace(0, {{2000, 50, kNoTime}}, {{100, 110, {}, -1, 5, kAllReduce}}, m0)});
    };
    Job job = job_with(100);
    sim::CoupledResult r = sim::simulate_coupled(job.ranks, sim::plan_job(job.ranks), config("lru", 1500));
    REQUIRE(r.ranks[0].oom.happened);
    REQUIRE(r.ranks[1].oom.happened);
    CHECK(r.oom == 1);
    CHECK(r.global_rank[1] == 0);
    // At the same instant (rank 1's clock starting at 45): the lowest global rank, 0 again.
    Job tie = job_with(45);
    CHECK(sim::simulate_coupled(tie.ranks, sim::plan_job(tie.ranks), config("lru", 1500)).oom == 1);
    // Rank 1 first (its clock at 0): rank 1.
    Job early = job_with(0);
    CHECK(sim::simulate_coupled(early.ranks, sim::plan_job(early.ranks), config("lru", 1500)).oom == 0);
}

TEST_CASE("coupled: an NCCL kernel's name starts with 'nccl' (that case) and its operation ends at the first "
          "character that is not a letter or digit", "[sim][multirank][decided]") {
    // Per rank, on stream 5 one after another: NCCL 2.x's two spellings (operation AllGather,
    // then AllReduce), and three names that are not cross-rank kernels.
    const std::vector<K> ks = {{10, 20, {}, -1, 5, "ncclKernel_AllGather_RING_LL_Sum_float(ncclWorkElem)"},
                               {30, 40, {}, -1, 5, "NCCLDevKernel_AllReduce_Sum_f32_RING_LL"},
                               {50, 60, {}, -1, 5, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"},
                               {70, 80, {}, -1, 5, "nccl:all_reduce"},
                               {90, 100, {}, -1, 5, "my_ncclKernel_AllReduce"}};
    Job job({rank_trace(0, {{MiB, 0, kNoTime}}, ks, kDpMeta), rank_trace(1, {{MiB, 0, kNoTime}}, ks, kDpMeta)});
    sim::JobPlan plan = sim::plan_job(job.ranks);
    CHECK(plan.cross_events() == 4);
    REQUIRE(plan.events[0].size() == 2);
    CHECK(plan.events[0][0].op == "AllGather");
    CHECK(plan.events[0][1].op == "AllReduce");
    CHECK(plan.events[0][1].row == 2);
}

TEST_CASE("coupled: a rank without cross-rank events runs as simulate() runs it, under every policy", "[sim][multirank]") {
    // simulate() and the coupled runner share one event loop: same timeline, same figures.
    Job job({stalling_rank(5 * ms, "k", 0, {})});
    for (const auto& p : sim::eviction_policies())
        for (const char* allocator : {"ideal", "caching"}) {
            INFO(p.name << " " << allocator);
            sim::Config c = config(p.name, MiB);
            c.allocator = allocator;
            c.capacity = sim::Capacity{allocator == std::string("ideal") ? MiB : 4 * MiB, 0};
            const sim::Result alone = sim::simulate(*job.ranks[0].prepared, c);
            const sim::CoupledResult coupled = sim::simulate_coupled(job.ranks, sim::plan_job(job.ranks), c);
            const sim::Result& r = coupled.ranks[0];
            CHECK(coupled.cross_events == 0);
            CHECK(r.events.size() == alone.events.size());
            for (size_t k = 0; k < r.events.size() && k < alone.events.size(); ++k) {
                CHECK(r.events[k].kind == alone.events[k].kind);
                CHECK(r.events[k].t_start == alone.events[k].t_start);
                CHECK(r.events[k].t_end == alone.events[k].t_end);
            }
            auto figures = [](const sim::Result& x) {
                auto m = sim::metrics(x);
                m.erase(std::remove_if(m.begin(), m.end(), [](const auto& kv) { return kv.first == "sim_seconds"; }), m.end());
                return m;
            };
            CHECK(figures(r) == figures(alone));
        }
}

#ifdef MHC_HAVE_DATASETS
namespace {
// One step of gpt2-small with `layers` layers in `pp` pipeline stages, `micro_batches` micro-batches
// of `seq` tokens.
datasets::GeneratorConfig small_pipeline(int layers, int pp, int micro_batches, int seq) {
    datasets::GeneratorConfig cfg = datasets::preset("gpt2-small");
    cfg.layers = layers;
    cfg.pp = pp;
    cfg.micro_batches = micro_batches;
    cfg.steps = 1;
    cfg.seq = seq;
    return cfg;
}

// Generates every rank of a small job and checks the identity on each: with unlimited
// capacity, the coupled run of every rank equals its recorded timeline and its own run.
void check_identity(datasets::GeneratorConfig cfg) {
    std::vector<datasets::RankFile> files;
    for (int s = 0; s < cfg.pp; ++s)
        for (int d = 0; d < cfg.dp; ++d)
            for (int t = 0; t < cfg.tp; ++t)
                files.push_back({s, d, t, temp_path("job.rank" + std::to_string(datasets::global_rank(cfg, s, d, t)) + ".db")});
    datasets::generate_ranks(cfg, files);
    std::vector<trace::TraceData> traces;
    for (auto& f : files) traces.push_back(trace::load_trace(f.path));
    Job job(std::move(traces));
    sim::JobPlan plan = sim::plan_job(job.ranks);
    CHECK(plan.cross_events() > 0);
    for (const char* pol : {"lru", "dtr"}) {
        sim::Config c;
        c.eviction = pol;
        c.check_invariants = true;
        sim::CoupledResult r = sim::simulate_coupled(job.ranks, plan, c);
        for (size_t i = 0; i < r.ranks.size(); ++i) {
            INFO("rank " << i << " policy " << pol);
            const sim::Result& x = r.ranks[i];
            sim::Result alone = sim::simulate(*job.ranks[i].prepared, c);
            CHECK(x.simulated_makespan == x.baseline_makespan);
            CHECK(x.simulated_peak == x.baseline_peak);
            CHECK(x.stall_time == 0);
            CHECK(x.coupled_wait_time == 0);
            CHECK(simtest::kernels_off_recorded_time(*job.ranks[i].trace, x) == 0);
            CHECK(x.simulated_makespan == alone.simulated_makespan);
            CHECK(x.simulated_peak == alone.simulated_peak);
            CHECK(x.invariant_violation.empty());
        }
        CHECK(r.job_loss == 0);
        CHECK(r.job_simulated_makespan == r.job_baseline_makespan);
    }
}
}  // namespace

TEST_CASE("coupled: identity with unlimited capacity on every rank of a 4-stage pipeline", "[sim][multirank]") {
    check_identity(small_pipeline(4, 4, 4, 256));
}

TEST_CASE("coupled: identity on data- and tensor-parallel ranks", "[sim][multirank]") {
    datasets::GeneratorConfig cfg = small_pipeline(2, 2, 2, 128);
    cfg.dp = 2;
    cfg.tp = 2;
    check_identity(cfg);
}

TEST_CASE("generate_ranks: stages receive no earlier than the neighbour sent", "[sim][multirank]") {
    const datasets::GeneratorConfig cfg = small_pipeline(2, 2, 3, 128);
    std::vector<datasets::RankFile> files = {{0, 0, 0, temp_path("p.rank0.db")}, {1, 0, 0, temp_path("p.rank1.db")}};
    datasets::generate_ranks(cfg, files);
    trace::TraceData a = trace::load_trace(files[0].path), b = trace::load_trace(files[1].path);
    CHECK(a.meta.at("rank") == "0");
    CHECK(b.meta.at("rank") == "1");
    CHECK(a.meta.at("nccl.stream.23") == "pp.s0-1.d0.t0:0,1");
    CHECK(b.meta.at("nccl.stream.24") == "pp.s0-1.d0.t0:0,1");
    Job job({std::move(a), std::move(b)});
    sim::JobPlan plan = sim::plan_job(job.ranks);
    // Each of the 3 micro-batches: an activation 0 -> 1 and a gradient 1 -> 0.
    REQUIRE(plan.events[0].size() == 6);
    REQUIRE(plan.events[1].size() == 6);
    int sends = 0;
    for (int r = 0; r < 2; ++r)
        for (size_t g = 0; g < plan.events[size_t(r)].size(); ++g) {
            const auto& e = plan.events[size_t(r)][g];
            if (e.role == sim::CrossRole::Send) { ++sends; continue; }
            REQUIRE(e.role == sim::CrossRole::Recv);
            REQUIRE(plan.waits[size_t(r)][g].size() == 1);
            const auto& w = plan.waits[size_t(r)][g][0];
            const auto& send = plan.events[size_t(w.rank)][size_t(w.event)];
            CHECK(job.traces[size_t(r)].kernels.t_end[size_t(e.row)] >=
                  job.traces[size_t(w.rank)].kernels.t_end[size_t(send.row)]);
        }
    CHECK(sends == 6);
}
#endif
