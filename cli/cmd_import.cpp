// mhc import FILE -o trace.db: PyTorch memory snapshots, Kineto JSON, execution traces
// (optionally joined with Kineto) and Nsight Systems SQLite exports (docs/import.md).
#include <cstdio>
#include <memory>

#include "command.hpp"
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
        auto max_input = std::make_shared<uint64_t>(imp::kDefaultMaxInputSize);
        auto force = std::make_shared<bool>(false);
        app.add_option("file", *in, "Input file")->required()->check(CLI::ExistingFile);
        app.add_option("-o,--output", *out, "Trace file to write (.db)")->required();
        app.add_option("--format", *format, "Input format (detected from content when omitted)")
            ->check(CLI::IsMember({"auto", "snapshot", "kineto", "et", "nsys"}));
        app.add_option("--kineto", *kineto, "Kineto trace of the same run (execution traces: timing)")
            ->check(CLI::ExistingFile);
        app.add_option("--max-input-size", *max_input,
                       "Most decompressed bytes of a gzip input held at once (a snapshot, one ET node or "
                       "Kineto event); 256MiB by default, suffixes KiB/MiB/GiB")
            ->transform(CLI::AsSizeValue(false));
        app.add_flag("--force", *force, "Replace an existing output file (and the runs stored in it)");
        return [in, out, format, kineto, max_input, force] {
            imp::Options opt;
            opt.format = imp::format_from_string(*format);
            opt.kineto_path = *kineto;
            opt.max_input_size = *max_input;
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
                if (k.rfind("kineto.total_allocated.", 0) == 0 && v.rfind("agrees", 0) != 0)
                    std::printf("  warning               %s\n", v.c_str());
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
