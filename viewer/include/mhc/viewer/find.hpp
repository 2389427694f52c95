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
    uint32_t lane = 0;                // the lane it lies in, among the lanes searched (by their order)
    int32_t name = -1;                // its name's string id (ViewTrace::str)
};

// Matches of `text` among the kernels of `run` (its kernel lanes when it has them) or of `view`,
// by start (ties by id). An empty text matches none. Each distinct name is compared once; each lane's
// matches come out in its order and the lanes' lists are merged, so a search costs a pass over the
// kernels and no sort of them (the field searches as the text is typed).
std::vector<KernelMatch> find_kernels(const ViewTrace& view, const ViewRun* run, std::string_view text);

// The matches of `text` among `matches` (in their order): when `text` contains the text they are of
// (in any case), its matches are among them, so typing one more letter re-checks the matches of the
// text before it, not every kernel.
std::vector<KernelMatch> refine_matches(const ViewTrace& view, const std::vector<KernelMatch>& matches,
                                        std::string_view text);

// The index of kernel `kernel` among `matches`, -1 when it is none of them (0: none selected).
int64_t match_index(const std::vector<KernelMatch>& matches, int64_t kernel);

// The index of the match after kernel `current` (by start, then id), or the first starting at or after
// `from` when `current` is not among them (0: none selected); the first again past the last. -1 when
// there are none. `backward`: the one before, the last again before the first.
int64_t next_match(const std::vector<KernelMatch>& matches, int64_t current, int64_t from, bool backward = false);

// The range that shows `match` from `range`: kept when the match lies inside it and is at least a
// thousandth of it (a pixel and more at 1400 px), else centred on the match, as wide as `range` or
// 20 times the match's length, whichever is less, within `limits`.
TimeRange range_for_match(const KernelMatch& match, TimeRange range, TimeRange limits);

// The longest match's length (0 for none): match_marks looks that far before a range for matches
// that reach into it.
int64_t longest_match(const std::vector<KernelMatch>& matches);

// Where the matches lie on a plot of `range` `width` pixels wide, per lane searched (`lanes` of them,
// KernelMatch::lane): each match in view as its box in pixels from the plot's left, at least `min_px`
// wide and centred on it when narrower (a 2 ns kernel at full zoom-out is still marked), clipped to
// the plot; marks that touch are merged and count their matches (200 matches in one pixel are one
// mark of 200). Every match is marked, not only the one selected. `longest`: longest_match.
struct MatchMark {
    float x0 = 0, x1 = 0;
    uint32_t count = 0;   // matches in the mark
};
std::vector<std::vector<MatchMark>> match_marks(const std::vector<KernelMatch>& matches, size_t lanes, TimeRange range,
                                                float width, int64_t longest, float min_px = 3.f);

// The find field's count: "3 of 17" (match 3 selected), "17 matches" (none selected yet), "no match".
std::string match_count_text(int64_t index, size_t count);

// The find field as it is typed (the timeline's state): the matches of the text on the clock of the
// run shown, made again only when the text or the run changed (refine_matches when the text grew),
// and which of them is the kernel selected (found again only when the selection or the matches
// changed). `update` is called every frame; it costs nothing when nothing changed.
struct FindState {
    std::vector<KernelMatch> matches;
    std::string of;                         // the text the matches are of
    int64_t run = -1;                       // the run whose clock they are on (0: the recording)
    int64_t index = -1;                     // the kernel selected among them (-1: none of them)
    int64_t longest = 0;                    // the longest match's length (match_marks)
    int64_t selected = -1;                  // the selected kernel `index` was found for
    size_t searches = 0, refinements = 0;   // how the matches of a text were made (tests, bench)
    // Returns true when the matches changed.
    bool update(const ViewTrace& view, const ViewRun* shown, std::string_view text, int64_t selected_kernel);
    bool current(std::string_view text) const { return !text.empty() && of == text; }
};

}   // namespace mhc::viewer
