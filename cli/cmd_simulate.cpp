// `mhc simulate TRACE`: one simulated run under a GPU memory limit (docs/simulator.md).
#include <cstdio>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "run_store.hpp"
#include "sim_options.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"

namespace mhc::cli {
namespace {

struct SimOptions {
    std::string trace, capacity, policy = "lru", prefetch = "none", link = "pcie4";
    std::string h2d_bw, d2h_bw, latency;
    double duplex = 0, nccl_share = -1, memcpy_share = -1;
    int copy_engines = 0, samples = 4096;
    bool json = false, check = false, no_events = false;
    StoreOptions store;
    SimBaseOptions base;
};

std::function<int()> setup(CLI::App& app) {
    auto o = std::make_shared<SimOptions>();
    app.add_option("trace", o->trace, "Trace file")->required()->check(CLI::ExistingFile);
    app.add_option("--capacity", o->capacity,
                   "GPU capacity (required): a share of the unlimited peak (60%, at most 100%), a size with a unit "
                   "(40GiB, 40GB, 512MiB), or 'unlimited' for the baseline");
    auto* pol = app.add_option("--policy,--eviction", o->policy, "Eviction (default lru): " + sim::registry_help(sim::eviction_policies()));
    app.add_option("--prefetch", o->prefetch, "Prefetch (default none): " + sim::registry_help(sim::prefetch_policies()));
    app.add_option("--link", o->link, "pcie3, pcie4, pcie5, nvlink-c2c, nvlink4-peer, or a link profile JSON file");
    add_sim_base_options(app, o->base);
    add_allocator_conf_option(app, o->base);
    app.add_option("--h2d-bandwidth", o->h2d_bw, "Override the link's H2D bandwidth (25GB/s)");
    app.add_option("--d2h-bandwidth", o->d2h_bw, "Override the link's D2H bandwidth");
    app.add_option("--latency", o->latency, "Override the per-transfer latency both ways (6us)");
    app.add_option("--copy-engines", o->copy_engines, "Override the number of copy engines (0: the link's)");
    app.add_option("--duplex-factor", o->duplex, "Override the both-directions bandwidth factor (0,1] (0: the link's)");
    app.add_option("--nccl-share", o->nccl_share, "Bandwidth share lost while NCCL kernels run [0,1) (-1: the link's)");
    app.add_option("--memcpy-share", o->memcpy_share,
                   "Bandwidth share lost to the trace's own memcpys [0,1) (-1: the link's)");
    app.add_option("--memory-samples", o->samples, "Memory timeline samples stored");
    app.add_flag("--json", o->json, "Print the result as JSON");
    add_store_options(app, o->store);
    app.add_flag("--check", o->check, "Check the invariants while running");
    app.add_flag("--no-events", o->no_events, "Store metrics only, no timeline");
    return [o, pol] {
        // Without a limit a run says nothing, and storing it by accident clutters the trace.
        if (o->capacity.empty())
            throw Error("simulate: --capacity is required: a share of the unlimited peak (60%), a size (40GiB), "
                        "or 'unlimited' for the baseline");
        sim::Config c;
        c.capacity = sim::parse_capacity(o->capacity);
        c.eviction = o->policy;
        c.prefetch = o->prefetch;
        c.link = sim::link_from_spec(o->link);
        if (!o->h2d_bw.empty()) c.link.h2d.bandwidth_Bps = parse_bandwidth(o->h2d_bw);
        if (!o->d2h_bw.empty()) c.link.d2h.bandwidth_Bps = parse_bandwidth(o->d2h_bw);
        if (!o->latency.empty()) c.link.h2d.latency_s = c.link.d2h.latency_s = parse_seconds(o->latency);
        if (o->copy_engines != 0) c.link.copy_engines = o->copy_engines;
        if (o->duplex != 0) c.link.duplex_factor = o->duplex;
        if (o->nccl_share >= 0) c.link.nccl_share = o->nccl_share;
        if (o->memcpy_share >= 0) c.link.memcpy_share = o->memcpy_share;
        if (!o->h2d_bw.empty() || !o->d2h_bw.empty() || !o->latency.empty() || o->copy_engines || o->duplex)
            c.link.name += "-custom";
        c.memory_samples = o->samples;
        c.record_events = !o->no_events;
        if (o->check) c.check_invariants = true;
        apply_sim_base_options(o->base, c, pol->count() > 0);
        sim::validate(c);

        trace::TraceData t = trace::load_trace(o->trace);
        auto prepared = prepare_for_simulation(t, c.device, o->trace);
        sim::Result r = sim::simulate(*prepared, c);
        // The result first: a run that cannot be stored must not cost the computation.
        if (o->json) std::cout << sim::to_json(r) << "\n";
        else std::cout << sim::to_text(r);
        std::cout.flush();
        bool stored = true;
        if (!o->store.no_store) {
            auto ids = store_runs(o->trace, {sim::to_run(r)}, o->store);
            stored = ids.has_value();
            if (ids && !o->json)
                std::cout << "stored         run " << ids->at(0) << " in " << store_target(o->trace, o->store) << "\n";
        }
        if (!r.invariant_violation.empty()) {
            std::fprintf(stderr, "mhc: simulator invariant violated: %s\n", r.invariant_violation.c_str());
            return kExitInternal;
        }
        if (!stored) return kExitNotStored;
        if (r.oom.happened) {
            // The text result opens with the OOM; with --json, stdout is for machines and the
            // one human line goes to stderr.
            if (o->json)
                std::fprintf(stderr, "mhc: out of memory at %s of simulated time: %s: %s\n",
                             format_ns(r.oom.time).c_str(), r.oom.where.c_str(), r.oom.why.c_str());
            return kExitOom;
        }
        return kExitOk;
    };
}

Registration reg{Command{"simulate", "Simulate a trace under a GPU memory limit with eviction/prefetch policies", setup}};

}  // namespace
}  // namespace mhc::cli
