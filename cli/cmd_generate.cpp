// mhc generate: a synthetic training trace of a decoder-only transformer (docs/datasets.md).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <sys/statvfs.h>
#include <map>
#include <memory>

#include "command.hpp"
#include "mhc/common/bandwidth.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"
#include "mhc/datasets/formulas.hpp"
#include "mhc/datasets/generate.hpp"

namespace {

// "54.0 million", "6.74 billion": a count in words ("0.054 B parameters" read as bytes, beside
// sizes written in B everywhere else).
std::string count_words(double count) {
    char text[48];
    if (count >= 1e9) std::snprintf(text, sizeof text, "%.2f billion", count / 1e9);
    else if (count >= 1e6) std::snprintf(text, sizeof text, "%.1f million", count / 1e6);
    else std::snprintf(text, sizeof text, "%.0f", count);
    return text;
}

// "2.75 TFLOP": decimal prefixes, as FLOP counts are quoted (it was printf's "2.75e+12 FLOP").
std::string flop_words(double flop) {
    static const char* const prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
    size_t at = 0;
    while (flop >= 1000 && at + 1 < std::size(prefixes)) {
        flop /= 1000;
        ++at;
    }
    char text[48];
    std::snprintf(text, sizeof text, "%.2f %sFLOP", flop, prefixes[at]);
    return text;
}

using namespace mhc::datasets;

// SIGINT sets a flag the generator checks; it then throws Cancelled and the Writer removes
// its temporary file, so an interrupted run leaves nothing behind.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

struct Options {
    std::string preset = "gpt2-small", output, arch, dtype, gpu, bucket, gpu_memory, gpu_bw;
    int steps = 0, layers = 0, heads = 0, kv_heads = 0, micro_batches = 0, dp = 0, tp = 0, pp = 0;
    int hc = 0, sinkhorn_iters = 0, hc_block = 0;
    int64_t hidden = 0, ffn = 0, seq = 0, micro_batch = 0, vocab = 0, max_positions = 0;
    std::string seed;
    double jitter = 0, gpu_flops = 0;
    bool zero1 = false, recompute = false, flash = false, dropout = false, hc_recompute = false;
    bool force = false;
    bool all_ranks = false;
    std::string max_output_size = "8GiB";
    int pp_stage = 0, dp_rank = 0, tp_rank = 0;
    std::map<std::string, CLI::Option*> opt;
    bool given(const char* name) const { return opt.at(name)->count() > 0; }
};

// 0 ... 2^64 - 1, said rather than clamped when it is not one.
uint64_t parse_seed(const std::string& text) {
    const auto seed = mhc::parse_integer<uint64_t>(text);
    if (!seed) throw mhc::Error(mhc::refused_value("--seed", text, "not a whole number in 0..2^64 - 1"));
    return *seed;
}

template <class T>
void set_if(const Options& o, const char* name, T& dst, const T& src) {
    if (o.given(name)) dst = src;
}

// --gpu-bw, --gpu-flops and --gpu-memory within what validate() takes (docs/datasets.md), a GPU's
// memory from 1 MiB.
constexpr double kMinGpuBw = 1e3, kMaxGpuBw = 1e16;
constexpr int64_t kMinGpuMemory = int64_t{1} << 20, kMaxGpuMemory = int64_t{1} << 56;

GeneratorConfig build(const Options& o) {
    GeneratorConfig c = preset(o.preset);
    set_if(o, "steps", c.steps, o.steps);
    if (o.given("seed")) c.seed = parse_seed(o.seed);
    set_if(o, "layers", c.layers, o.layers);
    set_if(o, "hidden", c.hidden, o.hidden);
    set_if(o, "heads", c.heads, o.heads);
    // New heads without --kv-heads: keep the preset's kind of attention (MHA stays MHA).
    if (o.given("heads") && !o.given("kv-heads"))
        c.kv_heads = preset(o.preset).kv_heads == preset(o.preset).heads ? c.heads : std::min(c.kv_heads, c.heads);
    set_if(o, "kv-heads", c.kv_heads, o.kv_heads);
    set_if(o, "ffn", c.ffn, o.ffn);
    set_if(o, "seq", c.seq, o.seq);
    if (o.given("seq") && !o.given("max-positions") && c.max_positions && c.max_positions < c.seq)
        c.max_positions = c.seq;
    set_if(o, "micro-batch", c.micro_batch, o.micro_batch);
    set_if(o, "micro-batches", c.micro_batches, o.micro_batches);
    set_if(o, "vocab", c.vocab, o.vocab);
    set_if(o, "max-positions", c.max_positions, o.max_positions);
    set_if(o, "dp", c.dp, o.dp);
    set_if(o, "tp", c.tp, o.tp);
    set_if(o, "pp", c.pp, o.pp);
    set_if(o, "zero1", c.zero1, o.zero1);
    set_if(o, "recompute", c.recompute, o.recompute);
    set_if(o, "flash", c.flash, o.flash);
    set_if(o, "dropout", c.dropout, o.dropout);
    set_if(o, "hc", c.hc, o.hc);
    set_if(o, "sinkhorn-iters", c.sinkhorn_iters, o.sinkhorn_iters);
    set_if(o, "hc-recompute", c.hc_recompute, o.hc_recompute);
    set_if(o, "hc-block", c.hc_block, o.hc_block);
    set_if(o, "jitter", c.jitter, o.jitter);
    if (o.given("arch")) c.arch = o.arch == "gpt2" ? Arch::Gpt2 : Arch::Llama;
    if (o.given("dtype")) c.dtype = o.dtype == "bf16" ? DType::BF16 : o.dtype == "fp16" ? DType::FP16 : DType::FP32;
    if (o.given("gpu")) c.gpu = gpu_spec(o.gpu);
    if (o.given("gpu-flops")) c.gpu.matmul_flops = o.gpu_flops;
    using mhc::cli::option_value;
    // The bounds said of the option as typed (validate() said "field 'gpu-bw': '1': not in [1000,
    // 1e16] B/s" of --gpu-bw 1B/s), and a GPU of less than 1 MiB is none (--gpu-memory 1B was taken).
    if (o.given("gpu-bw"))
        c.gpu.mem_bw = option_value("--gpu-bw", [&] { return mhc::parse_bandwidth_in(o.gpu_bw, kMinGpuBw, kMaxGpuBw); });
    if (o.given("gpu-memory"))
        c.gpu.memory_bytes =
            option_value("--gpu-memory", [&] { return mhc::parse_size(o.gpu_memory, kMinGpuMemory, kMaxGpuMemory); });
    if (o.given("bucket")) c.bucket_bytes = option_value("--bucket", [&] { return mhc::parse_size(o.bucket, 1); });
    return c;
}

// "a, b or c": names listed as every option's help lists them (docs/cli.md, "Help").
std::string names_list(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
    return s;
}

// job.db -> job.rank3.db (before the extension of the last path component, as the recorder
// names its per-rank files).
std::string rank_path(const std::string& base, int rank) {
    std::string tag = ".rank" + std::to_string(rank);
    size_t slash = base.find_last_of('/');
    size_t dot = base.find_last_of('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1)
        return base + tag;
    return base.substr(0, dot) + tag + base.substr(dot);
}

// "40 s", "12 min", "3.4 h", "12 days": how long a write would take, said before it starts.
std::string duration_words(double seconds) {
    char text[48];
    if (seconds < 90) std::snprintf(text, sizeof text, "%.0f s", std::max(seconds, 1.0));
    else if (seconds < 90 * 60) std::snprintf(text, sizeof text, "%.0f min", seconds / 60);
    else if (seconds < 48 * 3600) std::snprintf(text, sizeof text, "%.1f h", seconds / 3600);
    else if (seconds < 730 * 86400.0) std::snprintf(text, sizeof text, "%.0f days", seconds / 86400);
    else std::snprintf(text, sizeof text, "%.0f years", seconds / (365.25 * 86400));
    return text;
}

// "12,345,678"
std::string grouped(int64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

// Rows a second the generator writes on one core: the slowest of the shapes measured (CPU time,
// 1.10 to 1.67 million rows a second over five presets and shapes of 1.2 to 8 million rows;
// docs/results.md, "generate's write rate"). The time said is CPU time: on a busy machine the
// wall time is longer, by as much as the machine is shared.
constexpr double kRowsPerSecond = 1.1e6;

// How large the output will be, refused before a byte is written when it passes
// --max-output-size or the free space of the output's filesystem (docs/datasets.md, "Size").
// Returns the estimated bytes, for the progress line.
int64_t check_output_size(const Options& opts, const GeneratorConfig& cfg, size_t files) {
    const OutputEstimate one = estimate_output(cfg);
    const double rows = static_cast<double>(one.rows.total()) * static_cast<double>(files);
    const int64_t bytes = static_cast<int64_t>(
        std::min(static_cast<double>(one.bytes) * static_cast<double>(files), 4e18));
    const int64_t limit = mhc::cli::option_value("--max-output-size",
                                                 [&] { return mhc::parse_size(opts.max_output_size, 1); });
    char rows_text[64];
    if (rows < 1e9) std::snprintf(rows_text, sizeof rows_text, "%s rows", grouped(static_cast<int64_t>(rows)).c_str());
    else std::snprintf(rows_text, sizeof rows_text, "%.3g rows", rows);
    const std::string what = "about " + mhc::format_bytes(bytes) + " (" + (one.exact ? "" : "about ") + rows_text +
                             (files > 1 ? " in " + std::to_string(files) + " files" : "") + ", about " +
                             duration_words(rows / kRowsPerSecond) + " of one core to write)";
    const std::string target = files > 1 ? rank_path(opts.output, 0) + ", ..." : opts.output;
    if (bytes > limit) {
        // A round size above the estimate, in the largest binary unit that keeps it whole.
        const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
        double value = static_cast<double>(bytes) * 1.1 / 1024;
        size_t unit = 0;
        for (; value >= 1024 && unit < 5; ++unit) value /= 1024;
        char past[32];
        std::snprintf(past, sizeof past, "%.0f%s", std::ceil(value), units[unit]);
        throw mhc::Error(target + ": would be " + what + ", more than --max-output-size " + mhc::format_bytes(limit) +
                             "; pass --max-output-size " + past +
                             " to write it, or fewer --steps, --layers or --micro-batches",
                         mhc::Error::Kind::BadInput);
    }
    // The trace is written beside the output, then renamed: its filesystem must hold it whole.
    std::filesystem::path dir = std::filesystem::path(opts.output).parent_path();
    if (dir.empty()) dir = ".";
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) == 0 && fs.f_blocks > 0) {   // not /proc, /dev/fd: no size to speak of
        const double free_bytes = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
        if (static_cast<double>(bytes) > free_bytes)
            throw mhc::Error(target + ": would be " + what + ", but its filesystem has only " +
                                 mhc::format_bytes(static_cast<int64_t>(free_bytes)) + " of space free",
                             mhc::Error::Kind::BadInput);
    }
    return bytes;
}

int run_ranks(const Options& o, GeneratorConfig cfg, const GenerateHooks& hooks) {
    std::vector<RankFile> files;
    if (o.all_ranks) {
        for (int s = 0; s < cfg.pp; ++s)
            for (int d = 0; d < cfg.dp; ++d)
                for (int t = 0; t < cfg.tp; ++t)
                    files.push_back({s, d, t, rank_path(o.output, global_rank(cfg, s, d, t))});
    } else {
        files.push_back({o.pp_stage, o.dp_rank, o.tp_rank, o.output});
    }
    // OUTPUT names the files (job.db -> job.rank0.db): a folder would give hidden ones (DIR/.rank0).
    std::error_code ec;
    if (o.output.empty() || o.output.back() == '/' || std::filesystem::is_directory(o.output, ec))
        throw mhc::Error(o.output + ": is a directory; -o names the job's files, e.g. " +
                             (std::filesystem::path(o.output) / "job.db").lexically_normal().string() +
                             " for job.rank0.db, job.rank1.db, ...",
                         mhc::Error::Kind::BadInput);
    if (files.size() > 4096)
        throw mhc::Error("--all-ranks: " + std::to_string(files.size()) + " ranks (pp x dp x tp) is more than 4096 files",
                         mhc::Error::Kind::BadInput);
    for (const auto& f : files) mhc::refuse_special_file(f.path);   // before any file is generated
    for (const auto& f : files)
        if (!o.force && std::filesystem::exists(f.path))
            throw mhc::Error(mhc::already_exists(f.path, "the runs stored in it"), mhc::Error::Kind::BadInput);
    auto stats = generate_ranks(cfg, files, hooks);
    for (size_t i = 0; i < files.size(); ++i)
        std::printf("%s: rank %d (pp stage %d, dp rank %d, tp rank %d of %d x %d x %d): %lld rows (%lld kernels), "
                    "modelled time %s (a roofline estimate)\n",
                    mhc::printable(files[i].path).c_str(), global_rank(cfg, files[i].pp_stage, files[i].dp_rank, files[i].tp_rank),
                    files[i].pp_stage, files[i].dp_rank, files[i].tp_rank, cfg.pp, cfg.dp, cfg.tp,
                    (long long)stats[i].rows, (long long)stats[i].kernels, mhc::format_ns(stats[i].end_time_ns).c_str());
    return mhc::cli::kExitOk;
}

// The library names a configuration's fields ("field 'pp': '2': must divide layers (3)"); the command
// line names its options ("--pp: '2': must divide layers (3)").
void validate_options(const GeneratorConfig& cfg) {
    try {
        validate(cfg);
    } catch (const mhc::Error& e) {
        const std::string msg = e.what(), field = "field '";
        const size_t end = msg.find("': ", field.size());
        if (msg.rfind(field, 0) != 0 || end == std::string::npos) throw;
        std::string name = msg.substr(field.size(), end - field.size());
        if (name == "bucket-bytes") name = "bucket";
        throw mhc::Error(mhc::of_option("--" + name, msg.substr(end + 3)), e.kind());
    }
}

// Options given that the configuration leaves with nothing to do: refused, saying why, as simulate
// and advise refuse theirs (docs/cli.md). Only options given: a preset's own setting an override
// leaves idle (llama2-7b's ZeRO-1 with --dp 1) is not the user's word. A negation (--no-zero1)
// says what happens anyway and passes.
void refuse_idle_options(const Options& opts, const GeneratorConfig& cfg) {
    const std::string dp = "dp " + std::to_string(cfg.dp), hc = "--hc " + std::to_string(cfg.hc);
    const bool one_stream = cfg.hc == 1;
    struct Idle {
        const char* option;
        bool idle;
        std::string why;
    };
    const Idle rules[] = {
        {"zero1", cfg.zero1 && cfg.dp == 1,
         "with " + dp + ": ZeRO-1 shards the optimizer states over data-parallel ranks"},
        {"bucket", cfg.dp == 1, "with " + dp + ": gradient buckets are all-reduced over data-parallel ranks"},
        {"sinkhorn-iters", one_stream, "with " + hc + ": Sinkhorn-Knopp mixes the streams of mHC (--hc 2 or more)"},
        {"hc-recompute", one_stream && cfg.hc_recompute,
         "with " + hc + ": there is no n-stream residual (--hc 2 or more)"},
        {"hc-block", one_stream, "with " + hc + ": there is no n-stream residual (--hc 2 or more)"},
        {"hc-recompute", cfg.recompute && cfg.hc_recompute,
         "with --recompute: every layer is recomputed whole, the mHC blocks with it"},
        {"hc-block", cfg.recompute, "with --recompute: every layer is recomputed whole, the mHC blocks with it"},
        {"hc-block", !cfg.hc_recompute, "without --hc-recompute: the blocks are those it recomputes"},
        {"max-positions", cfg.arch == Arch::Llama, "with --arch llama: its positions are rotary, not learned"},
        {"seed", cfg.jitter == 0, "with --jitter 0: the seed draws the jitter alone"},
    };
    for (const auto& rule : rules)
        if (rule.idle && opts.given(rule.option))
            throw mhc::Error(std::string("--") + rule.option + " " + rule.why + "; it does nothing here: leave it out",
                             mhc::Error::Kind::BadInput);
}

int run(const Options& o) {
    GeneratorConfig cfg = build(o);
    const bool one_rank = o.given("pp-stage") || o.given("dp-rank") || o.given("tp-rank");
    if (o.all_ranks && one_rank)   // --all-ranks wrote every rank, the one named left unsaid
        throw mhc::Error(
            "--all-ranks writes every rank; --pp-stage, --dp-rank and --tp-rank choose one: give one or the other",
            mhc::Error::Kind::BadInput);
    const bool ranks = o.all_ranks || one_rank;
    if (ranks) {
        cfg.multi_rank = true;
        cfg.pp_stage = o.pp_stage;
        cfg.dp_rank = o.dp_rank;
        cfg.tp_rank = o.tp_rank;
    }
    validate_options(cfg);
    refuse_idle_options(o, cfg);
    if (!o.all_ranks) mhc::refuse_special_file(o.output);   // /dev/fd/1 is not too small: it is no file
    // Before any file: refuses an output too large for the bound or the disk.
    const size_t files = o.all_ranks
                             ? static_cast<size_t>(cfg.pp) * static_cast<size_t>(cfg.dp) * static_cast<size_t>(cfg.tp)
                             : 1;
    const int64_t expected = files <= 4096 ? check_output_size(o, cfg, files) : 0;
    GenerateHooks hooks;
    hooks.cancel = &g_interrupted;
    hooks.if_exists = o.force ? mhc::IfExists::Replace : mhc::IfExists::Refuse;
    const bool progress = mhc::cli::show_progress();
    int last = -1;
    const std::string of_size = " of about " + mhc::format_bytes(expected);
    if (progress)
        hooks.progress = [&last, &of_size](double fraction) {
            int pct = static_cast<int>(fraction * 100);
            if (pct != last) {
                last = pct;
                std::fprintf(stderr, "\rgenerating: %3d%%%s", pct, of_size.c_str());
            }
        };
    g_interrupted.store(false);
    struct sigaction sa {}, old {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    GenerateStats st;
    try {
        if (ranks) {
            int rc = run_ranks(o, cfg, hooks);
            sigaction(SIGINT, &old, nullptr);
            if (progress) std::fprintf(stderr, "\r%*s\r", 40, "");
            return rc;
        }
        st = generate_file(cfg, o.output, hooks);
    } catch (const Cancelled&) {
        sigaction(SIGINT, &old, nullptr);
        if (progress) std::fprintf(stderr, "\n");
        // As a signal's line says elsewhere (output_file.cpp, say_what_is_left).
        if (o.all_ranks)
            mhc::say("mhc: stopped by SIGINT before the job's files (%s, ...) were written (no part of them left)\n",
                         rank_path(o.output, 0).c_str());
        else
            mhc::say("mhc: stopped by SIGINT before %s was written (no part of it left)\n", o.output.c_str());
        return 130;
    } catch (...) {
        sigaction(SIGINT, &old, nullptr);
        if (progress) std::fprintf(stderr, "\n");
        throw;
    }
    sigaction(SIGINT, &old, nullptr);
    if (progress) std::fprintf(stderr, "\r%*s\r", 40, "");
    Dims d = dims(cfg);
    // One fact a line, labelled as `mhc info` lays them out (it was one line of 400 characters), the
    // time said to be the generator's model: no GPU ran these kernels.
    std::printf("%s: written in %.2f s\n", mhc::printable(o.output).c_str(), st.seconds);
    std::printf("rows        %lld: %lld allocations, %lld kernels, %lld accesses, %lld markers, %lld copies\n",
                static_cast<long long>(st.rows), static_cast<long long>(st.allocations),
                static_cast<long long>(st.kernels), static_cast<long long>(st.accesses),
                static_cast<long long>(st.markers), static_cast<long long>(st.copies));
    std::printf("model       preset %s (%s), %s parameters\n", cfg.preset.c_str(),
                std::string(to_string(cfg.arch)).c_str(), count_words(static_cast<double>(st.parameters)).c_str());
    std::printf("parallelism tp %d, pp %d (stage 0 written), dp %d%s: %s parameters on this GPU\n", cfg.tp, cfg.pp,
                cfg.dp, cfg.zero1 ? " ZeRO-1" : "", count_words(static_cast<double>(st.local_parameters)).c_str());
    std::printf("steps       %d, each %d micro-batch%s of %lld x %lld tokens, %s a step; seed %llu\n", cfg.steps,
                cfg.micro_batches, cfg.micro_batches == 1 ? "" : "es", static_cast<long long>(cfg.micro_batch),
                static_cast<long long>(cfg.seq), flop_words(st.flops_per_step).c_str(),
                static_cast<unsigned long long>(cfg.seed));
    std::printf("activations %s saved per layer (%lld layers on this GPU, hc n=%d%s%s%s)\n",
                mhc::format_bytes(st.activation_bytes_per_layer).c_str(), static_cast<long long>(d.layers), cfg.hc,
                cfg.flash ? ", flash" : "", cfg.recompute ? ", recompute" : "",
                cfg.hc_recompute && cfg.hc > 1 ? ", mHC block recompute" : "");
    std::printf("time        %s on %s, modelled: a roofline of the GPU, not a measurement\n",
                mhc::format_ns(st.end_time_ns).c_str(), cfg.gpu.device_name.c_str());
    return mhc::cli::kExitOk;
}

mhc::cli::Registration reg{mhc::cli::Command{
    "generate", "Write a synthetic training trace of a transformer (presets and overrides)",
    [](CLI::App& app) -> std::function<int()> {
        auto o = std::make_shared<Options>();
        auto& m = o->opt;
        const std::vector<std::string> arch_names{"gpt2", "llama"}, dtype_names{"bf16", "fp16", "fp32"};
        m["preset"] = app.add_option("--preset", o->preset,
                                     "Model, parallelism and GPU: " + names_list(preset_names()) +
                                         "; the options below change them")
                          ->check(mhc::cli::one_of(preset_names()))
                          ->type_name("NAME")
                          ->default_str(o->preset);
        app.add_option("-o,--output", o->output, "Trace file to write (.db)")->required()->type_name("FILE");
        app.add_flag("--force", o->force, "Replace an existing output file (and the runs stored in it)");
        app.add_option("--max-output-size", o->max_output_size,
                       "Refuse to write more than this (the size is estimated before writing)")
            ->type_name("SIZE")
            ->default_str(o->max_output_size);
        m["steps"] = app.add_option("--steps", o->steps, "Training steps")->check(CLI::Range(1, 1000000));
        m["seed"] = app.add_option("--seed", o->seed, "Seed of the jitter")->type_name("UINT");
        m["arch"] = app.add_option("--arch", o->arch, "Architecture: " + names_list(arch_names))
                        ->check(mhc::cli::one_of(arch_names))
                        ->type_name("NAME");
        m["layers"] = app.add_option("--layers", o->layers, "Transformer layers (whole model)")->check(CLI::Range(1, 4096));
        m["hidden"] = app.add_option("--hidden", o->hidden, "Hidden size")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
        m["heads"] = app.add_option("--heads", o->heads, "Attention heads")->check(CLI::Range(1, 16384));
        m["kv-heads"] = app.add_option("--kv-heads", o->kv_heads, "Key/value heads (GQA)")->check(CLI::Range(1, 16384));
        m["ffn"] = app.add_option("--ffn", o->ffn, "MLP inner size")->check(CLI::Range(int64_t(1), int64_t(1) << 22));
        m["seq"] = app.add_option("--seq", o->seq, "Sequence length")->check(CLI::Range(int64_t(1), int64_t(1) << 22));
        m["micro-batch"] = app.add_option("--micro-batch", o->micro_batch, "Sequences per micro-batch")->check(CLI::Range(int64_t(1), int64_t(65536)));
        m["micro-batches"] = app.add_option("--micro-batches", o->micro_batches, "Micro-batches per step (accumulation / pipeline)")->check(CLI::Range(1, 4096));
        m["vocab"] = app.add_option("--vocab", o->vocab, "Vocabulary size")->check(CLI::Range(int64_t(1), int64_t(1) << 26));
        m["max-positions"] = app.add_option("--max-positions", o->max_positions, "gpt2 learned positions (0: seq)")->check(CLI::Range(int64_t(0), int64_t(1) << 22));
        m["dtype"] = app.add_option("--dtype", o->dtype, "Precision: " + names_list(dtype_names))
                         ->check(mhc::cli::one_of(dtype_names))
                         ->type_name("NAME");
        m["dp"] = app.add_option("--dp", o->dp, "Data-parallel size")->check(CLI::Range(1, 65536));
        m["tp"] = app.add_option("--tp", o->tp, "Tensor-parallel size")->check(CLI::Range(1, 1024));
        m["pp"] = app.add_option("--pp", o->pp, "Pipeline-parallel size (the trace is stage 0 unless --pp-stage or --all-ranks)")->check(CLI::Range(1, 1024));
        m["pp-stage"] = app.add_option("--pp-stage", o->pp_stage, "Multi-rank: the pipeline stage to write (whole pipeline simulated)")->check(CLI::Range(0, 1023));
        m["dp-rank"] = app.add_option("--dp-rank", o->dp_rank, "Multi-rank: the data-parallel rank to write")->check(CLI::Range(0, 65535));
        m["tp-rank"] = app.add_option("--tp-rank", o->tp_rank, "Multi-rank: the tensor-parallel rank to write")->check(CLI::Range(0, 1023));
        m["all-ranks"] = app.add_flag("--all-ranks", o->all_ranks, "Multi-rank: write every rank, OUTPUT.rankN.ext each");
        m["zero1"] = app.add_flag("--zero1,!--no-zero1", o->zero1, "Shard optimizer states over dp");
        m["bucket"] = app.add_option("--bucket", o->bucket, "Gradient bucket size (e.g. 25MiB)")->type_name("SIZE");
        m["recompute"] = app.add_flag("--recompute,!--no-recompute", o->recompute, "Full activation recomputation");
        m["flash"] = app.add_flag("--flash,!--no-flash", o->flash, "Flash attention");
        m["dropout"] = app.add_flag("--dropout,!--no-dropout", o->dropout, "Dropout (saves masks)");
        m["hc"] = app.add_option("--hc", o->hc, "Hyper-connection streams n (1 plain, 4 mHC)")->check(CLI::Range(1, 16));
        m["sinkhorn-iters"] = app.add_option("--sinkhorn-iters", o->sinkhorn_iters, "Sinkhorn-Knopp iterations")->check(CLI::Range(1, 1000));
        m["hc-recompute"] = app.add_flag("--hc-recompute,!--no-hc-recompute", o->hc_recompute, "mHC block recomputation of the n-stream residual");
        m["hc-block"] = app.add_option("--hc-block", o->hc_block, "Layers per mHC recompute block (0: sqrt(nL/(n+2)))")->check(CLI::Range(0, 4096));
        m["gpu"] = app.add_option("--gpu", o->gpu, "GPU: " + names_list(gpu_names()))
                       ->check(mhc::cli::one_of(gpu_names()))
                       ->type_name("NAME");
        m["gpu-flops"] = app.add_option("--gpu-flops", o->gpu_flops, "Peak bf16 matmul FLOP/s override")
                             ->check(mhc::cli::finite_number())
                             ->check(CLI::PositiveNumber)
                             ->check(mhc::cli::number_in([](double flops) { return flops >= 1e6 && flops <= 1e20; },
                                                         "in [1e6, 1e20] FLOP/s"));
        m["gpu-bw"] = app.add_option("--gpu-bw", o->gpu_bw, "Memory bandwidth override (e.g. 3.35TB/s)")->type_name("RATE");
        m["gpu-memory"] = app.add_option("--gpu-memory", o->gpu_memory, "Device memory override (e.g. 80GiB)")->type_name("SIZE");
        m["jitter"] = app.add_option("--jitter", o->jitter, "Relative jitter of durations, from 0 to 0.5")
                          ->check(mhc::cli::finite_number())
                          ->check(CLI::Range(0.0, 0.5));
        return [o] { return run(*o); };
    }}};

}  // namespace
