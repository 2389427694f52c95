#pragma once
// The offload transform's parts, one concern a file (offload.cpp moves one pass's saves):
//   offload_packs.cpp      the packs the hook sees in one pass, in the order it sees them
//   offload_unpacks.cpp    where the hook unpacks a storage, and which unpack's prefetch brings it back
//   offload_lifetimes.cpp  which storages die on the device and come back, and when the device
//                          copy made in the forward is let go of
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "mhc/advise/transforms.hpp"

namespace mhc::advise::offloading {

struct Pack {
    int32_t seq;     // the saving op
    int32_t alloc;   // the storage
    bool output;     // made by the saving op: packed after it ran (its inputs are packed before)
    int32_t hook = -1;   // a checkpoint's save (index into Plan::hook_saves), -1: the capture's
    Point at() const { return {seq, output}; }
};

// One forward and its backward under the hook (a step with gradient accumulation has one per
// micro-batch): its saves moved to the host and back.
class PassOffload {
public:
    PassOffload(const Context& ctx, Plan& plan, int32_t pass, const OffloadSetting& setting,
                const std::vector<int32_t>& scope);
    void apply();

private:
    // A storage's copy back to the device, and the unpack whose prefetch brings it.
    struct Back {
        size_t trigger, distance;   // the pack whose unpack brings it; how many packs before that one it is
        int32_t storage;
        Alloc copy;
        int32_t h2d = -1, unpack = -1;   // sync: the copy op, placed before the unpacking op
    };

    const Context& ctx_;
    const Base& base_;
    Plan& plan_;
    const int32_t pass_;
    const OffloadSetting& setting_;
    const std::vector<int32_t>& scope_;   // modules whose forward runs under the hook; empty: the whole forward
    const bool streamed_;
    std::vector<uint8_t> uncovered_;   // module -> inside a checkpoint the hook is not around
    std::vector<Pack> packs_;                                        // in the hook's order
    std::unordered_map<int32_t, size_t> first_pack_;                 // storage -> its first eligible pack
    std::unordered_map<int32_t, std::vector<size_t>> pack_places_;   // storage -> all its packs
    std::unordered_map<int32_t, bool> copied_back_;                  // storages that die on the device
    std::unordered_map<int32_t, bool> never_back_;   // ... and that the hook never unpacks (a checkpoint's)
    // storages a checkpoint hands to the hook -> the earliest op unpacking one of those saves (-1: none)
    std::unordered_map<int32_t, int32_t> hook_unpack_;
    std::unordered_map<int32_t, bool> captured_pack_;   // storages the hook packs for the capture's saves too
    // storages that saves outside the hook keep on the device until their own backward, before
    // the hook's unpack -> the last backward op of theirs reading it (it dies after that op)
    std::unordered_map<int32_t, int32_t> outside_release_;
    // a call's first op -> the sync D2H copies of its checkpoint's inputs placed before it so far
    std::unordered_map<int32_t, size_t> call_input_copies_;
    int32_t first_unpack_ = -1;                                      // the hook's first unpack of a storage it moved
    std::vector<Back> backs_;

    // offload_packs.cpp
    bool in_scope(int32_t seq) const;
    bool checkpointed(int32_t seq) const;
    bool checkpointed_outside(int32_t seq) const;
    bool covers(int32_t checkpointed) const;
    bool eligible(int32_t alloc_id) const;
    void collect_packs();
    void add_hook_saves();
    void index_eligible_packs();
    // offload_unpacks.cpp
    int32_t unpack_at(int32_t storage) const;
    int32_t hook_unpack_at(int32_t storage) const;
    int32_t save_unpack_at(size_t pack) const;
    void find_first_unpack();
    size_t bringing_pack(size_t own, int32_t storage, int32_t& bring, size_t& distance) const;
    size_t unpacking_pack(size_t own, int32_t storage, int32_t at) const;
    bool earlier(int32_t op, int32_t than) const { return plan_.key(Point{op, false}) < plan_.key(Point{than, false}); }
    // offload_lifetimes.cpp
    void choose_copied_back();
    int32_t released_outside(int32_t storage, int32_t first_outside, bool replaced) const;
    Point device_release(size_t own, int32_t storage, int32_t d2h);
    Alloc device_copy_back(int32_t storage, const Alloc& saved, Point recorded_free,
                           int64_t recorded_free_offset) const;
    // offload.cpp
    void move(size_t own);
    void place_device_copies();
};

}  // namespace mhc::advise::offloading
