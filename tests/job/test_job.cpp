// The job library without processes: the flag table and its checks, the progress protocol, the
// failure ranking, the shard layout and the line splitter. Golden values are written out by hand.
#include "test_support.h"

#include "lockstep/core/run_db.h"
#include "lockstep/job/failure.h"
#include "lockstep/job/flags.h"
#include "lockstep/job/process.h"
#include "lockstep/job/progress.h"
#include "lockstep/job/shard_layout.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <set>

using namespace lockstep;
using namespace lockstep::job;
using lockstep::test::contains;

namespace {
// Wait statuses as waitpid reports them: exit status in bits 8-15; a signal in the low 7 bits.
constexpr int exitedWith(int code) { return code << 8; }
constexpr int killedBy(int sig) { return sig; }
} // namespace

// ---- the flag table -----------------------------------------------------------------------------

TEST(Flags, EveryFlagIsDeclaredOnceAndComplete)
{
    std::set<std::string_view> names, keys;
    for (const Flag& f : trainingFlags()) {
        EXPECT_TRUE(names.insert(f.name).second) << f.name << " declared twice";
        EXPECT_TRUE(f.name.starts_with("--")) << f.name;
        EXPECT_FALSE(f.help.empty()) << f.name;
        EXPECT_FALSE(f.label.empty()) << f.name;
        EXPECT_TRUE(f.store && f.text) << f.name;
        // The help is all a user reads (--help, the panel's tooltip): it names every choice.
        for (std::string_view c : f.choices)
            EXPECT_TRUE(contains(f.help, c)) << f.name << " help does not name " << c;
        if (f.recorded == Recorded::Extra) {
            EXPECT_TRUE(keys.insert(f.configKey).second) << f.configKey << " used twice";
        }
        // The default parses and passes its own flag's check (or is the "off" state: "").
        const std::string def = f.text(TrainingOptions{});
        if (!def.empty() && !(f.type == FlagType::Number && f.minOpen && def == formatNumber(f.min))) {
            EXPECT_TRUE(parseFlagValue(f, def)) << f.name << " default " << def;
        }
    }
    EXPECT_EQ(findFlag("--layers")->type, FlagType::Integer);
    EXPECT_EQ(findFlag("--nope"), nullptr);
}

TEST(Flags, ValuesAreCheckedWithShortMessages)
{
    const Flag& layers = *findFlag("--layers");
    EXPECT_EQ(parseFlagValue(layers, "8")->integer, 8);
    EXPECT_EQ(parseFlagValue(layers, "5000").error().message, "--layers: 5000 is out of range (1 to 1024)");
    EXPECT_EQ(parseFlagValue(layers, "2.5").error().message, "--layers: expected a whole number, got '2.5'");
    EXPECT_FALSE(parseFlagValue(layers, "99999999999999999999999")); // beyond int64: out of range, not a crash
    const Flag& bucket = *findFlag("--bucket-mb");
    EXPECT_EQ(parseFlagValue(bucket, "0.5")->number, 0.5);
    for (const char* bad : {"nan", "inf", "-1", "0", "1e400", "", "1x"})
        EXPECT_FALSE(parseFlagValue(bucket, bad)) << bad;
    EXPECT_EQ(parseFlagValue(bucket, "nan").error().message, "--bucket-mb: expected a finite number, got 'nan'");
    // A 300-digit value is not echoed back in full, and bounds read as numbers, not as 1.79e308.
    const std::string huge(300, '9');
    const std::string msg = parseFlagValue(bucket, huge).error().message;
    EXPECT_LT(msg.size(), 100u) << msg;
    EXPECT_EQ(parseFlagValue(*findFlag("--straggler"), "1:1e20").error().message,
              "--straggler MS: 1e20 is out of range (0 to 600000)");
    EXPECT_EQ(parseFlagValue(*findFlag("--model"), "resnet").error().message,
              "--model: 'resnet' is not one of mlp, transformer, convnet");
    const Flag& crash = *findFlag("--crash");
    auto c = parseFlagValue(crash, "1:5");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->rank, 1);
    EXPECT_EQ(c->integer, 5);
    EXPECT_FALSE(parseFlagValue(crash, "1:2.5")); // a step is a whole number
    EXPECT_FALSE(parseFlagValue(crash, "1:-1"));
    EXPECT_FALSE(parseFlagValue(*findFlag("--lr"), "0"));
    EXPECT_FALSE(parseFlagValue(*findFlag("--timeout-s"), "nan"));
    EXPECT_FALSE(parseFlagValue(*findFlag("--link-gbps"), "nan"));
}

