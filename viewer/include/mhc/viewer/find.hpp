#pragma once
// Finding kernels by name on the timeline (its "find" field): every kernel whose name contains the
// text (case-insensitive), by start on the clock shown (the selected run's when it has kernel
// times), and the next one after a given one, wrapping around. An execution trace's ops likewise.
#include <cstdint>
#include <cstddef>
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

// The find field as it is typed (the timeline's state), in slices: each `update` (one a frame) looks
// at no more than `slice` kernels or earlier matches, so that typing stays within a frame whatever the
// trace's size (5 M kernels matching one letter took 250-480 ms a letter as one search). A text that
// contains the one before (a letter more) re-checks that one's matches in place and goes on scanning
// where it had stopped; another text (Backspace, another run) starts again. The matches are kept per
// lane searched, as positions in the lane (4 bytes a match, not a list of KernelMatch of 40 bytes), in
// the lane's order by start then id: counting is a sum, the index of the kernel selected and the next
// match are binary searches in each lane, and the marks of a view are found by pixel column
// (`marks`), so that no frame after the search costs in proportion to the matches. The matches are
// exactly find_kernels' (`all`). `current` is false until the search of the text is done.
struct FindState {
    std::string of;                         // the text the matches are (being) made for
    int64_t run = -1;                       // the run whose clock they are on (0: the recording)
    int64_t index = -1;                     // the kernel selected among them (-1: none of them), when done
    int64_t longest = 0;                    // the longest match's length, when done (match_marks)
    int64_t selected = -1;                  // the selected kernel `index` was found for
    size_t searches = 0, refinements = 0;   // how the matches of a text were made (tests, bench)
    size_t slice = size_t{1} << 19;         // kernels or earlier matches looked at per update (1-3 ms)
    size_t slices = 0;                      // updates that did some of the work (tests, bench)

    // One slice of the work for `text` on the clock of `shown` (the recording's when null), and which
    // match the kernel selected is once done. Returns true when the matches changed (or were completed).
    // Called every frame; it costs nothing when nothing changed.
    bool update(const ViewTrace& view, const ViewRun* shown, std::string_view text, int64_t selected_kernel);
    // The whole of the rest at once (Enter asks for a match: it must be the right one).
    bool finish(const ViewTrace& view, const ViewRun* shown, std::string_view text, int64_t selected_kernel);
    bool done() const { return work_done_ >= work_total_; }
    // The share of the search of `of` done, in [0, 1].
    double progress() const;
    // Whether the matches are those of `text`, complete.
    bool current(std::string_view text) const { return !text.empty() && of == text && done(); }
    // Matches found (all of them when done).
    size_t count() const;
    // The index of the match after kernel `current` as next_match says it, and the match in `*match`;
    // -1 when there are none. Only when done. It becomes the match selected (`index`, `selected`).
    int64_t next(int64_t current, int64_t from, bool backward, KernelMatch* match);
    // The match selected (index >= 0), as a KernelMatch.
    KernelMatch selected_match() const { return selected_match_; }
    // Every match by start then id (as find_kernels gives them: tests and the bench compare).
    std::vector<KernelMatch> all() const;
    // The marks of the matches on a plot of `range`, as match_marks(all(), ...) gives them, each lane's
    // found by pixel column (a binary search per column drawn) where its kernels' ends come in order,
    // so a frame costs no more at 5 M matches than at a few thousand.
    // The last view's marks are kept: asked again for the same view and matches, they cost nothing.
    const std::vector<std::vector<MatchMark>>& marks(TimeRange range, float width, float min_px = 3.f) const;

private:
    struct Part {                    // one lane's search
        std::vector<uint32_t> at;    // positions of its matches in the lane, by (start, id) once complete
        size_t pending = 0;          // at[read, pending) are the text before's matches, to re-check
        size_t read = 0, kept = 0;   // re-checked so far; kept in at[0, kept)
        size_t scanned = 0;          // lane positions [0, scanned) looked at
        int64_t longest = 0;
        bool in_order = true;   // at is by (start, id) (ties in a lane may not be)
    };
    const std::vector<Lane>* lanes_ = nullptr;
    size_t kernels_ = 0;   // the lanes' kernels, to tell lanes read again apart
    std::vector<Part> parts_;
    std::vector<uint8_t> verdict_;   // per string id: 0 not asked yet, 1 contains `of`, 2 does not
    const ViewTrace* view_ = nullptr;
    size_t generation_ = 0;   // counts changes of the matches (the marks' cache)
    struct MarksCache {
        size_t generation = SIZE_MAX;
        TimeRange range;
        float width = 0, min_px = 0;
        std::vector<std::vector<MatchMark>> marks;
    };
    mutable MarksCache marks_cache_;
    size_t work_total_ = 0, work_done_ = 0;
    KernelMatch selected_match_;
    // Where the kernel `located_` lies among the lanes (found once per kernel selected and lanes).
    int64_t located_ = 0;
    const std::vector<Lane>* located_in_ = nullptr;
    bool located_found_ = false;
    uint32_t located_lane_ = 0, located_pos_ = 0;

    bool start(const ViewTrace& view, const ViewRun* shown, std::string_view text);
    bool matches(int32_t name);
    bool work(size_t budget);
    void completed(int64_t selected_kernel);
    bool locate(int64_t kernel);
    KernelMatch match_at(uint32_t lane, uint32_t pos) const;
    size_t rank(int64_t t_start, int64_t kernel) const;   // matches before (t_start, kernel)
};

}   // namespace mhc::viewer
