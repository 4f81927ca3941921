// The Python recorder's event log and writer thread (see shard_recorder.h for the split).
#include "shard_recorder.h"

#include "lockstep/core/backward_cut.h"
#include "lockstep/core/whatif.h"

#include <algorithm>
#include <ctime>

namespace lockstep::record {

TimeNs nowNs()
{
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<TimeNs>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

TimeNs PendingStep::start() const
{
    for (const Event& e : events)
        if (e.kind == Ev::StepStart)
            return e.ts;
    return events.empty() ? 0 : events.front().ts;
}

TimeNs PendingStep::end() const
{
    for (auto it = events.rbegin(); it != events.rend(); ++it)
        if (it->kind == Ev::StepEnd)
            return it->ts;
    return events.empty() ? 0 : events.back().ts;
}

core::Result<std::unique_ptr<ShardRecorder>> ShardRecorder::open(const std::string& path, const core::RunConfig& config,
                                                                 const core::RankInfo& rank, const ModelInfo& model)
{
    if (model.paramStage.size() != model.paramNames.size())
        return core::fail("recorder: one stage per parameter expected");
    for (int32_t s : model.paramStage)
        if (s < 0 || static_cast<size_t>(s) >= model.stageNames.size())
            return core::fail("recorder: parameter stage out of range");
    if (model.rootStage < 0 || static_cast<size_t>(model.rootStage) >= model.stageNames.size())
        return core::fail("recorder: root stage out of range");
    auto writer = core::RunWriter::create(path, config, core::RunWriter::Mode::Overwrite);
    if (!writer)
        return std::unexpected(writer.error());
    std::unique_ptr<ShardRecorder> r(new ShardRecorder());
    r->m_path = path;
    r->m_writer = std::move(*writer);
    r->m_model = model;
    r->m_rank = rank.rank;
    r->m_deviceTiming = model.device >= 0;
    auto& w = *r->m_writer;
    if (auto s = w.addRank(rank); !s)
        return std::unexpected(s.error());
    const auto lane = [&](core::LaneKind kind, const std::string& name, core::LaneId* out) -> core::Status {
        core::Lane l;
        l.rank = rank.rank;
        l.kind = kind;
        l.name = name;
        if (kind == core::LaneKind::GpuStream)
            l.device = model.device;
        auto id = w.addLane(l);
        if (!id)
            return std::unexpected(id.error());
        *out = *id;
        return {};
    };
    core::Status s = lane(core::LaneKind::Compute, "compute", &r->m_computeLane);
    if (s)
        s = lane(core::LaneKind::Comm, "comm", &r->m_commLane);
    if (s && r->m_deviceTiming) {
        const std::string dev = "cuda:" + std::to_string(model.device);
        s = lane(core::LaneKind::GpuStream, dev + " compute stream", &r->m_gpuComputeLane);
        if (s)
            s = lane(core::LaneKind::GpuStream, dev + " communication", &r->m_gpuCommLane);
    }
    if (!s)
        return std::unexpected(s.error());
    // Every fixed name is interned here, before the writer thread owns the RunWriter.
    for (const auto& n : model.stageNames)
        r->m_stageIds.push_back(w.intern(n));
    for (const auto& n : model.paramNames)
        r->m_paramIds.push_back(w.intern(n));
    r->m_dataId = w.intern("data, user code");
    r->m_lossId = w.intern("after forward (loss)");
    r->m_waitId = w.intern("wait for buckets");
    r->m_backwardId = w.intern("backward");
    if (auto c = w.commit(); !c)
        return std::unexpected(c.error());
    r->m_thread = std::thread([p = r.get()] { p->writerLoop(); });
    return r;
}

ShardRecorder::~ShardRecorder()
{
    if (m_thread.joinable()) {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_cv.notify_all();
        m_thread.join();
    }
}

void ShardRecorder::markAt(Ev kind, TimeNs ts, int32_t a, int64_t value, int32_t c)
{
    Event e;
    e.ts = ts;
    e.a = a;
    e.value = value;
    e.c = c;
    e.kind = kind;
    if (kind == Ev::BackwardEnd)
        ++m_backwardGen;
    // The training thread's scheduler statistics over the step (shard_recorder.h, m_lastSched).
    // Both snapshots must be of one thread (the statistics are per thread): a step closed from
    // another thread (an exit handler) gets none, and the next step starts afresh.
    const std::thread::id self = std::this_thread::get_id();
    if (kind == Ev::StepStart && (m_lastSched.cpuNs < 0 || m_lastSchedThread != self)) {
        m_lastSched = core::readThreadSchedStat(); // the first step: its window opens now
        m_lastSchedThread = self;
    }
    if (kind == Ev::StepEnd) {
        const core::ThreadSchedStat now = core::readThreadSchedStat();
        const core::ThreadSchedStat d =
            m_lastSchedThread == self ? core::schedStatDelta(m_lastSched, now) : core::ThreadSchedStat{};
        e.value = d.cpuNs;
        e.end = d.runqNs;
        m_lastSched = now;
        m_lastSchedThread = self;
    }
    m_log.push_back(e);
}

// When is a gradient "ready"? DDP's reducer and the recorder both hang post-hooks on the
// parameter's gradient accumulator; DDP's was registered first, so it runs first: it copies the
// gradient into its bucket and, when that completes a bucket, launches the bucket's all-reduce
// — which calls the communication hook, i.e. commLaunch() below — before the recorder's hook
// for that same gradient runs. Stamped naively, the gradient that completes a bucket would look
// ready *after* its bucket launched (a negative ready→launch delay). So commLaunch() leaves a
// mark on its thread (hooks of one accumulator run on one thread, back to back), and the next
// grad() on that thread in the same backward takes the time of the first launch it caused.
// Every other gradient is stamped when DDP has it in its bucket, which is what "ready" means to
// DDP.
namespace {
struct LaunchMark {
    const ShardRecorder* owner = nullptr;
    uint64_t generation = 0;
    TimeNs ts = 0;
};
thread_local LaunchMark t_launchMark;
} // namespace

void ShardRecorder::gradAt(int32_t param, TimeNs ts)
{
    LaunchMark& m = t_launchMark;
    if (m.owner == this && m.generation == m_backwardGen) {
        ts = std::min(ts, m.ts);
        m.owner = nullptr;
    }
    Event e;
    e.ts = ts;
    e.a = param;
    e.kind = Ev::Grad;
    m_log.push_back(e);
}

int32_t ShardRecorder::commLaunchAt(int32_t bucket, int64_t bytes, int32_t label, TimeNs ts)
{
    LaunchMark& m = t_launchMark;
    if (m.owner != this || m.generation != m_backwardGen)
        m = LaunchMark{this, m_backwardGen, ts};
    Event e;
    e.ts = ts;
    e.a = m_nextSlot++;
    e.b = bucket;
    e.value = bytes;
    e.c = label;
    e.kind = Ev::CommLaunch;
    m_log.push_back(e);
    return e.a;
}

void ShardRecorder::commDone(int32_t slot)
{
    mark(Ev::CommDone, slot);
}

int32_t ShardRecorder::label(const std::string& text)
{
    std::lock_guard lock(m_labelMutex);
    for (size_t i = 0; i < m_labels.size(); ++i)
        if (m_labels[i] == text)
            return static_cast<int32_t>(i);
    m_labels.push_back(text);
    return static_cast<int32_t>(m_labels.size() - 1);
}

void ShardRecorder::setLayout(std::shared_ptr<const BucketLayout> layout, bool writeRows)
{
    m_layout = layout;
    if (writeRows) {
        Item item;
        item.buckets = std::move(layout);
        enqueue(std::move(item));
    }
}

std::unique_ptr<PendingStep> ShardRecorder::takeStep(int32_t step)
{
    auto p = std::make_unique<PendingStep>();
    p->step = step;
    p->layout = m_layout;
    p->events.swap(m_log);
    m_log.reserve(p->events.capacity());
    m_nextSlot = 0;
    return p;
}

void ShardRecorder::submit(std::unique_ptr<PendingStep> step)
{
    Item item;
    item.step = std::move(step);
    enqueue(std::move(item));
}

void ShardRecorder::setConfig(const core::RunConfig& config)
{
    Item item;
    item.config = std::make_unique<core::RunConfig>(config);
    enqueue(std::move(item));
}

void ShardRecorder::addDiagnostic(const core::Diagnostic& diagnostic)
{
    Item item;
    item.diagnostic = std::make_unique<core::Diagnostic>(diagnostic);
    enqueue(std::move(item));
}

void ShardRecorder::updateRank(const core::RankInfo& rank)
{
    Item item;
    item.rank = std::make_unique<core::RankInfo>(rank);
    enqueue(std::move(item));
}

void ShardRecorder::enqueue(Item item)
{
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back(std::move(item));
    }
    m_cv.notify_one();
}

void ShardRecorder::note(const core::Status& status)
{
    if (status)
        return;
    std::lock_guard lock(m_mutex);
    if (!m_firstError)
        m_firstError = status.error();
}

core::Status ShardRecorder::finish(core::RunStatus status, const std::string& cause)
{
    if (m_thread.joinable()) {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_cv.notify_all();
        m_thread.join();
    }
    if (!m_writer)
        return core::fail("recording into " + m_path + ": already finished");
    note(m_writer->setStatus(status, cause, nowNs()));
    note(m_writer->close());
    m_writer.reset();
    if (m_firstError)
        return core::fail(*m_firstError, "recording into " + m_path + ": " + m_firstError->message);
    return {};
}

void ShardRecorder::writerLoop()
{
    for (;;) {
        Item item;
        {
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [&] { return m_stop || !m_queue.empty(); });
            if (m_queue.empty())
                return; // stopping and drained
            item = std::move(m_queue.front());
            m_queue.pop_front();
        }
        core::Status s;
        if (item.step) {
            writeStep(*item.step);
        } else if (item.config) {
            m_config = std::move(item.config);
            s = writeConfig();
        } else if (item.diagnostic) {
            s = m_writer->addDiagnostic(*item.diagnostic);
        } else if (item.rank) {
            s = m_writer->addRank(*item.rank);
        } else if (item.buckets) {
            for (const core::Bucket& b : item.buckets->buckets)
                if (s)
                    s = m_writer->addBucket(b);
            // The parameters' sizes in the layout's packing order, into the configuration.
            std::vector<std::vector<int64_t>> numel;
            bool known = !item.buckets->paramIndices.empty();
            for (const std::vector<int32_t>& bucket : item.buckets->paramIndices) {
                numel.emplace_back();
                for (int32_t p : bucket) {
                    if (p < 0 || static_cast<size_t>(p) >= m_model.paramNumel.size() || m_model.paramNumel[p] <= 0)
                        known = false;
                    else
                        numel.back().push_back(m_model.paramNumel[p]);
                }
            }
            m_paramNumel = known ? core::formatParamNumel(numel) : std::string();
            if (s && m_config)
                s = writeConfig();
        }
        if (s && !item.step)
            s = m_writer->commit();
        note(s);
    }
}

