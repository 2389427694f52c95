#pragma once
// A large plain Kineto trace parsed by two threads: the second half from a guessed element
// start on a thread of its own, merged into the first half's data where the first parse meets
// that element (docs/import.md, "Speed"). The result is the same as one thread's.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "kineto_handler.hpp"
#include "kineto_parse.hpp"
#include "kineto_window.hpp"

namespace mhc::trace::import {

// The first element of traceEvents that starts at or after `from`, as far as the bytes there
// tell: '{' after "}," (whitespace between). A guess: it may lie inside a string, so the first
// part accepts it only where one of its elements really starts. UINT64_MAX if none is near.
uint64_t guess_element_start(const std::string& path, uint64_t from);

// Appends what the second part of the input gave to the first part's data, as one parse of
// the whole would have left it: names re-interned, event indexes shifted, later runtime calls
// and flows replacing earlier ones of the same id. False (nothing changed) where the two cannot
// be told apart from one parse: device properties in both parts.
bool merge_second_part(KinetoData& first, KinetoData&& second);

// The second half of a large plain file, parsed on a thread of its own from a guessed element
// start while the caller parses the first half (docs/import.md, "Speed").
class SecondPart {
public:
    SecondPart(const std::string& path, uint64_t limit, uint64_t at) : h_(d_, path) {
        h_.copy_strings = false;
        h_.stack = {In::Root, In::Events};   // as the first part's handler is at that element
        h_.top_key = "traceEvents";
        h_.saw_events = true;
        thread_ = std::thread([this, &path, limit, at] {
            try {
                ok_ = Windowed(path, h_, limit, at, false).run(nullptr, &stop_);
            } catch (...) {   // the first part meets the same error where it lies, and says it
                ok_ = false;
            }
        });
    }
    ~SecondPart() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    SecondPart(const SecondPart&) = delete;
    SecondPart& operator=(const SecondPart&) = delete;

    // Called when the first part reaches the guessed element: waits for the second part and
    // merges its data into `d`; false (d unchanged) where it failed.
    bool take_over(KinetoData& first) {
        thread_.join();
        return ok_ && merge_second_part(first, std::move(d_));
    }

private:
    KinetoData d_;
    Handler h_;
    std::atomic<bool> stop_{false};
    bool ok_ = false;
    std::thread thread_;
};

}  // namespace mhc::trace::import