TEST(Flags, RulesBetweenFlags)
{
    TrainingOptions o;
    EXPECT_TRUE(checkOptions(o, 2));
    o.stragglerRank = 5;
    o.stragglerMs = 10;
    EXPECT_EQ(checkOptions(o, 2).error().message, "--straggler: rank 5 does not exist in a world of 2 (ranks 0 to 1)");
    EXPECT_TRUE(checkOptions(o, 0)); // world not known yet: checked later
    EXPECT_TRUE(checkOptions(o, 6));
    o = {};
    o.crashRank = 1;
    o.crashStep = 20; // --steps 20: steps 0..19
    EXPECT_FALSE(checkOptions(o, 2));
    o.crashStep = 19;
    EXPECT_TRUE(checkOptions(o, 2));
    o = {};
    o.model = "transformer";
    o.width = 30;
    o.heads = 4;
    EXPECT_TRUE(contains(checkOptions(o, 1).error().message, "multiple of --heads"));
    o = {};
    o.checkEvery = 21;
    EXPECT_FALSE(checkOptions(o, 1));
    o = {};
    o.datasetSize = 63; // 2 ranks x 32 = 64 samples per global batch
    EXPECT_FALSE(checkOptions(o, 2));
    EXPECT_TRUE(checkOptions(o, 1));
    o = {};
    o.backend = "nccl";
    EXPECT_FALSE(checkOptions(o, 1));
}

TEST(Flags, ArgumentsRoundTripThroughTheTable)
{
    TrainingOptions o;
    EXPECT_TRUE(toArguments(o).empty()); // defaults are not passed: the worker has the same ones
    ASSERT_TRUE(setFlag(o, *findFlag("--layers"), "8"));
    ASSERT_TRUE(setFlag(o, *findFlag("--bucket-mb"), "0.25"));
    ASSERT_TRUE(setFlag(o, *findFlag("--straggler"), "1:30"));
    ASSERT_TRUE(setFlag(o, *findFlag("--no-record"), "true"));
    ASSERT_TRUE(setFlag(o, *findFlag("--out-dir"), "/tmp/x"));
    const std::vector<std::string> want{"--layers", "8", "--bucket-mb", "0.25", "--straggler", "1:30", "--no-record"};
    EXPECT_EQ(toArguments(o), want); // table order; worker-only flags left out
    EXPECT_EQ(toArguments(o, true).back(), "/tmp/x");
    // Parsing the arguments back gives the same options.
    TrainingOptions back;
    const auto args = toArguments(o);
    for (size_t i = 0; i < args.size(); ++i) {
        const Flag& f = *findFlag(args[i]);
        ASSERT_TRUE(setFlag(back, f, f.type == FlagType::Switch ? "true" : args[++i]));
    }
    EXPECT_EQ(toArguments(back), want);
    EXPECT_FALSE(back.record);
    EXPECT_EQ(back.stragglerRank, 1);
    EXPECT_EQ(back.stragglerMs, 30.0);
}

TEST(Flags, EveryOptionIsRecorded)
{
    TrainingOptions o;
    o.lr = 0.02;
    o.seed = 11;
    o.stragglerRank = 1;
    o.stragglerMs = 30;
    core::RunConfig c;
    recordOptions(o, c);
    EXPECT_EQ(c.extra["lr"], "0.02");
    EXPECT_EQ(c.extra["seed"], "11");
    EXPECT_EQ(c.extra["micro_batch"], "32");
    EXPECT_EQ(c.extra["straggler"], "1:30");
    EXPECT_EQ(c.extra["timeout_s"], "30");
    EXPECT_EQ(c.extra.count("crash"), 0u); // not injected: not recorded
    // Every flag is somewhere in a recorded run: a column, the model's arguments or extra.
    for (const Flag& f : trainingFlags())
        if (f.scope == FlagScope::Training && f.name != "--no-record") {
            EXPECT_NE(f.recorded, Recorded::No) << f.name;
        }
}

