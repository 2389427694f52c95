// The communicator of each stream's NCCL kernels, from the process group PyTorch's profiler writes
// on them (docs/import.md, "Process groups"): meta nccl.stream.N, which simulate --ranks reads
// (docs/trace-format.md, "Cross-rank events"), and kineto.process_groups saying what was read.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kineto_groups.hpp"
#include "kineto_numbers.hpp"
#include "kineto_write.hpp"
#include "mhc/trace/comm_kernels.hpp"

namespace mhc::trace::import {

namespace {

// args.Process Group Ranks as Kineto writes it, "[0, 1, 2]": the ranks, or nullopt where the list
// is cut short ("[0, 1, ..., 29, ...]": PyTorch keeps 30 ranks) or is not a list of ranks.
std::optional<std::vector<int64_t>> ranks_of(const std::string& text) {
    if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
    std::vector<int64_t> ranks;
    size_t at = 1;
    while (at < text.size() - 1) {
        size_t comma = text.find(',', at);
        if (comma == std::string::npos || comma > text.size() - 1) comma = text.size() - 1;
        size_t begin = text.find_first_not_of(' ', at), end = text.find_last_not_of(' ', comma - 1);
        int64_t rank = -1;
        if (begin >= comma || end == std::string::npos || end < begin ||
            !parse_int(text.data() + begin, end - begin + 1, rank) || rank < 0 || rank > (1 << 24))
            return std::nullopt;
        ranks.push_back(rank);
        at = comma + 1;
    }
    return ranks;
}

std::string list_text(const std::vector<int64_t>& ranks) {
    std::string text;
    for (int64_t rank : ranks) text += (text.empty() ? "" : ",") + std::to_string(rank);
    return text;
}

// One stream's NCCL kernels: those of each group (name -> kernels) and those naming none.
struct StreamGroups {
    std::map<std::string, int64_t> kernels;   // "name\x1franks text" -> kernels
    int64_t without = 0, unreadable = 0;
};

// A group's members: its kernels' list, else distributedInfo.pg_config's; nullopt if neither holds them.
std::optional<std::vector<int64_t>> members_of(const KinetoData& data, const std::string& name, const std::string& text) {
    std::optional<std::vector<int64_t>> ranks = ranks_of(text);
    if (!ranks || ranks->empty()) {
        auto listed = data.pg_config.find(name);
        if (listed == data.pg_config.end() || listed->second.empty()) return std::nullopt;
        ranks = listed->second;
    }
    std::sort(ranks->begin(), ranks->end());
    ranks->erase(std::unique(ranks->begin(), ranks->end()), ranks->end());
    return ranks;
}

// Writes nccl.stream.N for a stream whose named kernels are of one group; returns what it says of
// the stream, and a warning where no communicator could be written for it.
std::string stream_said(const KinetoData& data, int64_t stream, const StreamGroups& kernels_of, Result& result,
                        std::string& warning) {
    const std::string lane = "stream " + std::to_string(stream);
    std::map<std::string, std::pair<std::optional<std::vector<int64_t>>, int64_t>> groups;   // name -> members, kernels
    bool differ = false;
    for (const auto& [key, count] : kernels_of.kernels) {
        const size_t cut = key.find('\x1f');
        const std::string name = key.substr(0, cut);
        auto members = members_of(data, name, key.substr(cut + 1));
        auto [it, fresh] = groups.try_emplace(name, members, 0);
        differ |= !fresh && it->second.first != members;
        it->second.second += count;
    }
    std::string said = lane + ": ";
    for (const auto& [name, group] : groups)
        said += (said.size() > lane.size() + 2 ? "; " : "") + std::string("process group ") + name + " (" +
                (group.first ? "ranks " + list_text(*group.first) : std::string("ranks not known")) + ") " +
                std::to_string(group.second) + " kernels";
    const int64_t none = kernels_of.without + kernels_of.unreadable;
    if (none > 0) said += "; " + std::to_string(none) + " naming none";
    if (groups.size() > 1 || differ) {
        warning = lane + " carries the NCCL kernels of " + std::to_string(groups.size()) +
                  " process groups (or one group with two member lists): simulate --ranks takes a stream for one "
                  "communicator, so these kernels are matched across ranks by the stream number";
        return said;
    }
    const auto& [name, group] = *groups.begin();
    if (!group.first) {
        warning = lane + "'s process group " + name +
                  " lists its ranks cut short and distributedInfo.pg_config does not list it: simulate --ranks "
                  "matches its kernels across ranks by the stream number";
        return said;
    }
    if (data.rank >= 0 && !std::binary_search(group.first->begin(), group.first->end(), data.rank)) {
        warning = lane + "'s process group " + name + " does not list the trace's own rank " + std::to_string(data.rank) +
                  ": no communicator written for it";
        return said;
    }
    result.meta["nccl.stream." + std::to_string(stream)] = "pg " + name + ":" + list_text(*group.first);
    return said;
}

}  // namespace

void write_process_groups(const KinetoData& data, Result& result) {
    std::map<int64_t, StreamGroups> streams;
    int64_t nccl = 0, named = 0;
    for (const KKernel& kernel : data.kernels) {
        if (kernel.is_copy || kernel.is_memset || comm_kernel_op(data.strings.list[kernel.name]).empty()) continue;
        ++nccl;
        StreamGroups& lane = streams[kernel.stream];
        if (kernel.group_unreadable) {
            ++lane.unreadable;
        } else if (kernel.group_name == KKernel::kNoGroup) {
            ++lane.without;
        } else {
            ++named;
            const std::string ranks = kernel.group_ranks == KKernel::kNoGroup ? "" : data.strings.list[kernel.group_ranks];
            ++lane.kernels[data.strings.list[kernel.group_name] + '\x1f' + ranks];
        }
    }
    if (nccl == 0) return;
    if (named == 0) {
        result.meta["kineto.process_groups"] =
            "none of the " + std::to_string(nccl) +
            " NCCL kernels names its process group (args.Process Group Name, written by PyTorch 2.x): simulate --ranks "
            "takes each stream for one communicator";
        return;
    }
    std::string said = std::to_string(named) + " of " + std::to_string(nccl) + " NCCL kernels name their process group: ";
    bool first = true;
    for (const auto& [stream, lane] : streams) {
        if (lane.kernels.empty()) continue;
        std::string warning;
        said += (first ? "" : "; ") + stream_said(data, stream, lane, result, warning);
        first = false;
        if (!warning.empty()) result.warnings.push_back(warning);
    }
    for (const auto& [stream, lane] : streams)
        if (lane.kernels.empty())
            said += "; stream " + std::to_string(stream) + ": " + std::to_string(lane.without + lane.unreadable) +
                    " naming none";
    result.meta["kineto.process_groups"] = said;
}

}  // namespace mhc::trace::import
