#pragma once
// A PyTorch memory snapshot's allocator settings (docs/import.md, "PyTorch CUDA memory snapshot").
#include <map>
#include <optional>
#include <string>

#include "mhc/trace/import/pickle.hpp"
#include "snapshot_blocks.hpp"
#include "snapshot_doc.hpp"

namespace mhc::trace::import::snapshot {

// snapshot['allocator_settings'] (PyTorch >= 2.4) as PYTORCH_CUDA_ALLOC_CONF text, the keys the
// caching model follows: expandable_segments, max_split_size_mb, roundup_power2_divisions,
// garbage_collection_threshold, and as the rules of a block's size. max_split_size is in bytes
// there (-1 or SIZE_MAX: unlimited); roundup_power2_divisions maps each power-of-two interval
// start in MiB to its divisions.
BlockRules add_allocator_settings(const PickleDoc& doc, std::optional<Id> settings,
                                  std::map<std::string, std::string>& meta);

}  // namespace mhc::trace::import::snapshot
