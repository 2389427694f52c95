// CUDA kernels against the CPU ones on random inputs, with poisoned outputs ([gpu]: built into
// mhc_kernels_cuda_tests, skipped where no CUDA device is present), and where CUDA cannot be
// used, that asking for the device fails with a clear error ([nocuda]: mhc_kernels_nocuda_tests,
// skipped where a device is present). main_device.cpp decides; the tests assume it.
#include <catch2/catch.hpp>

#include <cstring>
#include <initializer_list>
#include <memory>

#include "helpers.hpp"
#include "mhc/common/error.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/standin.hpp"
#include "mhc/kernels/swap.hpp"

using namespace kt;

namespace {

// main_device.cpp runs the [gpu] tests only where this holds; a failure here means it did not.
void require_gpu() { REQUIRE((k::built_with_cuda() && k::cuda_device_count() > 0)); }

template <typename T>
std::vector<T> to_dtype(const std::vector<float>& v) {
    if constexpr (std::is_same_v<T, float>) {
        return v;
    } else {
        std::vector<k::bf16> out(v.size());
        for (size_t i = 0; i < v.size(); ++i) out[i] = k::float_to_bf16(v[i]);
        return out;
    }
}

float as_float(float x) { return x; }
float as_float(k::bf16 x) { return k::bf16_to_float(x); }

// Runs forward (and backward when g is given) on the GPU with outputs poisoned (all-ones
// bytes: NaN in fp32 and bf16) and returns the outputs as floats. With `offset`, every buffer
// starts that many elements past a cudaMalloc'd (256-byte aligned) address.
template <typename In, typename Out>
void run_gpu(const k::SinkhornOptions& opt, const std::vector<float>& logits, const std::vector<float>* grad,
             std::vector<float>& p_out, std::vector<float>& dh_out, k::SinkhornReport& rep, size_t offset = 0) {
    const int64_t tokens = static_cast<int64_t>(logits.size()) / (opt.n * opt.n);
    auto hi = to_dtype<In>(logits);
    const size_t in_off = offset * sizeof(In), out_off = offset * sizeof(Out);
    k::DeviceBuffer dH(hi.size() * sizeof(In) + in_off), dP(logits.size() * sizeof(Out) + out_off), dG, ddH;
    auto at = [](const k::DeviceBuffer& buf, size_t off) { return static_cast<unsigned char*>(buf.data()) + off; };
    dH.upload(hi.data(), hi.size() * sizeof(In), in_off);
    dP.fill_bytes(0xff);
    std::vector<Out> po(logits.size()), dho(logits.size());
    if (grad) {
        auto gi = to_dtype<In>(*grad);
        dG = k::DeviceBuffer{gi.size() * sizeof(In) + in_off};
        ddH = k::DeviceBuffer{logits.size() * sizeof(Out) + out_off};
        dG.upload(gi.data(), gi.size() * sizeof(In), in_off);
        ddH.fill_bytes(0xff);
        rep = k::sinkhorn_backward(
            opt, tokens, {at(dH, in_off), k::view(hi.data()).dtype}, {at(dG, in_off), k::view(gi.data()).dtype},
            {at(ddH, out_off), k::view(po.data()).dtype}, {at(dP, out_off), k::view(po.data()).dtype});
        ddH.download(dho.data(), dho.size() * sizeof(Out), out_off);
    } else {
        rep = k::sinkhorn_forward(opt, tokens, {at(dH, in_off), k::view(hi.data()).dtype},
                                  {at(dP, out_off), k::view(po.data()).dtype});
    }
    dP.download(po.data(), po.size() * sizeof(Out), out_off);
    p_out.resize(logits.size());
    dh_out.resize(grad ? logits.size() : 0);
    for (size_t i = 0; i < logits.size(); ++i) p_out[i] = as_float(po[i]);
    for (size_t i = 0; i < dh_out.size(); ++i) dh_out[i] = as_float(dho[i]);
}

// The kernels a call must have run: the fused ones for n = 4 unless the baseline was asked
// for (or the backward's history does not fit, which these tests avoid).
std::string expected_backend(const k::SinkhornOptions& opt) {
    return opt.n == 4 && k::resolve_cuda_kernels(opt.cuda_kernels) == k::CudaSinkhornKernels::Fused ? "cuda-fused"
                                                                                                    : "cuda-baseline";
}

template <typename In, typename Out>
k::SinkhornReport compare_with_cpu(std::mt19937_64& rng, const k::SinkhornOptions& og, bool backward, size_t offset = 0,
                                   int64_t tokens = 3001) {
    const int n = og.n;
    auto logits = ref::random_logits(rng, tokens * n * n, 2.0);
    auto grads = ref::random_logits(rng, tokens * n * n, 1.0);
    // The CPU sees exactly the values the GPU sees.
    std::vector<float> hc(logits.size()), gc(grads.size());
    for (size_t i = 0; i < logits.size(); ++i) {
        hc[i] = as_float(to_dtype<In>({logits[i]})[0]);
        gc[i] = as_float(to_dtype<In>({grads[i]})[0]);
    }
    k::SinkhornOptions oc = og;
    oc.device = k::Device::Cpu;
    std::vector<float> pc, dhc, pg, dhg;
    k::SinkhornReport rc, rg;
    if (backward) {
        dhc = bwd(oc, hc, gc, &pc);
        run_gpu<In, Out>(og, logits, &grads, pg, dhg, rg, offset);
    } else {
        pc = fwd(oc, hc, &rc);
        run_gpu<In, Out>(og, logits, nullptr, pg, dhg, rg, offset);
    }
    const bool bf16_out = std::is_same_v<Out, k::bf16>;
    const bool bf16_in = std::is_same_v<In, k::bf16>;
    INFO("n " << n << " log " << og.log_domain << " column_first " << og.column_first << " tol " << og.tol << " iters "
              << og.iters << " backward " << backward << " bf16 in " << bf16_in << " bf16 out " << bf16_out
              << " kernels " << k::to_string(og.cuda_kernels) << " offset " << offset);
    if (!backward || og.iters <= 40) CHECK(rg.backend == expected_backend(og));
    // With a tolerance, a token whose error lands within rounding of tol may stop one
    // iteration earlier on one side; that moves P by about tol (and dH accordingly).
    const double slack = og.tol > 0 ? 5.0 * og.tol : 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
        REQUIRE(std::isfinite(pg[i]));  // every poisoned output was overwritten
        const double tol = (bf16_out ? 1e-6 + std::abs(pc[i]) / 128 : 2e-6) + slack;
        REQUIRE(std::abs(pg[i] - pc[i]) <= tol);
    }
    if (backward) {
        double scale = 1;
        for (float x : dhc) scale = std::max(scale, double(std::abs(x)));
        for (size_t i = 0; i < logits.size(); ++i) {
            REQUIRE(std::isfinite(dhg[i]));
            const double tol = (bf16_out ? 1e-6 + std::abs(dhc[i]) / 128 : 0) + (1e-4 + 100 * slack) * scale;
            REQUIRE(std::abs(dhg[i] - dhc[i]) <= tol);
        }
    } else {
        CHECK(rg.tokens == tokens);
        CHECK(rg.max_row_err == Approx(rc.max_row_err).margin(2e-6 + slack));
        CHECK(rg.max_col_err == Approx(rc.max_col_err).margin(2e-6 + slack));
        if (og.tol > 0) {
            CHECK(std::abs(rg.iters_max - rc.iters_max) <= 1);
            CHECK(rg.iters_mean == Approx(rc.iters_mean).epsilon(0.01));
        } else {
            CHECK(rg.iters_max == rc.iters_max);
        }
    }
    return rg;
}

}  // namespace

