// main() of the test programs: Catch2's session over the program's arguments.
#include "mhc/test/catch_run.hpp"

int main(int argc, char** argv) { return mhc::test::catch_run(argc, argv); }
