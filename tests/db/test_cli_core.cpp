// The `lockstep` CLI's report, export, merge and import sub-commands, run as a process
// (LOCKSTEP_CLI): their output, and the promises of issue 9 at the command line — output is never
// input, outputs are whole or absent (a failed command leaves no file and no temporary behind),
// usage errors exit 2 and every help lists the exit statuses.
//
// Disk full is simulated with a file-size limit (`ulimit -f` in a shell that then execs the CLI):
// a write past it fails with EFBIG, as a write to a full disk fails with ENOSPC, and needs no
// privileges or a filesystem of our own.
#include "db_test_util.h"

#include "lockstep/core/report.h"
#include "lockstep/core/summary_store.h"

#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include <filesystem>

#include <sys/stat.h>

using namespace lockstep::core;
using namespace dbtest;
namespace test = lockstep::test;

class CliCore : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        ASSERT_TRUE(exists(test::cliPath())) << "no lockstep binary at " << test::cliPath();
    }
    void SetUp() override { ASSERT_TRUE(saveRun(makeRun(2, 6), m_dir.file("run.db")).has_value()); }

    test::Outcome cli(const std::vector<std::string>& args) { return test::lockstep(args, 60'000); }
    // The CLI with a file-size limit of `kib` KiB: writes past it fail as on a full disk.
    test::Outcome cliWithFileLimit(int kib, const std::vector<std::string>& args)
    {
        std::vector<std::string> sh{"-c", "ulimit -f " + std::to_string(kib) + " && exec \"$0\" \"$@\"", test::cliPath()};
        sh.insert(sh.end(), args.begin(), args.end());
        return test::run("/bin/sh", sh, 60'000);
    }
    // The folder's entries: nothing but `want` (no temporary folder, no -wal left behind).
    void expectOnly(const std::vector<std::string>& want)
    {
        EXPECT_EQ(test::listDir(m_dir.path()), want);
    }
    test::TempDir m_dir;
};

TEST_F(CliCore, helpForEachCommandListsTheExitStatuses)
{
    const std::pair<const char*, const char*> cases[] = {
        {"report", "--json"}, {"export", "--chrome"}, {"merge", "--out"}, {"import", "--out"},
        {"predict", "--out-dir"}, {"advise", "--bucket-mb"}, {"index", "RUN"}, {"run", "--nproc"}, {"sweep", "--nproc"}};
    for (const auto& [cmd, option] : cases) {
        const test::Outcome o = cli({cmd, "--help"});
        ASSERT_EQ(o.exitCode, 0);
        EXPECT_TRUE(contains(o.out, option)) << o.out;
        EXPECT_TRUE(contains(o.out, "Exit status: 0 success; 1 ")) << o.out;
        EXPECT_TRUE(contains(o.out, "2 usage error")) << o.out;
        // The same status for the same signal in every command (issue 26).
        EXPECT_TRUE(contains(o.out, "130 SIGINT")) << o.out;
        EXPECT_TRUE(contains(o.out, "143 SIGTERM")) << o.out;
    }
    const test::Outcome top = cli({"--help"});
    EXPECT_EQ(top.exitCode, 0);
    EXPECT_TRUE(contains(top.out, "Exit status")) << top.out;
    for (const char* cmd : {"report", "export", "import", "merge", "run", "sweep", "worker"})
        EXPECT_TRUE(contains(top.out, cmd)) << cmd;
    EXPECT_EQ(cli({"--version"}).exitCode, 0);
}

TEST_F(CliCore, usageErrorsExitTwo)
{
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{}, {"frobnicate"}, {"report"}, {"report", "--bogus", "x"}, {"merge", "a.db"},
          {"export", m_dir.file("run.db")}, {"run", "--nproc", "2"}, {"run", "--nproc", "x", "--out", "a.db"}}) {
        const test::Outcome o = cli(args);
        EXPECT_EQ(o.exitCode, 2) << o.describe();
    }
}