// The last configuration, with the parameter sizes of the last layout written (writer thread).
core::Status ShardRecorder::writeConfig()
{
    if (m_paramNumel.empty())
        m_config->extra.erase(core::kParamNumelKey);
    else
        m_config->extra[core::kParamNumelKey] = m_paramNumel;
    return m_writer->setConfig(*m_config);
}

std::string ShardRecorder::labelText(int32_t label)
{
    std::lock_guard lock(m_labelMutex);
    return label >= 0 && static_cast<size_t>(label) < m_labels.size() ? m_labels[label] : std::string();
}

// "allreduce bucket 3", or the user's hook: "fp16_compress_hook bucket 3". Interned once.
core::StringId ShardRecorder::commName(int32_t label, int32_t bucket)
{
    const auto key = std::make_pair(label, bucket);
    if (auto it = m_commNames.find(key); it != m_commNames.end())
        return it->second;
    std::string text = labelText(label);
    const core::StringId id = m_writer->intern((text.empty() ? "allreduce" : text) + " bucket " + std::to_string(bucket));
    m_commNames.emplace(key, id);
    return id;
}

// "optimizer SGD". Interned once.
core::StringId ShardRecorder::optimizerName(int32_t label)
{
    if (auto it = m_optimizerNames.find(label); it != m_optimizerNames.end())
        return it->second;
    std::string text = labelText(label);
    const core::StringId id = m_writer->intern(text.empty() ? "optimizer" : "optimizer " + text);
    m_optimizerNames.emplace(label, id);
    return id;
}

