// mhc allocator TRACE: the caching allocator model against the segments the trace recorded
// (docs/simulator.md "Comparing with a recording").
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "command.hpp"
#include "sim_options.hpp"
#include "mhc/sim/allocator_compare.hpp"
#include "mhc/sim/config.hpp"
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
        app.add_flag("--json", *json, "Print the comparison as JSON");
        app.add_option("--allocator-conf", *conf,
                       "What-if settings over the recorded ones, " + std::string(mhc::cli::kAllocatorConfHelp))
            ->type_name("CONF")
            ->check(mhc::cli::allocator_conf_once());
        app.add_option("--device", *device,
                       "Device to compare: auto is the one with the largest recorded reserved peak")
            ->transform(CLI::Transformer({{"auto", std::to_string(mhc::sim::kAutoDevice)}}))
            ->type_name("DEVICE")
            ->default_str("auto")
            // 0 and up, or auto: -1 (the host's pinned memory in simulate) was taken as auto.
            ->check(CLI::Validator(
                [](std::string& text) {
                    const long long id = std::strtoll(text.c_str(), nullptr, 10);
                    return id >= 0 || id == mhc::sim::kAutoDevice
                               ? std::string()
                               : mhc::quoted_value(text) + ": a device is 0 or more, or auto (segments are the GPUs' memory)";
                },
                "DEVICE"));
        return [path, json, conf, device] {
            auto data = mhc::trace::load_checked_trace(*path);   // segments checked too (overlap, order)
            const int device_id = *device == mhc::sim::kAutoDevice ? -1 : *device;   // -1: auto there
            auto comparison = mhc::sim::compare_allocator(data, data.segments, device_id, *conf);
            if (*json) {
                std::printf("%s\n", mhc::sim::to_json(comparison).c_str());
            } else {
                std::printf("trace         %s\n%s", path->c_str(), mhc::sim::to_text(comparison).c_str());
            }
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
