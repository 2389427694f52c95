#pragma once
// SIGINT/SIGTERM: the recorded run may be interrupted; its trace must still be written.
namespace mhc::record::inject {

// Installs handlers that chain to the ones already installed. False on failure.
bool install_signal_handlers();

}  // namespace mhc::record::inject
