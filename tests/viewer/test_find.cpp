// The timeline's find field as it is typed (find.hpp): the matches of each text, made by a whole
// search or by re-checking the matches of the text before it, equal a brute force over every kernel;
// which match is selected follows the selection.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "mhc/viewer/data.hpp"
#include "mhc/viewer/find.hpp"
#include "mhc/viewer/stats.hpp"

using mhc::viewer::find_kernels;
using mhc::viewer::FindState;
using mhc::viewer::KernelMatch;
using mhc::viewer::Lane;
using mhc::viewer::match_index;
using mhc::viewer::match_marks;
using mhc::viewer::MatchMark;
using mhc::viewer::next_match;
using mhc::viewer::refine_matches;
using mhc::viewer::TimeRange;
using mhc::viewer::ViewRun;
using mhc::viewer::ViewTrace;

namespace {

const std::vector<std::string> kNames{"ampere_bf16_s16816gemm_bf16_128x128",
                                      "void flash::flash_fwd_kernel<128>",
                                      "vectorized_elementwise_kernel<4, add>",
                                      "layer_norm_grad_kernel",
                                      "ncclDevKernel_AllReduce_Sum_bf16",
                                      "Memcpy DtoH",
                                      "GEMM_splitK_reduce",
                                      "softmax_warp_forward"};

// `lanes` streams of `per_lane` kernels with names drawn from kNames, starts on a coarse grid so that
// kernels of different streams (and, unsorted in a lane, of one) share starts: ties by id.
ViewTrace random_trace(std::mt19937_64& rng, size_t lanes, size_t per_lane, bool shuffled_ties) {
    ViewTrace view;
    view.strings = kNames;
    int64_t id = 1;
    for (size_t l = 0; l < lanes; ++l) {
        Lane lane;
        int64_t at = 0;
        for (size_t i = 0; i < per_lane; ++i) {
            at += static_cast<int64_t>(rng() % 3) * 100;   // equal starts in a lane too
            lane.push(at, at + 50 + static_cast<int64_t>(rng() % 400), static_cast<int32_t>(rng() % kNames.size()), 0);
        }
        // Kernel ids not in start order (ids are the file's rows; a lane's equal starts in any id order).
        std::vector<int64_t> ids(per_lane);
        for (int64_t& kernel : ids) kernel = id++;
        if (shuffled_ties) std::shuffle(ids.begin(), ids.end(), rng);
        lane.ref = ids;
        lane.finish();
        view.kernel_lanes.push_back(std::move(lane));
    }
    return view;
}

// Every kernel of `lanes` whose name contains `text` (any case), sorted by start then id.
std::vector<KernelMatch> brute_force(const ViewTrace& view, const std::vector<Lane>& lanes, const std::string& text) {
    std::vector<KernelMatch> out;
    if (text.empty()) return out;
    for (size_t l = 0; l < lanes.size(); ++l)
        for (size_t i = 0; i < lanes[l].size(); ++i) {
            std::string name = view.str(lanes[l].key[i]), lower_text = text;
            std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
            std::transform(lower_text.begin(), lower_text.end(), lower_text.begin(),
                           [](unsigned char ch) { return std::tolower(ch); });
            if (name.find(lower_text) != std::string::npos)
                out.push_back({lanes[l].t_start[i], lanes[l].t_end[i], lanes[l].ref[i], static_cast<uint32_t>(l),
                               lanes[l].key[i]});
        }
    std::sort(out.begin(), out.end(), [](const KernelMatch& one, const KernelMatch& other) {
        return one.t_start != other.t_start ? one.t_start < other.t_start : one.kernel < other.kernel;
    });
    return out;
}

void same(const std::vector<KernelMatch>& got, const std::vector<KernelMatch>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("match " << i);
        CHECK(got[i].kernel == want[i].kernel);
        CHECK(got[i].t_start == want[i].t_start);
        CHECK(got[i].t_end == want[i].t_end);
        CHECK(got[i].lane == want[i].lane);
        CHECK(got[i].name == want[i].name);
    }
}

}   // namespace

