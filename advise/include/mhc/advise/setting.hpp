#pragma once
// A setting: what a PyTorch user can turn on to change a training step's memory
// (docs/advise.md, "Settings"). One JSON object, every key optional (absent: as captured):
//   {"checkpoint": {"modules": [...], "policy": "full"|"save_matmuls"|"mhc"} or a list of them,
//    "offload": {"mode": "sync"|"streamed", "modules": [...] or null, "min_bytes": N,
//                "max_fwd_stash": K, "prefetch": P},
//    "optimizer": {"impl": "foreach"|"fused"|"forloop", "state": "device"|"host"},
//    "weights": "fp32"|"bf16",
//    "allocator": "PYTORCH_CUDA_ALLOC_CONF text",
//    "reshard_after_forward": {"blocks.0": false, ...}}   (FSDP2, per fully_shard module)
// The same object is what mhc_torch.apply(model, optimizer, setting) takes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mhc::advise {

enum class Policy { Full, SaveMatmuls, Mhc };

struct CheckpointGroup {
    std::vector<std::string> modules;   // fully qualified names, as the capture spells them
    Policy policy = Policy::Full;
};

enum class OffloadMode { Sync, Streamed };

struct OffloadSetting {
    OffloadMode mode = OffloadMode::Streamed;
    std::optional<std::vector<std::string>> modules;   // nullopt: the whole forward
    int64_t min_bytes = 1024;     // torchtune's min_offload_size default
    int max_fwd_stash = 5;        // torchtune's max_fwd_stash_size default (streamed)
    int prefetch = -1;            // storages brought back ahead in the backward; -1: the mode's default
    int prefetch_or_default() const { return prefetch >= 0 ? prefetch : mode == OffloadMode::Sync ? 0 : 2; }
};

enum class OptimizerImpl { AsCaptured, Foreach, Fused, Forloop };

struct Setting {
    std::vector<CheckpointGroup> checkpoint;
    std::optional<OffloadSetting> offload;
    OptimizerImpl optimizer_impl = OptimizerImpl::AsCaptured;
    bool optimizer_on_host = false;
    bool bf16_weights = false;
    std::string allocator;        // "" keeps the captured allocator settings
    // FSDP2's reshard_after_forward per fully_shard module (its name as the capture's groups
    // spell it, "blocks.0"): 0 false, 1 true, 2 or more the ranks of a smaller group; absent: as captured
    std::vector<std::pair<std::string, int>> reshard_after_forward;

    bool empty() const;
};

std::string_view to_string(Policy p);
std::string_view to_string(OptimizerImpl i);

// Parses a setting from JSON text or, when `text` names an existing file, from that file.
// Throws mhc::Error (bad input) naming the field: unknown keys, wrong types, bad values.
Setting parse_setting(const std::string& text);
// The setting as compact JSON with its keys in a fixed order (what mhc_torch.apply and
// `mhc-torch capture --setting` take); "{}" for the empty setting.
std::string to_json(const Setting& s);

}  // namespace mhc::advise
