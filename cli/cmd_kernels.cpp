// `mhc kernels sinkhorn`: runs the batched Sinkhorn-Knopp kernels on raw tensors in files
// (little-endian, T x n x n, row-major; T from the file size), forward or backward.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/sinkhorn.hpp"

namespace mhc::cli {
namespace {

namespace k = mhc::kernels;

k::DType parse_dtype(const std::string& s) {
    if (s == "f32" || s == "float32") return k::DType::F32;
    if (s == "bf16" || s == "bfloat16") return k::DType::BF16;
    throw Error(quoted_value(s) + ": not an element type; use f32 or bf16 (float32, bfloat16)");
}

// Reads a T x n x n tensor; the size must be a whole number of matrices.
// A tensor is read by its size and a seek: a folder was "9223372036854775807 bytes is not a whole
// number of ... matrices", /dev/zero "is empty", a named pipe waited for a writer without a word
// and <(cmd) "cannot open for reading"; each is said as what it is, as for a trace.
std::vector<unsigned char> read_tensor(const std::string& path, int n, k::DType t, int64_t& tokens) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(no_such_file(path));
    if (S_ISDIR(st.st_mode)) throw Error(where(path, "is a directory"));
    if (!S_ISREG(st.st_mode))
        throw Error(where(path, std::string("is a ") +
                                    (S_ISFIFO(st.st_mode)  ? "pipe"
                                     : S_ISCHR(st.st_mode) ? "character device"
                                     : S_ISBLK(st.st_mode) ? "block device"
                                                           : "socket") +
                                    ", not a regular file: a tensor is read by its size; give a file"));
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error(where(path, std::string("cannot read: ") + std::strerror(errno)));
    const auto size = static_cast<int64_t>(in.tellg());
    const int64_t per = static_cast<int64_t>(n) * n * k::dtype_size(t);
    if (size == 0) throw Error(where(path, "is empty"));
    if (size % per != 0)
        throw Error(where(path, std::to_string(size) + " bytes is not a whole number of " + std::to_string(n) + "x" +
                                    std::to_string(n) + " " + k::to_string(t) + " matrices (" +
                                    std::to_string(per) + " bytes each)"));
    tokens = size / per;
    std::vector<unsigned char> data(static_cast<size_t>(size));
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(data.data()), size)) throw Error(where(path, "read failed"));
    return data;
}

void check_finite(const std::string& path, int n, int64_t tokens, k::DType t, const std::vector<unsigned char>& d) {
    int64_t bad = k::first_nonfinite_token(n, tokens, {d.data(), t});
    if (bad >= 0)
        throw Error(where(path, "token " + std::to_string(bad) + " contains NaN or Inf"));
}

// All-or-nothing: write a temporary file beside the target, then rename over it; an existing one
// only with --force, as every command's output.
void write_atomic(const std::string& path, const void* data, size_t bytes, bool force) {
    mhc::write_file_atomically(path, std::string_view(static_cast<const char*>(data), bytes),
                               force ? mhc::IfExists::Replace : mhc::IfExists::Refuse);
}

// --eps and --tol are f32 in the kernels: a value below f32's least normal number became 0 or lost
// its digits (--tol 1e-50 ran fixed iterations, --eps 1e300 became inf), and one of 1 or more is
// meaningless (1e20 was taken: every entry divided to 0).
constexpr double kF32Least = 1.18e-38;
constexpr const char* kSumsNearOne =
    "it is added to row and column sums near 1 (eps 1 would halve each), and f32 holds no smaller normal number";

struct Args {
    int n = 4, iters = 20, threads = 0;
    float eps = 1e-6f, tol = 0.0f;
    bool column_first = false, log_domain = false, backward = false, force = false;
    std::string device = "cpu", input, output, grad, grad_output;
    std::string input_dtype = "f32", output_dtype = "f32";
    bool eps_given = false, threads_given = false;   // --eps, --threads given (not their defaults)
};

// The options' ranges, named as the user typed them (kernels::validate names the library's fields).
void check_options(const Args& args) {
    // Each range is checked as the command line is read (the options' checks below); this one
    // needs --log-domain too.
    if (!args.log_domain && args.eps == 0.0f)
        throw Error(refused_value("--eps", "0", "must be more than 0 without --log-domain (it guards every division)"));
    // Options the others leave with nothing to do: taken, and the run the same without them.
    if (args.eps_given && args.log_domain)
        throw Error(
            "--eps and --log-domain: --eps guards the plain variant's divisions, and the log-domain one "
            "has none; give one");
    if (args.threads_given && args.device == "cuda")
        throw Error("--threads and --device cuda: --threads sets the CPU's threads; give one");
}