TEST_CASE("kernels: asking for CUDA without it fails clearly", "[kernels][cuda][nocuda]") {
    REQUIRE(k::cuda_device_count() == 0);
    std::vector<float> h(16), p(16);
    k::SinkhornOptions o;
    o.device = k::Device::Cuda;
    CHECK_THROWS_AS(k::sinkhorn_forward(o, 1, k::view(h.data()), k::view(p.data())), mhc::Error);
    CHECK_THROWS_WITH(k::require_device(k::Device::Cuda), Catch::Contains("cuda") || Catch::Contains("CUDA"));
    CHECK_THROWS_AS(k::make_swap_engine(k::Device::Cuda, {}), mhc::Error);
    CHECK_THROWS_AS(k::make_standin(k::Device::Cuda), mhc::Error);
    CHECK_THROWS_AS(k::pinned_host_memory(64), mhc::Error);
    CHECK_THROWS_AS(k::DeviceBuffer(64), mhc::Error);
    CHECK_NOTHROW(k::require_device(k::Device::Cpu));
}

// Every option the kernels branch on (order, domain, a tolerance's early stop) and both kernel
// sets, for each n; n != 4 runs the fused kernels only (the baseline's are the same there).
template <class Check>
void for_each_cuda_variant(std::initializer_list<int> sizes, int tol_iters, Check&& check) {
    for (int n : sizes)
        for (int variant = 0; variant < 8; ++variant) {
            k::SinkhornOptions opt;
            opt.device = k::Device::Cuda;
            opt.n = n;
            opt.column_first = variant & 1;
            opt.log_domain = variant & 2;
            if (variant & 4) {
                opt.tol = 1e-4f;
                opt.iters = tol_iters;
            }
            for (auto kernels : {k::CudaSinkhornKernels::Fused, k::CudaSinkhornKernels::Baseline}) {
                if (n != 4 && kernels == k::CudaSinkhornKernels::Baseline) continue;
                opt.cuda_kernels = kernels;
                check(opt);
            }
        }
}

