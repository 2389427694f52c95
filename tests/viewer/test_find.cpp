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
using mhc::viewer::refine_matches;
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
    same(find.matches, gemm);
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
    same(find.matches, brute_force(view, view.kernel_lanes, "gem"));
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
    CHECK(find.matches.empty());
    CHECK_FALSE(find.current(""));
}