TEST_F(CliCore, badFilesFailWithAMessage)
{
    test::writeFile(m_dir.file("notes.txt"), "hello\n");
    for (const std::string& f : {m_dir.file("notes.txt"), m_dir.file("missing.db")}) {
        const test::Outcome r = cli({"report", f});
        EXPECT_EQ(r.exitCode, 1);
        EXPECT_TRUE(contains(r.err, "lockstep:")) << r.err;
        EXPECT_TRUE(r.out.empty());
        const test::Outcome e = cli({"export", f, "--chrome", m_dir.file("x.json")});
        EXPECT_EQ(e.exitCode, 1);
        EXPECT_FALSE(exists(m_dir.file("x.json")));
    }
    EXPECT_TRUE(contains(cli({"report", m_dir.file("notes.txt")}).err, "not a Lockstep run database"));
    expectOnly({"notes.txt", "run.db"});
}

TEST_F(CliCore, exportWritesATrace)
{
    const std::string out = m_dir.file("trace.json");
    const test::Outcome o = cli({"export", m_dir.file("run.db"), "--chrome", out});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    const std::string json = test::readFile(out);
    rapidjson::Document doc;
    doc.Parse(json.c_str(), json.size());
    ASSERT_FALSE(doc.HasParseError());
    int complete = 0;
    for (const auto& e : doc["traceEvents"].GetArray())
        complete += std::string(e["ph"].GetString()) == "X";
    EXPECT_EQ(complete, 2 * (1 + 6 * 6) + 2 * 6); // the spans, then each rank's 6 steps
    // An existing output is replaced only with --force.
    const test::Outcome again = cli({"export", m_dir.file("run.db"), "--chrome", out});
    EXPECT_EQ(again.exitCode, 1);
    EXPECT_TRUE(contains(again.err, "already exists")) << again.err;
    EXPECT_EQ(cli({"export", m_dir.file("run.db"), "--chrome", out, "--force"}).exitCode, 0);
    expectOnly({"run.db", "trace.json"});
}

TEST_F(CliCore, mergeShards)
{
    const std::string a = m_dir.file("rank0.db");
    const std::string b = m_dir.file("rank1.db");
    ASSERT_TRUE(saveRun(makeRun(1, 4, 0, 2), a).has_value());
    ASSERT_TRUE(saveRun(makeRun(1, 4, 1, 2), b).has_value());
    const std::string out = m_dir.file("merged.db");
    test::Outcome o = cli({"merge", b, a, "--out", out});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    auto run = loadRun(out);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->config.worldSize, 2);
    EXPECT_EQ(run->steps.size(), size_t(8));
    o = cli({"merge", a, b, "--out", out});
    EXPECT_EQ(o.exitCode, 1);
    EXPECT_TRUE(contains(o.err, "already exists")) << o.err;
    o = cli({"merge", a, b, "--out", out, "--force"});
    EXPECT_EQ(o.exitCode, 0);
    expectOnly({"merged.db", "rank0.db", "rank1.db", "run.db"});
}

TEST_F(CliCore, reportJsonHasTheKeys)
{
    const test::Outcome o = cli({"report", m_dir.file("run.db"), "--json"});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    rapidjson::Document doc;
    doc.Parse(o.out.c_str(), o.out.size());
    ASSERT_TRUE(!doc.HasParseError() && doc.IsObject()) << o.out;
    for (const char* key : {"world_size", "bucket_cap_bytes", "steps", "step_time_ms", "compute_ms", "comm_ms",
                            "overlap_ratio", "exposed_comm_ms", "idle_ms", "stragglers", "buckets"})
        EXPECT_TRUE(doc.HasMember(key)) << key;
    EXPECT_EQ(doc["world_size"].GetInt(), 2);
    EXPECT_EQ(doc["bucket_cap_bytes"].GetInt64(), int64_t(4096));
    const test::Outcome text = cli({"report", m_dir.file("run.db")});
    EXPECT_EQ(text.exitCode, 0);
    EXPECT_FALSE(text.out.empty());
    expectOnly({"run.db"}); // reading created nothing
}