TEST_CASE("kernels: CUDA Sinkhorn forward matches the CPU", "[kernels][cuda][gpu]") {
    require_gpu();
    std::mt19937_64 rng(ref::seed() + 30);
    for_each_cuda_variant({2, 4, 5, 16}, 200, [&](const k::SinkhornOptions& opt) {
        compare_with_cpu<float, float>(rng, opt, false);
        compare_with_cpu<k::bf16, k::bf16>(rng, opt, false);
        compare_with_cpu<k::bf16, float>(rng, opt, false);
    });
}

TEST_CASE("kernels: CUDA Sinkhorn backward matches the CPU", "[kernels][cuda][gpu]") {
    require_gpu();
    std::mt19937_64 rng(ref::seed() + 31);
    // 40 iterations: the fused backward's history (iters x 2 KiB a block) must fit twice.
    for_each_cuda_variant({2, 4, 7, 16}, 40, [&](const k::SinkhornOptions& opt) {
        compare_with_cpu<float, float>(rng, opt, true);
        compare_with_cpu<k::bf16, k::bf16>(rng, opt, true);
    });
}

TEST_CASE("kernels: CUDA Sinkhorn on buffers that are not 16-byte aligned", "[kernels][cuda][gpu]") {
    // Both kernel sets fall back to element loads (a 16-byte load there would end the context).
    require_gpu();
    std::mt19937_64 rng(ref::seed() + 34);
    for (int variant = 0; variant < 4; ++variant)
        for (auto kernels : {k::CudaSinkhornKernels::Fused, k::CudaSinkhornKernels::Baseline}) {
            k::SinkhornOptions opt;
            opt.device = k::Device::Cuda;
            opt.column_first = variant & 1;
            opt.log_domain = variant & 2;
            opt.cuda_kernels = kernels;
            for (bool backward : {false, true}) {
                compare_with_cpu<float, float>(rng, opt, backward, 1);
                compare_with_cpu<k::bf16, k::bf16>(rng, opt, backward, 3);
            }
        }
}

TEST_CASE("kernels: CUDA Sinkhorn on a few tokens", "[kernels][cuda][gpu]") {
    // Fewer tokens than a block has threads, and a count that leaves a block partly idle.
    require_gpu();
    std::mt19937_64 rng(ref::seed() + 36);
    for (int64_t tokens : {1, 31, 257})
        for (int variant = 0; variant < 4; ++variant) {
            k::SinkhornOptions opt;
            opt.device = k::Device::Cuda;
            opt.column_first = variant & 1;
            opt.log_domain = variant & 2;
            for (bool backward : {false, true}) compare_with_cpu<float, float>(rng, opt, backward, 0, tokens);
        }
}

TEST_CASE("kernels: CUDA Sinkhorn refuses buffers not aligned to their element", "[kernels][cuda][gpu]") {
    require_gpu();
    k::DeviceBuffer in(64 * 4 + 8), out(64 * 4 + 8);
    auto* base_in = static_cast<unsigned char*>(in.data());
    auto* base_out = static_cast<unsigned char*>(out.data());
    k::SinkhornOptions opt;
    opt.device = k::Device::Cuda;
    CHECK_THROWS_WITH(k::sinkhorn_forward(opt, 4, {base_in + 2, k::DType::F32}, {base_out, k::DType::F32}),
                      Catch::Contains("not aligned to its element size"));
    CHECK_THROWS_WITH(k::sinkhorn_forward(opt, 4, {base_in, k::DType::BF16}, {base_out + 1, k::DType::BF16}),
                      Catch::Contains("not aligned to its element size"));
}

