#pragma once
// The nodes of a PyTorch execution trace (ExecutionTraceObserver / Chakra JSON), read by a SAX
// parse that keeps each op's name, ids and tensors and drops the rest (et_nodes.cpp); the
// importer (et.cpp) maps them to the trace.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kineto_repair.hpp"

namespace mhc::trace::import {

struct TensorUse {
    int64_t storage;
    int32_t device;
    int64_t bytes;         // (offset + elements spanned) * itemsize
    int64_t tensor = 0;    // the trace's tensor id
    bool spanned = false;  // the span from written strides; false: numel (no strides written)
    int32_t generation = 0;   // which allocation of the storage id (number_allocations)
};

struct Node {
    int64_t id = 0, parent = -1, rf_id = -1, tid = 0, seq = -1;   // seq: autograd seq_id
    std::string name;
    std::vector<TensorUse> ins, outs;
    bool has_children = false;
};

// The tensors of each device type the trace names (c10::Device::str(): "cuda:0", "xpu:1",
// "cpu", "meta", a backend's own name such as "npu:0"), counted as they are read.
using DeviceTypes = std::map<std::string, int64_t>;

// The nodes chakra_trace_link adds to an execution trace (its "ET+"): one per kernel, copy or
// memset Kineto ran for an op, a copy of that op (its tensors, ctrl_deps on it) with the Kineto
// event's "cat", "ph", "ts", "stream". Not ops of the program: left out and counted.
struct LinkedNodes {
    int64_t count = 0;
    std::string first;   // the first one's name
};

// The nodes in id order, each marked when another node names it as parent; `pid` is the
// recording process's (-1 when the trace does not say), `devices` the tensors of each device
// type, `linked` the nodes chakra_trace_link added (left out). Bad input throws mhc::Error naming
// the file.
// `raw`: the characters of node names written unescaped that the parse read as their name's
// (kineto_repair.hpp: PyTorch's observer writes a record_function's name as it is), none where the
// file is JSON whose names hold no backslash before b, f, n, r or t. `stray`: members after a name
// that no reading could take as the name's text, kept as written (StrayMember).
std::vector<Node> parse_nodes(const std::string& in, uint64_t max_input_size, int64_t& pid, DeviceTypes& devices,
                              LinkedNodes& linked, RawStrings& raw, StrayMember& stray);

// PyTorch's observer names a storage by its data pointer, so when the allocator gives a freed
// block's address to a new storage, its id comes back. A leaf ATen op's output on a storage id
// that none of its inputs holds is a new allocation: where another leaf op used that id before,
// it starts the id's next allocation (TensorUse::generation, from 0). `nodes` in id order (the
// order ops start). Returns how many allocations began so.
int64_t number_allocations(std::vector<Node>& nodes);

}  // namespace mhc::trace::import
