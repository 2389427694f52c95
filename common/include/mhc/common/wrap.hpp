#pragma once
// Text laid out for a terminal: help, notes under a table, long report lines (mhc's outputs keep
// within 100 columns, docs/cli.md "Output").
#include <string>

namespace mhc {

// `text` wrapped at `width` columns, every line after the first indented by `indent` spaces
// (the first by `first_indent`). Explicit line breaks in `text` are kept; a word longer than a
// line stays whole.
std::string wrap(const std::string& text, int width, int indent = 0, int first_indent = 0);

}  // namespace mhc
