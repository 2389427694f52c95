#pragma once
// The bytes a result travels in between processes: every field of the struct's field list
// (mhc/sim/result_fields.hpp) in order, integers, booleans and enums as int64, doubles as
// themselves, strings and lists with their length first. Both ends are the same build.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "mhc/sim/result_fields.hpp"

namespace mhc::dist {

namespace codec {

// Ordinary lookup finds the lists of result_fields.hpp (trace:: structs among them); argument-
// dependent lookup the ones declared beside their struct (sim::BisectAnswer).
using sim::fields;

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

struct Writer {
    std::string bytes;

    template <class T>
    void operator()(const sim::Field&, const T& x) { put(x); }

    template <class T>
    void put(const T& x) {
        if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
            scalar(static_cast<int64_t>(x));
        } else if constexpr (std::is_floating_point_v<T>) {
            scalar(static_cast<double>(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
            scalar(static_cast<int64_t>(x.size()));
            bytes.append(x);
        } else if constexpr (IsVector<T>::value) {
            scalar(static_cast<int64_t>(x.size()));
            for (const auto& e : x) put(e);
        } else {
            fields(x, *this);
        }
    }
    template <class T>
    void scalar(T v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); }
};

struct Reader {
    const std::string& bytes;
    size_t at = 0;

    template <class T>
    void operator()(const sim::Field&, T& x) { get(x); }

    template <class T>
    void get(T& x) {
        if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
            x = static_cast<T>(scalar<int64_t>());
        } else if constexpr (std::is_floating_point_v<T>) {
            x = static_cast<T>(scalar<double>());
        } else if constexpr (std::is_same_v<T, std::string>) {
            const size_t n = length();
            x = bytes.substr(at, n);
            at += n;
        } else if constexpr (IsVector<T>::value) {
            x.resize(length());
            for (auto& e : x) get(e);
        } else {
            fields(x, *this);
        }
    }
    template <class T>
    T scalar() {
        if (at + sizeof(T) > bytes.size()) throw std::runtime_error("mpi: truncated result message");
        T v;
        std::memcpy(&v, bytes.data() + at, sizeof v);
        at += sizeof v;
        return v;
    }
    // A string's bytes or a list's elements (one byte at least each) that the message holds.
    size_t length() {
        const int64_t n = scalar<int64_t>();
        if (n < 0 || static_cast<uint64_t>(n) > bytes.size() - at) throw std::runtime_error("mpi: truncated result message");
        return static_cast<size_t>(n);
    }
};

}  // namespace codec

template <class T>
std::string encode(const T& x) {
    codec::Writer w;
    w.put(x);
    return std::move(w.bytes);
}

// Throws std::runtime_error when the bytes end before the fields or go on after them.
template <class T>
T decode(const std::string& bytes) {
    codec::Reader r{bytes};
    T x;
    r.get(x);
    if (r.at != bytes.size()) throw std::runtime_error("mpi: result message longer than its fields");
    return x;
}

inline std::string pack(const sim::Result& r) { return encode(r); }
inline sim::Result unpack(const std::string& bytes) { return decode<sim::Result>(bytes); }

}  // namespace mhc::dist
