#pragma once
// A tiny captured step written to a trace file and made a Base, with the link the hand-worked
// numbers of the advise tests use.
#include <string>

#include "mhc/advise/evaluate.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "tiny.hpp"

namespace advisetest {

// A link of 1 B/ns each way, no latency: a copy of n bytes takes n ns.
inline mhc::sim::LinkModel unit_link() {
    mhc::sim::LinkModel link = mhc::sim::link_from_spec("pcie4");
    link.h2d = {1e9, 0};
    link.d2h = {1e9, 0};
    link.duplex_factor = 1;
    return link;
}

struct Fixture {
    mhc::test::TempPath path{"advise.db"};
    mhc::trace::TraceData data;
    mhc::advise::Base base;
    explicit Fixture(const TinyTrace& tiny) {
        tiny.write(path.path);
        data = mhc::trace::load_checked_trace(path.path);
        base = mhc::advise::make_base(data);
    }
    mhc::advise::Evaluator ev(mhc::advise::HostModel host = {}) const {
        return mhc::advise::Evaluator(base, unit_link(), host);
    }
    mhc::advise::Prediction predict(const std::string& json, mhc::advise::HostModel host = {}) const {
        return ev(host).predict(mhc::advise::parse_setting(json));
    }
};

}  // namespace advisetest