// A run recorded by the runtime gives back the options it was started with: the columns, the
// model's argument string and extra are filled here exactly as trainer_torch.cpp fills them.
TEST(Flags, OptionsReadBackFromARecordedRun)
{
    TrainingOptions o;
    o.model = "convnet";
    o.layers = 3;
    o.width = 24;
    o.batch = 16;
    o.steps = 12;
    o.warmup = 2;
    o.accumulate = 2;
    o.bucketMb = 0.5;
    o.firstBucketMb = 0.25;
    o.compress = "fp16";
    o.optimizer = "adamw";
    o.lr = 0.003;
    o.seed = 7;
    o.threads = 0;
    o.stragglerRank = 1;
    o.stragglerMs = 20;
    o.linkGbps = 2.5;
    core::RunConfig c;
    recordOptions(o, c);
    c.model = o.model;
    c.modelArgs = "layers=3 channels=24 image=3x16x16"; // the convnet calls its width channels
    c.worldSize = 2;
    c.backend = o.backend;
    c.device = o.device;
    c.bucketCapBytes = 512 << 10;      // 0.5 MiB
    c.firstBucketCapBytes = 256 << 10; // 0.25 MiB
    c.batchPerRank = 32;
    c.stepsPlanned = 12;
    c.warmupSteps = 2;
    c.optimizer = o.optimizer;
    c.compress = o.compress;
    c.accumulate = 2;
    c.linkGbps = 2.5;
    c.extra["threads"] = "4";           // resolved: cores / local ranks
    c.extra["threads_requested"] = "0"; // asked: automatic
    auto back = optionsFromConfig(c);
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(toArguments(*back), toArguments(o)); // every flag, in table order
    EXPECT_EQ(back->threads, 0);
    EXPECT_EQ(back->width, 24);
    EXPECT_EQ(back->bucketMb, 0.5);

    // Transformer sizes come from its argument string; a run without threads_requested (older
    // recordings) falls back to the resolved count.
    core::RunConfig t = c;
    t.model = "transformer";
    t.modelArgs = "layers=2 width=64 heads=8 seq=16 vocab=256";
    t.extra.erase("threads_requested");
    back = optionsFromConfig(t);
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(back->heads, 8);
    EXPECT_EQ(back->seq, 16);
    EXPECT_EQ(back->width, 64);
    EXPECT_EQ(back->threads, 4);

    // Not the runtime's: refused with the reason; a bad recorded value is checked like a typed one.
    core::RunConfig imported = c;
    imported.source = "pytorch";
    EXPECT_EQ(optionsFromConfig(imported).error().message,
              "recorded by 'pytorch', not by Lockstep's runtime: its training options cannot be launched again");
    core::RunConfig bad = c;
    bad.extra["lr"] = "-1";
    ASSERT_FALSE(optionsFromConfig(bad));
    EXPECT_TRUE(contains(optionsFromConfig(bad).error().message, "the recorded --lr")) << optionsFromConfig(bad).error().message;
}

TEST(Flags, NumbersForOtherFlags)
{
    EXPECT_EQ(*parseNumber("--grace-s", "1.5", 0, 3600), 1.5);
    EXPECT_EQ(parseNumber("--grace-s", "nan", 0, 3600).error().message, "--grace-s: expected a finite number, got 'nan'");
    EXPECT_FALSE(parseNumber("--grace-s", "-1", 0, 3600));
    EXPECT_EQ(*parseInteger("--nproc", "4", 1, 512), 4);
    EXPECT_FALSE(parseInteger("--nproc", "513", 1, 512));
    EXPECT_EQ(formatNumber(25), "25");
    EXPECT_EQ(formatNumber(0.01), "0.01");
}

// ---- the progress protocol ----------------------------------------------------------------------

