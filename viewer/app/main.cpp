// mhc-view TRACE [--screenshot out.png [--run ID]... [--range T0:T1] [--view V] [--size WxH]]
// Interactive: a GLFW window; the trace loads on a worker thread and errors show in the window.
// Screenshot: loads first (bad trace or run id: one line on stderr, exit 2), renders a few
// frames off-screen in a hidden window and writes the last one as a PNG.
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <GLFW/glfw3.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "app.hpp"
#include "mhc/common/command_line.hpp"
#include "mhc/common/cut_short.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/help_format.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/trace/model.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "screenshot.hpp"

namespace {

// One line on stderr whatever it quotes, as mhc's (docs/cli.md): a newline, tab or escape in a file
// name or a value is shown as '?' (`mhc-view $'a\nb.db'` was said over two lines), as is any
// character mhc::printable hides.
void say(const std::string& what) {
    std::fprintf(stderr, "mhc-view: %s\n", mhc::message_line(what).c_str());
}

void style() {
    ImGui::StyleColorsDark();
    ImGuiStyle& s = ImGui::GetStyle();
    s.WindowPadding = {8, 6};
    s.FrameRounding = 3;
    s.TabRounding = 3;
    s.Colors[ImGuiCol_WindowBg] = ImGui::ColorConvertU32ToFloat4(IM_COL32(30, 30, 34, 255));
}

// Screenshot mode's scripted input, before frame n is built: each --click is the mouse arriving
// on one frame, a press on the next and a release on the one after, as a user's (a popup opened
// by the click before is drawn and hoverable by then: pressing on the frame the mouse arrived hit
// the window under a combo's list), after two frames that settle the layout; --step presses Go
// after them (the toolbar's field set to the step).
constexpr int kFramesPerClick = 3;
// --type's text as one key a frame: a character, or Enter ('\n') or Esc ('\x1b', printf '\e') and
// a frame without a key (released before it is pressed again).
constexpr char kEscape = '\x1b';
std::vector<int> typed_keys(const std::string& text) {
    std::vector<int> keys;
    for (const char ch : text) {
        keys.push_back(static_cast<unsigned char>(ch));
        if (ch == '\n' || ch == kEscape) keys.push_back(0);
    }
    return keys;
}
// One press of --keys: the key, Shift held with it, and the character it types (0: none).
struct KeyPress {
    int key = 0;
    bool shift = false;
    unsigned typed = 0;
};
// --keys as a terminal sends them: a character a key (a letter, a digit, a space, a tab, a newline
// for Enter), ESC [ A, B, C, D the arrows up, down, right, left, ESC [ Z Shift+Tab, ESC alone Esc.
// What no key sends is refused (mhc::Error, the one form): it was pressed as nothing, unsaid.
std::vector<KeyPress> key_presses(const std::string& keys) {
    std::vector<KeyPress> presses;
    for (size_t at = 0; at < keys.size(); ++at) {
        const char ch = keys[at];
        const auto letter = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (ch == kEscape && at + 2 < keys.size() && keys[at + 1] == '[') {
            static const std::string kFinals = "ABCDZ";
            static const std::array<int, 5> kCodes{GLFW_KEY_UP, GLFW_KEY_DOWN, GLFW_KEY_RIGHT, GLFW_KEY_LEFT, GLFW_KEY_TAB};
            const size_t which = kFinals.find(keys[at + 2]);
            if (which == std::string::npos)
                throw mhc::Error(mhc::refused_value("--keys", keys, "ESC [ " + keys.substr(at + 2, 1) +
                                                                         " is no key; ESC [ A, B, C, D are the arrows up, "
                                                                         "down, right, left and ESC [ Z Shift+Tab"));
            presses.push_back({kCodes[which], keys[at + 2] == 'Z', 0});
            at += 2;
        } else if (ch == '\t') {
            presses.push_back({GLFW_KEY_TAB});
        } else if (ch == '\n') {
            presses.push_back({GLFW_KEY_ENTER});
        } else if (ch == kEscape) {
            presses.push_back({GLFW_KEY_ESCAPE});
        } else if (ch == ' ') {
            presses.push_back({GLFW_KEY_SPACE, false, ' '});
        } else if (ch >= '0' && ch <= '9') {
            presses.push_back({GLFW_KEY_0 + (ch - '0'), false, static_cast<unsigned>(ch)});
        } else if (letter >= 'a' && letter <= 'z') {
            presses.push_back({GLFW_KEY_A + (letter - 'a'), false, static_cast<unsigned>(ch)});
        } else {
            throw mhc::Error(mhc::refused_value(
                "--keys", keys,
                "'" + std::string(1, ch) +
                    "' is no key --keys presses; use letters, digits, space, tab, newline (Enter), ESC (Esc), "
                    "ESC [ A, B, C, D (the arrows) and ESC [ Z (Shift+Tab)"));
        }
    }
    return presses;
}
// The arrows, Tab, Space, the digits and letters: up on every frame but a press's own.
void release_keys(ImGuiIO& io) {
    for (const int code : {GLFW_KEY_TAB, GLFW_KEY_SPACE, GLFW_KEY_UP, GLFW_KEY_DOWN, GLFW_KEY_LEFT, GLFW_KEY_RIGHT})
        io.KeysDown[code] = false;
    for (int code = GLFW_KEY_0; code <= GLFW_KEY_9; ++code) io.KeysDown[code] = false;
    for (int code = GLFW_KEY_A; code <= GLFW_KEY_Z; ++code) io.KeysDown[code] = false;
    io.KeyShift = false;
}

void simulate_input(mhc::viewer::App& app, int n) {
    ImGuiIO& io = ImGui::GetIO();
    const int k = n - 2;
    if (k >= 0 && k / kFramesPerClick < static_cast<int>(app.opt.clicks.size())) {
        const auto& [x, y] = app.opt.clicks[static_cast<size_t>(k / kFramesPerClick)];
        io.MousePos = {x, y};
        io.MouseDown[0] = k % kFramesPerClick == 1;
        return;
    }
    // After the clicks the mouse rests on --hover (its tooltip is in the saved frame), else leaves.
    io.MousePos = app.opt.hover ? ImVec2{app.opt.hover->first, app.opt.hover->second} : ImVec2{-FLT_MAX, -FLT_MAX};
    if (app.opt.go_step && k == kFramesPerClick * static_cast<int>(app.opt.clicks.size())) {
        app.step_input = app.opt.step;
        app.go_to_step(app.opt.step);
    }
    // --find: typed into the timeline's find field and Enter pressed, one per frame after the clicks.
    const int find = k - kFramesPerClick * static_cast<int>(app.opt.clicks.size()) - (app.opt.go_step ? 1 : 0);
    if (find >= 0 && find < static_cast<int>(app.opt.finds.size())) {
        std::snprintf(app.find_text, sizeof app.find_text, "%s", app.opt.finds[static_cast<size_t>(find)].c_str());
        app.find_next();
    }
    // --find-back: Shift+Enter, once a frame after them.
    const int back = find - static_cast<int>(app.opt.finds.size());
    if (back >= 0 && back < app.opt.find_back) app.find_next(true);
    // --type: the field focused on the first frame after them (active from the next), then a letter a
    // frame, as typed; a newline is Enter pressed on one frame and released on the next.
    const int typed = back - app.opt.find_back;
    if (typed == 0 && !app.opt.typed.empty()) app.focus_find = true;
    io.KeysDown[GLFW_KEY_ENTER] = false;
    io.KeysDown[GLFW_KEY_ESCAPE] = false;
    const std::vector<int> keys = typed_keys(app.opt.typed);
    if (typed >= 2 && typed < 2 + static_cast<int>(keys.size())) {
        const int key = keys[static_cast<size_t>(typed - 2)];
        if (key == '\n') io.KeysDown[GLFW_KEY_ENTER] = true;
        else if (key == kEscape) io.KeysDown[GLFW_KEY_ESCAPE] = true;
        else if (key > 0) io.AddInputCharacter(static_cast<unsigned>(key));
    }
    // --keys: a key down on one frame, up on the next, after the typing.
    const int pressed = typed - (app.opt.typed.empty() ? 0 : 2 + static_cast<int>(keys.size()));
    release_keys(io);
    const std::vector<KeyPress> presses = key_presses(app.opt.keys);
    if (pressed >= 0 && pressed < 2 * static_cast<int>(presses.size()) && pressed % 2 == 0) {
        const KeyPress& press = presses[static_cast<size_t>(pressed / 2)];
        io.KeysDown[press.key] = true;
        io.KeyShift = press.shift;
        if (press.typed != 0) io.AddInputCharacter(press.typed);
    }
}

// GLFW's reason while it starts, said in the one line that says what to do instead (it was a
// "GLFW: X11: ..." line, then "cannot open a display" with no way forward).
std::string glfw_reason;

// The frame drawn last as the PNG, and the layout beside it: 0, or the exit status said.
int save_screenshot(const mhc::viewer::App& app, int fw, int fh) {
    try {
        mhc::viewer::write_framebuffer_png(app.opt.screenshot, fw, fh);
        // Whole or not at all (an ofstream whose failure went unchecked).
        if (!app.opt.layout.empty())
            mhc::write_file_atomically(app.opt.layout, app.layout.dump(1) + "\n", mhc::IfExists::Replace);
    } catch (const mhc::Error& e) {
        say(e.what());
        return e.exit_code();
    }
    return 0;
}

int run_gui(mhc::viewer::App& app, bool screenshot) {
    glfwSetErrorCallback([](int, const char* what) {
        glfw_reason = what;
        while (!glfw_reason.empty() && glfw_reason.back() == ' ') glfw_reason.pop_back();   // "display %s" of ""
    });
    if (!glfwInit()) {
        const std::string& trace = app.opt.trace;
        say("cannot open a window: " + (glfw_reason.empty() ? std::string("no display") : glfw_reason) +
            (screenshot ? "; without a screen run it under xvfb-run -a"
                        : "; without a screen: xvfb-run -a mhc-view " + trace +
                              " --screenshot out.png writes a view as a PNG, mhc info " + trace +
                              " prints the summary"));
        return 1;
    }
    glfwSetErrorCallback([](int, const char* what) { say(std::string("GLFW: ") + what); });
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GL_TRUE);
    if (screenshot) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
    std::string title = "mhc-view " + app.opt.trace;
    GLFWwindow* w = glfwCreateWindow(app.opt.width, app.opt.height, title.c_str(), nullptr, nullptr);
    if (!w) {
        say("cannot create an OpenGL 3.3 window");
        glfwTerminate();
        return 1;
    }
    glfwMakeContextCurrent(w);
    glfwSwapInterval(screenshot ? 0 : 1);
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGui::GetIO().IniFilename = nullptr;
    // The keyboard reaches every field: Tab (Shift+Tab) and the arrows move among the toolbar's
    // fields and buttons, Space or Enter uses the one focused (Tab alone reached the text fields).
    ImGui::GetIO().ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
    style();
    ImGui_ImplGlfw_InitForOpenGL(w, true);
    ImGui_ImplOpenGL3_Init("#version 330");

