#pragma once
// Where importers put rows: each row goes to the trace Writer and is also kept in columns,
// so that the import can check the trace it wrote without reading the file back (reading
// it back cost as much as a tenth of a large import). The columns are exactly what
// load_trace would return for the finished file, as long as rows come in id order (every
// importer's do); take() says when they did not, and the caller then loads the file.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/trace/columns.hpp"
#include "mhc/trace/model.hpp"

namespace mhc::trace {
class Writer;
}

namespace mhc::trace::import {

class Rows {
public:
    explicit Rows(Writer& w);

    int64_t intern(std::string_view text);
    void set_meta(const std::string& key, const std::string& value);
    void add(const Allocation& a);
    void add(const Kernel& k);
    void add(const Access& a);
    void add(const Copy& c);
    void add(const Marker& m);
    // Segments go to the file only (check_trace does not look at them).
    void add(const Segment& s);
    // Capacity for rows about to be added (saves regrowing the columns).
    void reserve(size_t allocations, size_t kernels = 0, size_t copies = 0);
    // Sets t_free of an allocation already added.
    void set_free_time(int64_t allocation_id, int64_t t_free);

    // Moves the rows into `t` as load_trace(path of the finished file) would give them;
    // false (and `t` untouched) when some table's ids were not increasing.
    bool take(TraceData& t);

private:
    struct RawAccess {
        int64_t kernel, allocation;
        AccessMode mode;
    };
    Writer& w_;
    TraceData t_;
    std::vector<RawAccess> accesses_;
    bool ordered_ = true;
};

}  // namespace mhc::trace::import