TEST(Protocol, WorkerLinesRoundTrip)
{
    ProgressLine p = parseProgressLine(stepLine(1, 4, 0.523, 12.5));
    EXPECT_EQ(p.kind, ProgressLine::Kind::Step);
    EXPECT_EQ(p.rank, 1);
    EXPECT_EQ(p.step, 4);
    EXPECT_DOUBLE_EQ(p.loss, 0.523);
    EXPECT_DOUBLE_EQ(p.stepMs, 12.5);
    EXPECT_EQ(stepLine(1, 4, 0.523, 12.5), "LOCKSTEP step=4 rank=1 loss=0.523000 step_ms=12.500");

    p = parseProgressLine(failedLine(0, "step 3: Connection reset by peer\nmore"));
    EXPECT_EQ(p.kind, ProgressLine::Kind::Failed);
    EXPECT_EQ(p.rank, 0);
    EXPECT_EQ(p.text, "step 3: Connection reset by peer more"); // the rest of the line, spaces and all

    EXPECT_EQ(parseProgressLine(doneLine(2)).kind, ProgressLine::Kind::Done);
    EXPECT_EQ(parseProgressLine(doneLine(2)).rank, 2);
    p = parseProgressLine(crashLine(1, 3));
    EXPECT_EQ(p.kind, ProgressLine::Kind::Info);
    EXPECT_EQ(p.text, "crash");
    EXPECT_EQ(p.step, 3);
    EXPECT_EQ(parseProgressLine(layoutLine(0, 3, "1024,2048,4096", 1, true)).kind, ProgressLine::Kind::Info);
    EXPECT_EQ(parseProgressLine(driftLine(0, 7)).kind, ProgressLine::Kind::Info);
    // A nan loss (a diverged run) is still a step.
    p = parseProgressLine("LOCKSTEP step=2 rank=0 loss=nan step_ms=3.0");
    EXPECT_EQ(p.kind, ProgressLine::Kind::Step);
    EXPECT_TRUE(std::isnan(p.loss));
    EXPECT_EQ(parseProgressLine("LOCKSTEP step=2 rank=0 loss=1 step_ms=3.0\r").kind, ProgressLine::Kind::Step);
}

// Issue 28: where a job is before its first step, in one protocol: each rank's phase, and the
// launcher's summary (the slowest rank's phase, how many ranks are past it).
TEST(Protocol, PhaseLinesRoundTrip)
{
    ProgressLine p = parseProgressLine(phaseLine(3, Phase::Rendezvous));
    EXPECT_EQ(p.kind, ProgressLine::Kind::Phase);
    EXPECT_EQ(p.rank, 3);
    EXPECT_EQ(p.phase, Phase::Rendezvous);
    EXPECT_EQ(parseProgressLine(phaseLine(0, Phase::WarmUp)).phase, Phase::WarmUp);
    EXPECT_EQ(parseProgressLine(phaseLine(0, Phase::Training)).phase, Phase::Training);
    p = parseProgressLine(jobPhaseLine(Phase::WarmUp, 1, 4));
    EXPECT_EQ(p.kind, ProgressLine::Kind::Phase);
    EXPECT_EQ(p.rank, -1);
    EXPECT_EQ(p.phase, Phase::WarmUp);
    EXPECT_EQ(p.ranksPast, 1);
    EXPECT_EQ(p.nproc, 4);
    EXPECT_EQ(jobPhaseLine(Phase::Starting, 0, 2), "LOCKSTEP phase name=starting ranks=0 nproc=2");
    EXPECT_EQ(phaseLine(1, Phase::WarmUp), "LOCKSTEP phase rank=1 name=warm-up");
    // Every phase has its own name and label, in order.
    EXPECT_EQ(phaseLabel(Phase::Starting), "starting workers");
    EXPECT_EQ(phaseLabel(Phase::Rendezvous), "rendezvous");
    EXPECT_EQ(phaseLabel(Phase::WarmUp), "warm-up");
    EXPECT_LT(Phase::Starting, Phase::Rendezvous);
    EXPECT_LT(Phase::WarmUp, Phase::Training);
    // Malformed: an unknown phase, no name, a negative rank, a summary without its counts.
    EXPECT_EQ(parseProgressLine("LOCKSTEP phase rank=0 name=lunch").kind, ProgressLine::Kind::Other);
    EXPECT_EQ(parseProgressLine("LOCKSTEP phase rank=0").kind, ProgressLine::Kind::Other);
    EXPECT_EQ(parseProgressLine("LOCKSTEP phase rank=-1 name=warm-up").kind, ProgressLine::Kind::Other);
    EXPECT_EQ(parseProgressLine("LOCKSTEP phase name=warm-up").kind, ProgressLine::Kind::Other);
}

