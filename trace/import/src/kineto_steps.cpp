// The training steps of a Kineto trace (kineto_steps.hpp): ProfilerStep#N ranges mended where the
// writer wrote them wrong, steps from the optimizer's ranges where the trace has no ProfilerStep#N,
// and several processes' steps of one number joined.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kineto_steps.hpp"
#include "kineto_write.hpp"
#include "steps.hpp"

namespace mhc::trace::import {

namespace {

// Where no CPU range is a ProfilerStep#N, each process's optimizer-step ranges delimit its steps
// (steps.hpp), added to the ranges as step#0, step#1, ... ranges of those step numbers; step 0 begins
// at the trace's first event (`base`). Meta steps_from says where the steps came from. Before
// 2026-12-05 such a trace had no steps (param's ResNet trace: 30 Optimizer.step#SGD.step ranges).
// An optimizer range's work (steps.hpp): the ops (cpu_op, user_annotation, Operator) and runtime or
// driver calls of its process and thread that begin within it, itself included.
class ThreadWork {
public:
    explicit ThreadWork(const KinetoData& data) {
        std::map<KinetoData::ThreadKey, std::vector<std::pair<int64_t, uint32_t>>> events;
        for (const KOp& op : data.ops) add(events, {op.pid, op.tid}, op.ts, op.dur, op.name);
        for (const KLaunch& call : data.runtime_calls) add(events, {call.pid, call.tid}, call.ts, call.dur, kCall);
        for (auto& [thread, list] : events) {
            // By time, then name (a call's: empty), so that ops of one microsecond keep one order.
            auto label = [&](uint32_t name) -> const std::string& {
                static const std::string call;
                return name == kCall ? call : data.strings.list[name];
            };
            std::stable_sort(list.begin(), list.end(), [&](const auto& lhs, const auto& rhs) {
                return lhs.first != rhs.first ? lhs.first < rhs.first : label(lhs.second) < label(rhs.second);
            });
            for (const auto& [ts, name] : list) starts_[thread].push_back(ts), names_[thread].push_back(name);
        }
    }
    // The latest end of the thread's ops and calls (the range's start if none ends later).
    int64_t last_end(const KRange& range) const {
        auto found = last_end_.find({range.pid, range.tid});
        return found == last_end_.end() ? range.ts : std::max(range.ts, found->second);
    }
    // The sorted starts of a range's thread's ops and calls and what each is (an op's name id, a
    // runtime call's kCall), none where it has none.
    const std::vector<int64_t>* starts_of(const KRange& range) const {
        auto found = starts_.find({range.pid, range.tid});
        return found == starts_.end() ? nullptr : &found->second;
    }
    const std::vector<uint32_t>* names_of(const KRange& range) const {
        auto found = names_.find({range.pid, range.tid});
        return found == names_.end() ? nullptr : &found->second;
    }
    int64_t within(const KRange& range) const {
        const std::vector<int64_t>* starts = starts_of(range);
        if (starts == nullptr) return 0;
        return std::upper_bound(starts->begin(), starts->end(), range.ts + range.dur) -
               std::lower_bound(starts->begin(), starts->end(), range.ts);
    }

private:
    static constexpr uint32_t kCall = UINT32_MAX;
    void add(std::map<KinetoData::ThreadKey, std::vector<std::pair<int64_t, uint32_t>>>& events,
             const KinetoData::ThreadKey& thread, int64_t ts, int64_t dur, uint32_t name) {
        events[thread].emplace_back(ts, name);
        auto [at, fresh] = last_end_.try_emplace(thread, ts + dur);
        if (!fresh) at->second = std::max(at->second, ts + dur);
    }
    std::map<KinetoData::ThreadKey, std::vector<int64_t>> starts_;
    std::map<KinetoData::ThreadKey, std::vector<uint32_t>> names_;
    std::map<KinetoData::ThreadKey, int64_t> last_end_;
};

// The last optimizer-step range of each process, where it lasts 0: the profiler writes a range still
// open when recording stopped with its start as its end (HTA's step-based trace: its fifth
// Optimizer.step#SGD.step at 0 us, the four add_ of that step and their kernels after it on its
// thread, its GPU annotation 64 us long). Such a range ends at its thread's last event instead (the
// index in data.ranges -> that end).
std::map<size_t, int64_t> open_optimizer_ranges(const KinetoData& data, const ThreadWork& work) {
    std::map<int64_t, size_t> last;   // pid -> index of its last optimizer range (by start)
    for (size_t i = 0; i < data.ranges.size(); ++i) {
        const KRange& range = data.ranges[i];
        if (range.gpu || !is_optimizer_step(data.strings.list[range.name])) continue;
        auto [at, fresh] = last.try_emplace(range.pid, i);
        if (!fresh && range.ts >= data.ranges[at->second].ts) at->second = i;
    }
    std::map<size_t, int64_t> out;
    for (const auto& [pid, index] : last) {
        const KRange& range = data.ranges[index];
        if (range.dur == 0 && work.last_end(range) > range.ts) out[index] = work.last_end(range);
    }
    return out;
}

}   // namespace

// ProfilerStep#N ranges written with their end only right. The profiler's step() ends step N's range
// and begins step N+1's at once, so a thread's ProfilerStep#N ranges hold its ops and follow one
// another with nothing between them but step()'s own work. torch 2.5 with with_stack=True writes each
// range from the start of the step() call that ends it to that end (about 20 us at the end of the
// step; tests/import/fixtures/writers/torch-2.5.1-kineto.json.gz): its ops lie between the ranges.
// Where a thread's ops and calls that begin between its ranges (before each, after the one before
// it ended; before the first, any) outnumber those that begin within them (the range itself left
// out), each of its ranges begins where the one before it ended, the first at the thread's first op
// or call before it; ends are kept. Said in meta kineto.profiler_steps_mended and a warning.
void mend_profiler_steps(KinetoData& data, Result& result) {
    std::map<KinetoData::ThreadKey, std::vector<size_t>> by_thread;   // by start
    for (size_t i = 0; i < data.ranges.size(); ++i)
        if (data.ranges[i].step >= 0 && !data.ranges[i].gpu)
            by_thread[{data.ranges[i].pid, data.ranges[i].tid}].push_back(i);
    const ThreadWork work(data);
    int64_t mended = 0, threads = 0, moved_ns = 0;
    for (auto& [thread, list] : by_thread) {
        std::stable_sort(list.begin(), list.end(),
                         [&](size_t lhs, size_t rhs) { return data.ranges[lhs].ts < data.ranges[rhs].ts; });
        const std::vector<int64_t>* starts = work.starts_of(data.ranges[list.front()]);
        if (starts == nullptr) continue;
        int64_t between = 0, within = 0;
        for (size_t k = 0; k < list.size(); ++k) {
            const KRange& range = data.ranges[list[k]];
            const auto from = k == 0 ? starts->begin()
                                     : std::upper_bound(starts->begin(), starts->end(),
                                                        data.ranges[list[k - 1]].ts + data.ranges[list[k - 1]].dur);
            between += std::max<int64_t>(0, std::lower_bound(starts->begin(), starts->end(), range.ts) - from);
            within += std::max<int64_t>(0, work.within(range) - 1);
        }
        if (between <= within) continue;
        ++threads;
        for (size_t k = list.size(); k-- > 0;) {
            KRange& range = data.ranges[list[k]];
            const int64_t end = range.ts + range.dur;
            const int64_t start = k == 0 ? std::min(range.ts, starts->front())
                                         : data.ranges[list[k - 1]].ts + data.ranges[list[k - 1]].dur;
            if (start >= range.ts) continue;
            moved_ns = std::max(moved_ns, range.ts - start);
            range.ts = start;
            range.dur = end - start;
            ++mended;
        }
    }
    if (mended == 0) return;
    said_and_warned(result, "kineto.profiler_steps_mended",
                    std::to_string(mended) + " ProfilerStep#N ranges of " + std::to_string(threads) +
                        " thread(s) held fewer of their thread's ops than lay between them (as torch 2.5 writes "
                        "them with with_stack=True: each from the start of the step() call that ends it): each "
                        "taken to begin where the one before it ended (the first at its thread's first op), by up "
                        "to " +
                        std::to_string(moved_ns) + " ns earlier");
}


void add_optimizer_steps(KinetoData& data, int64_t base, Result& result) {
    std::map<int64_t, std::vector<NamedSpan>> by_process;
    for (const auto& range : data.ranges)
        if (range.step >= 0) {
            result.meta["steps_from"] = kStepsFromProfiler;
            mend_profiler_steps(data, result);
            return;
        }
    const ThreadWork work(data);
    const std::map<size_t, int64_t> open = open_optimizer_ranges(data, work);
    for (size_t i = 0; i < data.ranges.size(); ++i) {
        KRange range = data.ranges[i];
        const std::string& name = data.strings.list[range.name];
        if (auto found = open.find(i); found != open.end()) range.dur = found->second - range.ts;
        if (range.gpu) continue;
        NamedSpan span{name, range.ts, range.ts + range.dur, is_optimizer_step(name) ? work.within(range) : -1};
        if (is_loop_range(name)) span.thread_starts = work.starts_of(range), span.thread_names = work.names_of(range);
        by_process[range.pid].push_back(std::move(span));
    }
    if (!open.empty()) {
        const KRange& first = data.ranges[open.begin()->first];
        const std::string said =
            std::to_string(open.size()) + " last optimizer-step range" + (open.size() > 1 ? "s" : "") +
            " of 0 us (open when recording stopped: " + data.strings.list[first.name] +
            " with ops after it on its thread) taken to end at its thread's last event, " +
            std::to_string(open.begin()->second - first.ts) + " ns after its start";
        result.meta["kineto.open_optimizer_ranges"] = said;
        result.warnings.push_back(said + ", so the step it ends holds that work");
    }
    for (const auto& range : data.loop_ranges) {   // where step 0 begins (steps.hpp)
        NamedSpan span{data.strings.list[range.name], range.ts, range.ts + range.dur};
        span.thread_starts = work.starts_of(range), span.thread_names = work.names_of(range);
        by_process[range.pid].push_back(std::move(span));
    }
    std::string said, warning, optimizers;
    for (const auto& [pid, spans] : by_process) {
        const OptimizerSteps found = optimizer_steps(spans, base);
        if (found.steps.empty()) continue;
        if (said.empty()) said = found.said(), warning = found.warning(), optimizers = found.optimizers_said();
        for (const StepSpan& step : found.steps) {
            KRange range;
            range.ts = step.t_start;
            range.dur = step.t_end - step.t_start;
            range.pid = pid;
            range.step = step.step;
            range.name = data.strings.intern("step#" + std::to_string(step.step));
            data.ranges.push_back(range);
        }
    }
    if (said.empty()) return;
    result.meta["steps_from"] = said;
    result.meta["steps_optimizers"] = optimizers;
    if (!warning.empty()) result.warnings.push_back(warning);
}

// A file of several processes' traces (ranks a tool merged into one file: their runtime calls or
// ProfilerStep#N ranges carry several pids; a trace the profiler writes has one) has each
// process's ProfilerStep#N: the step is one marker, from the earliest start of its ranges to
// their latest end, as info counts steps by number. Said in meta and a warning; a trace of one
// process is left as it is. A kernel's step is looked up in its launching process's own ranges
// (ProcessSteps; `skew` is how far apart the ranges of one N begin, said). (Correlation ids, also
// per process, are joined per process: KinetoData::launch_of, said by say_shared_ids.)
void merge_process_steps(KinetoData& data, int64_t skew, Result& result) {
    std::set<int64_t> step_pids;
    for (const auto& range : data.ranges)
        if (range.step >= 0) step_pids.insert(range.pid);
    const size_t processes = std::max(step_pids.size(), data.launch_pids.size());
    if (processes <= 1) return;
    std::unordered_map<int32_t, size_t> kept_at;   // step number -> its range in kept
    std::vector<KRange> kept;
    kept.reserve(data.ranges.size());
    int64_t merged = 0;
    for (const auto& range : data.ranges) {
        auto [it, fresh] = range.step >= 0 ? kept_at.try_emplace(range.step, kept.size())
                                           : std::pair{kept_at.end(), true};
        if (fresh) {
            kept.push_back(range);
            continue;
        }
        KRange& step = kept[it->second];
        const int64_t end = std::max(step.ts + step.dur, range.ts + range.dur);
        step.ts = std::min(step.ts, range.ts);
        step.dur = end - step.ts;
        ++merged;
    }
    data.ranges = std::move(kept);
    std::string said = std::to_string(processes) +
                       " processes' traces in one file (their runtime calls or ProfilerStep#N ranges carry " +
                       std::to_string(processes) +
                       " pids; a profiler writes one process a file: ranks merged?): " + std::to_string(merged) +
                       (result.meta.count("steps_from") == 0 || result.meta.at("steps_from") == kStepsFromProfiler
                            ? " ProfilerStep#N ranges of the same N joined, one step marker each"
                            : " optimizer steps of the same number joined, one step marker each") +
                       joined_steps_said(skew);
    said_and_warned(result, "kineto.processes", said);
}

int64_t KernelSteps::lane_owner(const KKernel& kernel) {
    if (auto known = data_.lane_process.find({kernel.pid, kernel.device});
        known != data_.lane_process.end() && known->second >= 0)
        return known->second;
    if (!lanes_learnt_) {   // once, where some kernel lacks its launch: most traces have none
        lanes_learnt_ = true;
        std::map<std::pair<int64_t, int32_t>, std::map<int64_t, int64_t>> votes;
        for (const KKernel& other : data_.kernels)
            if (!other.is_copy && !other.is_memset)
                if (const KLaunch* call = data_.launch_of(other)) ++votes[{other.pid, other.device}][call->pid];
        for (const auto& [lane, counts] : votes) {   // 99%, as KinetoData::learn_lanes
            int64_t process = -1, most = 0, total = 0;
            for (const auto& [pid, count] : counts) {
                total += count;
                if (count > most) process = pid, most = count;
            }
            owner_[lane] = most * 100 >= total * 99 ? process : -1;
        }
    }
    if (auto found = owner_.find({kernel.pid, kernel.device}); found != owner_.end()) return found->second;
    return data_.launch_pids.size() == 1 ? *data_.launch_pids.begin() : -1;
}

int32_t KernelSteps::of(const KKernel& kernel, const KLaunch* call) {
    if (call != nullptr) return own_.at(call->pid, call->ts, joined_);
    const int64_t process = lane_owner(kernel);
    if (process < 0) return joined_.at(kernel.ts);
    auto first = data_.first_call_id.find(process);
    const int32_t by_start = own_.at(process, kernel.ts, joined_);
    return before_.take(kernel.correlation, first != data_.first_call_id.end() ? first->second : 0, by_start)
               ? -1
               : by_start;
}

}  // namespace mhc::trace::import