// `lockstep index`: the stored analysis replaces the computed one without changing a byte of the
// report; a file written before schema 4 is refused and left as it was; a file that is not a run
// is a clear error.
TEST_F(CliCore, indexStoresTheAnalysisAndTheReportStaysTheSame)
{
    const std::string run = m_dir.file("run.db");
    // A writer that changed the run dropped what saveRun stored: the report is computed.
    {
        auto w = RunWriter::openExisting(run);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->setStatus(RunStatus::Completed));
        ASSERT_TRUE((*w)->close());
    }
    auto before = loadAnalyzedRun(run);
    ASSERT_TRUE(before);
    ASSERT_FALSE(before->stored);
    const test::Outcome text = cli({"report", run});
    const test::Outcome json = cli({"report", "--json", run});
    ASSERT_EQ(text.exitCode, 0) << text.describe();
    const test::Outcome index = cli({"index", run});
    ASSERT_EQ(index.exitCode, 0) << index.describe();
    EXPECT_TRUE(contains(index.err, "stored the summaries of")) << index.err;
    auto after = loadAnalyzedRun(run);
    ASSERT_TRUE(after);
    EXPECT_TRUE(after->stored) << after->whyComputed;
    EXPECT_EQ(cli({"report", run}).out, text.out);
    EXPECT_EQ(cli({"report", "--json", run}).out, json.out);
    expectOnly({"run.db"});

    const std::string old = m_dir.file("old.db");
    std::filesystem::copy_file(std::string(LOCKSTEP_SOURCE_DIR) + "/tests/data/cpu/run-cpu-2.db", old);
    const auto oldBytes = test::readFile(old);
    const test::Outcome refused = cli({"index", old});
    EXPECT_EQ(refused.exitCode, 1) << refused.describe();
    EXPECT_TRUE(contains(refused.err, "written before schema version 4")) << refused.err;
    EXPECT_EQ(test::readFile(old), oldBytes) << "a refused file is left as it was";

    const std::string notRun = m_dir.file("notes.txt");
    test::writeFile(notRun, "not a run database\n");
    const test::Outcome bad = cli({"index", notRun});
    EXPECT_EQ(bad.exitCode, 1) << bad.describe();
    EXPECT_TRUE(contains(bad.err, "notes.txt")) << bad.err;
}

// Issue 9: "lockstep merge ./s.db --out s.db --force replaces its input with an empty run".
TEST_F(CliCore, outputIsNeverInput)
{
    const std::string run = m_dir.file("run.db");
    const std::string before = fileBytes(run);
    std::filesystem::create_symlink(run, m_dir.file("link.db"));
    std::filesystem::create_directory(m_dir.file("sub"));
    for (const std::string& out : {run, m_dir.path() + "/./run.db", m_dir.path() + "/sub/../run.db", m_dir.file("link.db")}) {
        SCOPED_TRACE(out);
        test::Outcome o = cli({"merge", run, "--out", out, "--force"});
        EXPECT_EQ(o.exitCode, 1) << o.describe();
        EXPECT_TRUE(contains(o.err, "is also an input")) << o.err;
        o = cli({"export", run, "--chrome", out, "--force"});
        EXPECT_EQ(o.exitCode, 1) << o.describe();
        EXPECT_TRUE(contains(o.err, "is also an input")) << o.err;
        o = cli({"import", run, "--out", out, "--force"});
        EXPECT_EQ(o.exitCode, 1) << o.describe();
        EXPECT_TRUE(contains(o.err, "is also an input")) << o.err;
        EXPECT_TRUE(fileBytes(run) == before) << "the input changed";
    }
    expectOnly({"link.db", "run.db", "sub"});
}

// Issue 9: a failed merge must not leave a file that reads as a completed run with 0 steps, and
// with --force the previous file must still be there.
TEST_F(CliCore, aFailedMergeLeavesNothing)
{
    const std::string a = m_dir.file("rank0.db");
    ASSERT_TRUE(saveRun(makeRun(1, 4, 0, 2), a).has_value());
    const std::string broken = m_dir.file("rank1.db");
    test::writeFile(broken, "SQLite format 3"); // not a whole run
    const std::string out = m_dir.file("merged.db");
    test::Outcome o = cli({"merge", a, broken, "--out", out});
    EXPECT_EQ(o.exitCode, 1);
    EXPECT_FALSE(exists(out));
    // --force over an existing run: the old one stays when the new one cannot be written.
    const std::string old = fileBytes(m_dir.file("run.db"));
    o = cli({"merge", a, broken, "--out", m_dir.file("run.db"), "--force"});
    EXPECT_EQ(o.exitCode, 1);
    EXPECT_TRUE(fileBytes(m_dir.file("run.db")) == old);
    expectOnly({"rank0.db", "rank1.db", "run.db"});
}

