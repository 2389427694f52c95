// mhc import FILE -o trace.db: PyTorch memory snapshots, Kineto JSON, execution traces
// (optionally joined with Kineto) and Nsight Systems SQLite exports (docs/import.md).
#include <cstdio>
#include <memory>

#include "command.hpp"
#include "mhc/common/units.hpp"
#include "mhc/trace/import/import.hpp"

namespace {

namespace imp = mhc::trace::import;

mhc::cli::Registration reg{mhc::cli::Command{
    "import", "Import a PyTorch memory snapshot, Kineto trace, execution trace or nsys SQLite export",
    [](CLI::App& app) -> std::function<int()> {
        auto in = std::make_shared<std::string>();
        auto out = std::make_shared<std::string>();
        auto format = std::make_shared<std::string>("auto");
        auto kineto = std::make_shared<std::string>();
        auto max_input = std::make_shared<std::string>(std::to_string(imp::kDefaultMaxInputSize >> 20) + "MiB");
        auto force = std::make_shared<bool>(false);
        app.add_option("file", *in, "Input file")->required()->check(CLI::ExistingFile);
        app.add_option("-o,--output", *out, "Trace file to write (.db)")->required()->type_name("FILE");
        app.add_option("--format", *format, "Input format: snapshot, kineto, et, nsys, or auto (from the content)")
            ->check(CLI::IsMember({"auto", "snapshot", "kineto", "et", "nsys"}))
            ->type_name("FORMAT")
            ->default_str(*format);
        app.add_option("--kineto", *kineto, "Kineto trace of the same run (execution traces: timing)")
            ->check(CLI::ExistingFile)
            ->type_name("FILE");
        app.add_option("--max-input-size", *max_input,
                       "Most decompressed bytes of a gzip input held at once (a snapshot, one ET node or "
                       "Kineto event)")
            ->type_name("SIZE")
            ->default_str(*max_input);
        app.add_flag("--force", *force, "Replace an existing output file (and the runs stored in it)");
        return [in, out, format, kineto, max_input, force] {
            imp::Options opt;
            opt.format = imp::format_from_string(*format);
            opt.kineto_path = *kineto;
            opt.max_input_size = static_cast<uint64_t>(
                mhc::cli::option_value("--max-input-size", [&] { return mhc::parse_size(*max_input, 1); }));
            opt.if_exists = *force ? mhc::IfExists::Replace : mhc::IfExists::Refuse;
            imp::Result r = imp::import_file(*in, *out, opt);
            std::printf("%s: %s, %lld input events -> %lld allocations, %lld kernels, %lld accesses, "
                        "%lld copies, %lld markers\n",
                        out->c_str(), std::string(imp::to_string(r.format)).c_str(),
                        static_cast<long long>(r.events), static_cast<long long>(r.allocations),
                        static_cast<long long>(r.kernels), static_cast<long long>(r.accesses),
                        static_cast<long long>(r.copies), static_cast<long long>(r.markers));
            for (const char* k : {"timing", "accesses", "reconstructed_blocks", "pairing", "missing"}) {
                auto it = r.meta.find(k);
                if (it != r.meta.end()) std::printf("  %-21s %s\n", k, it->second.c_str());
            }
            // Where a Kineto trace's Total Allocated and the imported curve disagree: one line per device.
            for (const auto& [k, v] : r.meta)
                if ((k.rfind("kineto.total_allocated.", 0) == 0 && v.rfind("agrees", 0) != 0) ||
                    k == "kineto.negative_durations")
                    std::printf("  warning               %s\n", v.c_str());
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
