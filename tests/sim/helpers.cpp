#include "helpers.hpp"

#include <filesystem>
#include <unistd.h>

#include "mhc/sim/synthetic.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/store.hpp"

namespace simtest {

using namespace mhc;

static trace::AccessMode mode_of(char m) {
    return m == 'r' ? trace::AccessMode::Read : m == 'w' ? trace::AccessMode::Write : trace::AccessMode::ReadWrite;
}

trace::TraceData build(const std::vector<Tensor>& tensors, const std::vector<K>& kernels) {
    trace::TraceData t;
    t.strings = {"", "k", "nccl_allreduce"};
    for (size_t i = 0; i < tensors.size(); ++i) {
        auto& a = t.allocations;
        a.id.push_back(static_cast<int64_t>(i) + 1);
        a.device.push_back(0);
        a.address.push_back(0);
        a.bytes.push_back(tensors[i].bytes);
        a.t_alloc.push_back(tensors[i].t_alloc);
        a.t_free.push_back(tensors[i].t_free);
        a.stream.push_back(0);
        a.category.push_back(tensors[i].cat);
        a.label.push_back(0);
    }
    std::vector<int32_t> kernel_of;
    for (size_t i = 0; i < kernels.size(); ++i) {
        auto& k = t.kernels;
        k.id.push_back(static_cast<int64_t>(i) + 1);
        k.device.push_back(0);
        k.stream.push_back(kernels[i].stream);
        k.name.push_back(kernels[i].name == "k" ? 1 : 2);
        k.t_start.push_back(kernels[i].start);
        k.t_end.push_back(kernels[i].end);
        k.step.push_back(kernels[i].step);
        k.correlation.push_back(0);
        for (auto& u : kernels[i].uses) {
            kernel_of.push_back(static_cast<int32_t>(i));
            t.accesses.allocation.push_back(u.tensor);
            t.accesses.mode.push_back(mode_of(u.mode));
        }
    }
    sim::synthetic::finalize(t, kernel_of);
    return t;
}

void write(const std::string& path, const std::vector<Tensor>& tensors, const std::vector<K>& kernels) {
    std::filesystem::remove(path);
    trace::Writer w(path);
    w.set_meta("source", "sim-test");
    int64_t kname = w.intern("k");
    for (size_t i = 0; i < tensors.size(); ++i) {
        trace::Allocation a;
        a.id = static_cast<int64_t>(i) + 1;
        a.bytes = tensors[i].bytes;
        a.t_alloc = tensors[i].t_alloc;
        a.t_free = tensors[i].t_free;
        a.category = tensors[i].cat;
        w.add(a);
    }
    for (size_t i = 0; i < kernels.size(); ++i) {
        trace::Kernel k;
        k.id = static_cast<int64_t>(i) + 1;
        k.stream = kernels[i].stream;
        k.name = kname;
        k.t_start = kernels[i].start;
        k.t_end = kernels[i].end;
        k.step = kernels[i].step;
        w.add(k);
    }
    for (size_t i = 0; i < kernels.size(); ++i)
        for (auto& u : kernels[i].uses) {
            trace::Access a;
            a.kernel = static_cast<int64_t>(i) + 1;
            a.allocation = u.tensor + 1;
            a.mode = mode_of(u.mode);
            w.add(a);
        }
    w.finish();
}

sim::LinkModel slow_link() {
    sim::LinkModel l;
    l.name = "test-link";
    l.h2d = {static_cast<double>(MiB) * 1000.0, 0};
    l.d2h = {static_cast<double>(MiB) * 1000.0, 0};
    l.copy_engines = 2;
    l.duplex_factor = 1.0;
    l.nccl_share = 0;
    l.memcpy_share = 0;
    return l;
}

sim::Config config(const std::string& eviction, int64_t capacity, const std::string& prefetch) {
    sim::Config c;
    c.eviction = eviction;
    c.prefetch = prefetch;
    c.capacity.bytes = capacity;
    c.link = slow_link();
    c.check_invariants = true;
    return c;
}

std::vector<int64_t> swapped_out(const sim::Result& r) {
    std::vector<int64_t> v;
    for (const auto& e : r.events)
        if (e.kind == trace::EventKind::SwapOut) v.push_back(e.allocation);
    return v;
}

std::string temp_path(const std::string& name) {
    return (mhc::test::scratch_dir("mhc-sim-tests") / name).string();
}

int64_t kernels_off_recorded_time(const trace::TraceData& t, const sim::Result& r) {
    int64_t on_device = 0;
    for (size_t k = 0; k < t.kernels.size(); ++k) on_device += t.kernels.device[k] == r.device;
    int64_t off = on_device - static_cast<int64_t>(r.kernel_times.size());   // kernels without a time
    for (const trace::RunKernelTime& kt : r.kernel_times) {
        const int64_t k = t.kernel_at(kt.kernel);
        if (k < 0 || t.kernels.t_start[size_t(k)] != kt.t_start || t.kernels.t_end[size_t(k)] != kt.t_end) ++off;
    }
    return off + (r.kernels_reached != on_device);
}

}  // namespace simtest