// Issue 9: outputs whole or absent when the disk fills up (a 192 KiB file-size limit: room for
// the schema, not for the run database of makeRun(2, 800) or its JSON export, which are larger).
TEST_F(CliCore, aFullDiskLeavesNoPartialOutput)
{
    const std::string big = m_dir.file("big.db");
    ASSERT_TRUE(saveRun(makeRun(2, 800), big).has_value());
    ASSERT_GT(std::filesystem::file_size(big), 256u * 1024);
    const std::string old = fileBytes(m_dir.file("run.db"));

    test::Outcome o = cliWithFileLimit(192, {"export", big, "--chrome", m_dir.file("big.json")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_FALSE(exists(m_dir.file("big.json")));

    o = cliWithFileLimit(192, {"merge", big, "--out", m_dir.file("merged.db")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "disk full")) << o.err;
    EXPECT_FALSE(exists(m_dir.file("merged.db")));

    o = cliWithFileLimit(192, {"merge", big, "--out", m_dir.file("run.db"), "--force"});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(fileBytes(m_dir.file("run.db")) == old);

    // The same export without the limit works: the failures above were the disk's.
    EXPECT_EQ(cli({"export", big, "--chrome", m_dir.file("big.json")}).exitCode, 0);
    std::filesystem::remove(m_dir.file("big.json"));
    expectOnly({"big.db", "run.db"});
}

// Audit #3: `export --chrome /dev/full --force` replaced the device node by a file. An output that
// exists and is not a regular file (a device, a FIFO) is refused by every command; a symbolic
// link to a regular file gets the new contents in the file it points to and stays a link.
TEST_F(CliCore, outputsThatAreNotRegularFilesAreRefused)
{
    const std::string run = m_dir.file("run.db");
    const std::string fifo = m_dir.file("pipe");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // A FIFO stands for every special file (a device such as /dev/full: a test must not risk one).
    for (const std::string& out : {fifo}) {
        SCOPED_TRACE(out);
        for (const std::vector<std::string>& args :
             {std::vector<std::string>{"export", run, "--chrome", out, "--force"}, {"merge", run, "--out", out, "--force"},
              {"import", m_dir.file("trace.json"), "--out", out, "--force"}}) {
            if (args[0] == "import" && !exists(m_dir.file("trace.json"))) {
                ASSERT_EQ(cli({"export", run, "--chrome", m_dir.file("trace.json")}).exitCode, 0);
            }
            const test::Outcome o = cli(args);
            EXPECT_EQ(o.exitCode, 1) << args[0] << ": " << o.describe();
            EXPECT_TRUE(contains(o.err, "is not a regular file")) << o.err;
        }
    }
    EXPECT_TRUE(std::filesystem::is_fifo(fifo));
    // A link to a regular file: the file behind it is replaced, the link kept.
    test::writeFile(m_dir.file("target.json"), "old");
    std::filesystem::create_symlink("target.json", m_dir.file("link.json"));
    const test::Outcome o = cli({"export", run, "--chrome", m_dir.file("link.json"), "--force"});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    EXPECT_TRUE(std::filesystem::is_symlink(m_dir.file("link.json")));
    EXPECT_TRUE(test::readFile(m_dir.file("target.json")).starts_with("{")) << "the target was not replaced";
    // '-' (standard output elsewhere) is refused, not written as a file named '-' (audit #14g).
    const test::Outcome dash =
        test::run("/bin/sh", {"-c", "cd \"$1\" && exec \"$0\" export run.db --chrome -", test::cliPath(), m_dir.path()});
    EXPECT_EQ(dash.exitCode, 1) << dash.describe();
    EXPECT_TRUE(contains(dash.err, "standard output")) << dash.err;
    expectOnly({"link.json", "pipe", "run.db", "target.json", "trace.json"});
}

// Audit #5: Ctrl-C or SIGTERM while export, merge or import writes left their hidden temporary
// folders behind. Interrupted once the temporary folder exists (mid-write): exit 128+signal, the
// output absent and nothing else left.
TEST_F(CliCore, aSignalLeavesNoTemporaries)
{
    const std::string big = m_dir.file("big.db");
    ASSERT_TRUE(saveRun(makeRun(4, 1500), big).has_value());
    ASSERT_EQ(cli({"export", big, "--chrome", m_dir.file("big.json")}).exitCode, 0);
    // A shell starts the CLI, waits for its temporary folder to appear, sends the signal and
    // prints the CLI's exit status.
    struct Case {
        std::vector<std::string> args;
        std::string out;
    };
    const std::vector<Case> cases{{{"export", big, "--chrome", m_dir.file("e.json")}, "e.json"},
                                  {{"merge", big, "--out", m_dir.file("m.db")}, "m.db"},
                                  {{"import", m_dir.file("big.json"), "--out", m_dir.file("i.db"), "-q"}, "i.db"}};
    for (const Case& c : cases) {
        for (const char* sig : {"INT", "TERM"}) {
            SCOPED_TRACE(c.args[0] + std::string(" SIG") + sig);
            std::vector<std::string> sh{"-c",
                                        "d=\"$1\"; s=\"$2\"; shift 2; \"$@\" & pid=$!; "
                                        "while kill -0 $pid 2>/dev/null; do ls -a \"$d\" | grep -q '[.]tmp-' && break; done; "
                                        "kill -$s $pid; wait $pid; echo status=$?",
                                        "sh", m_dir.path(), sig, test::cliPath()};
            sh.insert(sh.end(), c.args.begin(), c.args.end());
            const test::Outcome o = test::run("/bin/sh", sh, 60'000);
            // A signal that lands after the output was moved into place finds the command done: the
            // output is whole and the status 0. Before: nothing, 128 + signal. Never anything else.
            if (contains(o.out, "status=0")) {
                EXPECT_TRUE(exists(m_dir.file(c.out))) << o.describe();
                std::filesystem::remove(m_dir.file(c.out));
            } else {
                EXPECT_TRUE(contains(o.out, std::string("status=") + (std::string(sig) == "INT" ? "130" : "143")))
                    << o.describe();
            }
            expectOnly({"big.db", "big.json", "run.db"});
        }
    }
}

// Issue 26 item 7: physically meaningless values are usage errors (exit 2), and no message
// carries a raw control character from a name, a value or a file name (a terminal would act on
// it: ESC starts a sequence).
TEST_F(CliCore, meaninglessValuesAndControlCharactersAreRefused)
{
    for (const char* gbps : {"1e-300", "1e-9", "0.0009"}) {
        const test::Outcome o = cli({"run", "--nproc", "2", "--out", m_dir.file("x.db"), "--link-gbps", gbps});
        EXPECT_EQ(o.exitCode, 2) << gbps << ": " << o.describe();
        EXPECT_TRUE(contains(o.err, "--link-gbps")) << o.err;
    }
    for (const char* cmd : {"predict", "advise"}) {
        const test::Outcome o = cli({cmd, m_dir.file("run.db"), "--bucket-mb", "1e-300"});
        EXPECT_EQ(o.exitCode, 2) << cmd << ": " << o.describe();
    }
    EXPECT_EQ(cli({"predict", m_dir.file("run.db"), "--link-gbps", "1e-300"}).exitCode, 2);
    const auto noRawControl = [](const std::string& text) {
        for (unsigned char c : text)
            if ((c < 0x20 && c != '\n') || c == 0x7f)
                return false;
        return true;
    };
    // merge: "differ in model (...)" quoted the models as they were.
    lockstep::core::Run a = makeRun(1, 4, 0, 2);
    lockstep::core::Run b = makeRun(1, 4, 1, 2);
    a.config.model = "mlp\x1b[2J\x07";
    ASSERT_TRUE(saveRun(a, m_dir.file("a.db")).has_value());
    ASSERT_TRUE(saveRun(b, m_dir.file("b.db")).has_value());
    test::Outcome o = cli({"merge", m_dir.file("a.db"), m_dir.file("b.db"), "--out", m_dir.file("m.db")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "differ in model")) << o.err;
    EXPECT_TRUE(noRawControl(o.err)) << o.err;
    // predict: "unknown compression '...'".
    o = cli({"predict", m_dir.file("run.db"), "--compress", "fp\x1b[31m16"});
    EXPECT_NE(o.exitCode, 0) << o.describe();
    EXPECT_TRUE(noRawControl(o.err)) << o.err;
    // A file name echoed back.
    o = cli({"report", m_dir.file("no\x1b]0;title\x07such.db")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(noRawControl(o.err)) << o.err;
    o = cli({"import", m_dir.file("no\x1bsuch.json"), "--out", m_dir.file("i.db")});
    EXPECT_NE(o.exitCode, 0) << o.describe();
    EXPECT_TRUE(noRawControl(o.err)) << o.err;
}

// Issue 26 item 9's smaller defects: report --help named schema_version 2 (now the schema's own); a FIFO was
// "empty" (and a reader could block on it), a loop of symbolic links "no such file".
TEST_F(CliCore, smallerDefectsOfIssue26)
{
    const test::Outcome help = cli({"report", "--help"});
    EXPECT_TRUE(contains(help.out, "schema_version " + std::to_string(lockstep::core::kReportSchemaVersion))) << help.out;
    EXPECT_FALSE(contains(help.out, "schema_version 2")) << help.out;
    const std::string fifo = m_dir.file("pipe.db");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    test::Outcome o = cli({"report", fifo});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "is not a regular file")) << o.err;
    std::filesystem::create_symlink("loop2.db", m_dir.file("loop1.db"));
    std::filesystem::create_symlink("loop1.db", m_dir.file("loop2.db"));
    o = cli({"report", m_dir.file("loop1.db")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "loop of symbolic links")) << o.err;
    // A shard whose configuration was never written (a full disk before it): named, not "differ
    // in model (mlp vs )".
    lockstep::core::Run rank0 = makeRun(1, 4, 0, 2);
    lockstep::core::Run rank1 = makeRun(1, 4, 1, 2);
    rank1.config.model.clear();
    ASSERT_TRUE(saveRun(rank0, m_dir.file("s0.db")).has_value());
    ASSERT_TRUE(saveRun(rank1, m_dir.file("s1.db")).has_value());
    o = cli({"merge", m_dir.file("s0.db"), m_dir.file("s1.db"), "--out", m_dir.file("sm.db")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "s1.db has no run configuration")) << o.err;
    EXPECT_FALSE(contains(o.err, "differ in model")) << o.err;
    EXPECT_FALSE(exists(m_dir.file("sm.db")));
}

// Issue 26 item 6: names and paths are bytes (any byte but NUL) in every core command: a run
// file, a trace, an output and a run name that are not UTF-8 go through, and a name shown on the
// terminal has its invalid bytes escaped.
TEST_F(CliCore, namesAndPathsAreBytes)
{
    lockstep::core::Run run = makeRun(2, 6);
    run.config.name = "name\xfe";
    const std::string in = m_dir.file("run\xff.db");
    ASSERT_TRUE(saveRun(run, in).has_value());
    test::Outcome o = cli({"report", in});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    EXPECT_TRUE(contains(o.out, "name\\xfe")) << o.out;
    o = cli({"export", in, "--chrome", m_dir.file("t\xfd.json")});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    o = cli({"import", m_dir.file("t\xfd.json"), "--out", m_dir.file("i\xfc.db"), "-q"});
    EXPECT_EQ(o.exitCode, 0) << o.describe();
    o = cli({"merge", in, "--out", m_dir.file("m\xfb.db")});
    EXPECT_EQ(o.exitCode, 0) << o.describe();
    o = cli({"predict", in, "--out-dir", m_dir.file("d\xfa")});
    EXPECT_EQ(o.exitCode, 0) << o.describe();
    EXPECT_EQ(test::listDir(m_dir.file("d\xfa")).size(), 1u);
    expectOnly({"d\xfa", "i\xfc.db", "m\xfb.db", "run.db", "run\xff.db", "t\xfd.json"});
}

// Audit #6, #7: merge made a chimera of shards from different runs, and a "completed" run of one
// shard of a world of 2. Both refused, naming the field or the missing ranks; nothing written.
TEST_F(CliCore, mergeRefusesShardsThatAreNotOneWholeRun)
{
    const std::string a = m_dir.file("rank0.db");
    const std::string b = m_dir.file("rank1.db");
    ASSERT_TRUE(saveRun(makeRun(1, 4, 0, 2), a).has_value());
    lockstep::core::Run other = makeRun(1, 4, 1, 2);
    other.config.modelArgs = "layers=24 width=32";
    ASSERT_TRUE(saveRun(other, b).has_value());
    const std::string out = m_dir.file("merged.db");
    test::Outcome o = cli({"merge", a, b, "--out", out});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "come from different runs")) << o.err;
    EXPECT_TRUE(contains(o.err, "model arguments")) << o.err;
    o = cli({"merge", b, "--out", out});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "missing: rank 0")) << o.err;
    expectOnly({"rank0.db", "rank1.db", "run.db"});
}

