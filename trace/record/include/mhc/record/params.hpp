#pragma once
// Access inference from kernel arguments. At a launch the driver callback knows the
// parameter layout (cuFuncGetParamInfo: offset and size of each parameter) and where the
// values are (kernelParams: one pointer per parameter, or a packed buffer passed through
// `extra`). Every 8-byte word at an 8-byte-aligned offset of the parameter buffer is a
// candidate device pointer; the translator keeps those inside a live allocation.
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace mhc::record {

struct ParamSlot {
    uint32_t offset = 0;   // byte offset in the parameter buffer
    uint32_t size = 0;     // bytes
};

// Appends the aligned words of every parameter, reading parameter i from values[i].
// A word is taken when it lies wholly inside one parameter.
void gather_words(const ParamSlot* slots, size_t n, void* const* values,
                  std::vector<uint64_t>& out);
// The same from a packed buffer (CU_LAUNCH_PARAM_BUFFER_POINTER), `size` bytes long;
// parameters that do not fit in the buffer are skipped.
void gather_words_packed(const ParamSlot* slots, size_t n, const void* buffer, size_t size,
                         std::vector<uint64_t>& out);

// Live allocations by address: [start, start + bytes) -> allocation id. Two layers: fine
// allocations (cuMemAlloc*, pool allocations, activity records) and VMM mappings, which
// may contain fine allocations; a lookup prefers the fine one.
class LiveMap {
public:
    enum class Layer : uint8_t { Fine, Vmm };
    // Inserts; returns the id previously live at the same start in that layer (its free was
    // missed), or -1.
    int64_t insert(uint64_t start, uint64_t bytes, int64_t id, Layer layer = Layer::Fine);
    // Removes the allocation starting at `start`; returns its id or -1.
    int64_t erase(uint64_t start, Layer layer = Layer::Fine);
    // Id of the allocation that starts exactly at `start`, or -1.
    int64_t at(uint64_t start, Layer layer = Layer::Fine) const;
    // Removes every VMM mapping inside [start, start + bytes); appends their ids.
    void erase_range(uint64_t start, uint64_t bytes, std::vector<int64_t>& ids);
    // Id of the allocation containing `value`, or -1. The end is exclusive.
    int64_t find(uint64_t value) const;
    size_t size() const { return fine_.size() + vmm_.size(); }

private:
    struct Entry { uint64_t end; int64_t id; };
    using Map = std::map<uint64_t, Entry>;
    static int64_t find_in(const Map& entries, uint64_t value);
    Map fine_, vmm_;
};

// Ids of the live allocations the words point into, sorted and without repeats.
void scan_words(const std::vector<uint64_t>& words, const LiveMap& live,
                std::vector<int64_t>& ids);

}  // namespace mhc::record
