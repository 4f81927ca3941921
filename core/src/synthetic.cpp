// Synthetic DDP runs: a deterministic, plausible timeline of any size for tests, benchmarks and
// the UI's performance checks.
//
// The model of one step (all ranks start a step together, as synchronous DDP does):
//   compute lane: data | forward | backward segments ... | wait | optimizer
//   comm lane:                     bucket 0 | bucket 1 | ...
// Backward is cut into buckets × backwardSegmentsPerBucket segments; each segment ends at one
// parameter's gradient-ready instant. Bucket b is ready when its last segment ends; its
// all-reduce launches when it is ready and the previous bucket's all-reduce is done on that
// rank (one communication stream, buckets in order). A collective cannot finish before every
// rank has joined it, so its completion is the latest launch over ranks plus its duration:
// that is how a late rank (the straggler, whose data loading is delayed) makes the others wait.
// The wait span runs from the end of backward to the completion of the last bucket, then the
// optimizer runs; the next step starts when the slowest rank has finished the optimizer.
#include "lockstep/core/synthetic.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace lockstep::core {
namespace {

// splitmix64: tiny, fast and deterministic across platforms (std:: distributions are not).
class Rng {
public:
    explicit Rng(uint64_t seed) : m_state(seed) {}
    uint64_t next()
    {
        uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // A factor in [1 - amplitude, 1 + amplitude].
    double jitter(double amplitude)
    {
        const double u = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
        return 1.0 + amplitude * (2.0 * u - 1.0);
    }

private:
    uint64_t m_state;
};

// ±5% keeps steps plausible (real steps vary a little) without hiding the straggler.
constexpr double kJitter = 0.05;
// Shares of the nominal step (the rest is idle slack between steps).
constexpr double kDataShare = 0.05;
constexpr double kForwardShare = 0.25;
constexpr double kBackwardShare = 0.45;
constexpr double kOptimizerShare = 0.10;
constexpr TimeNs kRunStartNs = 1'700'000'000'000'000'000; // a plausible CLOCK_REALTIME
constexpr int64_t kBatchPerRank = 32;

TimeNs scaled(TimeNs base, double share, Rng& rng)
{
    return std::max<TimeNs>(1, static_cast<TimeNs>(std::llround(static_cast<double>(base) * share * rng.jitter(kJitter))));
}

void describeRun(RunConfig& c, const SyntheticParams& p, int32_t world, int32_t steps, int32_t nBuckets, int32_t segs)
{
    c.name = "synthetic";
    c.source = "synthetic";
    c.model = "synthetic";
    c.modelArgs = "buckets=" + std::to_string(nBuckets) + " segments=" + std::to_string(segs);
    c.worldSize = world;
    c.backend = "gloo";
    c.device = "cpu";
    c.batchPerRank = kBatchPerRank;
    c.stepsPlanned = steps;
    c.optimizer = "sgd";
    c.compress = "none";
    c.host = "localhost";
    c.commandLine = "synthetic";
    c.createdNs = kRunStartNs;
    c.status = RunStatus::Completed;
    if (p.stragglerRank >= 0)
        c.extra["straggler_rank"] = std::to_string(p.stragglerRank);
}

// Buckets in backward order: bucket 0 holds the last layers (capped smaller, like PyTorch's
// first bucket), so parameter names count down from the top layer. Returns each bucket's
// parameter names, interned.
std::vector<std::vector<StringId>> addBuckets(Run& run, int32_t nBuckets, int32_t segs)
{
    const int32_t nParams = nBuckets * segs;
    std::vector<std::vector<StringId>> paramIds(nBuckets);
    for (int32_t b = 0; b < nBuckets; ++b) {
        Bucket bucket;
        bucket.index = b;
        bucket.bytes = b == 0 ? (1ll << 20) : (8ll << 20) + (static_cast<int64_t>(b) << 16);
        for (int32_t k = 0; k < segs; ++k) {
            const int32_t layer = nParams - 1 - (b * segs + k);
            std::string name = "layers." + std::to_string(layer / 2) + (layer % 2 ? ".bias" : ".weight");
            paramIds[b].push_back(run.strings.intern(name));
            bucket.params.push_back(std::move(name));
        }
        run.buckets.push_back(std::move(bucket));
    }
    return paramIds;
}

// Each rank on one host, with a compute lane (id 2r) and a comm lane (id 2r + 1).
void addRanksAndLanes(Run& run, int32_t world)
{
    for (int32_t r = 0; r < world; ++r) {
        RankInfo info;
        info.rank = r;
        info.host = "localhost";
        info.pid = 1000 + r;
        info.device = "cpu";
        run.ranks.push_back(info);
        Lane compute;
        compute.id = LaneId{static_cast<uint32_t>(2 * r)};
        compute.rank = r;
        compute.kind = LaneKind::Compute;
        compute.name = "compute";
        Lane comm;
        comm.id = LaneId{static_cast<uint32_t>(2 * r + 1)};
        comm.rank = r;
        comm.kind = LaneKind::Comm;
        comm.name = "comm";
        run.lanes.push_back(std::move(compute));
        run.lanes.push_back(std::move(comm));
    }
}

// Writes the run's steps one after another (the model at the top of the file). The random
// draws happen in one fixed order, so a seed always gives the same run.
class StepWriter {
public:
    StepWriter(Run& run, const SyntheticParams& p, Rng& rng, int32_t world, int32_t steps, int32_t nBuckets,
               int32_t segs, TimeNs stepNs)
        : m_run(run), m_p(p), m_rng(rng), m_world(world), m_nBuckets(nBuckets), m_segs(segs),
          m_nParams(nBuckets * segs), m_stepNs(stepNs), m_paramIds(addBuckets(run, nBuckets, segs)),
          m_ready(world, std::vector<TimeNs>(nBuckets)), m_launch(world, std::vector<TimeNs>(nBuckets)),
          m_backwardEnd(world), m_dur(nBuckets), m_completion(nBuckets)
    {
        addRanksAndLanes(run, world);
        m_nData = run.strings.intern("data");
        m_nForward = run.strings.intern("forward");
        m_nBackward = run.strings.intern("backward");
        m_nWait = run.strings.intern("wait");
        m_nOptimizer = run.strings.intern("optimizer.step");
        m_nAllReduce = run.strings.intern("allreduce");
        layOut(steps);
    }

