#pragma once
// The sizes in the data-parallel meta python/mhc_torch/data_parallel.py writes: capture.ddp
// ("world 4, bucket_cap_mb 25, ...") and capture.fsdp2 ("world 4, ..." or "world 4 (shard 2 x
// replicate 2), ..."). mhc advise times its collectives with them (advise/src/comm.cpp), mhc check
// refuses them out of bounds first. Before 2026-12-05 they were read with sscanf("%d") and strtod
// unchecked: "world 2000000000" overflowed an int in the ring's step count, "bucket_cap_mb 1e300"
// was cast to int64 (both undefined behaviour, found under -fsanitize=undefined).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mhc/trace/limits.hpp"

namespace mhc::trace {

inline constexpr int64_t kMaxRanks = int64_t{1} << 20;                                    // ranks of one job
inline constexpr double kMaxBucketCapMb = static_cast<double>(limits::kMaxBytes >> 20);   // 2^36 MiB

struct DataParallelSizes {
    int world = 0;               // "world N", or S of "(shard S x replicate R)"; 0: not said (as _world writes it)
    int replicate = 0;           // R of "(shard S x replicate R)"; 0: not said
    double bucket_cap_mb = -1;   // DDP's bucket_cap_mb; -1: not said
    std::string error;           // the first size out of bounds, e.g. "world 4000000000 is not ..."; empty: none
};

inline DataParallelSizes data_parallel_sizes(const std::string& detail) {
    DataParallelSizes out;
    auto fail = [&](const std::string& why) {
        if (out.error.empty()) out.error = why;
    };
    // A count of ranks at `at` into `into` (0 to kMaxRanks); the end of its digits, or null when none.
    auto ranks = [&](const char* at, const char* what, int& into) -> const char* {
        char* end = nullptr;
        const long long n = std::strtoll(at, &end, 10);
        if (end == at) return nullptr;
        if (n < 0 || n > kMaxRanks) {
            fail(std::string(what) + " " + std::string(at, static_cast<size_t>(end - at)) +
                 " is not a number of ranks in [0, 2^20]");
            return nullptr;
        }
        into = static_cast<int>(n);
        return end;
    };
    if (detail.rfind("world ", 0) == 0) {
        int world = 0, shard = 0, replicate = 0;
        const char* end = ranks(detail.c_str() + 6, "world", world);
        out.world = world;
        constexpr const char* kShard = " (shard ";
        if (end != nullptr && std::strncmp(end, kShard, std::strlen(kShard)) == 0) {
            const char* at = ranks(end + std::strlen(kShard), "shard", shard);
            constexpr const char* kReplicate = " x replicate ";
            if (at != nullptr && std::strncmp(at, kReplicate, std::strlen(kReplicate)) == 0 &&
                ranks(at + std::strlen(kReplicate), "replicate", replicate) != nullptr) {
                if (int64_t{shard} * replicate > kMaxRanks) {
                    fail("shard " + std::to_string(shard) + " x replicate " + std::to_string(replicate) +
                         " is more than 2^20 ranks");
                } else {
                    out.world = shard;
                    out.replicate = replicate;
                }
            }
        }
    }
    if (const size_t key = detail.find("bucket_cap_mb "); key != std::string::npos) {
        const char* at = detail.c_str() + key + 14;
        char* end = nullptr;
        const double mb = std::strtod(at, &end);
        if (end == at || !(mb >= 0 && mb <= kMaxBucketCapMb)) {   // nan fails too
            fail("bucket_cap_mb " + std::string(at, end == at ? std::strcspn(at, ",") : size_t(end - at)) +
                 " is not a number of MiB in [0, 2^36]");
        } else {
            out.bucket_cap_mb = mb;
        }
    }
    return out;
}

}   // namespace mhc::trace
