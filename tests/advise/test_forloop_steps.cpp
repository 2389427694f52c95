// The host optimizer's for-loop steps (torch.optim's _single_tensor_* functions) against what a
// capture of the host step holds: mhc_torch.capture of tests' Net (six 4,096 B fp32 weights) with
// {"optimizer": {"state": "host"}}, its host peak less the masters, gradient buffers and state
// (2026-12-07, torch 2.15), and against the lines worked out by hand for unequal parameters.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "mhc/advise/capture_info.hpp"
#include "mhc/advise/forloop_steps.hpp"
#include "mhc/advise/transforms.hpp"

using mhc::advise::forloop_most;
using mhc::advise::forloop_program;

namespace {
int64_t most(const char* cls, const char* defaults, const std::vector<int64_t>& sizes, int64_t step = 1) {
    const auto program = forloop_program(cls, nlohmann::json::parse(defaults), step);
    REQUIRE(program);
    return forloop_most(sizes, *program);
}
const std::vector<int64_t> kSix(6, 4096);
}   // namespace

TEST_CASE("for-loop steps hold what the capture of the host step holds", "[advise][optimizer][forloop]") {
    // captured host peak - (masters + gradient buffers + state): the loop's tensors at their most
    CHECK(most("torch.optim.adam.Adam", R"({"weight_decay": 0})", kSix) == 3 * 4096);
    // Adam's coupled decay makes grad + wd x param: 114,712 B captured, 4 weights' worth (the
    // rule before took sqrt and quotient alone, 3: 4,096 B under)
    CHECK(most("torch.optim.adam.Adam", R"({"weight_decay": 0.1})", kSix) == 4 * 4096);
    CHECK(most("torch.optim.adam.Adam", R"({"amsgrad": true})", kSix) == 3 * 4096);
    CHECK(most("torch.optim.adam.Adam", R"({"maximize": true})", kSix) == 4 * 4096);
    CHECK(most("torch.optim.adamw.AdamW", R"({"maximize": true, "amsgrad": true, "weight_decay": 0.01,
                                             "decoupled_weight_decay": true})",
               kSix) == 4 * 4096);
    CHECK(most("torch.optim.nadam.NAdam", "{}", kSix) == 3 * 4096);
    CHECK(most("torch.optim.nadam.NAdam", R"({"weight_decay": 0.1})", kSix) == 4 * 4096);
    CHECK(most("torch.optim.radam.RAdam", "{}", kSix, 2) == 2 * 4096);
    CHECK(most("torch.optim.radam.RAdam", R"({"weight_decay": 0.1})", kSix, 2) == 3 * 4096);
    // rho_t > 5 from the sixth step at beta2 0.999: 7 steps captured, 118,808 B, 5 weights' worth
    CHECK(most("torch.optim.radam.RAdam", R"({"betas": [0.9, 0.999]})", kSix, 7) == 5 * 4096);
    CHECK(most("torch.optim.radam.RAdam", R"({"betas": [0.9, 0.999]})", kSix, 5) == 2 * 4096);
    CHECK(most("torch.optim.adamax.Adamax", "{}", kSix) == 4096);
    CHECK(most("torch.optim.adamax.Adamax", R"({"weight_decay": 0.1})", kSix) == 2 * 4096);
    CHECK(most("torch.optim.rmsprop.RMSprop", "{}", kSix) == 2 * 4096);
    CHECK(most("torch.optim.rmsprop.RMSprop", R"({"centered": true, "momentum": 0.9, "weight_decay": 0.1})", kSix) ==
          3 * 4096);
    CHECK(most("torch.optim.adadelta.Adadelta", "{}", kSix) == 3 * 4096);
    // Adagrad: the previous std held while this one is made (with decay, beside grad + wd x param)
    CHECK(most("torch.optim.adagrad.Adagrad", "{}", kSix) == 2 * 4096);
    CHECK(most("torch.optim.adagrad.Adagrad", R"({"weight_decay": 0.01})", kSix) == 3 * 4096);
    // Rprop: grad.mul(prev) and its sign beside the previous sign, then the clone of grad, a bool
    // mask (1,024 B) and grad.sign() beside the sign: 3 weights' worth; maximize's -grad is held
    // beside the product, its sign and the previous sign: 4
    CHECK(most("torch.optim.rprop.Rprop", "{}", kSix) == 3 * 4096);
    CHECK(most("torch.optim.rprop.Rprop", R"({"maximize": true})", kSix) == 4 * 4096);
}

