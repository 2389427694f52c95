// Run launcher: choose policy, prefetch, capacity and link, simulate on a worker thread, and
// the new run appears in the run list. Needs mhc_sim at build time (MHC_VIEWER_HAVE_SIM).
#include "widgets.hpp"

namespace mhc::view {

#ifndef MHC_VIEWER_HAVE_SIM
void draw_launcher(App& app) {
    (void)app;
    ImGui::TextWrapped("This mhc-view was built without the simulator library (mhc_sim was not part of the "
                       "build), so it cannot launch runs. Simulate with `mhc simulate` and reopen the trace, "
                       "or rebuild with sim/ present.");
}
#endif

}  // namespace mhc::view