TEST_CASE("kernels: CUDA Sinkhorn backward with a history too large for shared memory", "[kernels][cuda][gpu]") {
    // 200 iterations need 400 KiB of history a block: the first version's global scratch runs it.
    require_gpu();
    std::mt19937_64 rng(ref::seed() + 35);
    k::SinkhornOptions opt;
    opt.device = k::Device::Cuda;
    opt.iters = 200;
    CHECK(compare_with_cpu<float, float>(rng, opt, true).backend == "cuda-baseline");
}

TEST_CASE("kernels: CUDA swap engine verifies every transfer on both paths", "[kernels][cuda][gpu][swap]") {
    require_gpu();
    std::mt19937_64 rng(ref::seed() + 32);
    for (auto path : {k::SwapPath::CopyEngine, k::SwapPath::ZeroCopy}) {
        k::SwapConfig c;
        c.device_bytes = c.host_bytes = 16 << 20;
        c.chunk_bytes = 1 << 20;
        c.path = path;
        auto e = k::make_swap_engine(k::Device::Cuda, c);
        auto* host = static_cast<unsigned char*>(e->host_arena());
        for (size_t i = 0; i < (16u << 20); ++i) host[i] = static_cast<unsigned char>(rng());
        std::vector<unsigned char> expect(host, host + (8 << 20));
        // Out to the device and back to the other half of the host arena.
        std::vector<uint64_t> in_ids;
        for (size_t off = 0; off < (8u << 20); off += 3 << 20)
            in_ids.push_back(e->submit(k::SwapDir::HostToDevice, off, off, std::min<size_t>(3 << 20, (8 << 20) - off)));
        for (auto id : in_ids) CHECK(e->wait_checked(id).ok);
        auto out = e->submit(k::SwapDir::DeviceToHost, 8 << 20, 0, 8 << 20);
        auto r = e->wait_checked(out);
        CHECK(r.verified);
        CHECK(std::memcmp(host + (8 << 20), expect.data(), 8 << 20) == 0);
        for (auto dir : {k::SwapDir::HostToDevice, k::SwapDir::DeviceToHost})
            for (auto f : {k::SwapEngine::Fault::Corrupt, k::SwapEngine::Fault::Drop}) {
                for (size_t i = 0; i < (4u << 20); ++i) host[i] = static_cast<unsigned char>(rng());
                e->inject_fault(dir, f);
                INFO("path " << k::to_string(path) << " dir " << k::to_string(dir));
                CHECK_FALSE(e->wait(e->submit(dir, 0, 0, 4 << 20)).ok);
            }
        CHECK(e->stats().mismatches == 4);
    }
}

