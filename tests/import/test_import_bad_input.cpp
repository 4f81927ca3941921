// Bad input never crashes or hangs the importers: malformed, truncated, huge-number, deeply
// nested, wrong-type and adversarial traces give a clear error or per-kind diagnostic counts.
#include "trace_writer.h"
#include "test_support.h"

#include "lockstep/import/import.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

using namespace lockstep::core;
using namespace lockstep::testing;
namespace core = lockstep::core; // gtest's Test::Run hides core::Run inside TEST bodies

namespace {

using lockstep::test::TempDir;

int64_t diagCount(const core::Run& run, const std::string& kind)
{
    for (const auto& d : run.diagnostics)
        if (d.kind == kind)
            return d.count;
    return 0;
}

std::string good(double ts = 100) { return xEvent("cpu_op", "aten::mm", ts, 10, "1", "1"); }

} // namespace

TEST(ImportBadInput, PerKindDiagnostics)
    {
        const std::vector<std::string> events = {
            good(),
            "{\"ph\": \"X\", \"name\": \"no ts\", \"pid\": 1, \"tid\": 1, \"dur\": 5}",
            "{\"ph\": \"X\", \"name\": \"no ts either\", \"pid\": 1, \"tid\": 1, \"dur\": 5}",
            "{\"ph\": \"X\", \"name\": \"neg\", \"pid\": 1, \"tid\": 1, \"ts\": 10, \"dur\": -5}",
            "{\"ph\": \"Z\", \"name\": \"what\", \"pid\": 1, \"tid\": 1, \"ts\": 10}",
            "{\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": 10}",
            "{\"name\": \"no phase\", \"pid\": 1, \"tid\": 1, \"ts\": 10}",
            "{\"ph\": \"X\", \"name\": \"no dur\", \"pid\": 1, \"tid\": 1, \"ts\": 10}",
            "{\"ph\": \"X\", \"name\": \"str ts\", \"pid\": 1, \"tid\": 1, \"ts\": \"soon\", \"dur\": 1}",
            "{\"ph\": \"X\", \"name\": \"obj ts\", \"pid\": 1, \"tid\": 1, \"ts\": {\"a\": 1}, \"dur\": 1}",
            "{\"ph\": \"X\", \"name\": 12, \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}",
            "{\"ph\": \"X\", \"name\": \"huge\", \"pid\": 1, \"tid\": 1, \"ts\": 99999999999999999999999999999, \"dur\": 1}",
            "{\"ph\": \"X\", \"name\": \"huge exp\", \"pid\": 1, \"tid\": 1, \"ts\": 1e400, \"dur\": 1}",
            "{\"ph\": \"X\", \"name\": \"overflowing end\", \"pid\": 1, \"tid\": 1, \"ts\": 9223372036854775, \"dur\": 9223372036854775}",
            "42",
            "\"a string event\"",
            "[1, 2, 3]",
            "{\"ph\": \"X\", \"name\": \"bad json\" \"pid\": 1}",
            "{\"ph\": \"C\", \"name\": \"counter\", \"pid\": 1, \"ts\": 1, \"args\": {\"v\": 1}}",
            "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"ProfilerStep#notanumber\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}",
            "{\"ph\": \"X\", \"name\": \"args wrong type\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1, \"args\": [1, 2]}",
            "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 1, \"dur\": 1, \"args\": {\"device\": \"zero\", \"stream\": -99999999999999999999999, \"External id\": true}}",
            good(200),
        };
        auto run = importTraceBytes(arrayTrace(events));
        ASSERT_TRUE(run.has_value()) << run.error().message;
        EXPECT_EQ(diagCount(*run, "missing ts"), int64_t(2));
        EXPECT_EQ(diagCount(*run, "negative duration"), int64_t(1));
        EXPECT_EQ(diagCount(*run, "unknown phase"), int64_t(1));
        EXPECT_EQ(diagCount(*run, "unmatched B/E"), int64_t(1));
        EXPECT_EQ(diagCount(*run, "missing ph"), int64_t(1));
        EXPECT_EQ(diagCount(*run, "missing dur"), int64_t(1));
        EXPECT_EQ(diagCount(*run, "wrong type"), int64_t(3)); // "soon", {"a":1}, name 12
        EXPECT_EQ(diagCount(*run, "timestamp out of range"), int64_t(3));
        EXPECT_EQ(diagCount(*run, "event is not an object"), int64_t(3));
        EXPECT_EQ(diagCount(*run, "malformed event"), int64_t(1));
        EXPECT_EQ(diagCount(*run, "ignored event phase"), int64_t(1));
        EXPECT_EQ(diagCount(*run, "malformed step name"), int64_t(1));
        // The kernel with nonsense args has no launch record: counted, in no step.
        EXPECT_EQ(diagCount(*run, "device span without launch record"), int64_t(1));
        // The good events (and the ones whose odd parts are not needed) are all there.
        int good = 0;
        for (const Span& s : run->spans)
            good += run->strings.text(s.name) == "aten::mm";
        EXPECT_EQ(good, 2);
        EXPECT_TRUE(run->strings.intern("args wrong type").v != 0);
    }