TEST(Protocol, LauncherLinesRoundTrip)
{
    ProgressLine p = parseProgressLine(jobLine(4, 20, "/runs/.a b.db.shards-x"));
    EXPECT_EQ(p.kind, ProgressLine::Kind::Job);
    EXPECT_EQ(p.nproc, 4);
    EXPECT_EQ(p.steps, 20);
    EXPECT_EQ(p.text, "/runs/.a b.db.shards-x");
    p = parseProgressLine(progressLine(5, 20, 2.25, 41.5));
    EXPECT_EQ(p.kind, ProgressLine::Kind::Progress);
    EXPECT_EQ(p.step, 5);
    EXPECT_EQ(p.steps, 20);
    EXPECT_DOUBLE_EQ(p.loss, 2.25);
    EXPECT_DOUBLE_EQ(p.stepMs, 41.5);
    p = parseProgressLine(pointLine(1, 3, "/runs/sweep/mlp-n2-b4.db"));
    EXPECT_EQ(p.kind, ProgressLine::Kind::Point);
    EXPECT_EQ(p.index, 1);
    EXPECT_EQ(p.points, 3);
    EXPECT_EQ(p.text, "/runs/sweep/mlp-n2-b4.db");
}

TEST(Protocol, OtherLinesAreFreeText)
{
    for (const char* line : {"", "[rank 1] gloo: connected", "step 3/20 loss=1.2500 step_ms=8.0", "LOCKSTEP",
                             "LOCKSTEP step=x rank=0", "LOCKSTEP step=1", "LOCKSTEP done", "LOCKSTEP frobnicate rank=1",
                             "LOCKSTEP done rank=1 extra", "LOCKSTEP job nproc=2 steps=3", "xLOCKSTEP done rank=1"})
        EXPECT_EQ(parseProgressLine(line).kind, ProgressLine::Kind::Other) << line;
}

// ---- failure ranking ----------------------------------------------------------------------------

TEST(FailureRanking, PeerEchoesLoseToTheFirstRealCause)
{
    // Rank 0 reports a dead peer first; rank 1's own failure arrives 0.1 s later, inside the
    // settle window: rank 1's wins.
    FailureLog log;
    log.note(0, "rank 0 failed at step 5: Connection reset by peer", 10.0);
    log.note(1, "rank 1 failed at step 5: out of memory", 10.1);
    ASSERT_NE(log.primary(), nullptr);
    EXPECT_EQ(log.primary()->rank, 1);
    const std::vector<RankEnd> ends{{0, exitedWith(1), false, true}, {1, exitedWith(1), false, true}};
    EXPECT_EQ(log.cause(ends, false), "rank 1 failed at step 5: out of memory (exit status 1)");
}

TEST(FailureRanking, LaterFailuresAreConsequences)
{
    // The second failure comes 0.6 s after the first: outside the 0.5 s window, so the first
    // (a peer-like timeout) stays the cause.
    FailureLog log;
    log.note(0, "rank 0 failed at step 2: Timed out waiting", 1.0);
    log.note(1, "rank 1 failed at step 2: out of memory", 1.6);
    EXPECT_EQ(log.primary()->rank, 0);
}

TEST(FailureRanking, SilentKilledRanksAreNamed)
{
    // Rank 1 was frozen: rank 0 times out (peer-like), the launcher kills rank 1 (SIGKILL, no word).
    FailureLog log;
    log.note(0, "rank 0 failed at step 3: Timed out in all-reduce", 5.0);
    const std::vector<RankEnd> ends{{0, exitedWith(1), false, true}, {1, killedBy(SIGKILL), true, false}};
    EXPECT_EQ(log.cause(ends, false),
              "rank 0 failed at step 3: Timed out in all-reduce (exit status 1); rank 1 stopped responding and was "
              "killed by the launcher");
}

TEST(FailureRanking, SignalDeathsAndHangsAreNeverEchoes)
{
    FailureLog log;
    log.note(0, "rank 0 failed at step 4: Connection closed by peer", 2.0);
    log.note(1, "rank 1 was killed by SIGSEGV at step 4: last words mention a peer", 2.05, true);
    EXPECT_EQ(log.primary()->rank, 1);
    EXPECT_TRUE(looksLikePeerFailure("Connection reset by peer"));
    EXPECT_FALSE(looksLikePeerFailure("CUDA out of memory"));
    FailureLog interrupted;
    interrupted.note(-1, "interrupted", 1.0, true);
    EXPECT_EQ(interrupted.cause({}, true), "interrupted");
    EXPECT_EQ(FailureLog{}.primary(), nullptr);
}

