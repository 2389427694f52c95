// mhc_bench_tokenizers FILE [CHUNK_KIB] [REPS]: the JSON tokenizers the Kineto importer could use,
// timed over the same bytes (docs/results.md, "What bounds import"). FILE is a Kineto JSON whose
// traceEvents elements are separated by "},\n{", as mhc_bench_import's synthetic trace
// (MHC_BENCH_KEEP=1 mhc_bench_import 2000000 DIR 1). Its traceEvents are cut at those boundaries
// into arrays of about CHUNK_KIB KiB (default 256), each copied into a padded buffer and parsed
//   - by rapidjson in situ, numbers as strings (the importer's flags), with a handler that does
//     nothing: the tokenizer alone;
//   - by simdjson On Demand, reading the fields the importer reads (numbers as their text, strings
//     uncopied) and skipping the rest;
//   - by simdjson On Demand, visiting every value, so that the whole input is validated.
// Prints the CPU seconds (user + sys) of each pass, the median of REPS passes (default 3). Then,
// for malformed values inside a field the importer does not read, whether each pass refuses them.
// Built only where simdjson is installed (Debian: libsimdjson-dev); the importer does not use it.
#include <rapidjson/reader.h>
#include <simdjson.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mhc/bench/args.hpp"

namespace {

using simdjson::ondemand::json_type;

double cpu_seconds() {
    rusage use{};
    getrusage(RUSAGE_SELF, &use);
    auto seconds = [](const timeval& time) { return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) / 1e6; };
    return seconds(use.ru_utime) + seconds(use.ru_stime);
}

// [begin, end) of each chunk of whole traceEvents elements in `json`.
std::vector<std::pair<size_t, size_t>> chunks_of(const std::string& json, size_t chunk_bytes) {
    std::vector<std::pair<size_t, size_t>> chunks;
    size_t pos = json.find("\"traceEvents\"");
    pos = pos == std::string::npos ? pos : json.find('{', pos);
    const size_t last = json.rfind("}\n]");
    if (pos == std::string::npos || last == std::string::npos || last < pos) return chunks;
    while (pos <= last) {
        size_t cut = json.rfind("},\n{", std::min(last, pos + chunk_bytes));
        if (cut == std::string::npos || cut < pos) cut = json.find("},\n{", pos);
        if (cut == std::string::npos || cut > last) cut = last;
        chunks.emplace_back(pos, cut + 1);
        pos = cut + 3;
    }
    return chunks;
}

// The chunk as one JSON array in `buf`, NUL and simdjson's padding after it; its length.
size_t wrap(const std::string& json, std::pair<size_t, size_t> chunk, std::vector<char>& buf) {
    const size_t len = chunk.second - chunk.first;
    buf.assign(len + 3 + simdjson::SIMDJSON_PADDING, '\0');
    buf[0] = '[';
    std::memcpy(buf.data() + 1, json.data() + chunk.first, len);
    buf[len + 1] = ']';
    return len + 2;
}

bool rapidjson_pass(char* text) {
    rapidjson::BaseReaderHandler<rapidjson::UTF8<>> nothing;
    rapidjson::Reader reader;
    rapidjson::InsituStringStream stream(text);
    constexpr unsigned kFlags = rapidjson::kParseInsituFlag | rapidjson::kParseNumbersAsStringsFlag |
                                rapidjson::kParseNanAndInfFlag | rapidjson::kParseStopWhenDoneFlag;
    return !reader.Parse<kFlags>(stream, nothing).IsError();
}

// The keys the importer reads as numbers or strings (kineto_parse.cpp, by length as there).
bool read_key(std::string_view key) {
    switch (key.size()) {
        case 2: return key == "ph" || key == "ts" || key == "id";
        case 3: return key == "cat" || key == "pid" || key == "tid" || key == "dur";
        case 4: return key == "name" || key == "Addr";
        case 5: return key == "bytes" || key == "Bytes";
        case 6: return key == "device" || key == "stream" || key == "Ev Idx";
        case 9: return key == "Device Id";
        case 11: return key == "External id" || key == "correlation" || key == "Device Type";
        case 13: return key == "shared memory";
        case 14: return key == "Total Reserved";
        case 15: return key == "Total Allocated" || key == "Sequence number";
        case 18: return key == "Record function id";
        case 20: return key == "registers per thread";
        default: return false;
    }
}

// A value as the importer takes it: a string uncopied, anything else as its text.
size_t take(simdjson::ondemand::value value) {
    if (value.type() == json_type::string) return value.get_raw_json_string().value().raw() != nullptr;
    return value.raw_json_token().size();
}

void read_object(simdjson::ondemand::object object, size_t& sink) {
    for (auto field : object) {
        const std::string_view key = field.unescaped_key();
        if (key == "args") read_object(field.value().get_object(), sink);
        else if (read_key(key)) sink += take(field.value());
    }
}

