// The launcher (lockstep/job/launcher.h) through its API, as `lockstep record` uses it, with a
// worker command that is not Lockstep's trainer (shard_worker.cpp: a real process that writes a
// real shard and speaks the protocol). No LibTorch: these run in the headless build too.
#include "test_support.h"

#include "lockstep/core/run_db.h"
#include "lockstep/job/launcher.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

using namespace lockstep;
using lockstep::test::contains;

namespace {

job::LaunchOptions options(const std::string& out, int nproc, std::vector<std::string> args)
{
    job::LaunchOptions o;
    o.nproc = nproc;
    o.out = out;
    o.worker.argv = {SHARD_WORKER};
    o.worker.argv.insert(o.worker.argv.end(), args.begin(), args.end());
    o.progress = job::ProgressStyle::None;
    o.graceS = 1;
    o.hangTimeoutS = 30;
    o.stepsPlanned = 3;
    return o;
}

} // namespace

TEST(JobLauncher, AnyCommandGetsTheTorchrunEnvironment)
{
    test::TempDir dir;
    const std::string envOut = dir.file("env.txt");
    auto o = options(dir.file("run.db"), 3, {"--steps", "3", "--env-out", envOut});
    o.runName = "generic";
    // The command's own variables reach every rank; the launcher's own (RANK) cannot be overridden.
    o.worker.env = {"OMP_NUM_THREADS=7", "RANK=99", "LOCKSTEP_TEST_VAR=x"};
    auto r = job::launchRun(o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->success) << r->cause;
    EXPECT_TRUE(r->haveRunFile);
    EXPECT_EQ(r->exitCodes, (std::vector<int>{0, 0, 0}));
    // One line per rank: RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
    // LOCKSTEP_RUN_NAME, the rendezvous file inside the shard folder, OMP_NUM_THREADS, the
    // command's own variable.
    std::istringstream lines(test::readFile(envOut));
    std::set<int> ranks;
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream f(line);
        int rank = -1, world = 0, local = -1, localWorld = 0, port = 0;
        std::string addr, name, store, omp, var;
        f >> rank >> world >> local >> localWorld >> addr >> port >> name >> store >> omp >> var;
        ranks.insert(rank);
        EXPECT_EQ(world, 3);
        EXPECT_EQ(local, rank);
        EXPECT_EQ(localWorld, 3);
        EXPECT_EQ(addr, "127.0.0.1");
        EXPECT_GT(port, 0);
        EXPECT_EQ(name, "generic");
        EXPECT_EQ(store, "store-in-shards");
        EXPECT_EQ(omp, "7");
        EXPECT_EQ(var, "x");
    }
    EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
    auto run = core::loadRun(dir.file("run.db"));
    ASSERT_TRUE(run) << run.error().message;
    EXPECT_EQ(run->config.status, core::RunStatus::Completed);
    EXPECT_EQ(run->config.worldSize, 3);
    EXPECT_EQ(run->config.name, "generic");
    EXPECT_EQ(run->steps.size(), 9u);
    EXPECT_EQ(r->merge.ranks, 3);
    // Nothing left beside the run file: no shard folder, no -wal.
    EXPECT_EQ(test::listDir(dir.path()), (std::vector<std::string>{"env.txt", "run.db"}));
}

TEST(JobLauncher, AFailedRankIsTheCauseAndCompletedStepsStay)
{
    test::TempDir dir;
    auto r = job::launchRun(options(dir.file("run.db"), 2, {"--steps", "50", "--fail", "1:2"}));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->success);
    EXPECT_TRUE(contains(r->cause, "rank 1 failed at step 2: injected failure at step 2")) << r->cause;
    EXPECT_EQ(r->exitCodes[1], 1);
    auto run = core::loadRun(dir.file("run.db"));
    ASSERT_TRUE(run);
    EXPECT_EQ(run->config.status, core::RunStatus::Failed);
    EXPECT_EQ(run->config.failureCause, r->cause);
    int rank1Steps = 0;
    for (const auto& s : run->steps)
        rank1Steps += s.rank == 1;
    EXPECT_EQ(rank1Steps, 2); // steps 0 and 1
}

TEST(JobLauncher, ASilentDeathIsNamedWithItsLastWords)
{
    test::TempDir dir;
    auto r = job::launchRun(options(dir.file("run.db"), 3, {"--steps", "50", "--die", "2:1"}));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->success);
    EXPECT_EQ(r->cause, "rank 2 was killed by SIGKILL at step 1: about to die");
    EXPECT_EQ(r->exitCodes[2], 128 + 9);
    EXPECT_LT(r->stopS, 10); // grace 1 s, SIGTERM, SIGKILL 2 s later at most
}

TEST(JobLauncher, TheHangWatchdogStopsAStuckJob)
{
    test::TempDir dir;
    auto o = options(dir.file("run.db"), 2, {"--steps", "50", "--hang", "1:1"});
    o.hangTimeoutS = 1;
    o.startupTimeoutS = 600; // start-up on a loaded machine may take longer than the 1 s
    auto r = job::launchRun(o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->success);
    EXPECT_TRUE(contains(r->cause, "hung: no progress from any rank for 1 s (rank 1 stuck at step 1)")) << r->cause;
    auto run = core::loadRun(dir.file("run.db"));
    ASSERT_TRUE(run);
    EXPECT_EQ(run->config.status, core::RunStatus::Failed);
}