TEST_CASE("find: the matches of a text equal a brute force over every kernel, whole or refined as typed") {
    std::mt19937_64 rng(11);
    const std::vector<std::string> typed{"gemm", "Flash_fwd", "kernel<", "ncclDev", "_b", "memcpy dtoh", "zzz"};
    for (int round = 0; round < 12; ++round) {
        const ViewTrace view = random_trace(rng, 1 + rng() % 9, 50 + rng() % 400, round % 2 == 1);
        for (const std::string& text : typed) {
            INFO("round " << round << ", text '" << text << "'");
            // Each prefix as a letter is typed: a whole search of it, and the matches of the one before refined.
            std::vector<KernelMatch> before;
            for (size_t n = 1; n <= text.size(); ++n) {
                const std::string prefix = text.substr(0, n);
                const std::vector<KernelMatch> want = brute_force(view, view.kernel_lanes, prefix);
                const std::vector<KernelMatch> whole = find_kernels(view, nullptr, prefix);
                same(whole, want);
                if (n > 1) same(refine_matches(view, before, prefix), want);
                before = whole;
            }
        }
    }
    // A run's lanes (its kernel times) are searched instead of the recording's when it has them.
    ViewTrace view = random_trace(rng, 3, 100, false);
    ViewRun run;
    run.info.id = 4;
    run.kernel_lanes = view.kernel_lanes;
    for (Lane& lane : run.kernel_lanes) {
        for (size_t i = 0; i < lane.size(); ++i) {
            lane.t_start[i] += 1000;
            lane.t_end[i] += 1000;
        }
        lane.finish();
    }
    same(find_kernels(view, &run, "gemm"), brute_force(view, run.kernel_lanes, "gemm"));
    CHECK(find_kernels(view, nullptr, "").empty());
}

TEST_CASE("find: typed a letter at a time, the field searches once and refines, and the count follows the selection") {
    std::mt19937_64 rng(5);
    const ViewTrace view = random_trace(rng, 4, 500, true);
    FindState find;
    // "g", "ge", "gem", "gemm": one whole search, then three refinements of the matches before.
    for (const std::string text : {"g", "ge", "gem", "gemm"}) CHECK(find.update(view, nullptr, text, 0));
    CHECK(find.searches == 1);
    CHECK(find.refinements == 3);
    CHECK(find.current("gemm"));
    const std::vector<KernelMatch> gemm = brute_force(view, view.kernel_lanes, "gemm");
    same(find.all(), gemm);
    CHECK(find.index == -1);   // nothing selected: "N matches"
    // Nothing changed: nothing done.
    CHECK_FALSE(find.update(view, nullptr, "gemm", 0));
    CHECK(find.searches + find.refinements == 4);
    // A click on the 5th match's kernel: "5 of N"; on a kernel that is no match: none of them.
    REQUIRE(gemm.size() > 5);
    CHECK_FALSE(find.update(view, nullptr, "gemm", gemm[4].kernel));
    CHECK(find.index == 4);
    int64_t other = 0;
    for (const Lane& lane : view.kernel_lanes)
        for (size_t i = 0; i < lane.size() && !other; ++i)
            if (view.str(lane.key[i]).find("flash") != std::string::npos) other = lane.ref[i];
    find.update(view, nullptr, "gemm", other);
    CHECK(find.index == -1);
    // The selected kernel stays "k of N" as the text narrows, when it still matches.
    find.update(view, nullptr, "gemm", gemm[4].kernel);
    find.update(view, nullptr, "gemm_", gemm[4].kernel);
    const std::vector<KernelMatch> narrower = brute_force(view, view.kernel_lanes, "gemm_");
    CHECK(find.index == match_index(narrower, gemm[4].kernel));
    // Backspace (a shorter text) and another case: whole searches, the same matches as a brute force.
    const size_t searches = find.searches;
    find.update(view, nullptr, "GEM", 0);
    CHECK(find.searches == searches + 1);   // "GEM" does not contain "gemm_": searched whole
    same(find.all(), brute_force(view, view.kernel_lanes, "gem"));
    // The run shown changed: searched again on its clock.
    ViewRun run;
    run.info.id = 2;
    run.kernel_lanes = view.kernel_lanes;
    const size_t before_run = find.searches;
    CHECK(find.update(view, &run, "GEM", 0));
    CHECK(find.searches == before_run + 1);
    CHECK(find.run == 2);
    // An empty field: no matches, not current.
    find.update(view, &run, "", 0);
    CHECK(find.all().empty());
    CHECK(find.count() == 0);
    CHECK_FALSE(find.current(""));
}

