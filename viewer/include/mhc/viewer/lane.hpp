#pragma once
// A Lane is one timeline track: intervals sorted by start time. Kernels of one stream,
// copies of one direction, markers of one kind, simulated events of one kind are lanes.
#include <cstdint>
#include <string>
#include <vector>

namespace mhc::viewer {

// What a lane holds; decides colours and tooltips in the front-end.
enum class LaneKind : uint8_t { Kernels, Copies, Markers, Events, Highlight };

struct Lane {
    LaneKind kind = LaneKind::Kernels;
    std::string title;
    int32_t device = 0;
    int64_t stream = 0;       // kernels/copies: stream; markers: marker kind; events: event kind
    uint16_t row = 0;         // sub-row of a lane split so that overlapping items do not cover each other
    std::vector<int64_t> t_start, t_end;
    std::vector<int32_t> key;  // colour/label key: string id (kernels, markers), event kind, ...
    std::vector<int64_t> ref;  // row id: kernel id, copy id, marker id, event row index

    size_t size() const { return t_start.size(); }
    bool empty() const { return t_start.empty(); }
    void push(int64_t s, int64_t e, int32_t k, int64_t r) {
        t_start.push_back(s); t_end.push_back(e < s ? s : e); key.push_back(k); ref.push_back(r);
    }
    // Sorts by start (stable) and builds the search structure; call once after the last push.
    void finish();

    // First item whose end reaches t (items before it end before t): binary search.
    size_t first_ending_at_or_after(int64_t t) const;
    // Largest end among items [0, i] (t_end itself when ends are already monotonic).
    int64_t end_max(size_t i) const { return end_sorted_ ? t_end[i] : end_max_[i]; }
    // Whether the ends come in order too (as the starts do): kernels of one stream, back to back.
    bool ends_sorted() const { return end_sorted_; }

    // Colour classes (kernel families): item i gets class_of_key[key[i]] (or `fallback`). Call
    // after finish(). Per-block duration sums make dominant_class O(classes + block) per query.
    void classify(const std::vector<uint8_t>& class_of_key, uint8_t fallback, int classes);
    bool classified() const { return !cls_.empty(); }
    uint8_t item_class(size_t i) const { return cls_.empty() ? 0 : cls_[i]; }
    // The class with the largest total duration among items [first, first + count); `mixed`, when
    // given, is set when another class has time among them too.
    uint8_t dominant_class(size_t first, size_t count, bool* mixed = nullptr) const;

private:
    static constexpr size_t kClassBlock = 64;
    std::vector<uint8_t> cls_;
    int classes_ = 0;
    std::vector<int64_t> block_prefix_;   // [(b * classes_) + c]: duration of class c in blocks [0, b)

    bool end_sorted_ = true;
    std::vector<int64_t> end_max_;   // prefix max of t_end, only when ends are not monotonic
};

// Splits a lane whose items overlap (nested NVTX ranges, concurrent collectives) into rows in
// which no two items overlap: each item, by start, goes to the first row free at its start, so
// a range nested in another lands one row below it. At most `max_rows` rows; the last row takes
// what does not fit. A lane without overlaps comes back as one row. Rows are finished; row 0
// keeps the title.
std::vector<Lane> split_rows(const Lane& lane, size_t max_rows);

// An item's label as drawn inside its box, `room` pixels wide, in a font of `char_width` pixels
// per character (the viewer's is monospaced): the whole text when it fits, else its start and
// "..." (never cut inside a UTF-8 character), else nothing when not even two characters and the
// dots fit. A label clipped at the box's edge ran into the next box's ("test4(double *, ur" then
// "test4(double *, u"), reading as one garbled name.
std::string fit_label(const std::string& text, float room, float char_width);

// The label of a folded box of `count` items, `room` pixels wide: "4744 GEMM" (the count and
// what they are) when it fits, else the count alone, else nothing. A count is never cut: fit_label
// made "47..." of "4744 GEMM", a number that read as 47. A `what` of two parts ("kernels, mostly
// GEMM") gives up its second before being cut: "673000 kernels".
std::string folded_label(uint32_t count, const std::string& what, float room, float char_width);
// What a folded box of `lane` counts, for folded_label: kernels their family's name (given) when
// they are all of it, "kernels, mostly GEMM" when `mixed` (DrawItem::mixed: "673000 GEMM" counted
// every kernel of a stream as GEMMs, 48% of its time), else "copies", "steps"/"layers"/"ranges"
// (markers), "events", "accesses". `ops`: an execution trace's "kernels" are its ops ("2841 ops, mostly
// memory/copy"; it read "2841 kernels, ..." under a header counting ops).
std::string folded_noun(const Lane& lane, const char* family, bool mixed = false, bool ops = false);

}  // namespace mhc::viewer