// Audit #10, #11, #14b: a damaged trace imported "completed" with rc 0; --world-size below the
// traces' ranks and --rank outside the world were accepted; a missing file was a usage error with
// CLI11's words.
TEST_F(CliCore, importRefusesDamagedTracesAndContradictoryFlags)
{
    const std::string trace = m_dir.file("trace.json");
    ASSERT_EQ(cli({"export", m_dir.file("run.db"), "--chrome", trace}).exitCode, 0);
    const std::string full = test::readFile(trace);
    test::writeFile(m_dir.file("cut.json"), full.substr(0, full.size() / 2));
    test::Outcome o = cli({"import", m_dir.file("cut.json"), "--out", m_dir.file("cut.db"), "-q"});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "damaged")) << o.err;
    EXPECT_FALSE(exists(m_dir.file("cut.db")));
    // The trace holds ranks 0 and 1 (an export of a 2-rank run).
    o = cli({"import", trace, "--world-size", "1", "--out", m_dir.file("w.db"), "-q"});
    EXPECT_EQ(o.exitCode, 2) << o.describe();
    EXPECT_TRUE(contains(o.err, "--world-size")) << o.err;
    o = cli({"import", trace, "--rank", "5", "--world-size", "2", "--out", m_dir.file("w.db"), "-q"});
    EXPECT_EQ(o.exitCode, 2) << o.describe();
    o = cli({"import", m_dir.file("missing.json"), "--out", m_dir.file("w.db")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "missing.json: no such file")) << o.err;
    // Not a trace: the path is named once ("X: X is not a trace" before).
    const std::string notes = m_dir.file("notes.txt");
    test::writeFile(notes, "hello\n");
    o = cli({"import", notes, "--out", m_dir.file("w.db")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "is not a trace")) << o.err;
    EXPECT_EQ(o.err.find(notes), o.err.rfind(notes)) << o.err;
    std::filesystem::remove(notes);
    // The output is checked before the import starts.
    o = cli({"import", trace, "--out", m_dir.file("nofolder/w.db")});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "does not exist")) << o.err;
    EXPECT_FALSE(contains(o.err, "importing")) << o.err;
    // Range errors read like run's, not CLI11's 300-digit bounds (audit #14a).
    o = cli({"import", trace, "--world-size", "0", "--out", m_dir.file("w.db")});
    EXPECT_EQ(o.exitCode, 2);
    EXPECT_TRUE(contains(o.err, "--world-size: 0 is out of range (1 to 1000000)")) << o.err;
    expectOnly({"cut.json", "run.db", "trace.json"});
}

