// Hand-built runs for the analysis tests: small integer timelines whose expected metrics the
// tests derive by hand. Times are in whatever unit the test picks (ns, or multiples of 1 µs).
#pragma once

#include "lockstep/core/types.h"

#include <string>

namespace lockstep::test {

class RunBuilder {
public:
    explicit RunBuilder(int32_t worldSize = 1, int32_t warmupSteps = 0)
    {
        m_run.config.name = "hand";
        m_run.config.worldSize = worldSize;
        m_run.config.warmupSteps = warmupSteps;
        for (int32_t r = 0; r < worldSize; ++r) {
            core::RankInfo info;
            info.rank = r;
            m_run.ranks.push_back(info);
        }
    }
    core::LaneId lane(int32_t rank, core::LaneKind kind)
    {
        core::Lane l;
        l.id = core::LaneId{static_cast<uint32_t>(m_run.lanes.size())};
        l.rank = rank;
        l.kind = kind;
        l.name = core::laneKindName(kind);
        m_run.lanes.push_back(l);
        return l.id;
    }
    RunBuilder& span(core::LaneId lane, core::SpanKind kind, core::TimeNs start, core::TimeNs end,
                     int32_t step = core::kNoStep, int32_t bucket = core::kNoBucket, int64_t bytes = 0)
    {
        core::Span s;
        s.start = start;
        s.end = end;
        s.lane = lane;
        s.kind = kind;
        s.step = step;
        s.bucket = bucket;
        s.bytes = bytes;
        s.name = m_run.strings.intern(core::spanKindName(kind));
        m_run.spans.push_back(s);
        return *this;
    }
    RunBuilder& ready(core::LaneId lane, core::TimeNs ts, int32_t step, int32_t bucket,
                      core::InstantKind kind = core::InstantKind::GradReady)
    {
        core::Instant in;
        in.ts = ts;
        in.lane = lane;
        in.step = step;
        in.bucket = bucket;
        in.kind = kind;
        m_run.instants.push_back(in);
        return *this;
    }
    RunBuilder& step(int32_t rank, int32_t step, core::TimeNs start, core::TimeNs end, int64_t samples = 0)
    {
        core::Step s;
        s.rank = rank;
        s.step = step;
        s.start = start;
        s.end = end;
        s.samples = samples;
        m_run.steps.push_back(s);
        return *this;
    }
    RunBuilder& bucket(int32_t index, int64_t bytes, std::vector<std::string> params = {})
    {
        m_run.buckets.push_back(core::Bucket{index, bytes, std::move(params)});
        return *this;
    }
    core::Run& run() { return m_run; }
    core::Run build()
    {
        m_run.normalize();
        return m_run;
    }

private:
    core::Run m_run;
};

} // namespace lockstep::test
