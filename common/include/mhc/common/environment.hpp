#pragma once
// The environment variables mhc reads (MHC_*), read one way: a value that is not one the
// variable documents is refused in one line naming the variable, never taken for a default.
#include <optional>
#include <string>
#include <string_view>

namespace mhc {

// The value of `name`, nullopt when it is not set (set but empty is "").
std::optional<std::string> env_value(const char* name);

// A variable's refusal, "MHC_TRACE_CACHE='yes': use 1 or on, 0 or off", its value quoted as an
// option's is (mhc::quoted_value: one of 200 bytes was said whole by five variables' refusals).
std::string env_refusal(std::string_view name, std::string_view value, std::string_view why);

// A variable that turns something on or off: 1 or on, 0 or off (any case); `unset` when it is not
// set. Anything else (yes, 2, an empty value) throws mhc::Error (bad input):
// "MHC_TRACE_CACHE='yes': use 1 or on, 0 or off".
bool env_switch(const char* name, bool unset);

// The folder this user's caches live in (the trace cache's key, validate's link calibrations),
// made when missing: $XDG_CACHE_HOME/mhc ($XDG_CACHE_HOME absolute: XDG's rule, a relative one
// is ignored), else $HOME/.cache/mhc; where neither is set or can be made and written into (a
// read-only home, HOME=/nonexistent), $TMPDIR/mhc-UID (else /tmp/mhc-UID), used only as a folder of
// this user's alone (mode 0700, not a link: in a shared /tmp another user could make it first and
// read or plant what it holds). "" when none can be had, and `why` says what was tried.
std::string user_cache_dir(std::string& why);

}   // namespace mhc