    // Step s on every rank, starting at t0. Returns when the next step starts.
    TimeNs writeStep(int32_t s, TimeNs t0)
    {
        for (int32_t r = 0; r < m_world; ++r)
            writeUntilBackwardEnd(s, r, t0);
        scheduleCollectives();
        TimeNs nextStart = 0;
        for (int32_t r = 0; r < m_world; ++r)
            nextStart = std::max(nextStart, finishRank(s, r, t0));
        // A little slack between steps (the Python loop, logging) so steps do not touch.
        return nextStart + m_stepNs / 20;
    }

private:
    // Spans are written straight into their final place, lane after lane, so they are already
    // in the invariant order and normalize() only confirms it. Every rank-step has exactly
    // data, forward, nParams segments, wait and optimizer on the compute lane (the last bucket
    // launches at the end of backward at the earliest, so the wait is never empty).
    void layOut(int32_t steps)
    {
        const size_t computePerStep = 4 + static_cast<size_t>(m_nParams);
        const size_t computePerLane = computePerStep * steps;
        const size_t commPerLane = static_cast<size_t>(m_nBuckets) * steps;
        m_run.spans.resize((computePerLane + commPerLane) * m_world);
        m_run.instants.resize(static_cast<size_t>(m_nParams) * steps * m_world);
        m_cursor.resize(2 * m_world);
        for (int32_t r = 0; r < m_world; ++r) {
            m_cursor[2 * r] = r * (computePerLane + commPerLane);
            m_cursor[2 * r + 1] = m_cursor[2 * r] + computePerLane;
        }
        m_instantCursor.resize(m_world);
        for (int32_t r = 0; r < m_world; ++r)
            m_instantCursor[r] = static_cast<size_t>(r) * m_nParams * steps;
        m_run.steps.reserve(static_cast<size_t>(m_world) * steps);
    }

