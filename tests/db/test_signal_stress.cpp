// Issue 26 item 3: an interrupted command leaves either its whole output and exits 0, or nothing and
// exits 128 + the signal, and never a hidden temporary. Hundreds of SIGINT/SIGTERM at random
// moments over small, fast inputs for export, merge, import and predict --out-dir (every file or
// none), bounded in time.
//
// How a moment is chosen: each command is first run uninterrupted (three times, the median is
// its duration T); each interruption then comes after a random delay in [0, 1.25 T] from the
// start (seeded, the seed printed), so the signal lands anywhere from before main() to after the
// exit. What follows waits on events only: waitpid for the process's end. Every process's status
// is then compared with the folder: exit 0 <=> the whole output (readable, every file of it), exit
// 128 + signal (or death by the signal, before the command took it over) <=> nothing but the
// inputs. Anything else (another status, a temporary, a partial set) is counted and fails the test.
#include "db_test_util.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

extern char** environ;

using namespace lockstep::core;
using namespace dbtest;
namespace test = lockstep::test;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Starts the CLI with its output discarded; returns its pid.
pid_t startCli(const std::vector<std::string>& args)
{
    std::vector<std::string> all{test::cliPath()};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    // The test's own signal mask and dispositions are not the child's.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all_;
    sigemptyset(&none);
    sigfillset(&all_);
    posix_spawnattr_setsigmask(&attr, &none);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGHUP})
        sigaddset(&defaults, s);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc == 0 ? pid : -1;
}

// Waits for the process; its status as a shell reports it (128 + signal when killed by one).
int waitStatus(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Command {
    std::string name;
    std::vector<std::string> args;
    std::vector<std::string> outputs; // the entries the whole output consists of (in the folder)
    bool outputIsFolder = false;      // predict --out-dir: one folder holding the files
};

} // namespace