namespace {

// `lanes` streams of kernels back to back (ends in order, as a stream's), lengths from 1 ns to 50 us
// and gaps up to 20 us, names from kNames; one stream of overlapping kernels (ends out of order).
ViewTrace stream_trace(std::mt19937_64& rng, size_t lanes, size_t per_lane) {
    ViewTrace view;
    view.strings = kNames;
    int64_t id = 1;
    for (size_t l = 0; l < lanes; ++l) {
        Lane lane;
        int64_t at = static_cast<int64_t>(rng() % 1000);
        const bool overlapping = l + 1 == lanes;
        for (size_t i = 0; i < per_lane; ++i) {
            const int64_t length = rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % 50000)
                                                  : 1 + static_cast<int64_t>(rng() % 20);
            lane.push(at, at + length, static_cast<int32_t>(rng() % kNames.size()), id++);
            at += overlapping ? static_cast<int64_t>(rng() % 30) : length + static_cast<int64_t>(rng() % 20000);
        }
        lane.finish();
        view.kernel_lanes.push_back(std::move(lane));
    }
    view.t_begin = 0;
    view.t_end = view.kernel_lanes.front().t_end.back();
    return view;
}

void same_marks(const std::vector<std::vector<MatchMark>>& got, const std::vector<std::vector<MatchMark>>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t l = 0; l < got.size(); ++l) {
        INFO("lane " << l);
        REQUIRE(got[l].size() == want[l].size());
        for (size_t k = 0; k < got[l].size(); ++k) {
            INFO("mark " << k);
            CHECK(got[l][k].x0 == want[l][k].x0);
            CHECK(got[l][k].x1 == want[l][k].x1);
            CHECK(got[l][k].count == want[l][k].count);
        }
    }
}

}   // namespace

TEST_CASE("find: a search is done in slices of at most `slice` kernels a frame, letters typed mid-search included") {
    // Before, a letter searched every kernel at once: 5 M kernels all matching "k" took 478 ms of one
    // frame (bench_viewer). Now each update looks at `slice` kernels (or earlier matches) at most, and
    // the matches once done are a brute force's, whatever was typed while the search went on.
    std::mt19937_64 rng(23);
    const ViewTrace view = random_trace(rng, 5, 3000, true);   // 15,000 kernels
    FindState find;
    find.slice = 1000;
    CHECK(find.update(view, nullptr, "e", 0));
    CHECK_FALSE(find.done());   // one slice of 15: not done, not current, no marks yet
    CHECK_FALSE(find.current("e"));
    CHECK(find.progress() == Approx(1000.0 / 15000));
    CHECK(find.marks({0, 1000000}, 1000.f).front().empty());
    size_t frames = 1;
    while (!find.done()) {
        find.update(view, nullptr, "e", 0);
        ++frames;
    }
    CHECK(frames == 15);   // 15,000 kernels, 1,000 a frame
    same(find.all(), brute_force(view, view.kernel_lanes, "e"));
    // A slice of 0 looks at one item a frame (it ended the search at once, with nothing found).
    FindState none;
    none.slice = 0;
    const ViewTrace small = random_trace(rng, 2, 20, false);
    none.update(small, nullptr, "e", 0);
    CHECK(none.progress() == Approx(1.0 / 40));
    while (!none.done()) none.update(small, nullptr, "e", 0);
    same(none.all(), brute_force(small, small.kernel_lanes, "e"));
    // Letters typed while a search (or a re-check) is under way: each narrows what was found so far and
    // the scan goes on; Backspace starts again. Every end state equals a brute force.
    for (const std::vector<std::string>& typing :
         {std::vector<std::string>{"k", "ke", "ker", "kern", "kernel", "kernel<"},
          std::vector<std::string>{"g", "ge", "g", "ge", "gem", "gemm", "GEMM_"},
          std::vector<std::string>{"a", "al", "all", "allr", "allreduce", "al", "a", "_"}}) {
        FindState typed;
        typed.slice = 700;
        for (size_t n = 0; n < typing.size(); ++n) {
            // 1 to 3 frames a letter: often the letter comes before the search of the one before ends.
            const int frames_per_letter = 1 + static_cast<int>(rng() % 3);
            for (int f = 0; f < frames_per_letter; ++f) typed.update(view, nullptr, typing[n], 0);
        }
        while (!typed.done()) typed.update(view, nullptr, typing.back(), 0);
        INFO("typed up to '" << typing.back() << "'");
        same(typed.all(), brute_force(view, view.kernel_lanes, typing.back()));
        CHECK(typed.count() == typed.all().size());
        CHECK(typed.current(typing.back()));
    }
}