// From a step's event log to rows. The log is in the order the hooks ran (one GIL), which is
// time order except for gradient stamps moved back to their bucket's launch (see grad()).
//  - Forward: each outermost top-level module's [begin, end] is a Forward span named after it;
//    time inside DDP's forward but outside every child (the root's own code, DDP's bookkeeping)
//    is charged to the root stage, so the micro-batch's forward is covered end to end like the
//    runtime's cuts. From forward's end to the backward call is "after forward (loss)".
//  - Backward is cut at gradient-ready instants by core's rule, the runtime's recorder's too
//    (core::cutBackward): from the backward call (or, when backward was not called through
//    torch.autograd.backward, the forward's end or the first gradient) to the engine's end of
//    backward; a backward that readied no gradient is one "backward" span.
//  - Wait: from the end of backward to the return of DDP's end-of-backward callback.
//  - Before each micro-batch's forward, from the end of what came before: "data, user code"
//    (loading the batch, zero_grad, logging), a DataLoad span like the runtime's data span.
// StepRows reads one step's events in order into the recorder's scratch rows (m_spans,
// m_instants) and the step's row.
class ShardRecorder::StepRows {
public:
    StepRows(ShardRecorder& recorder, const PendingStep& p)
        : r(recorder), p(p), layout(p.layout.get()), nParams(static_cast<int32_t>(recorder.m_paramIds.size())),
          nStages(static_cast<int32_t>(recorder.m_stageIds.size()))
    {
    }

