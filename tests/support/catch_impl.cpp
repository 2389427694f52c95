// Catch2's implementation, compiled once for every test program: each program's own
// CATCH_CONFIG_MAIN file cost 40-60 s of CPU to build, thirteen times over.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "mhc/test/catch_run.hpp"

int mhc::test::catch_run(int argc, char** argv) { return Catch::Session().run(argc, argv); }
