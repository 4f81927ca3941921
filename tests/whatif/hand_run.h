// A hand-built DDP run for the what-if tests: two ranks, four parameters, two recorded buckets,
// every instant chosen so that the model's fit and replay can be derived by hand (test comments).
//
// Parameters in packing order (last layer first), float32:
//   p0 "head.bias"   64 elements =  256 B
//   p1 "head.weight" 192         =  768 B
//   p2 "l1.weight"   256         = 1024 B
//   p3 "l0.weight"   256         = 1024 B
// Recorded caps: first 1 KiB, then 25 KiB -> bucket 0 = {p0, p1} (1024 B, closes at the cap),
// bucket 1 = {p2, p3} (2048 B, the last bucket, under its cap). Pairwise exchange (2 ranks).
//
// Step timeline in µs (step 0 starts at `origin`):
//                    rank 0            rank 1
//   forward          [0, 100)          [0, 100)
//   backward         [100, 400)        [100, 420)   cut at the ready instants
//   ready p0,p1      150, 200          150, 210
//   ready p2,p3      300, 400          300, 420     the last gradient of any rank: 420
//   launch b0        200               210          (ready; no launch cost)
//   launch b1        400               420
//   link: no latency; 60 µs per KiB while some rank is in backward (before 420), 20 µs per KiB
//   after it
//     b0 starts at max(200, 210) = 210, moves 1 KiB during backward: done 270
//     b1 starts at max(400, 420, 270) = 420, moves 2 KiB after backward: done 460
//   wait             [400, 465)        [420, 465)   460 + 5 µs of write-back ("post")
//   optimizer        [465, 515)        [465, 515)
// Step time 515 µs on both ranks; 16 samples per rank.
// step(n, origin, slow) records a step whose link is `slow` times slower: b0 done 210 + 60 slow,
// b1 done 420 + 40 slow, the wait and the optimizer after it; step(n, origin, slow, idle) makes
// the transfer after backward `idle` times as long again: b1 done 420 + 40 slow idle.
#pragma once

#include "lockstep/core/types.h"
#include "lockstep/core/whatif.h"

#include <string>
#include <vector>

namespace whatiftest {

using lockstep::core::TimeNs;
namespace core = lockstep::core;

constexpr TimeNs us(double v) { return static_cast<TimeNs>(v * 1000); }

struct RankTimes {
    TimeNs ready[4];
    TimeNs backwardEnd; // = launch of bucket 1 = wait start
};
inline constexpr RankTimes kRank0{{us(150), us(200), us(300), us(400)}, us(400)};
inline constexpr RankTimes kRank1{{us(150), us(210), us(300), us(420)}, us(420)};
inline const char* const kParams[4] = {"head.bias", "head.weight", "l1.weight", "l0.weight"};
inline constexpr int64_t kNumel[4] = {64, 192, 256, 256};

class HandRun {
public:
    HandRun()
    {
        core::RunConfig& c = m_run.config;
        c.name = "hand";
        c.model = "mlp";
        c.worldSize = 2;
        c.backend = "gloo";
        c.device = "cpu";
        c.bucketCapBytes = 25 * 1024;
        c.firstBucketCapBytes = 1024;
        c.batchPerRank = 16;
        c.warmupSteps = 0;
        c.compress = "none";
        c.status = core::RunStatus::Completed;
        c.extra["allreduce"] = "pairwise send/recv exchange (world of 2)";
        c.extra[core::kParamNumelKey] = core::formatParamNumel({{64, 192}, {256, 256}});
        m_run.buckets.push_back(core::Bucket{0, 1024, {kParams[0], kParams[1]}});
        m_run.buckets.push_back(core::Bucket{1, 2048, {kParams[2], kParams[3]}});
        for (int32_t r = 0; r < 2; ++r) {
            m_run.ranks.push_back(core::RankInfo{.rank = r, .host = "h", .device = "cpu"});
            m_run.lanes.push_back(core::Lane{core::LaneId{static_cast<uint32_t>(2 * r)}, r,
                                             core::LaneKind::Compute, -1, -1, "compute"});
            m_run.lanes.push_back(core::Lane{core::LaneId{static_cast<uint32_t>(2 * r + 1)}, r,
                                             core::LaneKind::Comm, -1, -1, "comm"});
        }
        m_run.clocksCorrected = true;
    }

    // One step as in the header, starting at `origin`; its link `slow` times slower, and its
    // transfer after backward `idle` times as long again.
    HandRun& step(int32_t step, TimeNs origin, double slow = 1.0, double idle = 1.0)
    {
        const TimeNs done0 = us(210 + 60 * slow), done1 = us(420 + 40 * slow * idle);
        const RankTimes* times[2] = {&kRank0, &kRank1};
        for (int32_t r = 0; r < 2; ++r) {
            const RankTimes& t = *times[r];
            const core::LaneId compute{static_cast<uint32_t>(2 * r)}, comm{static_cast<uint32_t>(2 * r + 1)};
            span(compute, core::SpanKind::Forward, origin, origin + us(100), step, "fwd");
            span(compute, core::SpanKind::Backward, origin + us(100), origin + t.ready[1], step, "head");
            span(compute, core::SpanKind::Backward, origin + t.ready[1], origin + t.ready[2], step, "l1");
            span(compute, core::SpanKind::Backward, origin + t.ready[2], origin + t.ready[3], step, "l0");
            for (int p = 0; p < 4; ++p) {
                core::Instant in;
                in.ts = origin + t.ready[p];
                in.lane = compute;
                in.name = m_run.strings.intern(kParams[p]);
                in.step = step;
                in.bucket = p / 2;
                in.kind = core::InstantKind::GradReady;
                m_run.instants.push_back(in);
            }
            span(comm, core::SpanKind::Comm, origin + t.ready[1], origin + done0, step, "allreduce bucket 0", 0, 1024);
            span(comm, core::SpanKind::Comm, origin + t.ready[3], origin + done1, step, "allreduce bucket 1", 1, 2048);
            span(compute, core::SpanKind::Wait, origin + t.backwardEnd, origin + done1 + us(5), step, "wait for buckets");
            span(compute, core::SpanKind::Optimizer, origin + done1 + us(5), origin + done1 + us(55), step, "optimizer sgd");
            m_run.steps.push_back(core::Step{r, step, origin, origin + done1 + us(55), 1.0, 16});
        }
        return *this;
    }

    core::Run& run() { return m_run; }
    core::Run build()
    {
        m_run.normalize();
        return m_run;
    }

private:
    void span(core::LaneId lane, core::SpanKind kind, TimeNs a, TimeNs b, int32_t step, const char* name,
              int32_t bucket = core::kNoBucket, int64_t bytes = 0)
    {
        core::Span s;
        s.start = a;
        s.end = b;
        s.lane = lane;
        s.kind = kind;
        s.step = step;
        s.bucket = bucket;
        s.bytes = bytes;
        s.name = m_run.strings.intern(name);
        m_run.spans.push_back(s);
    }

    core::Run m_run;
};

} // namespace whatiftest
