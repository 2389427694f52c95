// The one JSON string writer, the one integer parser and the one hash (mhc/common): hand-worked cases.
#include <catch2/catch.hpp>

#include <cstdint>

#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/hash.hpp"
#include "mhc/common/json.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/common/text_table.hpp"

#include <cstdlib>

TEST_CASE("json_string escapes what JSON requires and replaces bytes that are not UTF-8", "[common]") {
    CHECK(mhc::json_string("gemm") == "\"gemm\"");
    CHECK(mhc::json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
    CHECK(mhc::json_string("l1\nl2\tx\r") == "\"l1\\nl2\\tx\\r\"");
    CHECK(mhc::json_string(std::string("\x01", 1)) == "\"\\u0001\"");
    CHECK(mhc::json_string("µs") == "\"µs\"");                        // valid UTF-8 kept as it is
    CHECK(mhc::json_string("a\xff" "b") == "\"a\xef\xbf\xbd" "b\"");  // a lone 0xff: U+FFFD
    CHECK(mhc::json_string("\xc3") == "\"\xef\xbf\xbd\"");            // a cut sequence
    std::string out = "[";
    mhc::append_json_string(out, "x");
    CHECK(out == "[\"x\"");
}

TEST_CASE("a repeated key and a parse error are said once for every file users write", "[common]") {
    CHECK(mhc::repeated_json_key_refusal(R"({"a": 1, "b": {"c": 1, "c": 2}})") ==
          "field 'b.c' is given twice: JSON readers take either value; give it once");
    CHECK(mhc::repeated_json_key_refusal(R"({"a": 1, "b": {"a": 2}})").empty());   // one key per object
    // nlohmann's tag and the bytes it last read are dropped; the place and the reason stay.
    CHECK(mhc::json_error_text("[json.exception.parse_error.101] parse error at line 1, column 2: syntax error "
                               "while parsing value - invalid literal; last read: '\x01'") ==
          "parse error at line 1, column 2: syntax error while parsing value - invalid literal");
    CHECK(mhc::json_error_text("[json.exception.out_of_range.406] number overflow parsing '1e999'") ==
          "number overflow parsing '1e999'");
    CHECK(mhc::json_error_text("no tag here") == "no tag here");
}

TEST_CASE("Error keeps its whole message, as printable() shows it", "[common]") {
    // what() is read as a C string: a NUL quoted from an input cut the message there.
    const mhc::Error nul(std::string("s.json: field 'a\0b': must be an object", 38));
    CHECK(std::string(nul.what()) == "s.json: field 'a?b': must be an object");
    CHECK(mhc::Error("two\nlines\x1b[31m").what() == std::string("two?lines?[31m"));
    CHECK(mhc::Error("caf\xc3\xa9 \xff", mhc::Error::Kind::Internal).what() == std::string("caf\xc3\xa9 ?"));
    CHECK(mhc::Error("x", mhc::Error::Kind::Internal).exit_code() == 1);
}

TEST_CASE("a long value is quoted as its start and its length, as is a long word of any message", "[common]") {
    const std::string x80(80, 'x'), x81(81, 'x');
    CHECK(mhc::quoted_value(x80) == "'" + x80 + "'");
    CHECK(mhc::quoted_value(x81) == "'" + std::string(60, 'x') + "...(81 bytes)'");
    // not cut inside a UTF-8 sequence: 59 bytes, then a 2-byte character across byte 60
    CHECK(mhc::shortened(std::string(59, 'x') + "\xc3\xa9" + std::string(40, 'x')) == std::string(59, 'x') + "...(101 bytes)");
    const std::string word(120000, 'y');
    // the quotes and the colon around a value stay; other words of 1,024 bytes or less are kept whole
    CHECK(mhc::Error("--capacity: '" + word + "': a capacity needs a unit " + std::string(1024, 'z')).what() ==
          "--capacity: '" + std::string(60, 'y') + "...(120000 bytes)': a capacity needs a unit " + std::string(1024, 'z'));
    // a file name is said whole as the user wrote it; one past 1,024 bytes (five parts of 210) is shortened
    const std::string name = std::string(150, 'd') + "/t.db";
    CHECK(mhc::Error(name + ": no such file").what() == name + ": no such file");
    std::string deep;
    for (int part = 0; part < 5; ++part) deep += std::string(210, 'd') + "/";
    deep += "t.db";
    CHECK(mhc::Error(deep + ": no such file").what() == std::string(60, 'd') + "...(1059 bytes): no such file");
    CHECK(mhc::message_line("mhc: " + deep + " is a link\n") == "mhc: " + std::string(60, 'd') + "...(1059 bytes) is a link?");
    CHECK(mhc::message_line(std::string(1024, 'a')) == std::string(1024, 'a'));
    // the colon after a name is not the name's: one of 1,024 bytes and its colon stay whole
    CHECK(mhc::message_line(std::string(1024, 'a') + ": no such file") == std::string(1024, 'a') + ": no such file");
    CHECK(mhc::message_line(std::string(1025, 'a')) == std::string(60, 'a') + "...(1025 bytes)");
    CHECK(mhc::refused_value("--policy", word, "no such policy") == "--policy: '" + std::string(60, 'y') + "...(120000 bytes)': no such policy");
}

TEST_CASE("a path past 1,024 bytes with spaces in it is capped between its colons, a sentence is not", "[common]") {
    // five folders "my runs " and 200 r of 209 bytes and t.db: 1,049 bytes, no word of it past 1,024
    std::string spaced;
    for (int part = 0; part < 5; ++part) spaced += "my runs " + std::string(200, 'r') + "/";
    spaced += "t.db";
    REQUIRE(spaced.size() == 1049);
    CHECK(mhc::Error(spaced + ": already exists").what() == spaced.substr(0, 60) + "...(1049 bytes): already exists");
    CHECK(mhc::message_line("mhc: '" + spaced + "': no") == "mhc: '" + spaced.substr(0, 60) + "...(1049 bytes)': no");
    // a path of 1,024 bytes with spaces stays whole; a sentence (no '/') of 1,200 bytes too
    std::string path1024;
    for (int part = 0; part < 512; ++part) path1024 += "a/";
    path1024.back() = ' ';
    CHECK(mhc::message_line("x: " + path1024 + ": y") == "x: " + path1024 + ": y");
    std::string sentence;
    for (int word = 0; word < 600; ++word) sentence += "b ";
    CHECK(mhc::message_line("x: " + sentence + ": y") == "x: " + sentence + ": y");
}

TEST_CASE("parse_integer takes the whole text as a decimal integer or nothing", "[common]") {
    CHECK(mhc::parse_integer<int64_t>("0") == 0);
    CHECK(mhc::parse_integer<int64_t>("-42") == -42);
    CHECK(mhc::parse_integer<int64_t>("9223372036854775807") == INT64_MAX);
    CHECK_FALSE(mhc::parse_integer<int64_t>("9223372036854775808"));   // past int64
    CHECK_FALSE(mhc::parse_integer<int64_t>(""));
    CHECK_FALSE(mhc::parse_integer<int64_t>("+1"));
    CHECK_FALSE(mhc::parse_integer<int64_t>(" 1"));
    CHECK_FALSE(mhc::parse_integer<int64_t>("1 "));
    CHECK_FALSE(mhc::parse_integer<int64_t>("1e3"));
    CHECK_FALSE(mhc::parse_integer<int64_t>("0x10"));
    CHECK(mhc::parse_integer<uint64_t>("18446744073709551615") == UINT64_MAX);
    CHECK_FALSE(mhc::parse_integer<uint64_t>("-1"));
    CHECK_FALSE(mhc::parse_integer<int>("4294967296"));
}

TEST_CASE("Fnv1a keeps the values fingerprints were made with, and fields end in 0xff", "[common]") {
    // FNV-1a with the offset 1469598103934665603 and the prime 1099511628211, worked out by hand
    // (h = (h ^ byte) * prime mod 2^64): "a" gives (1469598103934665603 ^ 0x61) * 1099511628211.
    CHECK(mhc::Fnv1a().value() == 1469598103934665603ull);
    CHECK(mhc::Fnv1a().add("a").value() == 4953267810257967366ull);
    CHECK(mhc::Fnv1a().add("foo").add("bar").hex() == "88fad7c0a8ff07f2");
    // add_field(x) is add(x) then the byte 0xff: ("a", "b") and ("ab", "") hash apart.
    CHECK(mhc::Fnv1a().add_field("a").add_field("b").value() == mhc::Fnv1a().add("a\xff" "b\xff").value());
    CHECK(mhc::Fnv1a().add_field("a").add_field("b").hex() == "c9791bbd2dd8f2ec");
    CHECK(mhc::Fnv1a().add_field("ab").add_field("").value() != mhc::Fnv1a().add_field("a").add_field("b").value());
}

TEST_CASE("a text table: two-line headings, figures right-aligned, split into blocks in a narrow terminal",
          "[common]") {
    mhc::TextTable table(
        {{{"policy"}, true, true}, {{"peak"}}, {{"peak", "reduction"}}, {{"throughput", "loss"}}, {{"stall", "time"}}});
    table.add_row({"lru", "2.81 GiB", "30.1%", "634.53%", "254.50 ms"});
    table.add_row({"cost_aware", "3.41 GiB", "15.2%", "4.75%", "8.06 ms"});
    // Worked by hand: policy 10 wide, peak 8, reduction 9, loss 10, time 9; one space between.
    const std::string whole =
        "                         peak throughput     stall\n"
        "policy         peak reduction       loss      time\n"
        "lru        2.81 GiB     30.1%    634.53% 254.50 ms\n"
        "cost_aware 3.41 GiB     15.2%      4.75%   8.06 ms\n";
    CHECK(table.full_width() == 50);
    CHECK(table.render(0) == whole);
    CHECK(table.render(50) == whole);
    // 35 columns: policy (the key) in each block, the figures that fit beside it, in their order.
    const std::string split =
        "                         peak\n"
        "policy         peak reduction\n"
        "lru        2.81 GiB     30.1%\n"
        "cost_aware 3.41 GiB     15.2%\n"
        "\n"
        "           throughput     stall\n"
        "policy           loss      time\n"
        "lru           634.53% 254.50 ms\n"
        "cost_aware      4.75%   8.06 ms\n";
    CHECK(table.render(35) == split);
    // Narrower than the key and one column: a column a block, still whole (never cut).
    const std::string narrow = table.render(12);
    CHECK(narrow.find("634.53%") != std::string::npos);
    CHECK(narrow.find("254.50 ms") != std::string::npos);
    size_t blocks = 1;
    for (size_t at = narrow.find("\n\n"); at != std::string::npos; at = narrow.find("\n\n", at + 1)) ++blocks;
    CHECK(blocks == 4);
}

TEST_CASE("a text table's last column of words wraps under its start in a narrow terminal", "[common]") {
    mhc::TextTable table(
        {{{"rank"}, true, true}, {{"peak"}}, {{"throughput", "loss"}}, {{"setting"}, true, false, 0, true}});
    table.add_row({"1", "4.77 GiB", "+5.1%", "checkpoint 5 of 6 blocks + fused AdamW"});
    table.add_row({"2", "4.81 GiB", "+6.5%", ""});
    // Worked by hand: rank 4, peak 8, loss 10, setting 38: 63 columns whole; at 50 the setting has
    // 50 - (4 + 1 + 8 + 1 + 10 + 1) = 25 columns, its words wrapped under its start (column 26).
    CHECK(table.full_width() == 63);
    const std::string wrapped =
        "              throughput\n"
        "rank     peak       loss setting\n"
        "1    4.77 GiB      +5.1% checkpoint 5 of 6 blocks\n"
        "                         + fused AdamW\n"
        "2    4.81 GiB      +6.5%\n";
    CHECK(table.render(50) == wrapped);
    CHECK(table.render(0).find("+5.1% checkpoint 5 of 6 blocks + fused AdamW\n") != std::string::npos);
    // 30 columns: peak and loss in a block; then the setting beside the key, wrapped within 25.
    const std::string blocks =
        "              throughput\n"
        "rank     peak       loss\n"
        "1    4.77 GiB      +5.1%\n"
        "2    4.81 GiB      +6.5%\n"
        "\n"
        "rank setting\n"
        "1    checkpoint 5 of 6 blocks\n"
        "     + fused AdamW\n"
        "2\n";
    CHECK(table.render(30) == blocks);
}

TEST_CASE("the tables' width: COLUMNS when it is a number of 20 or more, else none for a file", "[common]") {
    const char* before = std::getenv("COLUMNS");
    const std::string saved = before ? before : "";
    ::setenv("COLUMNS", "64", 1);
    CHECK(mhc::table_width() == 64);
    // Not a width: the terminal's, and a test's standard output is no terminal here (or one: then > 0).
    for (const char* bad : {"abc", "12", "64x", ""}) {
        ::setenv("COLUMNS", bad, 1);
        const int width = mhc::table_width();
        CHECK(width != 64);
        CHECK((width == 0 || width >= 1));
    }
    if (before) ::setenv("COLUMNS", saved.c_str(), 1);
    else ::unsetenv("COLUMNS");
}