TEST_CASE("kernels: CUDA swap engine hashing on the device alone catches damage on the round trip",
          "[kernels][cuda][gpu][swap]") {
    require_gpu();
    std::mt19937_64 rng(ref::seed() + 33);
    for (auto path : {k::SwapPath::CopyEngine, k::SwapPath::ZeroCopy}) {
        INFO("path " << k::to_string(path));
        k::SwapConfig c;
        c.device_bytes = c.host_bytes = 16 << 20;
        c.chunk_bytes = 1 << 20;
        c.path = path;
        c.verify_on_device_only = true;
        auto e = k::make_swap_engine(k::Device::Cuda, c);
        auto* host = static_cast<unsigned char*>(e->host_arena());
        const size_t n = 5 << 20;   // not a whole number of chunks
        // A clean round trip: in, out to another host range, in again to another device range.
        for (size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned char>(rng());
        const uint64_t want = k::checksum64(host, n);
        auto in = e->wait(e->submit(k::SwapDir::HostToDevice, 0, 0, n));
        CHECK(in.round_trip);
        CHECK_FALSE(in.verified);
        CHECK(in.dest_sum == want);
        auto out = e->wait(e->submit(k::SwapDir::DeviceToHost, 8 << 20, 0, n));
        CHECK(out.source_sum == want);
        CHECK(k::checksum64(host + (8 << 20), n) == want);
        CHECK(e->wait(e->submit(k::SwapDir::HostToDevice, 8 << 20, 8 << 20, n)).dest_sum == want);
        // Each fault, in either direction, shows as a swap-in whose hash differs from the
        // swap-out's (what replay compares).
        for (auto dir : {k::SwapDir::HostToDevice, k::SwapDir::DeviceToHost})
            for (auto f : {k::SwapEngine::Fault::Corrupt, k::SwapEngine::Fault::Drop}) {
                INFO("fault in " << k::to_string(dir));
                for (size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned char>(rng());
                e->wait(e->submit(k::SwapDir::HostToDevice, 0, 0, n));       // the data on the device
                for (size_t i = 0; i < n; ++i) host[(8 << 20) + i] = static_cast<unsigned char>(rng());
                if (dir == k::SwapDir::DeviceToHost) e->inject_fault(dir, f);
                auto o = e->wait(e->submit(k::SwapDir::DeviceToHost, 8 << 20, 0, n));
                if (dir == k::SwapDir::HostToDevice) e->inject_fault(dir, f);
                auto back = e->wait(e->submit(k::SwapDir::HostToDevice, 8 << 20, 8 << 20, n));
                CHECK(o.ok);
                CHECK(back.dest_sum != o.source_sum);
            }
        CHECK(e->stats().mismatches == 0);   // the engine compared nothing itself
        CHECK(e->stats().verified == 0);
    }
}

// mhc validate pins one host arena for all its replays (pinning GiBs per replay took longer
// than the replays on the H200): engines made one after the other on it share its bytes, and
// memory that is not pinned is refused.
TEST_CASE("kernels: CUDA swap engines share the caller's pinned host arena", "[kernels][cuda][gpu][swap]") {
    require_gpu();
    std::mt19937_64 rng(ref::seed() + 34);
    const size_t bytes = 3 << 20;
    std::shared_ptr<unsigned char> pinned = k::pinned_host_memory(16 << 20);
    for (auto path : {k::SwapPath::CopyEngine, k::SwapPath::ZeroCopy}) {
        INFO("path " << k::to_string(path));
        k::SwapConfig config;
        config.device_bytes = config.host_bytes = 16 << 20;
        config.chunk_bytes = 1 << 20;
        config.path = path;
        config.host_memory = pinned.get();
        std::vector<unsigned char> want(bytes);
        {
            auto first = k::make_swap_engine(k::Device::Cuda, config);
            CHECK(first->host_arena() == pinned.get());
            for (size_t i = 0; i < bytes; ++i) pinned.get()[i] = want[i] = static_cast<unsigned char>(rng());
            CHECK(first->wait_checked(first->submit(k::SwapDir::HostToDevice, 0, 0, bytes)).ok);
            CHECK(first->wait_checked(first->submit(k::SwapDir::DeviceToHost, 8 << 20, 0, bytes)).ok);
        }   // the engine is gone; the arena and what it copied there stay
        CHECK(std::memcmp(pinned.get() + (8 << 20), want.data(), bytes) == 0);
        auto second = k::make_swap_engine(k::Device::Cuda, config);
        CHECK(second->wait_checked(second->submit(k::SwapDir::HostToDevice, 8 << 20, 4 << 20, bytes)).ok);
        CHECK(second->wait_checked(second->submit(k::SwapDir::DeviceToHost, 12 << 20, 4 << 20, bytes)).ok);
        CHECK(std::memcmp(pinned.get() + (12 << 20), want.data(), bytes) == 0);
    }
    std::vector<unsigned char> pageable(16 << 20);
    k::SwapConfig config;
    config.device_bytes = config.host_bytes = 16 << 20;
    config.host_memory = pageable.data();
    CHECK_THROWS_WITH(k::make_swap_engine(k::Device::Cuda, config), Catch::Contains("not pinned"));
}

TEST_CASE("kernels: CUDA stand-ins run and touch", "[kernels][cuda][gpu][standin]") {
    require_gpu();
    auto s = k::make_standin(k::Device::Cuda);
    double prev = 0;
    for (double want : {20e-6, 200e-6, 2e-3}) {
        s->run_for(want);
        s->synchronize();
        double got = s->last_elapsed_s();
        CHECK(got >= want * 0.9);
        CHECK(got > prev);
        prev = got;
    }
    k::DeviceBuffer r(8 << 20), w(8 << 20);
    r.fill_bytes(0x11);
    w.fill_bytes(0);
    s->touch(r.data(), r.size(), w.data(), w.size());
    s->synchronize();
    std::vector<unsigned char> back(w.size());
    w.download(back.data(), back.size());
    CHECK(std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 0x3c; }));
}
