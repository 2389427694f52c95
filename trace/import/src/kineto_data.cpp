// The parsed Kineto data's own bookkeeping (kineto_parse.hpp): interned names, the runtime calls
// and flows that launched kernels (several processes may use one correlation id), and the
// ProfilerStep#N ranges.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kineto_parse.hpp"

namespace mhc::trace::import {

uint32_t KStrings::intern(std::string_view name) {
    auto it = index.find(name);   // heterogeneous lookup: no string built for known names
    if (it != index.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(list.size());
    list.emplace_back(name);
    index.emplace(std::string(name), id);
    return id;
}

namespace {

// Records `call` as the last call of `id`; where another process's call of the id was read
// before, every process's last call of it is kept in `shared`.
void add_call(std::unordered_map<int64_t, KLaunch>& last, std::unordered_map<int64_t, std::vector<KLaunch>>& shared,
              int64_t id, const KLaunch& call) {
    auto [it, fresh] = last.try_emplace(id, call);
    if (fresh) return;
    auto all = shared.find(id);
    if (all == shared.end()) {
        if (it->second.pid == call.pid) {
            it->second = call;
            return;
        }
        all = shared.emplace(id, std::vector<KLaunch>{it->second}).first;
    }
    auto same = std::find_if(all->second.begin(), all->second.end(),
                             [&](const KLaunch& other) { return other.pid == call.pid; });
    if (same != all->second.end()) *same = call;
    else all->second.push_back(call);
    it->second = call;
}

// The call of `id` that launched kernel k: the only one, or among several processes' calls the
// one of the process that drove k's GPU lane, else the latest one made before k started (a
// launch precedes its kernel), else the earliest.
const KLaunch* pick_call(const std::unordered_map<int64_t, KLaunch>& last,
                         const std::unordered_map<int64_t, std::vector<KLaunch>>& shared,
                         const std::map<std::pair<int64_t, int32_t>, int64_t>& lane_process, const KKernel& kernel,
                         LaunchPick& how) {
    auto all = shared.find(kernel.correlation);
    if (all == shared.end()) {
        auto it = last.find(kernel.correlation);
        how = it == last.end() ? LaunchPick::None : LaunchPick::Only;
        return it == last.end() ? nullptr : &it->second;
    }
    const std::vector<KLaunch>& calls = all->second;
    auto lane = lane_process.find({kernel.pid, kernel.device});
    if (lane != lane_process.end() && lane->second >= 0)
        for (const KLaunch& call : calls)
            if (call.pid == lane->second) {
                how = LaunchPick::ByProcess;
                return &call;
            }
    how = LaunchPick::ByTime;
    const KLaunch* best = nullptr;
    for (const KLaunch& call : calls)
        if (call.ts <= kernel.ts && (best == nullptr || call.ts > best->ts)) best = &call;
    if (best != nullptr) return best;
    return &*std::min_element(calls.begin(), calls.end(),
                              [](const KLaunch& lhs, const KLaunch& rhs) { return lhs.ts < rhs.ts; });
}

}   // namespace

void KinetoData::add_launch(int64_t correlation, const KLaunch& call) {
    add_call(launches, shared_launches, correlation, call);
    auto [first, fresh] = first_call_id.try_emplace(call.pid, correlation);
    if (!fresh) first->second = std::min(first->second, correlation);
    if (launch_pids.size() < kMaxLaunchPids) launch_pids.insert(call.pid);
}

void KinetoData::add_flow(int64_t id, const KLaunch& start) {
    add_call(flow_starts, shared_flows, id, start);
    if (launch_pids.size() < kMaxLaunchPids) launch_pids.insert(start.pid);
}

size_t KinetoData::calls_begun(const KKernel& kernel) const {
    // launch_of looks in the launches first, in the flows where no call has the id.
    const bool launched = launches.count(kernel.correlation) > 0;
    const auto& shared = launched ? shared_launches : shared_flows;
    auto all = shared.find(kernel.correlation);
    if (all == shared.end()) return 0;
    return static_cast<size_t>(std::count_if(all->second.begin(), all->second.end(),
                                             [&](const KLaunch& call) { return call.ts <= kernel.ts; }));
}

void KinetoData::learn_lanes() {
    lane_process.clear();
    if (shared_launches.empty() && shared_flows.empty()) return;
    // Per lane, how many of its kernels each process launched: ids one process used only, and ids
    // several used of which one process's call alone began by the kernel's start (a launch precedes
    // its kernel). Ranks running the same program number their calls alike, so in a merged file
    // every id can repeat: learnt from unique ids alone no lane had a process, each kernel took the
    // latest call of its id before it, another rank's where that rank ran behind, and the launches
    // left over were said to have lost their kernels (param's ResNet as two ranks 2 ms apart:
    // "9530 of 19256 kernel launches have no kernel", where every launch has its kernel).
    std::map<std::pair<int64_t, int32_t>, std::map<int64_t, int64_t>> votes;
    for (const KKernel& kernel : kernels) {
        if (kernel.is_copy || kernel.is_memset) continue;
        LaunchPick how = LaunchPick::None;
        const KLaunch* call = launch_of(kernel, &how);
        if (how == LaunchPick::Only || (how == LaunchPick::ByTime && calls_begun(kernel) == 1))
            ++votes[{kernel.pid, kernel.device}][call->pid];
    }
    // A lane is one process's where that process launched at least 99% of them (a stray kernel
    // whose own launch was not recorded can take another process's call of its id); a lane that
    // two processes drove (two ranks' GPU 0 under one pid) has no process: -1.
    for (const auto& [lane, counts] : votes) {
        int64_t process = -1, most = 0, total = 0;
        for (const auto& [pid, count] : counts) {
            total += count;
            if (count > most) {
                process = pid;
                most = count;
            }
        }
        lane_process[lane] = most * 100 >= total * 99 ? process : -1;
    }
}

const KLaunch* KinetoData::launch_of(const KKernel& kernel, LaunchPick* how) const {
    LaunchPick pick = LaunchPick::None;
    const KLaunch* call = pick_call(launches, shared_launches, lane_process, kernel, pick);
    if (call == nullptr) call = pick_call(flow_starts, shared_flows, lane_process, kernel, pick);
    if (how != nullptr) *how = pick;
    return call;
}

StepRanges::StepRanges(const std::vector<KRange>& ranges) {
    for (const auto& range : ranges)
        if (range.step >= 0) steps_.push_back(&range);
    std::sort(steps_.begin(), steps_.end(), [](const KRange* lhs, const KRange* rhs) { return lhs->ts < rhs->ts; });
}

int32_t StepRanges::at(int64_t time) const {
    auto after = std::upper_bound(steps_.begin(), steps_.end(), time,
                                  [](int64_t value, const KRange* step) { return value < step->ts; });
    if (after == steps_.begin()) return -1;
    const KRange* step = *(after - 1);
    return time <= step->ts + step->dur ? step->step : -1;
}

ProcessSteps::ProcessSteps(const std::vector<KRange>& ranges) {
    std::map<int32_t, std::pair<int64_t, int64_t>> starts;   // step number -> (earliest, latest) start
    for (const auto& range : ranges) {
        if (range.step < 0) continue;
        own_[range.pid].push_back(Span{range.ts, range.ts + range.dur, range.step});
        auto [it, fresh] = starts.try_emplace(range.step, range.ts, range.ts);
        it->second = {std::min(it->second.first, range.ts), std::max(it->second.second, range.ts)};
    }
    for (auto& [pid, steps] : own_)
        std::stable_sort(steps.begin(), steps.end(),
                         [](const Span& lhs, const Span& rhs) { return lhs.start < rhs.start; });
    for (const auto& [step, span] : starts) skew_ = std::max(skew_, span.second - span.first);
}

int32_t ProcessSteps::at(int64_t pid, int64_t time, const StepRanges& joined) const {
    auto found = own_.find(pid);
    if (found == own_.end()) return joined.at(time);
    const std::vector<Span>& steps = found->second;
    auto after = std::upper_bound(steps.begin(), steps.end(), time,
                                  [](int64_t value, const Span& step) { return value < step.start; });
    if (after == steps.begin()) return -1;
    return time <= (after - 1)->end ? (after - 1)->step : -1;
}

}  // namespace mhc::trace::import