TEST(ImportBadInput, StructuralErrors)
    {
        // Not a trace at all.
        for (const std::string& bad : {std::string(""), std::string("   \n"), std::string("hello"), std::string("\x00\x01\x02", 3),
                                      std::string("{\"traceEvents\": [}"), std::string("{\"traceEvents\": ["),
                                      std::string("[{\"ph\": \"X\""), std::string("{\"a\" 1}"), std::string("{1: 2}")}) {
            auto run = importTraceBytes(bad);
            EXPECT_TRUE(!run.has_value()) << bad.c_str();
            EXPECT_TRUE(!run.error().message.empty());
        }
        // traceEvents of another type: nothing to import, refused with the reason.
        auto notArray = importTraceBytes("{\"traceEvents\": {\"ph\": \"X\"}, \"x\": 1}");
        ASSERT_FALSE(notArray);
        EXPECT_NE(notArray.error().message.find("traceEvents member is not an array"), std::string::npos)
            << notArray.error().message;
        // Broken structure after some events: events so far kept, the stop is counted.
        auto broken = importTraceBytes("[" + good() + ", " + good(200) + " } garbage");
        EXPECT_TRUE(broken);
        EXPECT_EQ(broken->spans.size(), size_t(2));
        EXPECT_EQ(diagCount(*broken, "malformed JSON (import stopped)"), int64_t(1));
    }

TEST(ImportBadInput, TruncatedFiles)
    {
        std::vector<std::string> events;
        for (int i = 0; i < 200; ++i)
            events.push_back(good(100 + i * 20));
        const std::string full = objectTrace(events);
        // Every cut point: either a clear error (nothing usable yet) or the events before the
        // cut with a "truncated input" count. Never a crash.
        int errors = 0, partial = 0;
        for (size_t cut = 0; cut < full.size(); cut += 97) {
            auto run = importTraceBytes(std::string_view(full).substr(0, cut));
            if (!run) {
                ++errors;
                continue;
            }
            ++partial;
            EXPECT_TRUE(run->spans.size() <= 200);
            EXPECT_EQ(diagCount(*run, "truncated input"), int64_t(1));
            // The same cut through the streaming (gzip, buffered) path gives the same events.
            if (cut % 5 == 0) {
                auto streamed = importTraceBytes(gzipBytes(full.substr(0, cut)));
                EXPECT_TRUE(streamed);
                EXPECT_EQ(streamed->spans.size(), run->spans.size());
            }
        }
        EXPECT_TRUE(errors > 0);
        EXPECT_TRUE(partial > 0);
        // Truncated gzip: the inflated part is imported and the damage reported.
        const std::string gz = gzipBytes(full);
        auto cut = importTraceBytes(std::string_view(gz).substr(0, gz.size() / 2));
        if (cut) {
            EXPECT_TRUE(diagCount(*cut, "malformed JSON (import stopped)") + diagCount(*cut, "truncated input") >= 1);
        } else {
            EXPECT_TRUE(cut.error().message.find("gzip") != std::string::npos);
        }
        // Corrupt gzip: garbage after the magic.
        std::string corrupt = gz;
        for (size_t i = 20; i < corrupt.size(); i += 7)
            corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
        auto bad = importTraceBytes(corrupt);
        EXPECT_TRUE(!bad || diagCount(*bad, "malformed JSON (import stopped)") == 1 || diagCount(*bad, "truncated input") == 1);
        EXPECT_TRUE(!importTraceBytes(std::string("\x1f\x8b", 2)));
    }

TEST(ImportBadInput, DeeplyNested)
    {
        // A million levels of nesting: inside one event (simdjson's depth limit refuses the event)
        // and as the whole document. The splitter counts depth, it does not recurse.
        const int depth = 1'000'000;
        const std::string nestedArgs = "{\"ph\": \"X\", \"name\": \"deep\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1, \"args\": {\"x\": "
            + std::string(depth, '[') + std::string(depth, ']') + "}}";
        auto run = importTraceBytes(arrayTrace({good(), nestedArgs, good(300)}));
        EXPECT_TRUE(run);
        EXPECT_EQ(run->spans.size() + static_cast<size_t>(diagCount(*run, "malformed event")), size_t(3));
        auto unclosed = importTraceBytes("[" + std::string(depth, '['));
        EXPECT_TRUE(!unclosed);
        // A well-formed document whose only element is not an event: nothing to import.
        auto closed = importTraceBytes("[" + std::string(depth, '[') + std::string(depth, ']') + "]");
        EXPECT_FALSE(closed);
        auto objects = importTraceBytes("{\"traceEvents\": [], \"x\": " + std::string(depth, '{') + "}");
        EXPECT_TRUE(!objects || diagCount(*objects, "truncated input") == 1);
    }

