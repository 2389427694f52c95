// Where a test finds the repository's files and the programs this build made. The paths live in
// one file the build generates (tests/support/CMakeLists.txt), not in each test file's -D: a
// clone at another path, or another build folder, compiles that one file again, and the compiler
// cache serves every test file from any clone (docs/results.md, "Building and testing").
#pragma once

#include <string>

namespace mhc::test {

const char* source_dir();        // the repository's root
const char* public_datasets();   // tests/data/public: the public traces the importer tests read
const char* mhc_exe();           // the `mhc` this build made
const char* mhc_view_exe();      // the `mhc-view` this build made ("" where the viewer is not built)
// source_dir() + "/" + relative
std::string source_path(const std::string& relative);

}  // namespace mhc::test