// ---- process helpers ----------------------------------------------------------------------------

TEST(Process, LinesAreSplitAndCapped)
{
    LineSplitter s;
    EXPECT_TRUE(s.feed("LOCKSTEP st").empty());
    EXPECT_EQ(s.feed("ep=1 rank=0\r\nnext"), std::vector<std::string>{"LOCKSTEP step=1 rank=0"});
    EXPECT_EQ(s.finish(), std::vector<std::string>{"next"});
    EXPECT_TRUE(s.finish().empty());
    // 3 MiB without a newline: cut into 1 MiB pieces, nothing held back beyond the cap.
    const auto pieces = s.feed(std::string(3 * LineSplitter::kMaxLine, 'x'));
    EXPECT_EQ(pieces.size(), 2u);
    EXPECT_EQ(s.finish().size(), 1u);
    EXPECT_EQ(exitCodeOf(exitedWith(3)), 3);
    EXPECT_EQ(exitCodeOf(killedBy(9)), 137);
    EXPECT_EQ(describeWaitStatus(killedBy(SIGKILL)), "was killed by SIGKILL");
}

// ---- the shard layout ---------------------------------------------------------------------------

TEST(ShardLayout, FoldersAndFiles)
{
    test::TempDir dir;
    const std::string run = dir.file("live.db");
    EXPECT_TRUE(liveFilesFor(run).empty());
    auto folder = createShardFolder(run);
    ASSERT_TRUE(folder);
    EXPECT_TRUE(std::filesystem::path(*folder).filename().string().starts_with(".live.db.shards-"));
    EXPECT_EQ(shardFile(*folder, 3), *folder + "/rank-3.db");
    EXPECT_EQ(shardFoldersOf(run), std::vector<std::string>{*folder});
    // Rank order (10 after 2), empty files and other names ignored.
    for (const char* name : {"rank-10.db", "rank-2.db", "rank-0.db", "rank-x.db", "notes.db"})
        test::writeFile(*folder + "/" + name, "x");
    test::writeFile(*folder + "/rank-5.db", "");
    EXPECT_EQ(shardFilesIn(*folder), (std::vector<std::string>{*folder + "/rank-0.db", *folder + "/rank-2.db",
                                                               *folder + "/rank-10.db"}));
    // Once the run file is a run database, it is what the live view reads.
    EXPECT_EQ(liveFilesFor(run).size(), 3u);
    core::Run r;
    ASSERT_TRUE(core::saveRun(r, run));
    EXPECT_EQ(liveFilesFor(run), std::vector<std::string>{run});
}

// Which shards make a finished job's run (runShardsIn, the launcher's one decision): readable
// shards with a configuration, in rank order; a damaged shard and one whose rank stopped before
// its configuration are left out, each with its reason; empty files and other names are not shards.
TEST(ShardLayout, WhichShardsMakeTheRun)
{
    test::TempDir dir;
    const std::string folder = dir.path();
    const auto shard = [&](int rank, const std::string& model) {
        core::Run r;
        r.config.model = model;
        r.config.worldSize = 4;
        return core::saveRun(r, shardFile(folder, rank)).has_value();
    };
    ASSERT_TRUE(shard(2, "mlp"));
    ASSERT_TRUE(shard(0, "mlp"));
    ASSERT_TRUE(shard(3, "")); // its rank stopped before writing the configuration
    test::writeFile(shardFile(folder, 1), "not a run database");
    test::writeFile(shardFile(folder, 4), "");
    test::writeFile(folder + "/notes.db", "x");
    const RunShards found = runShardsIn(folder);
    EXPECT_EQ(found.files, (std::vector<std::string>{shardFile(folder, 0), shardFile(folder, 2)}));
    ASSERT_EQ(found.leftOut.size(), 2u);
    EXPECT_EQ(found.leftOut[0].file, shardFile(folder, 1));
    EXPECT_FALSE(found.leftOut[0].noConfig);
    EXPECT_NE(found.leftOut[0].reason.find("not a Lockstep run database"), std::string::npos) << found.leftOut[0].reason;
    EXPECT_EQ(found.leftOut[1].file, shardFile(folder, 3));
    EXPECT_TRUE(found.leftOut[1].noConfig);
    EXPECT_NE(found.leftOut[1].reason.find("no run configuration"), std::string::npos) << found.leftOut[1].reason;
}