TEST(ImportBadInput, AdversarialStrings)
    {
        // Escaped quotes and backslashes right at 64-byte block edges, brackets inside strings,
        // unicode escapes, an invalid UTF-8 byte, a 5 MB name, a huge pid.
        std::vector<std::string> events;
        for (int pad = 0; pad < 70; ++pad) {
            const std::string name = std::string(static_cast<size_t>(pad), 'a') + "\\\"}]{[\\\\\\\"" + "\\u00e9\\ud83d\\ude00";
            events.push_back("{\"ph\": \"X\", \"name\": \"" + name + "\", \"pid\": 1, \"tid\": 1, \"ts\": " + std::to_string(pad)
                             + ", \"dur\": 1}");
        }
        events.push_back("{\"ph\": \"X\", \"name\": \"bad utf8 \xff\xfe\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}");
        events.push_back("{\"ph\": \"X\", \"name\": \"" + std::string(5 << 20, 'x') + "\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}");
        events.push_back("{\"ph\": \"X\", \"name\": \"bigpid\", \"pid\": 123456789012345678901234567890, \"tid\": \"\\\"\", \"ts\": 1, \"dur\": 1}");
        auto run = importTraceBytes(arrayTrace(events));
        EXPECT_TRUE(run);
        EXPECT_EQ(run->spans.size(), size_t(72));
        // Streaming path: a 5 MB event is larger than the first read buffer, which must grow.
        auto streamed = importTraceBytes(gzipBytes(arrayTrace(events)));
        EXPECT_TRUE(streamed);
        EXPECT_EQ(streamed->spans.size(), size_t(72));
        EXPECT_EQ(diagCount(*run, "malformed event"), int64_t(1)); // the invalid UTF-8 one
        // The 5 MB name is cut to the documented limit and counted.
        EXPECT_EQ(diagCount(*run, "name truncated"), int64_t(1));
        size_t longest = 0;
        for (const std::string& t : run->strings.texts())
            longest = std::max(longest, t.size());
        EXPECT_EQ(longest, kImportNameLimit);
        bool found = false;
        for (const Span& s : run->spans)
            found |= run->strings.text(s.name) == std::string(69, 'a') + "\"}]{[\\\"" + "\xc3\xa9\xf0\x9f\x98\x80";
        EXPECT_TRUE(found);
    }

TEST(ImportBadInput, RandomMutationsNeverCrash)
    {
        // A cheap fuzz pass on every run of the suite (the libFuzzer targets go further).
        std::vector<std::string> events;
        for (int i = 0; i < 30; ++i)
            events.push_back(xEvent(i % 3 ? "cpu_op" : "kernel", "op" + std::to_string(i), 100 + i, 5, "1", std::to_string(i % 4),
                                    "\"External id\": " + std::to_string(i) + ", \"Collective name\": \"allreduce\", \"dtype\": \"Float\""));
        const std::string base = objectTrace(events, "\"distributedInfo\": {\"rank\": 0, \"world_size\": 2}", "\"baseTimeNanoseconds\": 1000");
        std::mt19937 rng(12345);
        const char alphabet[] = "{}[]\",:\\0123456789eE.-+ \ntrufalsn";
        for (int iter = 0; iter < 3000; ++iter) {
            std::string m = base;
            const int edits = 1 + static_cast<int>(rng() % 8);
            for (int k = 0; k < edits; ++k) {
                const size_t pos = rng() % m.size();
                switch (rng() % 3) {
                case 0: m[pos] = alphabet[rng() % (sizeof alphabet - 1)]; break;
                case 1: m.erase(pos, 1 + rng() % 16); break;
                default: m.insert(pos, 1, alphabet[rng() % (sizeof alphabet - 1)]);
                }
                if (m.empty())
                    m = "[";
            }
            if (iter % 2)
                m = gzipBytes(m);
            auto run = importTraceBytes(m);
            if (run) {
                EXPECT_TRUE(run->spans.size() <= 64);
            }
        }
    }

