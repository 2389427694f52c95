#include "threads.hpp"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

namespace mhc::kernels::cpu {

int default_threads() {
    unsigned h = std::thread::hardware_concurrency();
    return h ? static_cast<int>(h) : 1;
}

int workers_for(int64_t count, int threads, int64_t min_per_thread) {
    int t = threads > 0 ? threads : default_threads();
    int64_t by_size = std::max<int64_t>(1, count / std::max<int64_t>(1, min_per_thread));
    return static_cast<int>(std::min<int64_t>(t, by_size));
}

void parallel_for(int64_t count, int workers, int64_t align,
                  const std::function<void(int, int64_t, int64_t)>& fn) {
    if (workers <= 1 || count <= align) {
        fn(0, 0, count);
        return;
    }
    const int64_t units = (count + align - 1) / align;
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(workers);
    auto range = [&](int w) {
        int64_t b = units * w / workers * align, e = units * (w + 1) / workers * align;
        return std::pair<int64_t, int64_t>{std::min(b, count), std::min(e, count)};
    };
    for (int w = 1; w < workers; ++w)
        pool.emplace_back([&, w] {
            try {
                auto [b, e] = range(w);
                if (b < e) fn(w, b, e);
            } catch (...) {
                errors[w] = std::current_exception();
            }
        });
    try {
        auto [b, e] = range(0);
        if (b < e) fn(0, b, e);
    } catch (...) {
        errors[0] = std::current_exception();
    }
    for (auto& t : pool) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace mhc::kernels::cpu
