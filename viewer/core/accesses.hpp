#pragma once
// The viewer's accesses by allocation (AccessIndex, data.hpp): read at load on a thread of their
// own, from the trace's cache entry when the file holds a valid one (trace/cache.hpp), else from
// the accesses table's rows; grouped by allocation once the kernel lanes and allocations are in.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mhc/trace/model.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/viewer/data.hpp"

namespace mhc::viewer::detail {

// The accesses as read, in groups of one kernel each: group g's are [group_begin[g], group_begin[g + 1]).
struct AccessRows {
    bool from_cache = false;              // one group per kernel in id order, allocations as dense indices
    std::vector<int64_t> kernel_id;       // rows: each group's kernel id (strictly increasing)
    std::vector<int64_t> group_begin;     // groups + 1
    std::vector<int64_t> allocation_id;   // rows: per access
    std::vector<int32_t> allocation;      // cache: per access, the dense allocation index
    std::vector<trace::AccessMode> mode;
};

// Reads every access of the trace `reader` (whose fingerprint and row counts are given); `tick` is
// called with the rows read so far in steps. Throws mhc::Error naming the file on a bad row.
AccessRows read_access_rows(const trace::Reader& reader, const std::string& fingerprint, const trace::TableCounts& counts,
                            const std::function<void(int64_t)>& tick);

// Groups them by allocation. `kernel_ids`: the trace's kernel ids in id order (the kernel lanes'
// refs); `view`'s kernel lanes and allocation ids are final.
std::shared_ptr<const AccessIndex> group_by_allocation(AccessRows&& rows, const std::vector<int64_t>& kernel_ids,
                                                       const ViewTrace& view);

}   // namespace mhc::viewer::detail
