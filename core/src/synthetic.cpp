// Synthetic DDP runs: a deterministic, plausible timeline of any size for tests, benchmarks and
// the UI's performance checks.
//
// The model of one step (all ranks start a step together, as synchronous DDP does):
//   compute lane: data | forward ... | backward segments ... | wait | optimizer
//   comm lane:                          bucket 0 | bucket 1 | ...
// Forward is cut into forwardSpans spans (one per top-level module). Backward is cut into
// buckets × backwardSegmentsPerBucket segments; each segment ends at one parameter's
// gradient-ready instant. Bucket b is ready when its last segment ends; its all-reduce launches
// when it is ready and the previous bucket's all-reduce is done on that rank (one communication
// stream, buckets in order). A collective cannot finish before every rank has joined it, so its
// completion is the latest launch over ranks plus its duration: that is how a late rank (the
// straggler, whose data loading is delayed, or a rank with a hiccup) makes the others wait.
// The wait span runs from the end of backward to the completion of the last bucket, then the
// optimizer runs; the next step starts when the slowest rank has finished the optimizer.
//
// One generator, two outputs: StepGenerator makes one step of every rank at a time (a StepBatch);
// makeSyntheticRun places the batches into a Run, writeSyntheticRun writes each batch to a run
// file in one transaction and forgets it (bounded memory for 100 M spans).
#include "lockstep/core/synthetic.h"

#include "lockstep/core/clock_sync.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
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
    // Uniform in [0, 1).
    double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
    // A factor in [1 - amplitude, 1 + amplitude].
    double jitter(double amplitude) { return 1.0 + amplitude * (2.0 * unit() - 1.0); }
    // The whole state: where the draws are, to come back to (Replay).
    uint64_t state() const { return m_state; }
    void seek(uint64_t state) { m_state = state; }

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

// The parameters, clamped to what the model can make.
struct Shape {
    int32_t world = 1, steps = 0, nBuckets = 1, segs = 1, forward = 1;
    TimeNs stepNs = 0;
    int32_t nParams() const { return nBuckets * segs; }
    // Every rank-step has exactly data, the forward spans, nParams segments, wait and optimizer on
    // the compute lane (the last bucket launches at the end of backward at the earliest, so the
    // wait is never empty), one all-reduce per bucket on the comm lane, one instant per parameter.
    size_t computePerRankStep() const { return 3 + static_cast<size_t>(forward) + static_cast<size_t>(nParams()); }
    size_t commPerRankStep() const { return static_cast<size_t>(nBuckets); }
};

Shape shapeOf(const SyntheticParams& p)
{
    Shape s;
    s.world = std::max<int32_t>(1, p.worldSize);
    s.steps = std::max<int32_t>(0, p.steps);
    s.nBuckets = std::max<int32_t>(1, p.buckets);
    s.segs = std::max<int32_t>(1, p.backwardSegmentsPerBucket);
    s.forward = std::max<int32_t>(1, p.forwardSpans);
    s.stepNs = std::max<TimeNs>(1000, p.stepNs);
    return s;
}

std::string hostName(const SyntheticParams& p, int32_t rank)
{
    if (p.ranksPerHost <= 0)
        return "localhost";
    char buf[32];
    std::snprintf(buf, sizeof buf, "node-%03d", rank / p.ranksPerHost);
    return buf;
}

