#pragma once
// mhc's help formatter, shared with mhc-view (common/include/mhc/common/help_format.hpp).
#include "mhc/common/help_format.hpp"

namespace mhc::cli {

using mhc::help_width;
using mhc::HelpFormatter;

}  // namespace mhc::cli