    // Rank r's data, forward and backward segments (with their gradient-ready instants) from t0:
    // when each bucket is ready and when backward ends.
    void writeUntilBackwardEnd(int32_t s, int32_t r, TimeNs t0)
    {
        const LaneId lane{static_cast<uint32_t>(2 * r)};
        size_t& out = m_cursor[2 * r];
        TimeNs t = t0;
        auto add = [&](SpanKind kind, StringId name, TimeNs length, int32_t bucket) {
            Span sp;
            sp.start = t;
            sp.end = t + length;
            sp.lane = lane;
            sp.name = name;
            sp.step = s;
            sp.bucket = bucket;
            sp.kind = kind;
            m_run.spans[out++] = sp;
            t = sp.end;
        };
        TimeNs delay = r == m_p.stragglerRank ? std::max<TimeNs>(0, m_p.stragglerDelayNs) : 0;
        if (m_p.arrivalNoiseNs > 0) // drawn only when asked for, so other runs stay as they were
            delay += static_cast<TimeNs>(m_rng.next() % static_cast<uint64_t>(m_p.arrivalNoiseNs));
        add(SpanKind::DataLoad, m_nData, scaled(m_stepNs, kDataShare, m_rng) + delay, kNoBucket);
        add(SpanKind::Forward, m_nForward, scaled(m_stepNs, kForwardShare, m_rng), kNoBucket);
        const double segShare = kBackwardShare / m_nParams;
        for (int32_t b = 0; b < m_nBuckets; ++b) {
            for (int32_t k = 0; k < m_segs; ++k) {
                add(SpanKind::Backward, m_nBackward, scaled(m_stepNs, segShare, m_rng), b);
                Instant in;
                in.ts = t;
                in.lane = lane;
                in.name = m_paramIds[b][k];
                in.step = s;
                in.bucket = b;
                in.kind = InstantKind::GradReady;
                m_run.instants[m_instantCursor[r]++] = in;
            }
            m_ready[r][b] = t;
        }
        m_backwardEnd[r] = t;
    }

    // Each bucket's launch on every rank and its completion.
    void scheduleCollectives()
    {
        // One duration per bucket and step, shared by all ranks (it is one collective).
        for (int32_t b = 0; b < m_nBuckets; ++b)
            m_dur[b] = scaled(m_stepNs, kBackwardShare * m_p.commFraction / m_nBuckets, m_rng);
        // Collectives: launch in order on each rank, complete together after the last launch.
        TimeNs prevCompletion = 0;
        for (int32_t b = 0; b < m_nBuckets; ++b) {
            TimeNs last = 0;
            for (int32_t r = 0; r < m_world; ++r) {
                m_launch[r][b] = std::max(m_ready[r][b], prevCompletion);
                last = std::max(last, m_launch[r][b]);
            }
            m_completion[b] = last + m_dur[b];
            prevCompletion = m_completion[b];
        }
    }