// Audit #12, #13, #14a, #14e: predict printed a negative step time for --compute-scale 1e300,
// took gigabytes for --nproc 1048576, and with several outputs wrote some before failing on one
// that existed.
TEST_F(CliCore, predictChecksRangesAndEveryOutputFirst)
{
    const std::string run = m_dir.file("run.db");
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"--compute-scale", "1e300"}, "--compute-scale: 1e300 is out of range (0.01 to 100)"},
        {{"--compute-scale", "0"}, "out of range (0.01 to 100)"},
        {{"--link-gbps", "1e-12"}, "--link-gbps: 1e-12 is out of range (0.001 to 10000; 0 = not emulated)"},
        {{"--link-gbps", "-1"}, "out of range"},
        {{"--bucket-mb", "1e308"}, "--bucket-mb: 1e308 is out of range"},
        {{"--bucket-mb", "0"}, "--bucket-mb: 0 is out of range"},
        {{"--nproc", "1048576"}, "--nproc: 1048576 is out of range (1 to 4096)"},
    };
    for (const auto& [flags, message] : cases) {
        std::vector<std::string> args{"predict", run};
        args.insert(args.end(), flags.begin(), flags.end());
        const test::Outcome o = cli(args);
        EXPECT_EQ(o.exitCode, 2) << o.describe();
        EXPECT_TRUE(contains(o.err, message)) << o.err;
        EXPECT_LT(o.err.size(), 200u) << o.err;
    }
    EXPECT_EQ(cli({"advise", run, "--bucket-mb", "0"}).exitCode, 2);
    // Every output checked before the first is written.
    const std::string dir = m_dir.file("whatif");
    test::Outcome o = cli({"predict", run, "--bucket-mb", "1,2", "--out-dir", dir});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    const std::vector<std::string> written = test::listDir(dir);
    ASSERT_EQ(written.size(), 2u);
    std::filesystem::remove(dir + "/" + written[0]);
    const std::string kept = test::readFile(dir + "/" + written[1]);
    o = cli({"predict", run, "--bucket-mb", "1,2", "--out-dir", dir});
    EXPECT_EQ(o.exitCode, 1) << o.describe();
    EXPECT_TRUE(contains(o.err, "already exists; pass --force to replace it\n")) << o.err;
    EXPECT_FALSE(contains(o.err, "(--force overwrites)")) << o.err;
    EXPECT_EQ(test::listDir(dir), std::vector<std::string>{written[1]}); // the first point was not written
    EXPECT_TRUE(test::readFile(dir + "/" + written[1]) == kept);
}

