#pragma once
// The transfers in flight between the GPU and the host, earliest end first (engine.hpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mhc::sim {

struct Transfer {
    int64_t end;
    int32_t alloc;
    uint32_t epoch;   // the allocation's epoch at the start: a later one means freed or cancelled since
    bool h2d;
    bool operator>(const Transfer& other) const {
        return end != other.end ? end > other.end : alloc > other.alloc;
    }
};

// The transfers in flight, earliest (end, alloc) first. Each link queue runs its transfers
// one after another (rule 8), each at least 1 ns, so their ends strictly increase within a
// queue: one FIFO per queue, merged at the head, gives the order of a priority queue
// without its O(log n) pushes and pops.
class Inflight {
public:
    bool empty() const { return head[0] == fifo[0].size() && head[1] == fifo[1].size(); }
    const Transfer& top() const { return fifo[first()][head[first()]]; }
    // The end of top(), INT64_MAX when empty: the engine's test for landed transfers.
    int64_t next_end() const { return next; }
    void push(const Transfer& transfer, int queue) {
        fifo[queue].push_back(transfer);
        next = std::min(next, transfer.end);   // a later end in a queue is not its head
    }
    void pop() {
        const int queue = first();
        if (++head[queue] == fifo[queue].size()) {
            fifo[queue].clear();
            head[queue] = 0;
        } else if (head[queue] >= 4096 && 2 * head[queue] >= fifo[queue].size()) {
            fifo[queue].erase(fifo[queue].begin(), fifo[queue].begin() + static_cast<std::ptrdiff_t>(head[queue]));
            head[queue] = 0;
        }
        next = INT64_MAX;
        for (int q = 0; q < 2; ++q)
            if (head[q] < fifo[q].size()) next = std::min(next, fifo[q][head[q]].end);
    }

private:
    int first() const {   // the queue whose head comes first (empty() is false)
        if (head[0] == fifo[0].size()) return 1;
        if (head[1] == fifo[1].size()) return 0;
        return fifo[0][head[0]] > fifo[1][head[1]] ? 1 : 0;
    }
    std::vector<Transfer> fifo[2];
    size_t head[2] = {0, 0};
    int64_t next = INT64_MAX;
};

}  // namespace mhc::sim
