#pragma once
// A step curve (memory in bytes over time) with a min/max pyramid, so that the min and max
// over any time slice cost O(log n): a frame asks for one slice per pixel column.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mhc/viewer/lod.hpp"

namespace mhc::trace { struct MemoryEvent; }

namespace mhc::viewer {

class Curve {
public:
    // Samples (t[i], v[i]): the value is v[i] from t[i] until t[i+1]; before t[0] it is 0.
    // Times must be non-decreasing; equal times keep the last value.
    void assign(std::vector<int64_t> t, std::vector<double> v);
    // Builds the curve of live bytes from allocation intervals [t_alloc, t_free).
    static Curve from_intervals(const std::vector<int64_t>& t_alloc, const std::vector<int64_t>& t_free,
                                const std::vector<int64_t>& bytes);
    // The same from the allocations' events already in the trace's order (trace::memory_events).
    static Curve from_events(const std::vector<trace::MemoryEvent>& ev, const std::vector<int64_t>& bytes);

    size_t size() const { return t_.size(); }
    bool empty() const { return t_.empty(); }
    const std::vector<int64_t>& times() const { return t_; }
    const std::vector<double>& values() const { return v_; }
    double peak() const { return peak_; }
    int64_t peak_time() const { return peak_t_; }
    double value_at(int64_t t) const;

    struct MinMax { double min = 0, max = 0; };
    // Min and max of the value over [a, b) (b > a).
    MinMax range(int64_t a, int64_t b) const;
    // The same given the first sample after a (`first`) and the first at or after b (`last`).
    MinMax between(size_t first, size_t last) const;
    // Time of the first maximum inside [a, b).
    int64_t argmax(int64_t a, int64_t b) const;
    // The same over samples [lo, hi] (indexes, inclusive): the first index holding their maximum,
    // in O(log^2 n) without searching times.
    size_t argmax_index(size_t lo, size_t hi) const;

private:
    MinMax index_range(size_t lo, size_t hi) const;   // samples [lo, hi], inclusive
    std::vector<int64_t> t_;
    std::vector<double> v_;
    std::vector<std::vector<MinMax>> levels_;   // levels_[k][i]: samples [i*2^(k+1), (i+1)*2^(k+1))
    double peak_ = 0;
    int64_t peak_t_ = 0;
};

// A step function read only at given times (no min/max pyramid), values as floats: 12 bytes a
// sample, for the many per-class byte counts of the memory view's summary.
class StepSeries {
public:
    // Samples in non-decreasing time; a sample at the time of the last one replaces it.
    void push(int64_t t, double v);
    double value_at(int64_t t) const;   // 0 before the first sample
    // The same for increasing times: `hint` (start at 0) keeps the last sample found, and the
    // search gallops forward from it (a frame asks once per column, left to right).
    double value_at(int64_t t, size_t& hint) const;
    size_t size() const { return t_.size(); }

private:
    std::vector<int64_t> t_;
    std::vector<float> v_;
};

// One min/max per pixel column of `range` on `width` columns.
struct CurveColumns {
    std::vector<float> min, max;   // bytes
    double y_max = 0;              // largest max over the columns
    int peak_col = -1;             // first column that reaches y_max
    // With `instants`: per column, the first instant of its maximum (the memory view's bands show
    // the allocations alive then); empty otherwise.
    std::vector<int64_t> at;
};
void prepare_curve(const Curve& curve, TimeRange range, int width, CurveColumns& out, bool instants = false);
// Columns of a `width`-column plot of `range` wholly before the curve's first sample (0 for an
// empty curve). A run's device bytes are not known there: a run that first moves what was
// allocated before recording stores its first sample after that (a snapshot at 30% after 50.6 ms),
// and its curve drawn from 0 B read as an empty device; those columns are left undrawn.
size_t columns_before_first_sample(const Curve& curve, TimeRange range, int width);
// The lowest min and highest max over the first `columns` columns (those a curve is drawn on; a
// plot fitted to its data spans them): {0, 0} for none.
Curve::MinMax columns_min_max(const CurveColumns& cols, size_t columns = SIZE_MAX);

}  // namespace mhc::viewer