    void add(const Event& e)
    {
        switch (e.kind) {
        case Ev::StepStart:
            stepStart = e.ts;
            cursor = e.ts;
            break;
        case Ev::ForwardBegin: forwardBegin(e); break;
        case Ev::StageBegin: stageBegin(e); break;
        case Ev::StageEnd: stageEnd(e); break;
        case Ev::ForwardEnd: forwardEnd(e); break;
        case Ev::BackwardBegin: backwardBegin(e); break;
        case Ev::Grad: gradReady(e); break;
        case Ev::BackwardEnd:
            closeBackward(e.ts);
            bwdEnd = e.ts;
            break;
        case Ev::WaitEnd: waitEnd(e); break;
        case Ev::CommLaunch: commLaunch(e); break;
        case Ev::CommDone: commDone(e); break;
        case Ev::OptBegin:
            optStart = e.ts;
            optLabel = e.c;
            break;
        case Ev::OptEnd: optEnd(e); break;
        case Ev::DeviceSpan: deviceSpan(e); break;
        case Ev::StepEnd:
            stepEnd = e.ts;
            cpuNs = e.value;
            runqNs = e.end;
            break;
        }
    }

    // After the last event: a backward still open is closed, and the step's row.
    core::Step finish()
    {
        if (bwdStart >= 0 || !grads.empty())
            closeBackward(grads.empty() ? bwdStart : grads.back().first);
        if (stepEnd == 0)
            stepEnd = std::max(cursor, p.events.empty() ? 0 : p.events.back().ts);
        return core::Step{.rank = r.m_rank, .step = p.step, .start = stepStart, .end = stepEnd, .loss = p.loss,
                          .samples = samples, .cpuNs = cpuNs, .runqNs = runqNs};
    }

private:
    void span(TimeNs a, TimeNs b, core::LaneId lane, core::StringId name, core::SpanKind kind,
              int32_t bucket = core::kNoBucket, int64_t bytes = 0)
    {
        core::Span s;
        s.start = a;
        s.end = std::max(a, b);
        s.bytes = bytes;
        s.lane = lane;
        s.name = name;
        s.step = p.step;
        s.bucket = bucket;
        s.kind = kind;
        r.m_spans.push_back(s);
    }

