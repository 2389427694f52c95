// Coupled multi-rank simulation (docs/simulator.md, "Coupled ranks"): hand-built two-rank
// traces with the figures worked out by hand, mismatched collectives, and the identity on
// every rank of generated pipeline and data-parallel jobs.
#include <catch2/catch.hpp>

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

#ifdef MHC_HAVE_DATASETS
namespace {
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
    datasets::GeneratorConfig cfg = datasets::preset("gpt2-small");
    cfg.layers = 4;
    cfg.pp = 4;
    cfg.micro_batches = 4;
    cfg.steps = 1;
    cfg.seq = 256;
    check_identity(cfg);
}

TEST_CASE("coupled: identity on data- and tensor-parallel ranks", "[sim][multirank]") {
    datasets::GeneratorConfig cfg = datasets::preset("gpt2-small");
    cfg.layers = 2;
    cfg.pp = 2;
    cfg.dp = 2;
    cfg.tp = 2;
    cfg.micro_batches = 2;
    cfg.steps = 1;
    cfg.seq = 128;
    check_identity(cfg);
}

TEST_CASE("generate_ranks: stages receive no earlier than the neighbour sent", "[sim][multirank]") {
    datasets::GeneratorConfig cfg = datasets::preset("gpt2-small");
    cfg.layers = 2;
    cfg.pp = 2;
    cfg.micro_batches = 3;
    cfg.steps = 1;
    cfg.seq = 128;
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