// Before the first step the watchdog waits for start-up's own limit, and says so.
TEST(JobLauncher, AJobThatNeverStepsIsStoppedAfterTheStartupLimit)
{
    test::TempDir dir;
    auto o = options(dir.file("run.db"), 2, {"--steps", "50", "--hang", "0:0", "--hang", "1:0"}); // neither steps
    o.hangTimeoutS = 0.5;
    o.startupTimeoutS = 3;
    auto r = job::launchRun(o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->success);
    EXPECT_TRUE(contains(r->cause, "hung: no rank reported a step in the first 3 s")) << r->cause;
}

TEST(JobLauncher, AWorkerWithoutProtocolLinesStillRuns)
{
    test::TempDir dir;
    auto o = options(dir.file("run.db"), 2, {"--steps", "3", "--silent"});
    o.hangTimeoutS = 0; // no progress lines: nothing to watch
    auto r = job::launchRun(o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->success) << r->cause;
    auto run = core::loadRun(dir.file("run.db"));
    ASSERT_TRUE(run);
    EXPECT_EQ(run->steps.size(), 6u);
}

TEST(JobLauncher, BadOptionsAreRefusedBeforeAnythingStarts)
{
    test::TempDir dir;
    const std::string out = dir.file("run.db");
    auto o = options(out, 0, {});
    EXPECT_EQ(job::launchRun(o).error().message, "--nproc: 0 is out of range (1 to 512)");
    o = options(out, 2, {});
    o.graceS = std::nan("");
    EXPECT_TRUE(contains(job::launchRun(o).error().message, "--grace-s: expected a finite number"));
    o = options(out, 2, {});
    o.hangTimeoutS = std::numeric_limits<double>::infinity();
    EXPECT_TRUE(contains(job::launchRun(o).error().message, "--hang-timeout-s"));
    o = options(out, 2, {});
    o.worker.argv = {dir.file("no-such-worker")};
    EXPECT_TRUE(contains(job::launchRun(o).error().message, "cannot be started"));
    test::writeFile(out, "keep me");
    o = options(out, 2, {});
    EXPECT_TRUE(contains(job::launchRun(o).error().message, "already exists"));
    EXPECT_EQ(test::readFile(out), "keep me");
    EXPECT_EQ(test::listDir(dir.path()), std::vector<std::string>{"run.db"}); // no shard folder left
}

TEST(JobLauncher, ForceReplacesTheRunOnlyAtTheEnd)
{
    test::TempDir dir;
    const std::string out = dir.file("run.db");
    core::Run old;
    old.config.name = "old";
    ASSERT_TRUE(core::saveRun(old, out));
    auto o = options(out, 2, {"--steps", "2"});
    o.force = true;
    auto r = job::launchRun(o);
    ASSERT_TRUE(r && r->success);
    auto run = core::loadRun(out);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->config.name, "run");
    EXPECT_EQ(run->steps.size(), 4u);
}

// Audit #2: with --force, a job that failed before its first step replaced a good run with an
// empty failed one. The old run stays until a run with at least one step replaces it; a run that
// recorded steps and then failed still replaces it (marked failed).
TEST(JobLauncher, ForceKeepsTheOldRunWhenNoStepWasRecorded)
{
    test::TempDir dir;
    const std::string out = dir.file("run.db");
    core::Run old;
    old.config.name = "old";
    ASSERT_TRUE(core::saveRun(old, out));
    const std::string before = test::readFile(out);
    auto o = options(out, 2, {"--steps", "5", "--fail", "0:0", "--fail", "1:0"});
    o.force = true;
    auto r = job::launchRun(o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->success);
    EXPECT_FALSE(r->haveRunFile);
    EXPECT_TRUE(contains(r->cause, "the existing run file was kept")) << r->cause;
    EXPECT_TRUE(test::readFile(out) == before) << "the old run was replaced";
    EXPECT_EQ(test::listDir(dir.path()), std::vector<std::string>{"run.db"});

    o = options(out, 2, {"--steps", "50", "--fail", "1:2"});
    o.force = true;
    r = job::launchRun(o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->success);
    EXPECT_TRUE(r->haveRunFile);
    auto run = core::loadRun(out);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->config.status, core::RunStatus::Failed);
    EXPECT_GE(run->steps.size(), 2u);
}

// Audit #1 and #3: `record --out s.py --force -- s.py` replaced the script with a run database;
// an output that is a device was replaced by a file. Both refused before anything starts.
TEST(JobLauncher, TheRunFileIsNeverAnInputOrADevice)
{
    test::TempDir dir;
    const std::string script = dir.file("s.py");
    test::writeFile(script, "print('hello')\n");
    auto o = options(script, 2, {});
    o.force = true;
    o.inputs = {script, "--lr", "0.1"};
    auto r = job::launchRun(o);
    ASSERT_FALSE(r);
    EXPECT_TRUE(contains(r.error().message, "is also an input")) << r.error().message;
    EXPECT_EQ(test::readFile(script), "print('hello')\n");
    // A FIFO stands for every special file (a device such as /dev/full: a test must not risk one).
    const std::string fifo = dir.file("pipe");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    o = options(fifo, 2, {});
    o.force = true;
    r = job::launchRun(o);
    ASSERT_FALSE(r);
    EXPECT_TRUE(contains(r.error().message, "not a regular file")) << r.error().message;
    EXPECT_TRUE(std::filesystem::is_fifo(fifo));
    EXPECT_EQ(test::listDir(dir.path()), (std::vector<std::string>{"pipe", "s.py"}));
}