    int32_t bucketOf(int32_t param) const
    {
        if (!layout || param < 0 || static_cast<size_t>(param) >= layout->paramBucket.size())
            return core::kNoBucket;
        return layout->paramBucket[param];
    }

    void forwardBegin(const Event& e)
    {
        if (bwdStart >= 0 || !grads.empty())
            closeBackward(grads.empty() ? bwdStart : grads.back().first);
        if (cursor > 0 && e.ts > cursor)
            span(cursor, e.ts, r.m_computeLane, r.m_dataId, core::SpanKind::DataLoad);
        if (stepStart == 0)
            stepStart = e.ts;
        samples += e.value;
        fwdCursor = e.ts;
        fwdEnd = -1;
        depth = 0;
    }

    void stageBegin(const Event& e)
    {
        if (e.a < 0 || e.a >= nStages || fwdCursor < 0)
            return;
        if (depth++ == 0) {
            if (e.ts > fwdCursor)
                span(fwdCursor, e.ts, r.m_computeLane, r.m_stageIds[r.m_model.rootStage], core::SpanKind::Forward);
            stage = e.a;
            stageStart = e.ts;
        }
    }

    void stageEnd(const Event& e)
    {
        if (depth <= 0 || fwdCursor < 0)
            return;
        if (--depth == 0) {
            span(stageStart, e.ts, r.m_computeLane, r.m_stageIds[stage], core::SpanKind::Forward);
            fwdCursor = e.ts;
        }
    }

    void forwardEnd(const Event& e)
    {
        if (fwdCursor < 0)
            return;
        if (e.ts > fwdCursor)
            span(fwdCursor, e.ts, r.m_computeLane, r.m_stageIds[r.m_model.rootStage], core::SpanKind::Forward);
        fwdCursor = -1;
        fwdEnd = e.ts;
        cursor = e.ts;
    }

    void backwardBegin(const Event& e)
    {
        if (fwdEnd >= 0 && e.ts > fwdEnd)
            span(fwdEnd, e.ts, r.m_computeLane, r.m_lossId, core::SpanKind::Forward);
        fwdEnd = -1;
        bwdStart = e.ts;
        grads.clear();
    }

    void gradReady(const Event& e)
    {
        if (e.a < 0 || e.a >= nParams)
            return;
        if (bwdStart < 0 && grads.empty())
            bwdStart = fwdEnd >= 0 ? fwdEnd : e.ts; // backward not called through torch.autograd.backward
        fwdEnd = -1;
        grads.emplace_back(e.ts, e.a);
    }