TEST_CASE("for-loop steps of unequal parameters follow the loop's names", "[advise][optimizer][forloop]") {
    // Adam: the previous denom (100) held while this one's sqrt and quotient (2 x 300) are made
    CHECK(most("torch.optim.adam.Adam", "{}", {100, 300, 50}) == 700);
    // maximize, Adam's form: -grads[i] made while the previous -grad and denom are held
    CHECK(most("torch.optim.adam.Adam", R"({"maximize": true})", {300, 100}) == 3 * 300);
    CHECK(most("torch.optim.adam.Adam", R"({"maximize": true})", {100, 300}) == 100 + 3 * 300);
    // Adamax's `grad = grads[i]` frees the previous decayed grad before -grad is made
    CHECK(most("torch.optim.adamax.Adamax", R"({"maximize": true, "weight_decay": 1})", {100, 300}) == 2 * 300);
    // Adadelta: std and delta of the previous parameter held while this one's are made
    CHECK(most("torch.optim.adadelta.Adadelta", "{}", {100, 300}) == 100 + 2 * 300);
    // Rprop: the first parameter's clone and sign (400 each); `grad = grads[i]` drops the clone,
    // the old sign is held while the second's product and sign are made (400 + 2 x 800), freed at
    // the rebinding; then its sign, clone and grad.sign() (3 x 800), its masks (200) freed before
    CHECK(most("torch.optim.rprop.Rprop", "{}", {400, 800}) == 3 * 800);
    CHECK(most("torch.optim.rprop.Rprop", "{}", {800, 400}) == 3 * 800);
    // maximize: -grads[i] (800) is made after the previous clone is dropped, beside the old sign
    // (400), then the product and sign: 400 + 3 x 800; the clone replaces -grad after it is made
    CHECK(most("torch.optim.rprop.Rprop", R"({"maximize": true})", {400, 800}) == 400 + 3 * 800);
}

TEST_CASE("ASGD's for-loop holds what the capture of its host step holds", "[advise][optimizer][forloop]") {
    // mhc_torch.capture of Net with ASGD on the host, 2 steps (2026-12-07, torch 2.15): masters,
    // gradient buffers, ax (3 x 24,576 B) and step, eta, mu (18 x 4 B) = 73,800 B, then the loop.
    // Default: new_eta and new_mu (4 B each) held, the next new_eta made beside them: 73,812 B.
    CHECK(most("torch.optim.asgd.ASGD", "{}", kSix, 2) == 12);
    // weight decay: grad + wd x param (4,096) held while the scalars are made: 77,908 B
    CHECK(most("torch.optim.asgd.ASGD", R"({"weight_decay": 0.1, "t0": 0})", kSix, 2) == 4096 + 12);
    // t0 = -1: the first step ends with mu = 1 / max(1, 1 + 1) = 0.5, so the second averages
    // (param.sub(ax), beside the decayed gradient and the last scalars): 82,000 B
    CHECK(most("torch.optim.asgd.ASGD", R"({"weight_decay": 0.1, "t0": -1})", kSix, 1) == 4096 + 12);
    CHECK(most("torch.optim.asgd.ASGD", R"({"weight_decay": 0.1, "t0": -1})", kSix, 2) == 2 * 4096 + 8);
    // mu = 1 / 1.00000001 is 1 in fp32: no averaging
    CHECK(most("torch.optim.asgd.ASGD", R"({"t0": -0.00000001})", kSix, 2) == 12);
}

