// The translation unit that precompiles Catch2's header (tests/support/CMakeLists.txt,
// mhc_catch_pch); the test programs reuse that header. Nothing is compiled from here.
