#pragma once
// A tiny captured step written as the tests' comments draw it: the modules, the storages, then
// the ops in order (each 10 ns, back to back). What the trace says about each storage's life
// follows from the ops: it is made at the first op that touches it and freed after the last, as
// PyTorch frees a tensor whose last use has run. Only what differs is written: a storage alive
// before the step (the batch, a target, a parameter), one alive at its end (the last gradient),
// or one the program holds past its last use (`until`).
#include <algorithm>
#include <cassert>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tiny.hpp"

namespace advisetest {

using mhc::trace::Category;
using mhc::trace::Phase;

class Step {
public:
    // The root module "M" of type `root_type`, then `modules` (name, type), parents first.
    Step(std::initializer_list<std::pair<std::string, std::string>> modules, const std::string& root_type = "Tiny") {
        tiny_.modules.emplace_back("M", root_type);
        for (const auto& module : modules) tiny_.modules.push_back(module);
    }
    // One module more, after those given.
    void module(const std::string& name, const std::string& type) { tiny_.modules.emplace_back(name, type); }

    // Alive before the step and after it: the batch, a target, a parameter.
    int input(int64_t bytes, const std::string& label, Category category = Category::Other) {
        return add(bytes, category, label, Life::Throughout, -1);
    }
    int param(int64_t bytes, const std::string& label) { return input(bytes, label, Category::Param); }
    // Made at its first op, freed after its last one, or after op `until` when the program holds it
    // longer.
    int act(int64_t bytes, const std::string& label, int until = -1) {
        return add(bytes, Category::Activation, label, Life::Ops, until);
    }
    int work(int64_t bytes, const std::string& label, int until = -1) {
        return add(bytes, Category::Workspace, label, Life::Ops, until);
    }
    // Made at its first op, alive at the step's end (a gradient the step leaves).
    int result(int64_t bytes, const std::string& label, Category category = Category::Workspace) {
        return add(bytes, category, label, Life::ToTheEnd, -1);
    }

    // An op of `module` ("" : outside every module): what it reads ('r'), writes ('w') or both
    // ('x'), and what autograd saved when it ran. Returns its index.
    int fwd(const std::string& name, const std::string& module, std::vector<std::pair<int, char>> acc,
            std::vector<int> saves = {}, int step = 0) {
        return tiny_.kernel({name, module, Phase::Forward, std::move(acc), std::move(saves), step});
    }
    int bwd(const std::string& name, const std::string& module, std::vector<std::pair<int, char>> acc, int step = 0) {
        return tiny_.kernel({name, module, Phase::Backward, std::move(acc), {}, step});
    }
    void meta(const std::string& key, const std::string& value) { tiny_.meta.emplace_back(key, value); }

    // The trace, each storage's life worked out from the ops.
    TinyTrace done() const {
        TinyTrace out = tiny_;
        for (size_t a = 0; a < out.allocs.size(); ++a) {
            if (life_[a] == Life::Throughout) continue;
            int first = -1, last = -1;
            for (size_t k = 0; k < out.kernels.size(); ++k)
                for (auto [alloc, mode] : out.kernels[k].acc)
                    if (alloc == static_cast<int>(a)) {
                        if (first < 0) first = static_cast<int>(k);
                        last = static_cast<int>(k);
                    }
            assert(first >= 0 && "a storage no op touches");
            out.allocs[a].made_at = first;
            out.allocs[a].freed_after = life_[a] == Life::ToTheEnd ? -1 : std::max(last, until_[a]);
        }
        return out;
    }

private:
    enum class Life { Throughout, Ops, ToTheEnd };
    int add(int64_t bytes, Category category, const std::string& label, Life life, int until) {
        life_.push_back(life);
        until_.push_back(until);
        return tiny_.alloc(bytes, category, label, -1, -1);
    }
    TinyTrace tiny_;
    std::vector<Life> life_;
    std::vector<int> until_;
};

// The capture meta that names (storage, op) pairs (capture.unpacks: the op before which a
// storage is first unpacked; capture.pack_order: the op whose pack saved it), by the ids the
// written trace gives them: row + 1 and index + 1.
inline std::string id_pairs(std::initializer_list<std::pair<int, int>> storage_and_op) {
    std::string out = "[";
    for (auto [storage, op] : storage_and_op)
        out += (out.size() > 1 ? ",[" : "[") + std::to_string(storage + 1) + "," + std::to_string(op + 1) + "]";
    return out + "]";
}

}   // namespace advisetest
