#pragma once
// The trace model (docs/design.md §3): plain rows as they are stored. Time is int64 nanoseconds
// from the start of the trace, sizes are int64 bytes. Names and labels are ids into the
// trace's string table (see Writer::intern).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mhc::trace {

inline constexpr int64_t kNoTime = INT64_MAX;   // t_free of an allocation alive at the end
inline constexpr int64_t kNoString = 0;         // string id 0: no name
inline constexpr int64_t kNoBytes = -1;         // requested_bytes unknown (NULL in SQLite)

enum class Category : uint8_t { Param = 0, Grad, Optimizer, Activation, Workspace, Comm, Other };
inline constexpr int kCategoryCount = 7;
enum class AccessMode : uint8_t { Read = 1, Write = 2, ReadWrite = 3 };
enum class CopyKind : uint8_t { H2D = 0, D2H, D2D, P2P, Memset, H2H };
inline constexpr int kCopyKindCount = 6;
enum class MarkerKind : uint8_t { Step = 0, Layer, Range };

struct Allocation {
    int64_t id = 0;
    int32_t device = 0;
    int64_t address = 0;      // 0 if unknown
    int64_t bytes = 0;
    int64_t t_alloc = 0;
    int64_t t_free = kNoTime;  // kNoTime: alive at the end (NULL in SQLite)
    int64_t stream = 0;
    Category category = Category::Other;
    int64_t label = kNoString;
    // What the program asked for, where the source says (a PyTorch snapshot): `bytes` is the
    // block the allocator gave (rounded, or a whole cached block it did not split).
    int64_t requested_bytes = kNoBytes;
};

struct Kernel {
    int64_t id = 0;
    int32_t device = 0;
    int64_t stream = 0;
    int64_t name = kNoString;
    int64_t t_start = 0;
    int64_t t_end = 0;
    int32_t step = -1;         // training step, -1 if unknown
    int32_t grid[3] = {0, 0, 0};
    int32_t block[3] = {0, 0, 0};
    int32_t shared_mem = 0;    // bytes, static + dynamic
    int32_t registers = 0;     // per thread
    int64_t correlation = 0;
};

struct Access {
    int64_t kernel = 0;
    int64_t allocation = 0;
    AccessMode mode = AccessMode::Read;
};

struct Copy {
    int64_t id = 0;
    int32_t device = 0;
    int64_t stream = 0;
    CopyKind kind = CopyKind::H2D;
    int64_t bytes = 0;
    int64_t t_start = 0;
    int64_t t_end = 0;
};

struct Marker {
    int64_t id = 0;
    int64_t name = kNoString;
    int64_t t_start = 0;
    int64_t t_end = 0;
    MarkerKind kind = MarkerKind::Range;
    int32_t index = -1;        // step number or layer number, -1 if none
};

// A segment of the allocator's reserved memory (PyTorch: a cudaMalloc'd segment, or one mapped
// range of an expandable segment; docs/trace-format.md "segments"). Allocations live inside
// segments; reserved bytes at time t are the bytes of the segments alive at t.
struct Segment {
    int64_t id = 0;
    int32_t device = 0;
    int64_t stream = 0;
    int64_t address = 0;
    int64_t bytes = 0;
    int64_t t_alloc = 0;
    int64_t t_free = kNoTime;  // kNoTime: alive at the end (NULL in SQLite)
    bool expandable = false;   // a mapped range of an expandable segment (cuMemMap), not a cudaMalloc
    bool reconstructed = false;   // began before recording: t_alloc is not when it was allocated
};

// What a model capture knows (docs/trace-format.md "modules, kernel_info, saved_tensors").
enum class Phase : uint8_t { Forward = 0, Backward, Optimizer, Recompute, Other };
inline constexpr int kPhaseCount = 5;

struct Module {
    int64_t id = 0;            // from 1
    int64_t name = kNoString;  // fully qualified name (ModTracker's spelling)
    int64_t parent = 0;        // enclosing module's id, 0 for the root
    int64_t type = kNoString;  // class name
};

struct KernelInfo {
    int64_t kernel = 0;
    int64_t module = 0;        // innermost module running the op, 0 outside every module
    Phase phase = Phase::Other;
    int64_t flops = 0, bytes = 0;
};

// A storage autograd saved for the backward when the forward op `kernel` ran.
struct SavedTensor {
    int64_t allocation = 0;
    int64_t kernel = 0;
    int32_t packs = 1;         // how many times the op packed it (views of one storage); NULL reads 1
};

std::string_view to_string(Category c);
std::string_view to_string(AccessMode m);
std::string_view to_string(CopyKind k);
std::string_view to_string(MarkerKind k);
std::string_view to_string(Phase p);

}  // namespace mhc::trace
