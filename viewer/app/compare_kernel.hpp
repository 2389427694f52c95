#pragma once
// Compare view: where the selected kernel lies in each block (the recording and each ticked run),
// each on its own clock. A click selects a kernel in one block; the others showed it only when it
// happened to be in view there, and nothing said where it was (a run that stalls places it
// hundreds of ms later than the recording). Each block's title bar now says where ("kernel #181
// at 180.40 ms (+120.28 ms)"), with an arrow when it lies outside the range in view (a click on it
// brings it into view, the zoom kept), and a line marks it across the block when in view.
#include <imgui.h>

#include <cstdint>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "app.hpp"

namespace mhc::viewer {

struct AlignedRun;

// The selected kernel's place in each block, made once per selection and ticked runs.
struct SelectedKernelPlaces {
    struct Place {
        bool reached = false;   // false: the run stopped before it (or no kernel is selected)
        int64_t t0 = 0, t1 = 0;
    };
    int64_t kernel = 0;
    std::vector<int64_t> run_ids;
    Place recorded;
    std::vector<Place> runs;
    std::string name;
    // Recomputes when the selection or the ticked runs changed. An aligned run (order only) is on
    // the op axis: the kernel is where the recording has it.
    void update(App& app, const std::vector<const ViewRun*>& runs, const std::vector<const AlignedRun*>& aligned);
};

// Draws the kernel's place in one block: its words right-aligned in the title bar [x0, x1) at
// `title_y`, an arrow when outside the range in view (clickable), a line over the block's rows
// [rows_y0, rows_y1) when in view. `recorded` is the recording's place (for the shift); null for
// the recording's own block. Returns the title text's left edge (the block's other notes end
// before it) and fills `out` for --layout.
float draw_kernel_place(App& app, ImDrawList* dl, const SelectedKernelPlaces::Place& place,
                        const SelectedKernelPlaces::Place* recorded, int64_t kernel, const std::string& name, float x0,
                        float x1, float title_y, float rows_y0, float rows_y1, nlohmann::json& out);

}   // namespace mhc::viewer