    // Rank r's all-reduces, wait and optimizer, and the step's record. Returns when it ends.
    TimeNs finishRank(int32_t s, int32_t r, TimeNs t0)
    {
        const LaneId commLane{static_cast<uint32_t>(2 * r + 1)};
        for (int32_t b = 0; b < m_nBuckets; ++b) {
            Span sp;
            sp.start = m_launch[r][b];
            sp.end = m_completion[b];
            sp.bytes = m_run.buckets[b].bytes;
            sp.lane = commLane;
            sp.name = m_nAllReduce;
            sp.step = s;
            sp.bucket = b;
            sp.kind = SpanKind::Comm;
            m_run.spans[m_cursor[2 * r + 1]++] = sp;
        }
        const LaneId lane{static_cast<uint32_t>(2 * r)};
        TimeNs t = m_backwardEnd[r];
        // The last bucket is ready at the end of backward and takes at least 1 ns, so
        // allDone > t: the wait span always exists (the span count in layOut relies on it).
        const TimeNs allDone = m_completion[m_nBuckets - 1];
        m_run.spans[m_cursor[2 * r]++] = Span{t, allDone, 0, lane, m_nWait, s, kNoBucket, SpanKind::Wait};
        t = allDone;
        const TimeNs opt = scaled(m_stepNs, kOptimizerShare, m_rng);
        m_run.spans[m_cursor[2 * r]++] = Span{t, t + opt, 0, lane, m_nOptimizer, s, kNoBucket, SpanKind::Optimizer};
        t += opt;
        Step st;
        st.rank = r;
        st.step = s;
        st.start = t0;
        st.end = t;
        st.loss = 2.5 / (1.0 + 0.05 * s);
        st.samples = kBatchPerRank;
        // The training thread was on a CPU for the step less its wait, and waited for one
        // a little (deterministic: the generator's output is a function of its parameters).
        st.cpuNs = (t - t0) - (allDone - m_backwardEnd[r]);
        st.runqNs = 1000 * ((s + r) % 3);
        m_run.steps.push_back(st);
        return t;
    }

    Run& m_run;
    const SyntheticParams& m_p;
    Rng& m_rng;
    const int32_t m_world, m_nBuckets, m_segs, m_nParams;
    const TimeNs m_stepNs;
    const std::vector<std::vector<StringId>> m_paramIds;
    StringId m_nData{}, m_nForward{}, m_nBackward{}, m_nWait{}, m_nOptimizer{}, m_nAllReduce{};
    std::vector<size_t> m_cursor;        // per lane: where its next span goes
    std::vector<size_t> m_instantCursor; // per rank: where its next instant goes
    std::vector<std::vector<TimeNs>> m_ready, m_launch; // [rank][bucket]
    std::vector<TimeNs> m_backwardEnd;                  // per rank
    std::vector<TimeNs> m_dur, m_completion;            // per bucket
};

} // namespace

Run makeSyntheticRun(const SyntheticParams& p)
{
    Run run;
    const int32_t world = std::max<int32_t>(1, p.worldSize);
    const int32_t steps = std::max<int32_t>(0, p.steps);
    const int32_t nBuckets = std::max<int32_t>(1, p.buckets);
    const int32_t segs = std::max<int32_t>(1, p.backwardSegmentsPerBucket);
    const TimeNs stepNs = std::max<TimeNs>(1000, p.stepNs);
    Rng rng(p.seed);

    describeRun(run.config, p, world, steps, nBuckets, segs);
    run.clocksCorrected = true;

    StepWriter writer(run, p, rng, world, steps, nBuckets, segs, stepNs);
    TimeNs t0 = kRunStartNs + 1'000'000;
    for (int32_t s = 0; s < steps; ++s)
        t0 = writer.writeStep(s, t0);
    run.config.endedNs = t0;

    // Steps were generated step-major; normalize() puts them rank-major as the invariant says.
    run.normalize();
    return run;
}

Run makeSyntheticRunWithSpans(int64_t totalSpans, int32_t worldSize)
{
    SyntheticParams p;
    p.worldSize = std::max<int32_t>(1, worldSize);
    p.buckets = 8;
    p.backwardSegmentsPerBucket = 16;
    // Per rank and step: data, forward, 128 backward segments, wait, optimizer, 8 all-reduces.
    const int64_t perRankStep = 4 + static_cast<int64_t>(p.buckets) * p.backwardSegmentsPerBucket + p.buckets;
    p.steps = static_cast<int32_t>(std::max<int64_t>(1, totalSpans / (perRankStep * p.worldSize)));
    if (p.worldSize > 1) {
        // A mild straggler so the straggler analysis has something to find.
        p.stragglerRank = p.worldSize - 1;
        p.stragglerDelayNs = p.stepNs / 10;
    }
    return makeSyntheticRun(p);
}

} // namespace lockstep::core
