#pragma once
// A golden file of run digests (tests/sim/golden/*.json): read, unless MHC_UPDATE_GOLDEN is set,
// in which case the test rewrites it whole from the runs it made.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace simtest {

struct GoldenFile {
    std::string path;
    bool update = std::getenv("MHC_UPDATE_GOLDEN") != nullptr;
    nlohmann::json runs;   // the committed digests by key (empty when updating)

    explicit GoldenFile(std::string file) : path(std::move(file)) {
        if (update) return;
        std::ifstream in(path);
        REQUIRE(in.good());
        runs = nlohmann::json::parse(in).at("runs");
    }

    // One run made by the test: kept in `got` for an update, else compared with its golden
    // digest (counted in `checked`).
    void compare(nlohmann::json& got, int& checked, const std::string& key, const nlohmann::json& run) const {
        got[key] = run;
        if (update) return;
        INFO(key);
        REQUIRE(runs.contains(key));
        CHECK(runs.at(key) == run);
        ++checked;
    }

    // After the runs: rewrites the file from `got` (update) or checks that each of its runs was
    // compared (`checked` of them), so that a run dropped from the test cannot pass unnoticed.
    void finish(const nlohmann::json& got, int checked, const std::string& about) const {
        if (update) {
            std::ofstream out(path);
            out << nlohmann::json{{"_about", about}, {"runs", got}}.dump(1) << "\n";
            out.close();
            INFO("rewriting " << path);
            REQUIRE(out.good());   // the new golden file is whole, or the update fails
            return;
        }
        CHECK(checked == static_cast<int>(runs.size()));
    }
};

}  // namespace simtest
