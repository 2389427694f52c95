#include <catch2/catch.hpp>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"

TEST_CASE("sizes parse in binary and decimal units", "[units]") {
    CHECK(mhc::parse_bytes("123") == 123);
    CHECK(mhc::parse_bytes("40GiB") == 40LL << 30);
    CHECK(mhc::parse_bytes("1.5 GB") == 1500000000LL);
    CHECK(mhc::parse_bytes("64k") == 65536);
    CHECK(mhc::parse_bytes("2MiB") == 2 << 20);
    CHECK_THROWS_AS(mhc::parse_bytes("-5GB"), mhc::Error);
    CHECK_THROWS_AS(mhc::parse_bytes("abc"), mhc::Error);
    CHECK_THROWS_WITH(mhc::parse_bytes("5 parsecs"), Catch::Contains("unknown unit"));
}

TEST_CASE("durations and bandwidths parse", "[units]") {
    CHECK(mhc::parse_seconds("5us") == Approx(5e-6));
    CHECK(mhc::parse_seconds("2.5ms") == Approx(2.5e-3));
    CHECK(mhc::parse_bandwidth("25GB/s") == Approx(25e9));
    CHECK(mhc::parse_bandwidth("12.5e9") == Approx(12.5e9));
    CHECK_THROWS_AS(mhc::parse_bandwidth("0GB/s"), mhc::Error);
}

TEST_CASE("formatting picks readable units", "[units]") {
    CHECK(mhc::format_bytes(512) == "512 B");
    CHECK(mhc::format_bytes(3LL << 30) == "3.00 GiB");
    CHECK(mhc::format_ns(1500) == "1.50 us");
    CHECK(mhc::format_ns(2500000000LL) == "2.500 s");
}