// Every value, checked: numbers and atoms parsed, strings unescaped.
void visit(simdjson::ondemand::value value, size_t& sink) {
    switch (value.type()) {
        case json_type::object:
            for (auto field : value.get_object()) {
                sink += field.unescaped_key().value().size();
                visit(field.value(), sink);
            }
            break;
        case json_type::array:
            for (auto item : value.get_array()) visit(item.value(), sink);
            break;
        case json_type::string: sink += value.get_string().value().size(); break;
        case json_type::number: sink += value.get_number().value().get_number_type() == simdjson::ondemand::number_type::floating_point_number; break;
        case json_type::boolean: sink += value.get_bool().value(); break;
        case json_type::null:
            if (!value.is_null()) throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE);
            break;
    }
}

// One simdjson pass over `text`: false where simdjson reports an error.
bool simdjson_pass(simdjson::ondemand::parser& parser, const std::vector<char>& buf, size_t len, bool validate, size_t& sink) {
    try {
        auto doc = parser.iterate(buf.data(), len, buf.size());
        for (auto event : doc.get_array()) {
            if (validate) visit(event.value(), sink);
            else read_object(event.get_object(), sink);
        }
        return doc.current_location().error() == simdjson::OUT_OF_BOUNDS;   // nothing after the array
    } catch (const simdjson::simdjson_error&) {
        return false;
    }
}

using Pass = std::function<bool(std::vector<char>&, size_t)>;

// Median CPU seconds of `reps` passes over every chunk; false in `ok` where a chunk failed.
double time_pass(const std::string& json, const std::vector<std::pair<size_t, size_t>>& chunks, int reps, const Pass& pass, bool& ok) {
    std::vector<double> runs;
    std::vector<char> buf;
    ok = true;
    for (int rep = 0; rep < reps; ++rep) {
        double spent = 0;
        for (const auto& chunk : chunks) {
            const size_t len = wrap(json, chunk, buf);   // rapidjson writes into it: copied again each pass
            const double start = cpu_seconds();
            ok = pass(buf, len) && ok;
            spent += cpu_seconds() - start;
        }
        runs.push_back(spent);
    }
    std::sort(runs.begin(), runs.end());
    return runs[runs.size() / 2];
}

// Malformed JSON in "x", a key the importer does not read: refused by each pass or not.
void malformed(simdjson::ondemand::parser& parser) {
    const char* values[] = {"[1 2]", "tru", "01", "\"\\q\"", "{\"c\": 1,,}", "[1,]", "nul", "1e"};
    std::printf("%-14s %-10s %-14s %s\n", "value of x", "rapidjson", "simdjson read", "simdjson validate");
    for (const char* value : values) {
        const std::string json = std::string("{\"ph\": \"X\", \"x\": ") + value + ", \"ts\": 1}";
        std::vector<char> buf;
        size_t sink = 0;
        auto word = [](bool ok) { return ok ? "accepted" : "refused"; };
        wrap(json, {0, json.size()}, buf);
        const bool by_rapidjson = rapidjson_pass(buf.data());   // in situ: it changes the buffer
        const size_t len = wrap(json, {0, json.size()}, buf);
        std::printf("%-14s %-10s %-14s %s\n", value, word(by_rapidjson), word(simdjson_pass(parser, buf, len, false, sink)),
                    word(simdjson_pass(parser, buf, len, true, sink)));
    }
}

int run(int argc, char** argv) {
    const mhc::bench::Args args(argc, argv, "FILE [CHUNK_KIB] [REPS]");
    args.at_most(3);
    if (!args.has(0)) args.refuse("FILE is missing");
    const size_t chunk_kib = static_cast<size_t>(args.count(1, "CHUNK_KIB", 256, 1, 1 << 20));
    const int reps = static_cast<int>(args.count(2, "REPS", 3, 1, 100));
    std::ifstream in(args.word(0), std::ios::binary);
    const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto chunks = chunks_of(json, chunk_kib << 10);
    if (chunks.empty()) args.refuse("FILE '" + args.word(0) + "' has no traceEvents elements separated by \"},\\n{\"");
    simdjson::ondemand::parser parser;
    size_t sink = 0;
    const std::vector<std::pair<const char*, Pass>> passes = {
        {"rapidjson in situ, handler doing nothing", [](std::vector<char>& buf, size_t) { return rapidjson_pass(buf.data()); }},
        {"simdjson On Demand, the importer's fields", [&](std::vector<char>& buf, size_t len) { return simdjson_pass(parser, buf, len, false, sink); }},
        {"simdjson On Demand, every value validated", [&](std::vector<char>& buf, size_t len) { return simdjson_pass(parser, buf, len, true, sink); }},
    };
    std::printf("%s: %.1f MB in %zu arrays of about %zu KiB; CPU seconds, median of %d\n", args.word(0).c_str(),
                static_cast<double>(json.size()) / 1e6, chunks.size(), chunk_kib, reps);
    for (const auto& [name, pass] : passes) {
        bool ok = true;
        const double seconds = time_pass(json, chunks, reps, pass, ok);
        std::printf("%-44s %7.3f s %7.0f MB/s%s\n", name, seconds, static_cast<double>(json.size()) / 1e6 / seconds,
                    ok ? "" : " (a chunk failed)");
    }
    malformed(parser);
    std::printf("(%zu)\n", sink);   // what the passes read, so that none of it is optimized away
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("mhc_bench_tokenizers", [&] { return run(argc, argv); });
}
