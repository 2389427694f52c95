#pragma once
// Resident allocations whose host copy is also valid, in the order their copies became
// caches (a swap-in landed): the host discards the last first (docs/simulator.md, rule 5).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mhc::sim {

// A doubly linked list over allocation numbers, in arrays sized once for the run.
class HostCopyOrder {
public:
    void init(size_t n) { prev.assign(n, kOut); next.assign(n, kOut); tail = -1; }
    bool empty() const { return tail < 0; }
    int32_t back() const { return tail; }
    void insert(int32_t alloc) {
        if (prev[alloc] != kOut) return;
        prev[alloc] = tail;
        next[alloc] = -1;
        if (tail >= 0) next[tail] = alloc;
        tail = alloc;
    }
    void erase(int32_t alloc) {
        if (prev[alloc] == kOut) return;
        if (prev[alloc] >= 0) next[prev[alloc]] = next[alloc];
        if (next[alloc] >= 0) prev[next[alloc]] = prev[alloc];
        else tail = prev[alloc];
        prev[alloc] = next[alloc] = kOut;
    }

private:
    static constexpr int32_t kOut = -2;   // not in the list (-1 ends it)
    std::vector<int32_t> prev, next;
    int32_t tail = -1;
};

}  // namespace mhc::sim
