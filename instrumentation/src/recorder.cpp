// The recorder's writer thread and the conversion of raw step timestamps into run-database
// rows (see recorder.h for why the work is split this way).
#include "recorder.h"

#include <algorithm>
#include <ctime>

namespace lockstep::rt {

TimeNs nowNs()
{
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<TimeNs>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::vector<GradEvent>& GradBuffers::local()
{
    // One cache slot per thread; a thread that serves two GradBuffers objects (tests create
    // several trainers in one process) re-registers when the owner changes.
    thread_local GradBuffers* owner = nullptr;
    thread_local std::vector<GradEvent>* buffer = nullptr;
    if (owner != this) {
        std::lock_guard lock(m_mutex);
        m_buffers.push_back(std::make_unique<std::vector<GradEvent>>());
        m_buffers.back()->reserve(4096);
        buffer = m_buffers.back().get();
        owner = this;
    }
    return *buffer;
}

void GradBuffers::drainInto(std::vector<GradEvent>& out)
{
    std::lock_guard lock(m_mutex);
    for (auto& b : m_buffers) {
        out.insert(out.end(), b->begin(), b->end());
        b->clear();
    }
}

core::Result<std::unique_ptr<Recorder>> Recorder::open(const std::string& path, const core::RunConfig& config,
                                                       const core::RankInfo& rank, const ModelLayout& layout,
                                                       std::unique_ptr<DeviceActivity> device)
{
    auto writer = core::RunWriter::create(path, config, core::RunWriter::Mode::Overwrite);
    if (!writer)
        return std::unexpected(writer.error());
    std::unique_ptr<Recorder> r(new Recorder());
    r->m_writer = std::move(*writer);
    r->m_layout = layout;
    r->m_rank = rank.rank;
    r->m_device = std::move(device);
    auto& w = *r->m_writer;
    if (auto s = w.addRank(rank); !s)
        return std::unexpected(s.error());
    core::Lane compute{.rank = rank.rank, .kind = core::LaneKind::Compute, .name = "compute"};
    core::Lane comm{.rank = rank.rank, .kind = core::LaneKind::Comm, .name = "comm"};
    auto cl = w.addLane(compute);
    if (!cl)
        return std::unexpected(cl.error());
    auto ml = w.addLane(comm);
    if (!ml)
        return std::unexpected(ml.error());
    r->m_computeLane = *cl;
    r->m_commLane = *ml;
    for (const auto& b : layout.buckets)
        if (auto s = w.addBucket(b); !s)
            return std::unexpected(s.error());
    // Every name is interned here, before the writer thread owns the RunWriter.
    for (const auto& n : layout.stageNames)
        r->m_stageIds.push_back(w.intern(n));
    for (const auto& n : layout.paramNames)
        r->m_paramIds.push_back(w.intern(n));
    for (size_t b = 0; b < layout.buckets.size(); ++b)
        r->m_commIds.push_back(w.intern("allreduce bucket " + std::to_string(b)));
    r->m_dataId = w.intern("data");
    r->m_waitId = w.intern("wait for buckets");
    r->m_optId = w.intern("optimizer " + config.optimizer);
    if (auto s = w.commit(); !s)
        return std::unexpected(s.error());
    r->m_thread = std::thread([p = r.get()] { p->writerLoop(); });
    return r;
}

Recorder::~Recorder()
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

std::unique_ptr<StepRecord> Recorder::acquire()
{
    std::lock_guard lock(m_mutex);
    if (m_free.empty())
        return std::make_unique<StepRecord>();
    auto r = std::move(m_free.back());
    m_free.pop_back();
    return r;
}

void Recorder::submit(std::unique_ptr<StepRecord> record)
{
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back(Item{.step = std::move(record)});
        ++m_submitted;
    }
    m_cv.notify_one();
}

void Recorder::addDiagnostic(const core::Diagnostic& diagnostic)
{
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back(Item{.diagnostic = std::make_unique<core::Diagnostic>(diagnostic)});
        ++m_submitted;
    }
    m_cv.notify_one();
}

void Recorder::updateRank(const core::RankInfo& rank)
{
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back(Item{.rank = std::make_unique<core::RankInfo>(rank)});
        ++m_submitted;
    }
    m_cv.notify_one();
}

void Recorder::flush()
{
    std::unique_lock lock(m_mutex);
    const uint64_t target = m_submitted;
    m_doneCv.wait(lock, [&] { return m_processed >= target || !m_thread.joinable(); });
}

core::Status Recorder::finish(core::RunStatus status, const std::string& cause)
{
    if (m_thread.joinable()) {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_cv.notify_all();
        m_thread.join();
    }
    auto note = [&](const core::Status& s) {
        if (!s && !m_firstError)
            m_firstError = s.error();
    };
    if (m_device && !m_firstError) {
        // What ran after the last step (the final barrier, teardown) and the collector's counts.
        m_spans.clear();
        note(flushDevice());
        note(m_writer->appendSpans(m_spans));
        for (const core::Diagnostic& d : m_device->diagnostics())
            note(m_writer->addDiagnostic(d));
        note(m_writer->commit());
        m_device.reset();
    }
    note(m_writer->setStatus(status, cause, nowNs()));
    note(m_writer->close());
    if (m_firstError)
        return core::fail(*m_firstError, "recording into " + m_writer->path() + ": " + m_firstError->message);
    return {};
}

std::optional<Recorder::WriteFailure> Recorder::failure()
{
    std::lock_guard lock(m_mutex);
    if (!m_firstError)
        return std::nullopt;
    return WriteFailure{m_firstErrorStep, *m_firstError};
}

