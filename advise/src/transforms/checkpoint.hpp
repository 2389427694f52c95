#pragma once
// The checkpoint transform's parts, one concern a file (checkpoint.cpp applies them call by call):
//   checkpoint_saves.cpp      what a call saved, where its recomputation stops and where the
//                             backward that reads it back begins and ends
//   checkpoint_recompute.cpp  the recomputation placed before that backward
//   checkpoint_lifetimes.cpp  when the saves, their recomputed copies, the call's inputs and
//                             autocast's casts die once the call is checkpointed
//   checkpoint_batchnorm.cpp  BatchNorm's running-statistics copies around the forward and recompute
#include <unordered_map>
#include <utility>
#include <vector>

#include "mhc/advise/transforms.hpp"

namespace mhc::advise::checkpointing {

// One forward call of a checkpointed module: forward seqs [first, last] of one pass.
struct Call {
    int32_t first = 0, last = 0;
    int32_t module = -1;
    Policy policy = Policy::Full;
    int32_t pass = 0;   // Base::pass (a step with gradient accumulation has several)
    bool holds(int32_t seq) const { return seq >= first && seq <= last; }
};

// Whether the call's policy keeps the output of recorded op `seq` instead of recomputing it
// (selective checkpointing's matmuls).
bool cached(const Plan& plan, const Call& call, int32_t seq);

// A storage a call made and saved that ops outside the call save as well (shared_save), its
// backward reads split by whose nodes make them.
struct SharedSave {
    int32_t alloc = -1;
    std::vector<int32_t> run_reads;   // backward reads of the call's nodes, in order
    int32_t run_first = -1, run_last = -1;
    int32_t outside_last = -1;        // the last read of an outside saver's node
};

// What one call saved and the part of the backward that reads it back.
struct Saves {
    std::vector<int32_t> touched;     // recorded storages the call's ops access (sorted, unique)
    std::vector<int32_t> saved;       // those the call saved (sorted)
    std::vector<uint8_t> only_here;   // per recorded storage: saved by this call alone
    std::vector<int32_t> dropped_only;   // saved only by the call's nodes the forward let go
    std::vector<SharedSave> shared;      // saved by the call and by ops outside it (shared_save)
    bool repeated = false;            // the module is called many times a pass (shared weights)
    int32_t stop = -1;                // the call's last saving op: the recomputation's early stop
    int32_t trigger = -1;             // the first backward op that unpacks a save: the recomputation goes before it
    int32_t backward_last = -1;       // the last backward op that holds the checkpoint's frame
};

// A weight cast other calls saved too, which a call's recomputation made anew (or made again).
struct Recast {
    int32_t cast = 0, copy = 0;   // the recorded cast, the recomputation's copy
    int32_t trigger = 0, pass = 0, module = -1;
};

// BatchNorm inside a checkpointed module keeps its running statistics through the recompute
// (checkpoint_batchnorm.cpp says how): one forward call of a BatchNorm module.
struct StatsCall {
    int32_t first = -1, bn = -1, module = -1;   // the call's first kernel, its batch-norm op (seqs)
    std::vector<int64_t> bytes;                 // the clones, in named_buffers order
};

// The recomputation one call inserted before its trigger.
struct Recomputation {
    int32_t last_rerun = -1;   // the last recorded seq it reruns (the stop, or the op before it)
    int32_t last_op = -1;      // its last op (plan id)
    std::unordered_map<int32_t, int32_t> copy_of;       // recorded allocation -> its recomputed copy
    std::unordered_map<int32_t, int32_t> last_use;      // recomputed copy -> last recompute op using it
    std::unordered_map<int32_t, int32_t> replayed_at;   // cached op seq -> its position in the recomputation
    std::unordered_map<int32_t, int32_t> rerun_of;      // op seq -> its recomputed op
    std::unordered_map<int32_t, int32_t> workspace_of;  // main thread's workspace -> the autograd thread's
    // the recompute's statistics copies: (their allocations, the call)
    std::vector<std::pair<std::vector<int32_t>, const StatsCall*>> stats_copies;
};

// checkpoint_saves.cpp
Saves find_saves(const Base& base, const Plan& plan, const Call& call);
void free_unread_saves(const Base& base, Plan& plan, const Call& call, const Saves& saves);
void move_trigger_before_reads(const Base& base, const Call& call, Saves& saves);
void find_backward_end(const Base& base, const Plan& plan, const Call& call, Saves& saves);

// checkpoint_recompute.cpp
Recomputation insert_recomputation(const Base& base, Plan& plan, const Call& call, const Saves& saves,
                                   const std::vector<StatsCall>& stats);

// checkpoint_lifetimes.cpp
void end_let_go_saves(const Base& base, Plan& plan, const Call& call, const Saves& saves);
void hand_saves_to_copies(const Base& base, Plan& plan, const Call& call, const Saves& saves, Recomputation& rec);
void hand_shared_saves_to_copies(const Base& base, Plan& plan, const Call& call, const Saves& saves, Recomputation& rec);
void end_unsaved_copies(const Base& base, Plan& plan, const Call& call, Recomputation& rec);
void note_shared_casts(const Base& base, const Call& call, const Saves& saves, const Recomputation& rec,
                       std::vector<Recast>& shared_casts);
void end_cached_outputs(const Base& base, Plan& plan, const Call& call, const Saves& saves, const Recomputation& rec);
void keep_inputs(const Base& base, Plan& plan, const Call& call, const Saves& saves);
void end_stats_copies(const Base& base, Plan& plan, const Recomputation& rec);
void release_forward_casts(const Base& base, Plan& plan, const std::vector<Call>& calls, std::vector<Recast> casts);

// checkpoint_batchnorm.cpp
std::vector<StatsCall> stats_calls(const Base& base, const Plan& plan, int32_t first, int32_t last);
std::vector<int32_t> insert_clones(const Base& base, Plan& plan, const StatsCall& call, Phase phase, int32_t before,
                                   int32_t anchor);

}  // namespace mhc::advise::checkpointing