TEST(ImportBadInput, BadNsysFiles)
    {
        TempDir dir;
        // A SQLite file that is not an nsys export.
        const std::string other = dir.file("other.sqlite");
        {
            sqlite3* db = nullptr;
            sqlite3_open(other.c_str(), &db);
            sqlite3_exec(db, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
            sqlite3_close(db);
        }
        auto notNsys = importTracesToRun({other});
        EXPECT_TRUE(!notNsys);
        EXPECT_TRUE(notNsys.error().message.find("not an Nsight Systems export") != std::string::npos);
        // A truncated / corrupt one.
        const std::string good = dir.file("good.sqlite");
        {
            NsysWriter w(good);
            for (int i = 0; i < 2000; ++i)
                w.kernel(i * 100, i * 100 + 50, 0, 7, "kernel_" + std::to_string(i % 50));
        }
        std::ifstream in(good, std::ios::binary);
        const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_FALSE(image.empty());
        auto whole = importTraceBytes(image);
        EXPECT_TRUE(whole);
        EXPECT_EQ(whole->spans.size(), size_t(2000));
        for (size_t cut : {size_t(100), size_t(4096), image.size() / 2, image.size() - 1}) {
            auto run = importTraceBytes(std::string_view(image).substr(0, cut));
            EXPECT_TRUE(!run || run->spans.size() <= 2000);
        }
        std::string corrupt = image;
        for (size_t i = 4096; i < corrupt.size(); i += 511)
            corrupt[i] = static_cast<char>(~corrupt[i]);
        auto c = importTraceBytes(corrupt);
        EXPECT_TRUE(!c || c->spans.size() <= 2000);
        // Wrong types and inverted times in rows: counted.
        const std::string odd = dir.file("odd.sqlite");
        {
            NsysWriter w(odd);
            w.kernel(100, 50, 0, 7, "backwards");
            w.exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ('x', 'y', 0, 1, 7, 0, 0, 999, 999, 1)");
            w.exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 1, 7, 0, 0, 999, 999, 1)");
            w.exec("INSERT INTO NVTX_EVENTS VALUES (5, NULL, 59, 0, 0, 0, 'open range', 1, 1, NULL, 0)");
        }
        auto o = importTracesToRun({odd});
        EXPECT_TRUE(o);
        EXPECT_EQ(diagCount(*o, "negative duration"), int64_t(1));
        EXPECT_EQ(diagCount(*o, "missing ts"), int64_t(1));
        EXPECT_EQ(diagCount(*o, "unknown string id"), int64_t(1));
        EXPECT_EQ(diagCount(*o, "unmatched B/E"), int64_t(1));
        EXPECT_EQ(o->spans.size(), size_t(1));
    }

TEST(ImportBadInput, MissingAndUnknownFiles)
    {
        TempDir dir;
        auto missing = importTracesToRun({dir.file("nope.json")});
        EXPECT_TRUE(!missing);
        EXPECT_TRUE(missing.error().message.find("no such file") != std::string::npos);
        const std::string text = dir.file("x.txt");
        writeFile(text, "just some text\n");
        auto unknown = importTracesToRun({text});
        EXPECT_TRUE(!unknown);
        EXPECT_TRUE(unknown.error().message.find("not a trace") != std::string::npos);
        EXPECT_TRUE(!importTracesToRun({}));
        EXPECT_TRUE(!importTracesToRun({dir.path()}));
    }



TEST(ImportBadInput, JsonWithoutTraceEventsIsRefused)
{
    // A JSON that is not a trace must not become an empty run with exit status 0.
    for (const std::string& json : {std::string("{}"), std::string("[]"), std::string("{\"traceEvents\": []}"),
                                   std::string("{\"name\": \"a config file\", \"layers\": [1, 2]}")}) {
        auto run = importTraceBytes(json);
        ASSERT_FALSE(run) << json;
        EXPECT_NE(run.error().message.find("no trace events"), std::string::npos) << run.error().message;
    }
    // Events that are all unusable: refused too, saying so.
    auto skipped = importTraceBytes("[{\"ph\": \"X\", \"name\": \"no ts\", \"pid\": 1, \"tid\": 1, \"dur\": 5}]");
    ASSERT_FALSE(skipped);
    EXPECT_NE(skipped.error().message.find("no usable trace events"), std::string::npos) << skipped.error().message;
}

TEST(ImportBadInput, LongNamesAreCutAtACharacterBoundary)
{
    // 1023 ASCII bytes then "é" (2 bytes, straddling the 1024 limit): the cut keeps 1023 bytes,
    // never half a character. A 5000-byte thread name is cut too. Both counted.
    const std::string name = std::string(1023, 'a') + "\u00e9" + std::string(100, 'b');
    const std::string thread = std::string(5000, 't');
    auto run = importTraceBytes(arrayTrace({
        "{\"ph\": \"X\", \"name\": \"" + name + "\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}",
        "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"" + thread + "\"}}",
    }));
    ASSERT_TRUE(run) << run.error().message;
    ASSERT_EQ(run->spans.size(), 1u);
    EXPECT_EQ(run->strings.text(run->spans[0].name), std::string(1023, 'a'));
    EXPECT_EQ(run->lanes[0].name.size(), kImportNameLimit);
    EXPECT_EQ(diagCount(*run, "name truncated"), 2);
}
