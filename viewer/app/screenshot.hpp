#pragma once
#include <string>

namespace mhc::viewer {
// Reads the current GL framebuffer (width x height) and writes it as a PNG, atomically
// (temporary file + rename). Throws mhc::Error on failure.
void write_framebuffer_png(const std::string& path, int width, int height);
}  // namespace mhc::viewer