void Recorder::writerLoop()
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
        bool failedBefore = false;
        {
            std::lock_guard lock(m_mutex);
            failedBefore = m_firstError.has_value();
        }
        if (failedBefore) {
            // After a failed commit nothing more is written: the run is being stopped.
        } else if (item.step) {
            writeStep(*item.step);
        } else if (item.diagnostic) {
            s = m_writer->addDiagnostic(*item.diagnostic);
            if (s)
                s = m_writer->commit();
        } else if (item.rank) {
            s = m_writer->addRank(*item.rank);
            if (s)
                s = m_writer->commit();
        }
        {
            std::lock_guard lock(m_mutex);
            if (!s && !m_firstError)
                m_firstError = s.error();
            if (item.step)
                m_free.push_back(std::move(item.step));
            ++m_processed;
        }
        m_doneCv.notify_all();
    }
}

// Backward is cut into per-module segments by core's rule (core::cutBackward): this recorder
// knows no end of backward beyond its gradients, so it passes the last gradient's instant.
void Recorder::writeStep(const StepRecord& r)
{
    m_spans.clear();
    m_instants.clear();
    const auto span = [&](TimeNs a, TimeNs b, core::LaneId lane, core::StringId name, core::SpanKind kind,
                          int32_t bucket = core::kNoBucket, int64_t bytes = 0) {
        core::Span s;
        s.start = a;
        s.end = std::max(a, b);
        s.bytes = bytes;
        s.lane = lane;
        s.name = name;
        s.step = r.step;
        s.bucket = bucket;
        s.kind = kind;
        m_spans.push_back(s);
    };
    for (int m = 0; m < r.micros; ++m) {
        const MicroRecord& mr = r.micro[m];
        span(mr.dataStart, mr.dataEnd, m_computeLane, m_dataId, core::SpanKind::DataLoad);
        for (size_t i = 0; i + 1 < mr.forwardCuts.size() && i < m_stageIds.size(); ++i)
            span(mr.forwardCuts[i], mr.forwardCuts[i + 1], m_computeLane, m_stageIds[i], core::SpanKind::Forward);
        m_gradients.clear();
        for (const GradEvent& g : mr.grads) {
            if (g.param < 0 || static_cast<size_t>(g.param) >= m_paramIds.size())
                continue;
            core::Instant in;
            in.ts = g.ts;
            in.lane = m_computeLane;
            in.name = m_paramIds[g.param];
            in.step = r.step;
            in.bucket = m_layout.paramBucket[g.param];
            in.kind = core::InstantKind::GradReady;
            m_instants.push_back(in);
            m_gradients.push_back({g.ts, m_layout.paramStage[g.param]});
        }
        // Without a gradient there is no module to charge and no end to run to: nothing is drawn.
        if (!m_gradients.empty())
            for (const core::BackwardSegment& b : core::cutBackward(mr.backwardStart, m_gradients, m_gradients.back().ts))
                span(b.start, b.end, m_computeLane, m_stageIds[b.stage], core::SpanKind::Backward);
    }
    core::Status s;
    const size_t hostSpans = m_spans.size();
    if (m_device)
        s = flushDevice();
    for (const CommRecord& c : r.comms) {
        TimeNs end = c.end;
        if (end == 0) {
            // Completed on the device (NCCL): the end of the bucket's last communication kernel,
            // which this step's flush holds (the step ended after its device work). A collective
            // that ran no kernel (one rank) or is not seen ends where it was launched.
            end = c.launch;
            for (size_t i = hostSpans; i < m_spans.size(); ++i) {
                const core::Span& d = m_spans[i];
                if (d.kind == core::SpanKind::CommKernel && d.step == r.step && d.bucket == c.bucket)
                    end = std::max(end, d.end);
            }
        }
        span(c.launch, end, m_commLane, m_commIds[c.bucket], core::SpanKind::Comm, c.bucket, c.bytes);
    }
    if (r.waitEnd > 0)
        span(r.waitStart, r.waitEnd, m_computeLane, m_waitId, core::SpanKind::Wait);
    span(r.optStart, r.optEnd, m_computeLane, m_optId, core::SpanKind::Optimizer);

    const core::Step step{.rank = m_rank, .step = r.step, .start = r.start, .end = r.end, .loss = r.loss,
                          .samples = r.samples, .cpuNs = r.cpuNs, .runqNs = r.runqNs};
    if (s)
        s = m_writer->writeStep(step, m_spans, m_instants);
    if (!s) {
        std::lock_guard lock(m_mutex);
        if (!m_firstError) {
            m_firstError = s.error();
            m_firstErrorStep = r.step;
        }
    }
}

} // namespace lockstep::rt

namespace lockstep::rt {

core::LaneId Recorder::deviceLane(int32_t device, int64_t stream)
{
    const auto key = std::pair{device, stream};
    if (auto it = m_deviceLanes.find(key); it != m_deviceLanes.end())
        return it->second;
    core::Lane lane{.rank = m_rank, .kind = core::LaneKind::GpuStream, .device = device, .stream = stream,
                    .name = "gpu " + std::to_string(device) + " stream " + std::to_string(stream)};
    auto id = m_writer->addLane(lane);
    // A lane that cannot be added is a write error the next commit reports; its spans go to lane 0
    // meanwhile rather than to an id that does not exist.
    const core::LaneId resolved = id ? *id : m_computeLane;
    if (id)
        m_deviceLanes.emplace(key, resolved);
    return resolved;
}

core::Status Recorder::flushDevice()
{
    return m_device->flush(
        m_spans, [this](int32_t device, int64_t stream) { return deviceLane(device, stream); },
        [this](std::string_view text) { return m_writer->intern(text); });
}

} // namespace lockstep::rt
