// Picks the instruction set for the fused CPU kernels once, at first use.
#include <atomic>
#include <cstdlib>
#include <string>

#include "cpu_sinkhorn.hpp"
#include "mhc/common/error.hpp"

namespace mhc::kernels::cpu {

namespace {

const IsaTable kGeneric{"generic", generic::forward, generic::backward, generic::log_forward,
                        generic::log_backward};
#if defined(MHC_KERNELS_X86_ISAS)
const IsaTable kAvx2{"avx2", avx2::forward, avx2::backward, avx2::log_forward, avx2::log_backward};
const IsaTable kAvx512{"avx512", avx512::forward, avx512::backward, avx512::log_forward,
                       avx512::log_backward};
#endif

bool supported(const IsaTable* t) {
#if defined(MHC_KERNELS_X86_ISAS)
    __builtin_cpu_init();
    if (t == &kAvx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("fma");
    if (t == &kAvx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return t == &kGeneric;
}

std::vector<const IsaTable*> all_tables() {
#if defined(MHC_KERNELS_X86_ISAS)
    return {&kAvx512, &kAvx2, &kGeneric};
#else
    return {&kGeneric};
#endif
}

const IsaTable* find(const std::string& name) {
    for (const IsaTable* t : all_tables())
        if (name == t->name && supported(t)) return t;
    return nullptr;
}

const IsaTable* best() {
    if (const char* env = std::getenv("MHC_CPU_ISA"); env && *env) {
        if (const IsaTable* t = find(env)) return t;
    }
    for (const IsaTable* t : all_tables())
        if (supported(t)) return t;
    return &kGeneric;
}

std::atomic<const IsaTable*> g_table{nullptr};

}  // namespace

const IsaTable& isa() {
    const IsaTable* t = g_table.load(std::memory_order_acquire);
    if (!t) {
        t = best();
        g_table.store(t, std::memory_order_release);
    }
    return *t;
}

}  // namespace mhc::kernels::cpu

namespace mhc::kernels {

const char* cpu_isa() { return cpu::isa().name; }

std::vector<std::string> available_cpu_isas() {
    std::vector<std::string> names;
    for (const cpu::IsaTable* t : cpu::all_tables())
        if (cpu::supported(t)) names.emplace_back(t->name);
    return names;
}

void set_cpu_isa(const std::string& name) {
    const cpu::IsaTable* t = cpu::find(name);
    if (!t) throw Error("CPU code path '" + name + "' is not built or not supported by this CPU");
    cpu::g_table.store(t, std::memory_order_release);
}

}  // namespace mhc::kernels