TEST_CASE("find: the next match, its index and the marks from the per-lane matches equal those of the whole list") {
    // FindState keeps each lane's matches and finds the next one, the index ("3 of 17") and the marks by
    // binary searches (marks by pixel column where a lane's ends are in order); next_match and
    // match_marks over the merged list (find_kernels) are the reference.
    std::mt19937_64 rng(31);
    for (int round = 0; round < 6; ++round) {
        const ViewTrace view = round % 2 == 0 ? stream_trace(rng, 1 + rng() % 6, 200 + rng() % 3000)
                                              : random_trace(rng, 1 + rng() % 6, 200 + rng() % 600, true);
        for (const std::string text : {"e", "gemm", "flash", "memcpy"}) {
            INFO("round " << round << ", '" << text << "'");
            FindState find;
            find.finish(view, nullptr, text, 0);
            const std::vector<KernelMatch> all = find_kernels(view, nullptr, text);
            same(find.all(), all);
            REQUIRE(find.count() == all.size());
            const int64_t longest = mhc::viewer::longest_match(all);
            CHECK(find.longest == longest);
            int64_t t_end = 1;
            for (const Lane& lane : view.kernel_lanes) t_end = std::max(t_end, lane.end_max(lane.size() - 1));
            // Marks at full zoom-out (dense: many matches a pixel), and at random ranges and widths.
            for (int r = 0; r < 40; ++r) {
                const int64_t span = r == 0 ? t_end : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(t_end));
                const int64_t t0 = r == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(t_end)) - span / 4;
                const float width = r % 3 == 0 ? 1600.f : static_cast<float>(100 + rng() % 1500);
                const TimeRange range{t0, t0 + span};
                INFO("range " << range.t0 << ".." << range.t1 << " at " << width << " px");
                same_marks(find.marks(range, width), match_marks(all, view.kernel_lanes.size(), range, width, longest));
            }
            // Next and before, from a selected match, from a kernel that is none, from a time.
            for (int r = 0; r < 30 && !all.empty(); ++r) {
                const bool backward = r % 2 == 1;
                const int64_t from = static_cast<int64_t>(rng() % static_cast<uint64_t>(t_end));
                int64_t current = 0;
                if (r % 3 == 0) current = all[rng() % all.size()].kernel;
                if (r % 3 == 1) current = view.kernel_lanes[0].ref[rng() % view.kernel_lanes[0].size()];
                const int64_t want = next_match(all, current, from, backward);
                KernelMatch got;
                CHECK(find.next(current, from, backward, &got) == want);
                CHECK(got.kernel == all[static_cast<size_t>(want)].kernel);
                CHECK(find.index == want);
                // The field's count follows: that kernel selected, it is "want + 1 of N".
                find.update(view, nullptr, text, got.kernel);
                CHECK(find.index == want);
                CHECK(find.selected_match().kernel == got.kernel);
            }
        }
    }
}
