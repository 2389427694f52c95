#include "mhc/trace/event_order.hpp"

#include <algorithm>

namespace mhc::trace {

namespace {
std::vector<MemoryEvent> sorted(std::vector<MemoryEvent> ev) {
    if (!std::is_sorted(ev.begin(), ev.end())) std::sort(ev.begin(), ev.end());
    return ev;
}
}  // namespace

std::vector<MemoryEvent> memory_events(const AllocationColumns& a, int32_t device, bool all_devices) {
    std::vector<MemoryEvent> ev;
    ev.reserve(a.size() * 2);
    for (size_t i = 0; i < a.size(); ++i) {
        if (!all_devices && a.device[i] != device) continue;
        ev.push_back(MemoryEvent::allocation(static_cast<int64_t>(i), a.t_alloc[i]));
        if (a.t_free[i] != kNoTime) ev.push_back(MemoryEvent::release(static_cast<int64_t>(i), a.t_alloc[i], a.t_free[i]));
    }
    return sorted(std::move(ev));
}

std::vector<MemoryEvent> memory_events(const std::vector<int64_t>& t_alloc, const std::vector<int64_t>& t_free) {
    std::vector<MemoryEvent> ev;
    ev.reserve(t_alloc.size() * 2);
    for (size_t i = 0; i < t_alloc.size(); ++i) {
        ev.push_back(MemoryEvent::allocation(static_cast<int64_t>(i), t_alloc[i]));
        if (t_free[i] != kNoTime) ev.push_back(MemoryEvent::release(static_cast<int64_t>(i), t_alloc[i], t_free[i]));
    }
    return sorted(std::move(ev));
}

}  // namespace mhc::trace