    int rc = 0;
    // Screenshot mode: a few frames let tab selection and layout settle; each --click takes an
    // arrival, a press and a release frame; the last frame is saved.
    const int clicks = static_cast<int>(app.opt.clicks.size());
    const int frames = 4 + kFramesPerClick * clicks + (app.opt.go_step ? 1 : 0) +
                       static_cast<int>(app.opt.finds.size()) + app.opt.find_back +
                       (app.opt.typed.empty() ? 0 : 2 + static_cast<int>(typed_keys(app.opt.typed).size())) +
                       2 * static_cast<int>(key_presses(app.opt.keys).size());
    mhc::viewer::FramePacer pacer;
    double wait = 0;
    for (int n = 0; screenshot ? n < frames : !glfwWindowShouldClose(w); ++n) {
        // Interactive: draw while something moves or input arrives, else wait for events (an
        // idle window costs nothing); an early return from the wait means input came. Frames
        // drawn without waiting (settling, animating) do not count as input.
        bool had_input = n == 0;
        if (screenshot || wait <= 0) {
            glfwPollEvents();
        } else {
            double t0 = glfwGetTime();
            glfwWaitEventsTimeout(wait);
            had_input = glfwGetTime() - t0 < wait * 0.99;
        }
        auto start = std::chrono::steady_clock::now();
        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        if (screenshot) simulate_input(app, n);
        ImGui::NewFrame();
        int fw, fh;
        glfwGetFramebufferSize(w, &fw, &fh);
        app.frame(static_cast<float>(fw), static_cast<float>(fh));
        ImGui::Render();
        // Frames that read a run from the file are loading, not drawing: not in the frame time.
        if (!app.loaded_this_frame && !app.loading)
            app.frame_stats.add(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        // A screenshot rasterizes its saved frame alone: the frames before it only move the
        // layout and the input (each one drawn took about 40 ms of CPU at 1400x700 under Mesa's
        // llvmpipe, 2026-12-07).
        if (screenshot && n < frames - 1) continue;
        glViewport(0, 0, fw, fh);
        glClearColor(30 / 255.f, 30 / 255.f, 34 / 255.f, 1);
        glClear(GL_COLOR_BUFFER_BIT);
        ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
        if (screenshot) rc = save_screenshot(app, fw, fh);
        glfwSwapBuffers(w);
        if (!screenshot) wait = pacer.next_wait(had_input, app.animating());
    }
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(w);
    glfwTerminate();
    return rc;
}

// The words of the options read after CLI11 parses them (as mhc reads its own), and the two
// options whose use is asked afterwards.
struct Given {
    std::string size, device = "auto", hover;
    std::vector<std::string> clicks;
    CLI::Option* device_option = nullptr;
    CLI::Option* step = nullptr;
};

void add_options(CLI::App& cli, mhc::viewer::Options& options, Given& given) {
    // Help as mhc's (docs/cli.md, "Help"): wrapped at the terminal's width, each value named as
    // users write it (TRACE, FILE, X,Y), defaults as [default: ...].
    cli.formatter(std::make_shared<mhc::HelpFormatter>(mhc::help_width()));
    // The keys, as the toolbar's (?) says them: Esc closed things without a word in the help.
    cli.footer(
        "Keys: wheel or W/S zoom, drag or A/D pan, right-drag selects a range, Z or F zooms to the selection, "
        "0 shows the whole trace; Tab (Shift+Tab) moves along the toolbar's fields (an open menu's entries too), "
        "then the view's, its plot and its table's rows, the details pane's, the notes and the view tabs, the "
        "arrows among neighbours (in a table row to row; on the plot left and right pan, up and down zoom), and "
        "Space or Enter uses the one focused (Enter on a kernel's row finds it on the timeline); Ctrl+F or / finds a kernel; N lists the trace's notes; Esc closes the innermost "
        "thing open, one a press (a field, the notes, the range selected, the details).");
    cli.add_option("trace", options.trace, "Trace file (.db: mhc generate, import or record writes one)")->required();
    cli.add_option("--screenshot", options.screenshot,
                   "Render the view off-screen and write it as a PNG, then exit (no screen: under xvfb-run -a)")
        ->type_name("FILE");
    cli.add_option("--run", options.runs,
                   "A stored run to select, by its id (mhc info TRACE lists them); repeat to compare several, the "
                   "first selected")
        ->check(CLI::Validator([](std::string& text) { return mhc::whole_number_refusal(text, false); }, ""))
        ->type_name("ID");
    cli.add_option("--range", options.range, "Time range T0:T1 to open at, e.g. 0:2ms or 1500000:1600000 (ns)")
        ->type_name("RANGE");
    cli.add_option("--view", options.view,
                   "The view to open: timeline, memory, compare, statistics or run (the launcher)")
        ->check(CLI::Validator(
            [](std::string& view) {
                const std::vector<std::string> views{"timeline", "memory", "compare", "statistics", "run"};
                if (std::find(views.begin(), views.end(), view) != views.end()) return std::string();
                return mhc::quoted_value(view) + ": use one of timeline, memory, compare, statistics, run" +
                       mhc::did_you_mean(view, views);
            },
            ""))
        ->type_name("VIEW")
        ->default_str("timeline");
    cli.add_option("--size", given.size, "Window size in pixels")->type_name("WxH")->default_str("1600x900");
    cli.add_option("--families", options.families,
                   "A file of kernel family rules, one 'FAMILY TEXT' per line, checked before the built-in ones "
                   "(docs/viewer.md)")
        ->type_name("FILE");
    cli.add_option("--runs-db", options.runs_db,
                   "Show the runs stored in this file (mhc simulate --runs-db) instead of those in the trace; one "
                   "made for another trace is refused")
        ->type_name("FILE");
    given.device_option = cli.add_option("--device", given.device,
                                         "Whose memory the memory views show: auto (the GPU with the largest peak, as "
                                         "mhc simulate), a GPU number, or -1 for the host's pinned memory");
    cli.add_option("--click", given.clicks,
                   "With --screenshot: a left click at window pixel X,Y before the saved frame (repeat for more)")
        ->type_name("X,Y");
    cli.add_option("--hover", given.hover,
                   "With --screenshot: the mouse at window pixel X,Y in the saved frame (its tooltip)")
        ->type_name("X,Y");
    given.step = cli.add_option("--step", options.step,
                                "Go to this step once the trace is read (the toolbar's step and Go); a step the "
                                "trace lacks is refused");
    cli.add_option("--find", options.finds,
                   "With --screenshot: type TEXT in the timeline's find field and press Enter (again for each one)")
        ->type_name("TEXT");
    cli.add_option("--find-back", options.find_back,
                   "With --screenshot: after the --find presses, press Shift+Enter (the match before) N times")
        ->check(CLI::NonNegativeNumber);
    cli.add_option("--type", options.typed,
                   "With --screenshot: after them, type TEXT in the timeline's find field a letter a frame (its "
                   "matches marked as typed); a newline in TEXT presses Enter")
        ->type_name("TEXT");
    cli.add_option("--keys", options.keys,
                   "With --screenshot: after them, press these keys in turn, a key a frame with no field focused, "
                   "as a terminal sends them: a letter, a digit, a space, a tab, Esc or a newline (Enter); ESC [ A, "
                   "B, C, D the arrows up, down, right, left; ESC [ Z Shift+Tab. E.g. \"$(printf '\\t\\t\\033[Z')\"")
        ->check(CLI::Validator(
            [](std::string& keys) {
                try {
                    key_presses(keys);
                    return std::string();
                } catch (const mhc::Error& e) {   // "--keys: 'VALUE': why", said by CLI11 after the option
                    return std::string(e.what()).substr(std::string("--keys: ").size());
                }
            },
            ""))
        ->type_name("KEYS");
    cli.add_flag("--fit-y", options.fit_y,
                 "Memory curves: the y axis fitted to the bytes in view instead of from 0 B (the toolbar's \"fit y\")");
    cli.add_option("--layout", options.layout, "With --screenshot: write the plot rectangles as JSON (for tests)")
        ->type_name("FILE");
}

// The words checked by mhc's rules (mhc/common/command_line.hpp), before and after CLI11 parses
// them: a flag given a value (--fit-y=1, --help=1) or twice, an option given twice or '', the
// number grammar, said in mhc's words. --fit-y=1 and --fit-y --fit-y were taken, and the others
// said in CLI11's ("--size: At Most 1 required but received 2"). The exit status when mhc-view is
// to stop here (--help, a refusal).
std::optional<int> parse_command_line(CLI::App& cli, const Given& given, int argc, char** argv) {
    namespace line = mhc::command_line;
    const std::vector<std::string> words(argv + 1, argv + argc);
    line::apply_number_grammar(cli);
    given.device_option->type_name("DEVICE")->default_str(given.device);   // auto or a number: read_device
    for (const std::string& said : {line::flag_with_value(cli, words), line::short_with_equals(cli, words)})
        if (!said.empty()) {
            say(said);
            return 2;
        }
    try {
        cli.parse(argc, argv);
    } catch (const CLI::Success& e) {   // --help
        return cli.exit(e);
    } catch (const CLI::ExtrasError&) {
        say(line::unexpected(cli, nullptr));
        return 2;
    } catch (const CLI::RequiredError&) {   // the trace, the only one required: said as mhc says its own
        say("the TRACE argument is required (mhc-view --help)");
        return 2;
    } catch (const CLI::ParseError& e) {   // bad options: one line, exit 2, as `mhc` does
        say(line::missing_value(line::in_our_words(line::path_first(e.what())), cli, words));
        return 2;
    }
    for (const std::string& said :
         {line::empty_value(&cli), line::contrary_flags(&cli, words), line::repeated_flag(cli, nullptr, words)})
        if (!said.empty()) {
            say(said);
            return 2;
        }
    return std::nullopt;
}

// The options that script a screenshot (their help says "With --screenshot"), given without
// --screenshot: refused once their values are read, as mhc refuses an option the others leave with
// nothing to do (the window ignored them without a word). Throws mhc::Error.
void check_screenshot_only(const CLI::App& cli, const mhc::viewer::Options& options) {
    if (!options.screenshot.empty()) return;
    if (cli.get_option("--layout")->count() > 0)
        throw mhc::Error("--layout without --screenshot: it writes the screenshot's plot rectangles; give "
                         "--screenshot FILE, or leave --layout out");
    for (const char* name : {"--click", "--hover", "--find", "--find-back", "--type", "--keys"})
        if (cli.get_option(name)->count() > 0)
            throw mhc::Error(std::string(name) +
                             " without --screenshot: it scripts the screenshot's input; the window takes the mouse "
                             "and the keys from you (give --screenshot FILE, or leave " + name + " out)");
}

// Numbers as mhc reads them (docs/cli.md, "Numbers"): decimal, no '+', space, 0x or exponent.
// Each reader below throws mhc::Error with the refusal.
void read_device(const std::string& device, mhc::viewer::Options& options) {
    if (device == "auto") return;
    const auto parsed =
        mhc::whole_number_refusal(device, true).empty() ? mhc::parse_integer<int>(device) : std::nullopt;
    const int value = parsed.value_or(-2);
    if (value < -1) throw mhc::Error(mhc::refused_value("--device", device, "expected auto, a GPU number or -1 (the host)"));
    options.device = value;
}

// "X,Y" in window pixels, each within 0..65536.
std::optional<std::pair<float, float>> pixel(const std::string& text) {
    float px = -1, py = -1;
    const size_t comma = text.find(',');
    const std::string xs = text.substr(0, comma), ys = comma == std::string::npos ? "" : text.substr(comma + 1);
    if (comma != std::string::npos && mhc::decimal_refusal(xs).empty() && mhc::decimal_refusal(ys).empty()) {
        px = std::strtof(xs.c_str(), nullptr);
        py = std::strtof(ys.c_str(), nullptr);
    }
    if (!(px >= 0 && py >= 0 && px <= 65536 && py <= 65536)) return std::nullopt;
    return std::pair{px, py};
}

void read_pointer(const Given& given, mhc::viewer::Options& options) {
    for (const std::string& click : given.clicks) {
        const auto at = pixel(click);
        if (!at) throw mhc::Error(mhc::refused_value("--click", click, "expected X,Y in window pixels, e.g. 400,300"));
        options.clicks.push_back(*at);
    }
    if (given.hover.empty()) return;
    options.hover = pixel(given.hover);
    if (!options.hover)
        throw mhc::Error(mhc::refused_value("--hover", given.hover, "expected X,Y in window pixels, e.g. 400,300"));
}

void read_size(const std::string& size, mhc::viewer::Options& options) {
    if (size.empty()) return;
    const size_t times = size.find('x');
    const std::string ws = size.substr(0, times), hs = times == std::string::npos ? "" : size.substr(times + 1);
    auto dimension = [](const std::string& text) {
        return mhc::whole_number_refusal(text, false).empty() ? mhc::parse_integer<int>(text).value_or(0) : 0;
    };
    const int width = dimension(ws), height = dimension(hs);
    if (width < 320 || height < 240 || width > 8192 || height > 8192)
        throw mhc::Error(mhc::refused_value("--size", size, "expected WxH between 320x240 and 8192x8192"));
    options.width = width;
    options.height = height;
}

// The outputs checked before the trace is read and the window opens, as mhc checks its own: a
// folder, a device, a descriptor of this process (/dev/stdout), a folder that is not there.
// An output naming an input (--screenshot T.db replaced the trace with a PNG after the frame),
// or both outputs one file, refused as mhc refuses them.
void check_outputs(const mhc::viewer::Options& options) {
    for (const std::string* out : {&options.screenshot, &options.layout}) {
        if (out->empty()) continue;
        for (const std::string* in : {&options.trace, &options.runs_db, &options.families}) mhc::refuse_input_as_output(*in, *out);
        mhc::OutputFile checked(*out, mhc::IfExists::Replace);
    }
    std::error_code ec;
    if (!options.layout.empty() && !options.screenshot.empty() &&
        (std::filesystem::absolute(options.layout, ec).lexically_normal() ==
             std::filesystem::absolute(options.screenshot, ec).lexically_normal() ||
         std::filesystem::equivalent(options.layout, options.screenshot, ec)))
        throw mhc::Error("--layout " + options.layout + " is also --screenshot; write them to two files");
}

// --step naming no step of the trace: refused, with and without --screenshot, before any window
// opens (a screenshot was written with the status line saying "no step 5 in this trace", exit 0;
// the window ignored it). `steps` in order.
void check_step(const mhc::viewer::Options& options, const std::vector<int32_t>& steps) {
    if (!options.go_step || std::binary_search(steps.begin(), steps.end(), options.step)) return;
    std::string have = "it marks no steps";
    if (!steps.empty()) {
        const int32_t low = steps.front(), high = steps.back();
        const bool gaps = int64_t{high} - low + 1 != static_cast<int64_t>(steps.size());
        have = (gaps ? std::to_string(steps.size()) + " steps, " : "its steps: ") + std::to_string(low) +
               (low == high ? "" : (gaps ? " up to " : " to ") + std::to_string(high));
    }
    throw mhc::Error(mhc::refused_value("--step", std::to_string(options.step),
                                        "not a step of " + options.trace + " (" + have + ")"));
}

// Interactive: a file that is no trace (missing, a profiler's JSON, a directory): one line and exit
// 2 before any window opens; the window said it and stayed open. Throws mhc::Error.
void check_before_window(const mhc::viewer::Options& options) {
    const mhc::trace::Reader opened(options.trace);
    if (!options.range.empty()) mhc::viewer::parse_range(options.range);
    if (!options.families.empty()) mhc::viewer::FamilyRules().load_file(options.families);
    // A runs database of another trace, or a --run it does not hold: one line and exit 2,
    // before the window opens (a run id was said in the window, or after "no display").
    const auto runs = mhc::trace::list_all_runs(options.trace, options.runs_db);
    for (const int64_t id : options.runs)
        for (const auto& stale : runs.stale)   // computed from other data: refused by name
            if (stale.id == id) throw mhc::Error(stale.stale);
    for (const int64_t id : options.runs) mhc::viewer::run_index(runs.runs, id, options.trace, options.runs_db);
    if (options.go_step) check_step(options, mhc::viewer::step_numbers(opened));
    if (options.device != mhc::viewer::kAutoMemoryDevice)   // as the loader refuses it in screenshot mode
        mhc::viewer::check_memory_device(options.trace, options.device, mhc::viewer::allocation_devices(opened));
    if (!runs.note.empty()) say("warning: " + runs.note);
}

// Screenshot mode loads the trace now; the window loads it on a worker thread after the checks
// above. The exit status when mhc-view is to stop here.
std::optional<int> start_loading(mhc::viewer::App& app, bool screenshot) {
    const mhc::viewer::Options& options = app.opt;
    if (screenshot) {
        try {
            app.load_now();
            std::vector<int32_t> steps;
            for (const auto& span : app.trace->steps) steps.push_back(span.step);
            check_step(options, steps);
        } catch (const mhc::Error& e) {
            say(mhc::viewer::with_import_hint(e.what(), options.trace));
            return e.exit_code();
        } catch (const std::exception& e) {
            say(e.what());
            return 1;
        }
        return std::nullopt;
    }
    try {
        check_before_window(options);
    } catch (const mhc::Error& e) {
        say(mhc::viewer::with_import_hint(e.what(), options.trace));
        return 2;
    }
    app.step_on_load = options.go_step;
    app.load_async();
    return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
    mhc::viewer::Options options;
    CLI::App cli{"mhc-view: browse a trace and its simulated runs", "mhc-view"};
    Given given;
    add_options(cli, options, given);
    if (const auto stop = parse_command_line(cli, given, argc, argv)) return *stop;
    options.go_step = given.step->count() > 0;
    mhc::trace::set_lock_wait_note(true);   // a locked trace: said once on stderr, never a silent wait
    mhc::catch_files_cut_short("mhc-view");   // a trace truncated while read: one line, exit 2 (it was SIGBUS)
    try {
        // the MHC_* variables the viewer reads, as mhc checks them: before any window
        mhc::trace::check_environment();
        mhc::sim::Config sim_defaults;
        mhc::sim::apply_environment(sim_defaults, {});
        read_device(given.device, options);
        read_pointer(given, options);
        read_size(given.size, options);
        check_outputs(options);
        check_screenshot_only(cli, options);
    } catch (const mhc::Error& e) {
        say(e.what());
        return 2;
    }
    const bool screenshot = !options.screenshot.empty();
    mhc::viewer::App app(options);
    if (const auto stop = start_loading(app, screenshot)) return *stop;
    return run_gui(app, screenshot);
}
