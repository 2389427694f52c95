// A large plain Kineto trace parsed by two threads (kineto_two_parts.hpp): where the second part
// starts, and how its data joins the first part's.
#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "kineto_two_parts.hpp"

namespace mhc::trace::import {

uint64_t guess_element_start(const std::string& path, uint64_t from) {
    std::ifstream file(path, std::ios::binary);
    std::string chunk(size_t{1} << 16, '\0');
    if (!file.seekg(static_cast<std::streamoff>(from))) return UINT64_MAX;
    file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<size_t>(file.gcount()));
    auto space = [](char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; };
    for (size_t i = 0; i < chunk.size(); ++i) {
        if (chunk[i] != '}') continue;
        size_t next = i + 1;
        while (next < chunk.size() && space(chunk[next])) ++next;
        if (next >= chunk.size() || chunk[next] != ',') continue;
        ++next;
        while (next < chunk.size() && space(chunk[next])) ++next;
        if (next < chunk.size() && chunk[next] == '{') return from + next;
    }
    return UINT64_MAX;
}

bool merge_second_part(KinetoData& first, KinetoData&& second) {
    if (first.device_count > 0 && second.device_count > 0) return false;
    std::vector<uint32_t> name(second.strings.list.size());
    for (size_t i = 0; i < name.size(); ++i) name[i] = first.strings.intern(second.strings.list[i]);
    const int64_t shift = first.events;
    first.second_part_from = shift;
    first.kernels.reserve(first.kernels.size() + second.kernels.size());
    for (KKernel& kernel : second.kernels) {
        kernel.name = name[kernel.name];
        if (kernel.group_name != KKernel::kNoGroup) kernel.group_name = name[kernel.group_name];
        if (kernel.group_ranks != KKernel::kNoGroup) kernel.group_ranks = name[kernel.group_ranks];
        first.kernels.push_back(kernel);
    }
    first.memory.reserve(first.memory.size() + second.memory.size());
    for (KMemory& event : second.memory) {
        event.index += shift;
        first.memory.push_back(event);
    }
    first.ops.reserve(first.ops.size() + second.ops.size());
    for (KOp& op : second.ops) {
        op.name = name[op.name];
        first.ops.push_back(op);
    }
    for (KRange& range : second.ranges) {
        range.name = name[range.name];
        first.ranges.push_back(range);
    }
    for (KRange& range : second.loop_ranges) {
        range.name = name[range.name];
        first.loop_ranges.push_back(range);
    }
    for (KCall& call : second.launch_calls) {
        call.name = name[call.name];
        call.index += shift;
        first.launch_calls.push_back(call);
    }
    first.runtime_calls.insert(first.runtime_calls.end(), second.runtime_calls.begin(), second.runtime_calls.end());
    // Each process's calls of a shared id, then the last call of every id (which stays the last).
    for (const auto& [id, calls] : second.shared_launches)
        for (const KLaunch& call : calls) first.add_launch(id, call);
    for (const auto& [id, call] : second.launches) first.add_launch(id, call);
    for (const auto& [id, starts] : second.shared_flows)
        for (const KLaunch& start : starts) first.add_flow(id, start);
    for (const auto& [id, start] : second.flow_starts) first.add_flow(id, start);
    if (first.negative_durations == 0 && second.negative_durations > 0) {
        first.first_negative = second.first_negative + shift;
        first.first_negative_dur = second.first_negative_dur;
        first.first_negative_name = std::move(second.first_negative_name);
    }
    first.negative_durations += second.negative_durations;
    first.events += second.events;
    first.flows += second.flows;
    first.host_memory_events += second.host_memory_events;
    first.sycl_queue_lanes += second.sycl_queue_lanes;
    first.begin_end_events += second.begin_end_events;
    if (first.copies_without_direction == 0 && second.copies_without_direction > 0)
        first.first_copy_without_direction = std::move(second.first_copy_without_direction);
    first.copies_without_direction += second.copies_without_direction;
    if (first.out_of_memory == 0 && second.out_of_memory > 0) {
        first.first_out_of_memory = second.first_out_of_memory;
        first.first_out_of_memory.index += shift;
    }
    first.out_of_memory += second.out_of_memory;
    for (int64_t pid : second.launch_pids)
        if (first.launch_pids.size() < KinetoData::kMaxLaunchPids) first.launch_pids.insert(pid);
    for (const auto& [category, count] : second.unread_categories) first.unread_categories[category] += count;
    first.profiler_events += second.profiler_events;
    first.foreign_events += second.foreign_events;
    for (const auto& [category, count] : second.foreign_categories) first.foreign_categories[category] += count;
    if (first.xprof_process.empty()) first.xprof_process = std::move(second.xprof_process);
    first.autograd_legacy |= second.autograd_legacy;
    first.ascend_npu |= second.ascend_npu;
    for (const auto& [category, count] : second.counter_categories) first.counter_categories[category] += count;
    for (const auto& [device, count] : second.odd_memory_devices) first.odd_memory_devices[device] += count;
    if (first.activities_without_device == 0 && second.activities_without_device > 0)
        first.first_without_device = std::move(second.first_without_device);
    first.activities_without_device += second.activities_without_device;
    first.copies_on_in_device += second.copies_on_in_device;
    first.streams_from_tid += second.streams_from_tid;
    first.activities_without_stream += second.activities_without_stream;
    first.t_min = std::min(first.t_min, second.t_min);
    if (second.device_count > 0) {
        first.device_count = second.device_count;
        first.device_id = second.device_id;
        first.device_name = std::move(second.device_name);
        first.device_memory = second.device_memory;
    }
    if (second.rank >= 0) first.rank = second.rank;
    if (second.world_size >= 0) first.world_size = second.world_size;
    for (auto& [group, ranks] : second.pg_config) first.pg_config[group] = std::move(ranks);
    first.has_rf_id |= second.has_rf_id;
    first.rocm |= second.rocm;
    if (second.profile_memory >= 0) first.profile_memory = second.profile_memory;   // a key after traceEvents
    if (second.base_time_ns >= 0) first.base_time_ns = second.base_time_ns;
    return true;
}

}  // namespace mhc::trace::import