TEST(SignalStress, everyInterruptionLeavesTheWholeOutputOrNothing)
{
    test::TempDir dir;
    const std::string run = dir.file("run.db");
    ASSERT_TRUE(saveRun(makeRun(2, 6), run).has_value());
    const test::Outcome exported = test::lockstep({"export", run, "--chrome", dir.file("trace.json")});
    ASSERT_EQ(exported.exitCode, 0) << exported.describe();
    const std::vector<std::string> inputs{"run.db", "trace.json"};

    const std::vector<Command> commands{
        {"export", {"export", run, "--chrome", dir.file("out.json")}, {"out.json"}},
        {"merge", {"merge", run, "--out", dir.file("out.db")}, {"out.db"}},
        {"import", {"import", dir.file("trace.json"), "--out", dir.file("out.db"), "-q"}, {"out.db"}},
        {"predict", {"predict", run, "--bucket-mb", "1,4", "--out-dir", dir.file("what")}, {"what"}, true},
    };

    const auto clean = [&] {
        for (const std::string& name : test::listDir(dir.path()))
            if (std::find(inputs.begin(), inputs.end(), name) == inputs.end())
                fs::remove_all(dir.file(name));
    };
    // The whole output: every file readable (a run file validates, a trace parses as far as its end).
    const auto whole = [&](const Command& c, std::string& why) {
        if (c.outputIsFolder) {
            const std::vector<std::string> files = test::listDir(dir.file("what"));
            if (files.size() != 2) {
                why = std::to_string(files.size()) + " of 2 predicted files";
                return false;
            }
            for (const std::string& f : files)
                if (f.starts_with(".") || !validateRunFile(dir.file("what/" + f))) {
                    why = "predicted file " + f + " is not a whole run file";
                    return false;
                }
            return true;
        }
        const std::string path = dir.file(c.outputs.front());
        if (c.outputs.front().ends_with(".db")) {
            if (auto v = validateRunFile(path); !v) {
                why = v.error().message;
                return false;
            }
            return true;
        }
        const std::string text = test::readFile(path);
        if (!text.starts_with("{") || text.find_last_not_of(" \n") == std::string::npos
            || text[text.find_last_not_of(" \n")] != '}') {
            why = "the trace is cut";
            return false;
        }
        return true;
    };

    // Each command's duration uninterrupted (median of three), and that it succeeds at all.
    std::vector<double> durationUs;
    for (const Command& c : commands) {
        std::vector<double> t;
        for (int i = 0; i < 3; ++i) {
            const auto t0 = Clock::now();
            const pid_t pid = startCli(c.args);
            ASSERT_GT(pid, 0);
            ASSERT_EQ(waitStatus(pid), 0) << c.name << " fails uninterrupted";
            t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            std::string why;
            ASSERT_TRUE(whole(c, why)) << c.name << ": " << why;
            clean();
        }
        std::sort(t.begin(), t.end());
        durationUs.push_back(t[1]);
    }

    const unsigned seed = std::random_device{}();
    std::printf("seed %u; durations (us):", seed);
    for (double d : durationUs)
        std::printf(" %.0f", d);
    std::printf("\n");
    std::mt19937 rng(seed);
    constexpr int kPerCommand = 100;
    constexpr double kBudgetS = 120; // bounded: stop early on a very slow machine, but not below a floor
    constexpr int kFloor = 40;
    int done = 0, whole0 = 0, nothing = 0, bad = 0;
    std::vector<int> perCommand(commands.size(), 0);
    const auto start = Clock::now();
    for (int i = 0; i < kPerCommand * int(commands.size()); ++i) {
        const size_t k = size_t(i) % commands.size();
        const double elapsedS = std::chrono::duration<double>(Clock::now() - start).count();
        if (elapsedS > kBudgetS && perCommand[k] >= kFloor)
            continue;
        const Command& c = commands[k];
        const int sig = (rng() & 1) ? SIGINT : SIGTERM;
        const auto delay = std::chrono::microseconds(
            int64_t(std::uniform_real_distribution<double>(0, 1.25 * durationUs[k])(rng)));
        const auto t0 = Clock::now();
        const pid_t pid = startCli(c.args);
        ASSERT_GT(pid, 0);
        std::this_thread::sleep_until(t0 + delay); // the random moment (not a wait for anything)
        ::kill(pid, sig);
        const int status = waitStatus(pid);
        ++done;
        ++perCommand[k];

        std::vector<std::string> left = test::listDir(dir.path());
        std::erase_if(left, [&](const std::string& n) { return std::find(inputs.begin(), inputs.end(), n) != inputs.end(); });
        std::string why;
        const std::string what = c.name + " SIG" + (sig == SIGINT ? "INT" : "TERM") + " after "
            + std::to_string(delay.count()) + " us: exit " + std::to_string(status);
        if (status == 0) {
            if (left != c.outputs || !whole(c, why)) {
                ++bad;
                ADD_FAILURE() << what << " but the output is not whole (" << why << "); left: " << left.size();
            } else {
                ++whole0;
            }
        } else if (status == 128 + sig) {
            if (!left.empty()) {
                ++bad;
                std::string names;
                for (const std::string& n : left)
                    names += " " + n;
                ADD_FAILURE() << what << " but something was left:" << names;
            } else {
                ++nothing;
            }
        } else {
            ++bad;
            ADD_FAILURE() << what << " (neither 0 nor 128 + the signal)";
        }
        clean();
    }
    const double wallS = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("%d interruptions in %.1f s: %d whole output + exit 0, %d nothing + 128+signal, %d leftovers or "
                "mismatches\n",
                done, wallS, whole0, nothing, bad);
    for (size_t k = 0; k < commands.size(); ++k)
        std::printf("  %s: %d\n", commands[k].name.c_str(), perCommand[k]);
    EXPECT_EQ(bad, 0);
    EXPECT_GE(done, kFloor * int(commands.size()));
    // The moments were spread: both outcomes happened (else the delays missed the command).
    EXPECT_GT(whole0, 0);
    EXPECT_GT(nothing, 0);
}