TEST_CASE("for-loop steps not modelled fall back", "[advise][optimizer][forloop]") {
    for (const char* defaults : {R"({"capturable": true})", R"({"differentiable": true})", R"({"weight_decay": "x"})"})
        for (const char* cls : {"torch.optim.adam.Adam", "torch.optim.rprop.Rprop", "torch.optim.adagrad.Adagrad"})
            CHECK_FALSE(forloop_program(cls, nlohmann::json::parse(defaults), 1));
    for (const char* cls : {"torch.optim.sgd.SGD", "mylib.Adam"})
        CHECK_FALSE(forloop_program(cls, nlohmann::json::object(), 1));
    CHECK_FALSE(forloop_program("torch.optim.asgd.ASGD", nlohmann::json::parse(R"({"t0": null})"), 1));
    CHECK_FALSE(forloop_program("torch.optim.radam.RAdam", nlohmann::json::parse(R"({"betas": [0.9, 1]})"), 1));
}

TEST_CASE("Adagrad's sparse branch holds what the capture of its host step holds", "[advise][optimizer][forloop]") {
    const auto program = forloop_program("torch.optim.adagrad.Adagrad", nlohmann::json::object(), 1);
    REQUIRE(program);
    using mhc::advise::LoopParam;
    // mhc_torch.capture of nn.Embedding(4096, 64, sparse=True) (1,048,576 B) looking up 256 ids,
    // then Linear(64, 1): the host step's coalesce (2,048 B of indices, 65,536 B of values), the
    // mask's values and the quotient at once: 198,656 B above the masters, state and host gradient
    // (2026-12-07, torch 2.15); the Linear's std (256 B) comes after the quotient is freed
    const LoopParam table{1048576, 2048, 65536};
    CHECK(forloop_most({table, {256, 0, 0}, {4, 0, 0}}, *program) == 2048 + 3 * 65536);
    // a dense parameter's std (300) is held while the sparse branch coalesces (48) and makes the
    // pow, then the mask (40 each, one at a time); the mask replaces it
    CHECK(forloop_most({{300, 0, 0}, {1000, 8, 40}}, *program) == 300 + 48 + 40);
    // a second sparse parameter's coalesce is made while the first's coalesced gradient and std
    // values (88) are bound; grad_indices and grad_values rebound free the first's
    CHECK(forloop_most({{1000, 8, 40}, {1000, 8, 40}}, *program) == 88 + 48);
}

TEST_CASE("the host step of an optimizer not modelled is said in one line", "[advise][optimizer][forloop]") {
    using mhc::advise::host_step_note;
    mhc::advise::CaptureInfo info;
    info.optimizer_class = "__main__.Lion";   // a class of the user's own: its step is unknown
    info.optimizer_defaults = R"({"lr": 0.0001})";
    CHECK(host_step_note(info) ==
          "the optimizer on the host: __main__.Lion's host step is not modelled: its temporaries are taken as its "
          "recorded step's, in fp32; --verify measures them");
    info.optimizer_defaults = R"({"foreach": true})";
    CHECK(host_step_note(info).find("(its foreach kept)") != std::string::npos);
    info.optimizer_defaults = R"({"fused": true})";   // fused on the host as on the device
    CHECK(host_step_note(info).empty());
    for (const char* cls : {"torch.optim.adamw.AdamW", "torch.optim.sgd.SGD", "torch.optim.asgd.ASGD"}) {
        info.optimizer_class = cls;
        info.optimizer_defaults = R"({"foreach": true})";
        CHECK(host_step_note(info).empty() == (std::string(cls) != "torch.optim.asgd.ASGD"));
        info.optimizer_defaults = R"({"foreach": null})";
        CHECK(host_step_note(info).empty());
    }
}

TEST_CASE("a capture that recorded no optimizer class or defaults gets no host step note", "[advise][optimizer][forloop]") {
    CHECK(mhc::advise::host_step_note(mhc::advise::CaptureInfo{}).empty());
}
