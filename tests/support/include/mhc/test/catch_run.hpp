// Catch2's session over a program's arguments, from the one translation unit that holds
// Catch2's implementation (tests/support/catch_impl.cpp): test programs link it instead of
// compiling Catch2's implementation each.
#pragma once

namespace mhc::test {

int catch_run(int argc, char** argv);

}  // namespace mhc::test