// Audit #1, #8, #9, #14c, #14d: worker arguments after `--` are checked before anything starts
// (launcher-owned flags, unknown flags, bad values, a flag given twice), the run file is never the
// script `record` runs, an unknown command is named. Usage errors: exit 2, nothing written.
TEST_F(CliCore, launchArgumentsAreCheckedBeforeAnythingStarts)
{
    const std::string out = m_dir.file("v.db");
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"run", "--nproc", "2", "--out", out, "--", "--out-dir", m_dir.file("elsewhere")}, "--out-dir is set by the launcher"},
        {{"run", "--nproc", "2", "--out", out, "--", "--steps", "0"}, "--steps: 0 is out of range"},
        {{"run", "--nproc", "2", "--out", out, "--", "--garbage"}, "'--garbage' is not a worker flag"},
        {{"run", "--nproc", "2", "--out", out, "--steps", "3", "--", "--steps", "5"}, "--steps given twice"},
        {{"run", "--nproc", "2", "--out", out, "--steps", "5", "--steps", "6"}, "--steps given twice"},
        {{"sweep", "--nproc", "1,1", "--out-dir", m_dir.file("sw")}, "given twice"},
        {{"sweep", "--nproc", "1", "--out-dir", m_dir.file("sw"), "--", "--bucket-mb", "4"}, "give it before --"},
        {{"bogus"}, "unknown command 'bogus'"},
        {{"run", "--nproc", "2", "--out", out, "--device", "cuda"}, "trains on the CPU only"},
        {{"sweep", "--nproc", "1", "--out-dir", m_dir.file("sw"), "--device", "cuda"}, "trains on the CPU only"},
    };
    for (const auto& [args, message] : cases) {
        const test::Outcome o = cli(args);
        EXPECT_EQ(o.exitCode, 2) << o.describe();
        EXPECT_TRUE(contains(o.err, message)) << o.err;
    }
    // Sweep: the run file of a later point that exists is found before the first point runs.
    std::filesystem::create_directory(m_dir.file("sw"));
    test::writeFile(m_dir.file("sw/mlp-n2-b25.db"), "an earlier sweep");
    test::Outcome sw = cli({"sweep", "--nproc", "1,2", "--out-dir", m_dir.file("sw")});
    EXPECT_EQ(sw.exitCode, 2) << sw.describe();
    EXPECT_TRUE(contains(sw.err, "mlp-n2-b25.db already exists")) << sw.err;
    EXPECT_EQ(test::listDir(m_dir.file("sw")), std::vector<std::string>{"mlp-n2-b25.db"});
    std::filesystem::remove_all(m_dir.file("sw"));
    const std::string script = m_dir.file("s.py");
    test::writeFile(script, "print('hello')\n");
    test::Outcome o = cli({"record", "--nproc", "2", "--out", script, "--force", "--", script});
    EXPECT_EQ(o.exitCode, 2) << o.describe();
    if (!contains(o.err, "unknown command 'record'")) { // a build without the Python recorder
        EXPECT_TRUE(contains(o.err, "is also an input")) << o.err;
    }
    EXPECT_EQ(test::readFile(script), "print('hello')\n");
    expectOnly({"run.db", "s.py"});
}
