#pragma once
// Finding kernels by name on the timeline (its "find" field): every kernel whose name contains the
// text (case-insensitive), by start on the clock shown (the selected run's when it has kernel
// times), and the next one after a given one, wrapping around. An execution trace's ops likewise.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

struct KernelMatch {
    int64_t t_start = 0, t_end = 0;   // on the clock shown
    int64_t kernel = 0;               // its id
};

// Matches of `text` among the kernels of `run` (its kernel lanes when it has them) or of `view`,
// by start (ties by id). An empty text matches none.
std::vector<KernelMatch> find_kernels(const ViewTrace& view, const ViewRun* run, std::string_view text);

// The index of the match after kernel `current` (by start, then id), or the first starting at or after
// `from` when `current` is not among them (0: none selected); the first again past the last. -1 when
// there are none. `backward`: the one before, the last again before the first.
int64_t next_match(const std::vector<KernelMatch>& matches, int64_t current, int64_t from, bool backward = false);

// The range that shows `match` from `range`: kept when the match lies inside it and is at least a
// thousandth of it (a pixel and more at 1400 px), else centred on the match, as wide as `range` or
// 20 times the match's length, whichever is less, within `limits`.
TimeRange range_for_match(const KernelMatch& match, TimeRange range, TimeRange limits);

}   // namespace mhc::viewer
