#pragma once
// The environment variables mhc reads (MHC_*), read one way: a value that is not one the
// variable documents is refused in one line naming the variable, never taken for a default.
#include <optional>
#include <string>

namespace mhc {

// The value of `name`, nullopt when it is not set (set but empty is "").
std::optional<std::string> env_value(const char* name);

// A variable that turns something on or off: 1 or on, 0 or off (any case); `unset` when it is not
// set. Anything else (yes, 2, an empty value) throws mhc::Error (bad input):
// "MHC_TRACE_CACHE='yes': use 1 or on, 0 or off".
bool env_switch(const char* name, bool unset);

}   // namespace mhc
