// mhc-view-demo-runs TRACE: adds two hand-made runs to a trace so that the compare view has
// something to show before the simulator exists. They are NOT simulations, and say so in
// their config ("source"): run 1 repeats the recorded live bytes (what an unlimited-capacity
// simulation must give, by the identity property); run 2 takes half of the activation bytes
// off the device (a what-if envelope), with a capacity line at 80% of the recorded peak.
#include <cstdio>

#include "mhc/common/error.hpp"
#include "mhc/viewer/data.hpp"

using namespace mhc;

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: mhc-view-demo-runs TRACE\n");
        return 2;
    }
    try {
        viewer::ViewTrace t = viewer::load_view_trace(argv[1]);
        const auto& a = t.allocations;
        std::vector<int64_t> ta, tf, by;
        for (size_t i = 0; i < a.size(); ++i)
            if (a.category[i] == trace::Category::Activation) {
                ta.push_back(a.t_alloc[i]); tf.push_back(a.t_free[i]); by.push_back(a.bytes[i]);
            }
        viewer::Curve act = viewer::Curve::from_intervals(ta, tf, by);
        const auto& times = t.live.times();
        const auto& live = t.live.values();
        for (int r = 0; r < 2; ++r) {
            trace::Run run;
            run.kind = "simulated";
            run.name = r == 0 ? "demo: recorded (identity)" : "demo: half the activations off-device";
            run.config["source"] = "mhc-view-demo-runs: hand-made for the viewer's docs, not a simulation";
            if (r == 1) run.config["capacity_bytes"] = std::to_string(static_cast<int64_t>(0.8 * t.live.peak()));
            double peak = 0, host_peak = 0;
            for (size_t i = 0; i < times.size(); ++i) {
                double off = r == 0 ? 0.0 : 0.5 * act.value_at(times[i]);
                double dev = live[i] - off;
                peak = std::max(peak, dev);
                host_peak = std::max(host_peak, off);
                run.memory.push_back({times[i], static_cast<int64_t>(dev), static_cast<int64_t>(off)});
            }
            run.metrics["peak_bytes"] = peak;
            run.metrics["baseline_peak_bytes"] = t.live.peak();
            run.metrics["peak_reduction"] = 1.0 - peak / std::max(t.live.peak(), 1.0);
            run.metrics["host_peak_bytes"] = host_peak;
            int64_t id = trace::add_run(argv[1], run);
            std::printf("added run %lld: %s\n", static_cast<long long>(id), run.name.c_str());
        }
    } catch (const Error& e) {
        std::fprintf(stderr, "mhc-view-demo-runs: %s\n", e.what());
        return e.exit_code();
    }
    return 0;
}