void describeRun(RunConfig& c, const SyntheticParams& p, const Shape& shape)
{
    c.name = "synthetic";
    c.source = "synthetic";
    c.model = "synthetic";
    c.modelArgs = "buckets=" + std::to_string(shape.nBuckets) + " segments=" + std::to_string(shape.segs);
    if (shape.forward > 1)
        c.modelArgs += " forward=" + std::to_string(shape.forward);
    c.worldSize = shape.world;
    c.backend = "gloo";
    c.device = "cpu";
    c.batchPerRank = kBatchPerRank;
    c.stepsPlanned = shape.steps;
    c.optimizer = "sgd";
    c.compress = "none";
    c.host = hostName(p, 0);
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

// The rank's record. With hosts, ranks on rank 0's host share its boot id (one clock); the
// others carry a measured offset of 0 whose round trip bounds it by clockUncertaintyNs.
RankInfo rankInfo(const SyntheticParams& p, int32_t r)
{
    RankInfo info;
    info.rank = r;
    info.host = hostName(p, r);
    info.pid = 1000 + r;
    info.device = "cpu";
    if (p.ranksPerHost > 0) {
        info.bootId = "synthetic-boot-" + info.host;
        if (r / p.ranksPerHost != 0) {
            const TimeNs u = std::max<TimeNs>(1, p.clockUncertaintyNs);
            info.clockRttNs = 2 * u;
            info.clockUncertaintyNs = u;
            info.clockSyncStartNs = kRunStartNs;
        }
    }
    return info;
}

// Each rank with a compute lane (id 2r) and a comm lane (id 2r + 1).
void addRanksAndLanes(Run& run, const SyntheticParams& p, int32_t world)
{
    for (int32_t r = 0; r < world; ++r) {
        run.ranks.push_back(rankInfo(p, r));
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
    // What a reader decides about these clocks (clock_sync.h), so the Run in memory and the one
    // loaded from its file agree. Ranks without hosts keep their defaults, as they always had.
    if (p.ranksPerHost > 0)
        alignClocks(run.ranks, true);
}

// One step of every rank, in the lanes' time order: what either output takes at a time.
struct StepBatch {
    explicit StepBatch(int32_t world) : compute(world), comm(world), instants(world) {}
    void clear()
    {
        for (size_t r = 0; r < compute.size(); ++r)
            clearRank(r);
        steps.clear();
    }
    void clearRank(size_t r)
    {
        compute[r].clear();
        comm[r].clear();
        instants[r].clear();
    }
    std::vector<std::vector<Span>> compute, comm; // [rank]: the lane's spans of this step
    std::vector<std::vector<Instant>> instants;   // [rank]
    std::vector<Step> steps;                      // one per rank, in the order they finished
};

// What one rank's steps need from the whole run so that they can be made alone, rank after rank,
// exactly as they are in the run (writeSyntheticRun's rank-major order): when each step starts,
// when each collective completes, and where the generator's draws stood when the rank's part of
// the step began and when its finish began. 16 bytes per rank-step: 8 MB for 100 M spans.
struct Replay {
    std::vector<TimeNs> t0;                        // [step]
    std::vector<TimeNs> completion;                // [step * buckets + bucket]
    std::vector<uint64_t> startState, finishState; // [step * world + rank]
    TimeNs endNs = 0;
};

// Makes the run's steps one after another (the model at the top of the file) into a StepBatch.
// The constructor fills the run's skeleton (buckets, ranks, lanes, every string). The random
// draws happen in one fixed order, so a seed always gives the same run; draws for a feature
// happen only when it is asked for, so runs without it stay as they were.
class StepGenerator {
public:
    StepGenerator(Run& skeleton, const SyntheticParams& p, const Shape& shape)
        : m_p(p), m_rng(p.seed), m_world(shape.world), m_nBuckets(shape.nBuckets),
          m_segs(shape.segs), m_nParams(shape.nParams()), m_stepNs(shape.stepNs),
          m_paramIds(addBuckets(skeleton, shape.nBuckets, shape.segs)), m_bucketBytes(bucketBytes(skeleton)),
          m_ready(m_world, std::vector<TimeNs>(m_nBuckets)), m_launch(m_world, std::vector<TimeNs>(m_nBuckets)),
          m_backwardEnd(m_world), m_dur(m_nBuckets), m_completion(m_nBuckets)
    {
        addRanksAndLanes(skeleton, p, m_world);
        StringTable& st = skeleton.strings;
        m_nData = st.intern("data");
        m_nForward.push_back(st.intern("forward"));
        m_nBackward = st.intern("backward");
        m_nWait = st.intern("wait");
        m_nOptimizer = st.intern("optimizer.step");
        m_nAllReduce = st.intern("allreduce");
        if (shape.forward > 1) {
            m_nForward.clear();
            for (int32_t k = 0; k < shape.forward; ++k)
                m_nForward.push_back(st.intern("forward.module" + std::to_string(k)));
        }
    }

    // Step s on every rank, starting at t0, into `out` (cleared first); with `record`, notes
    // what replayRank needs. Returns when the next step starts.
    TimeNs generate(int32_t s, TimeNs t0, StepBatch& out, Replay* record = nullptr)
    {
        out.clear();
        if (record)
            record->t0.push_back(t0);
        for (int32_t r = 0; r < m_world; ++r) {
            if (record)
                record->startState.push_back(m_rng.state());
            untilBackwardEnd(s, r, t0, out);
        }
        scheduleCollectives();
        if (record)
            record->completion.insert(record->completion.end(), m_completion.begin(), m_completion.end());
        TimeNs nextStart = 0;
        for (int32_t r = 0; r < m_world; ++r) {
            if (record)
                record->finishState.push_back(m_rng.state());
            nextStart = std::max(nextStart, finishRank(s, r, t0, out));
        }
        // A little slack between steps (the Python loop, logging) so steps do not touch.
        return nextStart + m_stepNs / 20;
    }

    // Rank r's step s alone, as generate() made it, into `out`'s rank r (cleared first) and
    // out.steps (appended).
    void replayRank(int32_t s, int32_t r, const Replay& replay, StepBatch& out)
    {
        out.clearRank(static_cast<size_t>(r));
        const size_t i = static_cast<size_t>(s) * m_world + r;
        const TimeNs t0 = replay.t0[s];
        m_rng.seek(replay.startState[i]);
        untilBackwardEnd(s, r, t0, out);
        // scheduleCollectives' launches of this rank, from the completions every rank shares.
        TimeNs prevCompletion = 0;
        for (int32_t b = 0; b < m_nBuckets; ++b) {
            m_completion[b] = replay.completion[static_cast<size_t>(s) * m_nBuckets + b];
            m_launch[r][b] = std::max(m_ready[r][b], prevCompletion);
            prevCompletion = m_completion[b];
        }
        m_rng.seek(replay.finishState[i]);
        finishRank(s, r, t0, out);
    }

private:
    static std::vector<int64_t> bucketBytes(const Run& run)
    {
        std::vector<int64_t> bytes;
        for (const Bucket& b : run.buckets)
            bytes.push_back(b.bytes);
        return bytes;
    }

    // How late rank r starts its step: the straggler's delay, arrival noise and hiccups.
    TimeNs startDelay(int32_t r)
    {
        TimeNs delay = r == m_p.stragglerRank ? std::max<TimeNs>(0, m_p.stragglerDelayNs) : 0;
        if (m_p.arrivalNoiseNs > 0) // drawn only when asked for, so other runs stay as they were
            delay += static_cast<TimeNs>(m_rng.next() % static_cast<uint64_t>(m_p.arrivalNoiseNs));
        if (m_p.hiccupChance > 0 && m_rng.unit() < m_p.hiccupChance)
            delay += std::max<TimeNs>(0, m_p.hiccupNs);
        return delay;
    }

    // Rank r's data, forward and backward segments (with their gradient-ready instants) from t0:
    // when each bucket is ready and when backward ends.
    void untilBackwardEnd(int32_t s, int32_t r, TimeNs t0, StepBatch& out)
    {
        const LaneId lane{static_cast<uint32_t>(2 * r)};
        std::vector<Span>& spans = out.compute[r];
        TimeNs t = t0;
        auto add = [&](SpanKind kind, StringId name, TimeNs length, int32_t bucket) {
            spans.push_back(Span{t, t + length, 0, lane, name, s, bucket, kind});
            t += length;
        };
        const TimeNs delay = startDelay(r);
        add(SpanKind::DataLoad, m_nData, scaled(m_stepNs, kDataShare, m_rng) + delay, kNoBucket);
        const double forwardShare = kForwardShare / static_cast<double>(m_nForward.size());
        for (const StringId name : m_nForward)
            add(SpanKind::Forward, name, scaled(m_stepNs, forwardShare, m_rng), kNoBucket);
        const double segShare = kBackwardShare / m_nParams;
        for (int32_t b = 0; b < m_nBuckets; ++b) {
            for (int32_t k = 0; k < m_segs; ++k) {
                add(SpanKind::Backward, m_nBackward, scaled(m_stepNs, segShare, m_rng), b);
                out.instants[r].push_back(Instant{t, lane, m_paramIds[b][k], s, b, InstantKind::GradReady});
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
    TimeNs finishRank(int32_t s, int32_t r, TimeNs t0, StepBatch& out)
    {
        const LaneId commLane{static_cast<uint32_t>(2 * r + 1)};
        for (int32_t b = 0; b < m_nBuckets; ++b)
            out.comm[r].push_back(
                Span{m_launch[r][b], m_completion[b], m_bucketBytes[b], commLane, m_nAllReduce, s, b, SpanKind::Comm});
        const LaneId lane{static_cast<uint32_t>(2 * r)};
        TimeNs t = m_backwardEnd[r];
        // The last bucket is ready at the end of backward and takes at least 1 ns, so
        // allDone > t: the wait span always exists (Shape's counts rely on it).
        const TimeNs allDone = m_completion[m_nBuckets - 1];
        out.compute[r].push_back(Span{t, allDone, 0, lane, m_nWait, s, kNoBucket, SpanKind::Wait});
        t = allDone;
        const TimeNs opt = scaled(m_stepNs, kOptimizerShare, m_rng);
        out.compute[r].push_back(Span{t, t + opt, 0, lane, m_nOptimizer, s, kNoBucket, SpanKind::Optimizer});
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
        out.steps.push_back(st);
        return t;
    }

    const SyntheticParams& m_p;
    Rng m_rng;
    const int32_t m_world, m_nBuckets, m_segs, m_nParams;
    const TimeNs m_stepNs;
    const std::vector<std::vector<StringId>> m_paramIds;
    const std::vector<int64_t> m_bucketBytes;
    StringId m_nData{}, m_nBackward{}, m_nWait{}, m_nOptimizer{}, m_nAllReduce{};
    std::vector<StringId> m_nForward;
    std::vector<std::vector<TimeNs>> m_ready, m_launch; // [rank][bucket]
    std::vector<TimeNs> m_backwardEnd;                  // per rank
    std::vector<TimeNs> m_dur, m_completion;            // per bucket
};

// Places batches into a Run: spans go straight into their final place, lane after lane, so they
// are already in the invariant order and normalize() only confirms it.
class RunPlacer {
public:
    RunPlacer(Run& run, const Shape& shape) : m_run(run)
    {
        const size_t computePerLane = shape.computePerRankStep() * shape.steps;
        const size_t commPerLane = shape.commPerRankStep() * shape.steps;
        const size_t instantsPerRank = static_cast<size_t>(shape.nParams()) * shape.steps;
        run.spans.resize((computePerLane + commPerLane) * shape.world);
        run.instants.resize(instantsPerRank * shape.world);
        run.steps.reserve(static_cast<size_t>(shape.world) * shape.steps);
        m_cursor.resize(2 * shape.world);
        m_instantCursor.resize(shape.world);
        for (int32_t r = 0; r < shape.world; ++r) {
            m_cursor[2 * r] = r * (computePerLane + commPerLane);
            m_cursor[2 * r + 1] = m_cursor[2 * r] + computePerLane;
            m_instantCursor[r] = r * instantsPerRank;
        }
    }
    void place(const StepBatch& b)
    {
        for (size_t r = 0; r < b.compute.size(); ++r) {
            m_cursor[2 * r] = copy(b.compute[r], m_run.spans, m_cursor[2 * r]);
            m_cursor[2 * r + 1] = copy(b.comm[r], m_run.spans, m_cursor[2 * r + 1]);
            m_instantCursor[r] = copy(b.instants[r], m_run.instants, m_instantCursor[r]);
        }
        m_run.steps.insert(m_run.steps.end(), b.steps.begin(), b.steps.end());
    }

private:
    template <class T>
    static size_t copy(const std::vector<T>& from, std::vector<T>& to, size_t at)
    {
        std::copy(from.begin(), from.end(), to.begin() + static_cast<std::ptrdiff_t>(at));
        return at + from.size();
    }
    Run& m_run;
    std::vector<size_t> m_cursor;        // per lane: where its next span goes
    std::vector<size_t> m_instantCursor; // per rank: where its next instant goes
};

// Writes batches into a run file: the skeleton first, then each step in one transaction (its
// rows, every rank's spans and instants), lanes and strings mapped to the file's ids.
class FileSink {
public:
    static Result<FileSink> open(const Run& skeleton, const std::string& path, RunWriter::Mode mode)
    {
        RunConfig config = skeleton.config;
        config.status = RunStatus::Running; // until the last step is in (a killed write says so)
        auto writer = RunWriter::create(path, config, mode);
        if (!writer)
            return std::unexpected(writer.error());
        FileSink sink(std::move(*writer));
        if (auto s = sink.writeSkeleton(skeleton); !s)
            return std::unexpected(s.error());
        return sink;
    }

    // Every rank of one step, in one transaction.
    Status put(const StepBatch& b)
    {
        for (size_t r = 0; r < b.compute.size(); ++r)
            add(b, r);
        m_steps = b.steps;
        return flush();
    }

    // Rank r's part of `b` (its spans and instants; the step rows are the caller's), kept for flush().
    void add(const StepBatch& b, size_t r)
    {
        for (const auto* lane : {&b.compute[r], &b.comm[r]})
            for (Span sp : *lane) {
                sp.lane = m_laneMap[sp.lane.v];
                sp.name = m_stringMap[sp.name.v];
                m_spans.push_back(sp);
            }
        for (Instant in : b.instants[r]) {
            in.lane = m_laneMap[in.lane.v];
            in.name = m_stringMap[in.name.v];
            m_instants.push_back(in);
        }
    }
    std::vector<Step>& steps() { return m_steps; }

    // What was added and the step rows, in one transaction.
    Status flush()
    {
        for (const Step& st : m_steps)
            if (auto s = m_writer->addStep(st); !s)
                return s;
        if (auto s = m_writer->appendSpans(m_spans); !s)
            return s;
        if (auto s = m_writer->appendInstants(m_instants); !s)
            return s;
        m_steps.clear();
        m_spans.clear();
        m_instants.clear();
        return m_writer->commit();
    }

    Status finish(const RunConfig& config)
    {
        if (auto s = m_writer->setConfig(config); !s)
            return s;
        return m_writer->close();
    }

private:
    explicit FileSink(std::unique_ptr<RunWriter> writer) : m_writer(std::move(writer)) {}

    Status writeSkeleton(const Run& skeleton)
    {
        for (const RankInfo& r : skeleton.ranks)
            if (auto s = m_writer->addRank(r); !s)
                return s;
        for (const Lane& lane : skeleton.lanes) { // lanes[i].id.v == i in the skeleton
            auto id = m_writer->addLane(lane);
            if (!id)
                return std::unexpected(id.error());
            m_laneMap.push_back(*id);
        }
        for (const std::string& text : skeleton.strings.texts())
            m_stringMap.push_back(m_writer->intern(text));
        for (const Bucket& b : skeleton.buckets)
            if (auto s = m_writer->addBucket(b); !s)
                return s;
        return m_writer->commit();
    }

    std::unique_ptr<RunWriter> m_writer;
    std::vector<LaneId> m_laneMap;
    std::vector<StringId> m_stringMap;
    std::vector<Span> m_spans;
    std::vector<Instant> m_instants;
    std::vector<Step> m_steps;
};

} // namespace

Run makeSyntheticRun(const SyntheticParams& p)
{
    Run run;
    const Shape shape = shapeOf(p);
    describeRun(run.config, p, shape);
    run.clocksCorrected = true;

    StepGenerator generator(run, p, shape);
    RunPlacer placer(run, shape);
    StepBatch batch(shape.world);
    TimeNs t0 = kRunStartNs + 1'000'000;
    for (int32_t s = 0; s < shape.steps; ++s) {
        t0 = generator.generate(s, t0, batch);
        placer.place(batch);
    }
    run.config.endedNs = t0;

    // Steps were generated step-major; normalize() puts them rank-major as the invariant says.
    run.normalize();
    return run;
}

namespace {
// Step after step, every rank's spans of a step in one transaction.
Status writeStepMajor(StepGenerator& generator, const Shape& shape, FileSink& sink, std::stop_token stop, TimeNs& t0)
{
    StepBatch batch(shape.world);
    for (int32_t s = 0; s < shape.steps; ++s) {
        if (stop.stop_requested())
            return fail(ErrorCode::Cancelled, kCancelled);
        t0 = generator.generate(s, t0, batch);
        if (auto st = sink.put(batch); !st)
            return st;
    }
    return {};
}

// Rank after rank, all of a rank's steps in one transaction: a first pass makes the run and keeps
// only what a rank's steps need of it (Replay), the second makes each rank's steps again alone.
Status writeRankMajor(StepGenerator& generator, const Shape& shape, FileSink& sink, std::stop_token stop, TimeNs& t0)
{
    Replay replay;
    StepBatch batch(shape.world);
    for (int32_t s = 0; s < shape.steps; ++s)
        t0 = generator.generate(s, t0, batch, &replay);
    for (int32_t r = 0; r < shape.world; ++r) {
        if (stop.stop_requested())
            return fail(ErrorCode::Cancelled, kCancelled);
        for (int32_t s = 0; s < shape.steps; ++s) {
            batch.steps.clear();
            generator.replayRank(s, r, replay, batch);
            sink.add(batch, static_cast<size_t>(r));
            sink.steps().push_back(batch.steps.back());
        }
        if (auto st = sink.flush(); !st)
            return st;
    }
    return {};
}
} // namespace

Result<SyntheticCounts> writeSyntheticRun(const SyntheticParams& p, const std::string& path, RunWriter::Mode mode,
                                          SyntheticOrder order, std::stop_token stop)
{
    Run skeleton; // configuration, ranks, lanes, buckets, strings: never a span
    const Shape shape = shapeOf(p);
    describeRun(skeleton.config, p, shape);
    StepGenerator generator(skeleton, p, shape);
    auto sink = FileSink::open(skeleton, path, mode);
    if (!sink)
        return std::unexpected(sink.error());
    TimeNs t0 = kRunStartNs + 1'000'000;
    const Status written = order == SyntheticOrder::StepMajor ? writeStepMajor(generator, shape, *sink, stop, t0)
                                                              : writeRankMajor(generator, shape, *sink, stop, t0);
    if (!written)
        return std::unexpected(written.error());
    skeleton.config.endedNs = t0;
    if (auto st = sink->finish(skeleton.config); !st)
        return std::unexpected(st.error());
    return syntheticCounts(p);
}

SyntheticCounts syntheticCounts(const SyntheticParams& p)
{
    const Shape shape = shapeOf(p);
    const int64_t rankSteps = static_cast<int64_t>(shape.world) * shape.steps;
    SyntheticCounts c;
    c.spans = rankSteps * static_cast<int64_t>(shape.computePerRankStep() + shape.commPerRankStep());
    c.instants = rankSteps * shape.nParams();
    c.steps = rankSteps;
    return c;
}

SyntheticParams bigRunParams(int64_t totalSpans, int32_t ranks, int32_t spansPerRankStep, uint64_t seed)
{
    SyntheticParams p;
    p.worldSize = std::max<int32_t>(1, ranks);
    p.buckets = 16;
    p.backwardSegmentsPerBucket = 10;
    // Data, wait, optimizer, the backward segments and the all-reduces; forward takes the rest.
    const int32_t fixed = 3 + p.buckets * (p.backwardSegmentsPerBucket + 1);
    p.forwardSpans = std::max<int32_t>(1, spansPerRankStep - fixed);
    const int64_t perStep = static_cast<int64_t>(fixed + p.forwardSpans) * p.worldSize;
    p.steps = static_cast<int32_t>(std::clamp<int64_t>((std::max<int64_t>(0, totalSpans) + perStep / 2) / perStep, 1, std::numeric_limits<int32_t>::max()));
    p.stepNs = 100'000'000;
    p.ranksPerHost = 8;
    if (p.worldSize > 1) {
        // A straggler the analysis should name (8 % of the step, well above the noise) ...
        p.stragglerRank = p.worldSize * 3 / 4;
        p.stragglerDelayNs = p.stepNs * 8 / 100;
    }
    // ... among ranks that arrive within 0.5 ms of each other and now and then hiccup.
    p.arrivalNoiseNs = p.stepNs / 200;
    p.hiccupChance = 0.001;
    p.hiccupNs = p.stepNs / 10;
    p.seed = seed;
    return p;
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
