// mhc advise TRACE: which memory settings a PyTorch user can turn on make a captured training
// step fit a GPU, ranked by estimated step time, with the code to apply them
// (docs/advise.md).
#include <cstdio>
#include <memory>
#include <string>

#include "command.hpp"
#include "mhc/advise/evaluate.hpp"
#include "mhc/advise/verify.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/trace/check.hpp"

namespace {

struct Options {
    std::string trace, setting, link = "pcie5";
    bool verify = false, json = false;
    double host_bw = 100e9;
};

int run(const Options& o) {
    using namespace mhc::advise;
    auto data = mhc::trace::load_checked_trace(o.trace);
    Base base = make_base(data);
    HostModel host;
    host.bandwidth_Bps = o.host_bw;
    Evaluator ev(base, mhc::sim::link_from_spec(o.link), host);
    Setting none;
    Prediction b = ev.predict(none);
    Setting s = o.setting.empty() ? Setting{} : parse_setting(o.setting);
    Prediction p = ev.predict(s);
    std::printf("setting   %s\n", to_json(s).c_str());
    std::printf("baseline  peak %s  reserved %s  step %s (estimated)\n", mhc::format_bytes(b.memory.peak).c_str(),
                mhc::format_bytes(b.memory.reserved).c_str(), mhc::format_ns(b.step_time).c_str());
    std::printf("predicted peak %s  reserved %s  host %s  step %s (estimated)\n", mhc::format_bytes(p.memory.peak).c_str(),
                mhc::format_bytes(p.memory.reserved).c_str(), mhc::format_bytes(p.host_peak).c_str(),
                mhc::format_ns(p.step_time).c_str());
    if (o.verify) {
        Captured c = capture_with(o.trace, data.meta, s, o.trace + ".verify.db");
        std::printf("captured  peak %s  reserved %s  host %s  (%.1f s)  error peak %.2f%%  reserved %.2f%%\n",
                    mhc::format_bytes(c.memory.peak).c_str(), mhc::format_bytes(c.memory.reserved).c_str(),
                    mhc::format_bytes(c.host_peak).c_str(), c.seconds,
                    100 * relative_error(p.memory.peak, c.memory.peak), 100 * relative_error(p.memory.reserved, c.memory.reserved));
    }
    return mhc::cli::kExitOk;
}

mhc::cli::Registration reg{mhc::cli::Command{
    "advise",
    "Rank the memory settings a PyTorch user can turn on (checkpointing, offloading, optimizer placement, "
    "allocator) for a captured step, print the code to apply them, and verify them by capture",
    [](CLI::App& app) -> std::function<int()> {
        auto o = std::make_shared<Options>();
        app.add_option("trace", o->trace, "A captured training step (mhc-torch capture)")->required();
        app.add_option("--setting", o->setting, "Predict this one setting (JSON or a file)");
        app.add_option("--link", o->link, "Link to the host: a preset or a link profile");
        app.add_flag("--verify", o->verify, "Capture the step with the setting applied and compare");
        app.add_flag("--json", o->json, "Machine-readable output");
        return [o] { return run(*o); };
    }}};

}  // namespace
