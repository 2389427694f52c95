#pragma once
// A trace written through the recorder's translator into a temporary file, then loaded.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>

#include "mhc/record/translator.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"

namespace mhc::record::test {

inline std::string temp_trace_path() {
    static std::atomic<int> n{0};
    auto dir = mhc::test::scratch_dir("mhc-record-test");
    std::string file = "t";
    file.append(std::to_string(n++)).append(".db");
    return (dir / file).string();
}

// Runs `feed` on a Translator, finishes it and the file; returns the file's path.
inline std::string translate_to_file(const std::function<void(Translator&)>& feed,
                                     TranslatorOptions opt = {}) {
    std::string path = temp_trace_path();
    trace::Writer w(path);
    Translator t(w, opt);
    feed(t);
    t.finish();
    w.finish();
    return path;
}

// The same, loaded back (the file is removed).
inline trace::TraceData translate(const std::function<void(Translator&)>& feed,
                                  TranslatorOptions opt = {}) {
    std::string path = translate_to_file(feed, opt);
    trace::TraceData d = trace::load_trace(path);
    std::filesystem::remove(path);
    return d;
}

inline std::string problems(const trace::CheckReport& r) {
    std::string s;
    for (const auto& p : r.problems) {
        s.append(p.table).append(" ").append(std::to_string(p.row)).append(": ");
        s.append(p.message).append(" [").append(p.rule).append("]\n");
    }
    return s;
}

}  // namespace mhc::record::test
