// mhc allocator TRACE: the caching allocator model against the segments the trace recorded
// (docs/simulator.md "Comparing with a recording").
#include <cstdio>
#include <memory>
#include <string>

#include "command.hpp"
#include "mhc/sim/allocator_compare.hpp"
#include "mhc/trace/check.hpp"

namespace {

mhc::cli::Registration reg{mhc::cli::Command{
    "allocator",
    "Replay the recorded allocations through the caching allocator model and compare its segments with the "
    "recorded ones (reserved peak, cudaMalloc/cudaFree calls, reserved over time, first divergence)",
    [](CLI::App& app) -> std::function<int()> {
        auto path = std::make_shared<std::string>();
        auto json = std::make_shared<bool>(false);
        auto conf = std::make_shared<std::string>();
        auto device = std::make_shared<int>(-1);
        app.add_option("trace", *path, "Trace file (.db) with segments (an imported PyTorch memory snapshot)")
            ->required();
        app.add_flag("--json", *json, "Machine-readable output");
        app.add_option("--allocator-conf", *conf,
                       "What-if settings over the recorded ones, in PYTORCH_CUDA_ALLOC_CONF syntax: "
                       "expandable_segments:True")
            ->type_name("CONF");
        app.add_option("--device", *device, "Device to compare: auto is the one with the largest recorded reserved peak")
            ->transform(CLI::Transformer({{"auto", "-1"}}))
            ->type_name("DEVICE")
            ->default_str("auto")
            ->check(CLI::Range(-1, INT32_MAX));
        return [path, json, conf, device] {
            auto data = mhc::trace::load_checked_trace(*path);   // segments checked too (overlap, order)
            auto c = mhc::sim::compare_allocator(data, data.segments, *device, *conf);
            if (*json) {
                std::printf("%s\n", mhc::sim::to_json(c).c_str());
            } else {
                std::printf("trace         %s\n%s", path->c_str(), mhc::sim::to_text(c).c_str());
            }
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