    // The gradient-ready instants and the backward cut at them, up to `end`.
    void closeBackward(TimeNs end)
    {
        if (grads.empty() && bwdStart < 0)
            return;
        std::stable_sort(grads.begin(), grads.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        gradients.clear();
        for (const auto& [ts, param] : grads) {
            core::Instant in;
            in.ts = ts;
            in.lane = r.m_computeLane;
            in.name = r.m_paramIds[param];
            in.step = p.step;
            in.bucket = bucketOf(param);
            in.kind = core::InstantKind::GradReady;
            r.m_instants.push_back(in);
            gradients.push_back({ts, r.m_model.paramStage[param]});
        }
        const TimeNs start = bwdStart >= 0 ? bwdStart : grads.front().first;
        for (const core::BackwardSegment& b : core::cutBackward(start, gradients, end))
            span(b.start, b.end, r.m_computeLane, b.stage == core::kNoStage ? r.m_backwardId : r.m_stageIds[b.stage],
                 core::SpanKind::Backward);
        cursor = std::max(cursor, end);
        grads.clear();
        bwdStart = -1;
    }

    void waitEnd(const Event& e)
    {
        if (bwdEnd >= 0) {
            span(bwdEnd, e.ts, r.m_computeLane, r.m_waitId, core::SpanKind::Wait);
            cursor = std::max(cursor, e.ts);
        }
    }

    void commLaunch(const Event& e)
    {
        if (e.a >= 0) {
            if (static_cast<size_t>(e.a) >= launches.size())
                launches.resize(e.a + 1);
            launches[e.a] = Launch{e.ts, e.b, e.value, e.c, false};
        }
    }

    void commDone(const Event& e)
    {
        if (e.a >= 0 && static_cast<size_t>(e.a) < launches.size() && !launches[e.a].done) {
            Launch& l = launches[e.a];
            l.done = true;
            if (!r.m_deviceTiming)
                span(l.ts, e.ts, r.m_commLane, r.commName(l.label, l.bucket), core::SpanKind::Comm, l.bucket, l.bytes);
        }
    }

    void optEnd(const Event& e)
    {
        if (optStart >= 0) {
            span(optStart, e.ts, r.m_computeLane, r.optimizerName(optLabel), core::SpanKind::Optimizer);
            cursor = std::max(cursor, e.ts);
            optStart = -1;
        }
    }

    void deviceSpan(const Event& e)
    {
        if (!r.m_deviceTiming)
            return;
        switch (static_cast<DeviceWhat>(e.b)) {
        case DeviceWhat::Forward:
            if (e.a >= 0 && e.a < nStages)
                span(e.ts, e.end, r.m_gpuComputeLane, r.m_stageIds[e.a], core::SpanKind::Kernel);
            break;
        case DeviceWhat::Backward:
            span(e.ts, e.end, r.m_gpuComputeLane, r.m_backwardId, core::SpanKind::Kernel);
            break;
        case DeviceWhat::Optimizer:
            span(e.ts, e.end, r.m_gpuComputeLane, r.optimizerName(e.c), core::SpanKind::Kernel);
            break;
        case DeviceWhat::Comm:
            span(e.ts, e.end, r.m_gpuCommLane, r.commName(e.c, e.a), core::SpanKind::CommKernel, e.a, e.value);
            break;
        }
    }

    struct Launch {
        TimeNs ts = 0;
        int32_t bucket = 0;
        int64_t bytes = 0;
        int32_t label = -1;
        bool done = false;
    };

    ShardRecorder& r;
    const PendingStep& p;
    const BucketLayout* layout;
    const int32_t nParams;
    const int32_t nStages;

    TimeNs stepStart = 0, stepEnd = 0;
    int64_t cpuNs = -1, runqNs = -1; // the training thread's, from the StepEnd event
    TimeNs cursor = 0;      // end of the last thing accounted for on the compute lane
    TimeNs fwdCursor = -1;  // inside a forward: where its uncovered time starts
    TimeNs fwdEnd = -1;     // end of the current micro-batch's forward
    int depth = 0;
    int32_t stage = 0;
    TimeNs stageStart = 0;
    TimeNs bwdStart = -1;
    std::vector<std::pair<TimeNs, int32_t>> grads;
    std::vector<Launch> launches;
    TimeNs bwdEnd = -1, optStart = -1;
    int32_t optLabel = -1;
    int64_t samples = 0;
    std::vector<core::GradientReady> gradients; // grads in time order with their modules, for the cut
};

// One step's rows, written in one transaction (StepRows above has the rules).
void ShardRecorder::writeStep(const PendingStep& p)
{
    m_spans.clear();
    m_instants.clear();
    StepRows rows(*this, p);
    for (const Event& e : p.events)
        rows.add(e);
    const core::Step step = rows.finish();
    const core::Status s = m_writer->writeStep(step, m_spans, m_instants);
    if (!s) {
        std::lock_guard lock(m_mutex);
        if (!m_firstError)
            m_firstErrorStep = p.step;
    }
    note(s);
}

} // namespace lockstep::record
