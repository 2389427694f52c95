// `mhc validate TRACE`: simulate, replay each plan on a backend, compare (docs/validation.md).
#include <cstdio>
#include <iostream>
#include <memory>

#include "command.hpp"
#include "sim_options.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/replay/validate.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::cli {
namespace {

struct ValOptions {
    std::string trace, capacity = "60%", policy = "lru", prefetch = "none", link = "pcie4";
    std::string backend = "host", chunk = "2MiB";
    double time_scale = 1.0;
    int copy_threads = 1, repeat = 1;
    SimBaseOptions base;
    bool no_store = false, no_sinkhorn = false, recorded_timing = false;
};

std::function<int()> setup(CLI::App& app) {
    auto o = std::make_shared<ValOptions>();
    app.add_option("trace", o->trace, "Trace file")->required()->check(CLI::ExistingFile);
    app.add_option("--capacity", o->capacity,
                   "Limited capacities, comma-separated: bytes (40GiB) or shares of the peak (60%,70%); "
                   "the unlimited baseline is always run");
    auto* pol = app.add_option("--policy,--eviction", o->policy, "Eviction: lru, largest, belady, dtr, cost_aware");
    app.add_option("--prefetch", o->prefetch, "Prefetch: none, lookahead:K, periodic[:K], capuchin, forecast[:H]");
    app.add_option("--link", o->link,
                   "The replay machine's link: a preset or a profile from `mhc calibrate` (host: --backend host)");
    add_sim_base_options(app, o->base,
                         " (replay places caching segments in 2 MiB pages as on a GPU; ideal's page rounding may not fit)");
    app.add_option("--backend", o->backend, "host or cuda")->check(CLI::IsMember({"host", "cuda"}));
    app.add_option("--time-scale", o->time_scale,
                   "Run kernels and gaps this many times slower (the prediction uses the link x this)")
        ->check(CLI::Range(1e-3, 1e6));
    app.add_option("--chunk", o->chunk, "Swap chunk size");
    app.add_option("--copy-threads", o->copy_threads, "Host backend: copy threads per direction")->check(CLI::Range(1, 64));
    app.add_flag("--no-store", o->no_store, "Do not store the runs in the trace file");
    app.add_flag("--no-sinkhorn", o->no_sinkhorn, "Stand-ins for Sinkhorn-Knopp kernels too");
    app.add_option("--repeat", o->repeat,
                   "Replay each configuration this many times and use the one with the median makespan "
                   "(the host is noisy)")
        ->check(CLI::Range(1, 99));
    app.add_flag("--recorded-timing", o->recorded_timing,
                 "Predict the limited runs with the recorded kernel times, not the baseline replay's "
                 "(the default moves the trace onto the replay machine's clock first)");
    return [o, pol] {
        replay::ValidateSpec spec;
        sim::Config& c = spec.base;
        c.eviction = o->policy;
        c.prefetch = o->prefetch;
        c.link = sim::link_from_spec(o->link);
        apply_sim_base_options(o->base, c, pol->count() > 0);
        sim::validate(c);
        for (const auto& item : split_list(o->capacity)) spec.capacities.push_back(sim::parse_capacity(item));
        spec.replay.backend = replay::parse_backend(o->backend);
        spec.replay.time_scale = o->time_scale;
        spec.replay.chunk_bytes = static_cast<size_t>(parse_bytes(o->chunk));
        if (spec.replay.chunk_bytes < 4096) throw Error("--chunk: at least 4 KiB");
        spec.replay.copy_threads = o->copy_threads;
        spec.replay.real_sinkhorn = !o->no_sinkhorn;
        spec.store = !o->no_store;
        spec.retime = !o->recorded_timing;
        spec.repeat = o->repeat;
        // Nothing to limit, nothing to replay: refuse as simulate does (before any replay).
        if (trace::Reader(o->trace).counts().allocations == 0)
            throw Error(o->trace + ": no allocations: nothing to simulate or replay under a memory limit");
        auto note = [](const std::string& s) {
            if (show_progress()) std::fprintf(stderr, "mhc: %s\n", s.c_str());
        };
        replay::Report r = replay::validate(o->trace, spec, note);
        std::cout << replay::to_text(r);
        if (spec.store) {
            std::cout << "stored runs (simulated -> replayed):";
            auto ids = [&](const replay::Row& x) { std::cout << " " << x.sim_run << "->" << x.replay_run; };
            ids(r.baseline);
            for (const auto& x : r.rows) ids(x);
            std::cout << " in " << o->trace << "\n";
        }
        if (!r.ok()) {
            std::fprintf(stderr, "mhc: validation failed (see the status column)\n");
            return kExitInternal;
        }
        return kExitOk;
    };
}

Registration reg{Command{"validate", "Replay simulated plans on a backend and compare predicted with measured", setup}};

}  // namespace
}  // namespace mhc::cli
