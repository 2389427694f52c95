// main() of the test programs that need a given device situation: MHC_TESTS_NEED_GPU=1, a
// CUDA device; =0, a machine where CUDA is not usable (no CUDA build or no GPU). Where that does
// not hold, every test exits 77, which ctest reports as skipped (SKIP_RETURN_CODE): a test
// that cannot run here must not show as passed.
#include <cstdio>
#include <cstring>

#include "mhc/kernels/device.hpp"
#include "mhc/test/catch_run.hpp"

int main(int argc, char** argv) {
    // catch_discover_tests lists the tests at build time: listing needs no device.
    for (int i = 1; i < argc; ++i)
        if (std::strncmp(argv[i], "--list", 6) == 0) return mhc::test::catch_run(argc, argv);
    const bool gpu = mhc::kernels::built_with_cuda() && mhc::kernels::cuda_device_count() > 0;
    if (gpu != static_cast<bool>(MHC_TESTS_NEED_GPU)) {
        std::printf(gpu ? "a CUDA device is present: the no-CUDA checks do not apply; skipped\n"
                        : "no CUDA device (or a build without CUDA): skipped\n");
        return 77;
    }
    // Run by hand without arguments: only this program's tests (ctest names each one).
    if (argc == 1) {
        static char gpu_tag[] = "[gpu]", nocuda_tag[] = "[nocuda]";
        char* args[] = {argv[0], MHC_TESTS_NEED_GPU ? gpu_tag : nocuda_tag, nullptr};
        return mhc::test::catch_run(2, args);
    }
    return mhc::test::catch_run(argc, argv);
}
