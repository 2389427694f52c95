// bench_datasets [PRESET] [MIN_ROWS] [OUT]: generates PRESET (default llama2-7b) with enough
// steps for at least MIN_ROWS rows (default 10,000,000) and prints rows/s and bytes/row.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "mhc/datasets/generate.hpp"
#include "mhc/bench/args.hpp"

namespace {

int run_benchmark(int argc, char** argv) {
    using namespace mhc::datasets;
    const mhc::bench::Args args(argc, argv, "[PRESET] [MIN_ROWS] [OUT]");
    args.at_most(3);
    std::string name = args.text(0, "llama2-7b");
    int64_t min_rows = args.count(1, "MIN_ROWS", 10000000, 1, int64_t(1) << 40);
    std::string out = args.text(2, (std::filesystem::temp_directory_path() /
                                    ("mhc_bench_generate_" + std::to_string(getpid()) + ".db")).string());
    GeneratorConfig config = preset(name);
    // Rows per step from one- and two-step runs (the first step also holds the
    // parameters and the lazily created optimizer states), then enough steps.
    config.steps = 1;
    int64_t r1 = generate_file(config, out).rows;
    std::filesystem::remove(out);
    config.steps = 2;
    int64_t r2 = generate_file(config, out).rows;
    int64_t per_step = r2 - r1;
    config.steps = static_cast<int>(1 + (min_rows - r1 + per_step - 1) / per_step);
    std::filesystem::remove(out);
    auto cpu = [] {
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
               1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
    };
    double c0 = cpu();
    auto t0 = std::chrono::steady_clock::now();
    GenerateStats st = generate_file(config, out);   // includes indexes, commit and rename
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu_secs = cpu() - c0;
    auto size = std::filesystem::file_size(out);
    std::printf("preset %s, %d steps: %lld rows in %.2f s wall = %.0f rows/s; %.2f s CPU = %.0f rows/s "
                "(generate, write, index, rename), %.1f bytes/row, file %.1f MB\n",
                name.c_str(), config.steps, static_cast<long long>(st.rows), secs, static_cast<double>(st.rows) / secs, cpu_secs,
                static_cast<double>(st.rows) / cpu_secs, static_cast<double>(size) / static_cast<double>(st.rows),
                static_cast<double>(size) / 1e6);
    if (argc <= 3) std::filesystem::remove(out);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_datasets", [&] { return run_benchmark(argc, argv); });
}