// The same file by name (it need not exist yet).
// The same file under two names: existing (a hard or symbolic link), or to be made (P.f32 and
// ./P.f32: weakly_canonical leaves a relative name whose start does not exist as it is, so the
// two names stayed apart and both outputs were written to one file).
bool same_path(const std::string& first, const std::string& second) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::equivalent(first, second, ec) && !ec) return true;
    std::error_code efirst, esecond;
    const auto cfirst = fs::weakly_canonical(fs::absolute(first, efirst), efirst),
               csecond = fs::weakly_canonical(fs::absolute(second, esecond), esecond);
    return efirst || esecond ? first == second : cfirst == csecond;
}

int run_sinkhorn(const Args& a) {
    k::SinkhornOptions o;
    o.n = a.n;
    o.iters = a.iters;
    o.eps = a.eps;
    o.tol = a.tol;
    o.column_first = a.column_first;
    o.log_domain = a.log_domain;
    o.threads = a.threads;
    if (a.device == "cpu") o.device = k::Device::Cpu;
    else if (a.device == "cuda") o.device = k::Device::Cuda;
    else throw Error(refused_value("--device", a.device, "use one of cpu, cuda"));
    check_options(a);
    k::validate(o);   // the library's own check: after check_options, it finds nothing more
    k::require_device(o.device);
    // Writing a file the command reads would replace it (even a failed run would not: the output is
    // written atomically, but a success would lose the input).
    for (const std::string* in : {&a.input, &a.grad})
        for (const std::string* out : {&a.output, &a.grad_output})
            if (!out->empty()) mhc::refuse_input_as_output(*in, *out);
    if (a.backward && same_path(a.output, a.grad_output))
        throw Error("--grad-output " + a.grad_output + " is also --output; write them to two files");
    if (a.backward && (a.grad.empty() || a.grad_output.empty()))
        throw Error("--backward needs --grad G.f32 and --grad-output dH.f32");
    if (!a.backward && (!a.grad.empty() || !a.grad_output.empty()))
        throw Error("--grad and --grad-output only make sense with --backward");
    const k::DType in_t = option_value("--input-dtype", [&] { return parse_dtype(a.input_dtype); });
    const k::DType out_t = option_value("--output-dtype", [&] { return parse_dtype(a.output_dtype); });

    int64_t T = 0, TG = 0;
    auto H = read_tensor(a.input, a.n, in_t, T);
    check_finite(a.input, a.n, T, in_t, H);
    std::vector<unsigned char> G;
    if (a.backward) {
        G = read_tensor(a.grad, a.n, in_t, TG);
        if (TG != T)
            throw Error(where(a.grad, "has " + std::to_string(TG) + " matrices but " + a.input + " has " +
                                          std::to_string(T)));
        check_finite(a.grad, a.n, TG, in_t, G);
    }
    // An existing output is refused before the work, not after it (it was replaced without a word);
    // what is wrong with the inputs is said first.
    for (const std::string* out : {&a.output, &a.grad_output})
        if (!a.force && !out->empty() && std::filesystem::exists(*out))
            throw Error(mhc::already_exists(*out));
    const size_t out_bytes = static_cast<size_t>(T) * a.n * a.n * k::dtype_size(out_t);
    std::vector<unsigned char> P(out_bytes), dH(a.backward ? out_bytes : 0);

    auto t0 = std::chrono::steady_clock::now();
    k::SinkhornReport r;
    if (o.device == k::Device::Cpu) {
        r = a.backward ? k::sinkhorn_backward(o, T, {H.data(), in_t}, {G.data(), in_t}, {dH.data(), out_t},
                                              {P.data(), out_t})
                       : k::sinkhorn_forward(o, T, {H.data(), in_t}, {P.data(), out_t});
    } else {
        k::DeviceBuffer dHin(H.size()), dP(out_bytes), dG(G.size()), ddH(dH.size());
        dHin.upload(H.data(), H.size());
        if (a.backward) {
            dG.upload(G.data(), G.size());
            r = k::sinkhorn_backward(o, T, {dHin.data(), in_t}, {dG.data(), in_t}, {ddH.data(), out_t},
                                     {dP.data(), out_t});
            ddH.download(dH.data(), dH.size());
        } else {
            r = k::sinkhorn_forward(o, T, {dHin.data(), in_t}, {dP.data(), out_t});
        }
        dP.download(P.data(), P.size());
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    write_atomic(a.output, P.data(), P.size(), a.force);
    if (a.backward) write_atomic(a.grad_output, dH.data(), dH.size(), a.force);

    std::printf("sinkhorn %s: %lld tokens, n=%d, %s, %s order, %s%d iterations, %s -> %s, %s, %.3f s\n",
                a.backward ? "backward" : "forward", static_cast<long long>(T), a.n,
                a.log_domain ? "log-domain" : "plain", a.column_first ? "column-first" : "row-first",
                a.tol > 0 ? "up to " : "", a.iters, k::to_string(in_t), k::to_string(out_t), r.backend.c_str(),
                secs);
    std::printf("convergence: max |row sum - 1| = %.3g, max |column sum - 1| = %.3g (worst token %lld)\n",
                r.max_row_err, r.max_col_err, static_cast<long long>(r.worst_token));
    if (a.tol > 0)
        std::printf("iterations: mean %.2f, max %d (tolerance %g)\n", r.iters_mean, r.iters_max, a.tol);
    return kExitOk;
}

Registration reg{Command{
    "kernels", "Run the kernels library (batched Sinkhorn-Knopp) on files",
    [](CLI::App& sub) -> std::function<int()> {
        sub.require_subcommand(1);
        auto args = std::make_shared<Args>();
        CLI::App* sk = sub.add_subcommand("sinkhorn", "Batched Sinkhorn-Knopp on raw T x n x n tensors");
        sk->group("Commands");   // as mhc --help heads its commands
        sk->add_option("--n", args->n, "Matrix size n, from 2 to 16")
            ->check(number_in([](double count) { return count >= k::kSinkhornMinN && count <= k::kSinkhornMaxN; },
                              "in " + std::to_string(k::kSinkhornMinN) + ".." + std::to_string(k::kSinkhornMaxN)))
            ->capture_default_str();
        sk->add_option("--iters", args->iters, "Iterations, 1 to 100000 (the cap when --tol is given)")
            ->check(number_in([](double count) { return count >= 1 && count <= k::kSinkhornMaxIters; },
                              "in 1.." + std::to_string(k::kSinkhornMaxIters)))
            ->capture_default_str();
        auto* eps = sk->add_option("--eps", args->eps, "Added to every denominator (plain variant)")
                        ->check(finite_number())
                        ->check(number_in([](double value) { return value == 0 || (value >= kF32Least && value < 1); },
                                          "in [1.18e-38, 1): " + std::string(kSumsNearOne)))
                        ->capture_default_str();
        // Its default as users write it, 1e-6 (the stream's 1e-06).
        if (std::string shown = eps->get_default_str(); shown.find("e-0") != std::string::npos)
            eps->default_str(shown.erase(shown.find("e-0") + 2, 1));
        sk->add_option("--tol", args->tol, "Stop a token once its marginal error is <= tol, 0 for fixed iterations")
            ->check(finite_number())
            ->check(number_in([](double value) { return value == 0 || (value >= kF32Least && value < 1); },
                              "0 (fixed iterations) or in [1.18e-38, 1): a marginal error of 1 is a row or column "
                              "off by its whole sum, and f32 holds no smaller normal number (1e-50 was 0: fixed "
                              "iterations)"))
            ->default_str("0");
        sk->add_flag("--column-first", args->column_first, "Normalise columns before rows in each iteration");
        sk->add_flag("--log-domain", args->log_domain, "logsumexp normalisation (extreme inputs)");
        sk->add_option("--device", args->device, "Where the kernel runs: cpu or cuda")
            ->check(one_of({"cpu", "cuda"}))
            ->type_name("NAME")
            ->capture_default_str();
        auto* threads = sk->add_option("--threads", args->threads, "CPU threads, 0 for all")
                            ->check(number_in([](double count) { return count >= 0; }, "0 or more (0: all cores)"))
                            ->default_str("0");
        sk->add_option("--input", args->input, "Logits H, raw little-endian T x n x n")->required()->type_name("FILE");
        sk->add_option("-o,--output", args->output, "Result P (written atomically)")->required()->type_name("FILE");
        sk->add_option("--input-dtype", args->input_dtype, "f32 or bf16 (input and --grad files)")
            ->check(parsed_by([](const std::string& text) { parse_dtype(text); }))
            ->type_name("TYPE")
            ->capture_default_str();
        sk->add_option("--output-dtype", args->output_dtype, "f32 or bf16 (output files)")
            ->check(parsed_by([](const std::string& text) { parse_dtype(text); }))
            ->type_name("TYPE")
            ->capture_default_str();
        sk->add_flag("--backward", args->backward, "Also compute dH from the upstream gradient --grad");
        sk->add_option("--grad", args->grad, "Upstream gradient dL/dP, same shape as the input")->type_name("FILE");
        sk->add_option("--grad-output", args->grad_output, "Where to write dL/dH")->type_name("FILE");
        sk->add_flag("--force", args->force, "Replace existing output files");
        return [args, sk, eps, threads]() -> int {
            if (!sk->parsed()) return kExitBadInput;
            args->eps_given = eps->count() > 0;
            args->threads_given = threads->count() > 0;
            return run_sinkhorn(*args);
        };
    }}};

}  // namespace
}  // namespace mhc::cli
