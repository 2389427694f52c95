#pragma once
// Which Kineto CPU op is which execution-trace node (the ET importer's --kineto join,
// docs/import.md). Two rules, both exact, neither a guess:
//  - the key: Kineto's args "Record function id" equals the node's rf_id (both are the
//    RecordFunction handle; PyTorch writes the Kineto arg since about 2.4, and writes 0 for ops
//    that no execution trace recorded), the names agree, and so do the autograd sequence
//    numbers where both have one. A Kineto trace that writes the key joins by it alone;
//  - where Kineto writes no key at all (older traces: its "External id" is its own counter,
//    unrelated to rf_id), a thread's ops in start order must occur exactly once, contiguously
//    and in the same order, among one Kineto thread's ops, with the same names and the same
//    autograd sequence numbers ("Sequence number", seq_id) wherever both have one. A trace of
//    several iterations repeats the names; the sequence numbers tell the iterations apart.
// A thread that fits nowhere, or at more than one place, is not joined and said in a note.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kineto_parse.hpp"

namespace mhc::trace::import {

struct EtOpRef {   // what the join reads of one execution-trace node
    std::string_view name;
    int64_t id = 0, tid = 0, rf_id = -1, seq = -1;
    int64_t parent = -1;   // index of the parent node in the same list, -1 none
};

struct EtJoin {
    std::vector<int32_t> node_op;   // per node: its Kineto op (index into KinetoData::ops), or -1
    int64_t by_key = 0, by_order = 0;
    // Joined nodes whose joined parent does not enclose them on the Kineto timeline (an
    // independent check: the ET records parents, Kineto only times).
    int64_t parent_disagreements = 0;
    // Joined nodes whose joined parent's Kineto op is on another thread (or process): work the
    // parent handed to another thread, such as gloo's collectives (gloo:all_reduce on gloo's
    // worker thread under c10d::allreduce_), which need not lie inside it; not disagreements.
    int64_t parent_on_other_thread = 0;
    std::vector<std::string> notes;   // one line per thread left unjoined, and why
};

// `nodes` in id order (start order per thread); `kd` after link_ops; `pid` the execution trace's
// process (only its Kineto ops are joined), -1 when the execution trace does not say.
EtJoin join_et_kineto(const std::vector<EtOpRef>& nodes, const KinetoData& kd, int64_t pid);

// A profiler range the observer writes around a thread or process, not an op.
bool is_et_profiler_range(std::string_view name);

}   // namespace mhc::trace::import
