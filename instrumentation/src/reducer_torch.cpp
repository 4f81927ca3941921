// The project's own bucketing reducer: DDP's gradient averaging, scheduled so that each
// bucket's all-reduce overlaps the rest of backward (docs/design.md "The runtime's DDP semantics").
#include "runtime_torch.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/cuda.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <thread>

namespace lockstep::rt {

struct Reducer::Bucket {
    torch::Tensor flat;  // float32: the gradients of the bucket's parameters, packed
    torch::Tensor wire;  // what travels: flat itself, or its fp16 / bf16 copy
    std::vector<torch::Tensor> gathered; // bf16 only: every rank's wire payload
    c10::intrusive_ptr<c10d::Work> work;
    torch::Tensor peer;                       // pairwise: the other rank's half
    c10::intrusive_ptr<c10d::Work> sendWork;  // pairwise: work is the receive
    bool exchanged = false;                   // pairwise, under m_exchangeMutex: peer added
    std::exception_ptr exchangeError;         // pairwise, under m_exchangeMutex
    int pending = 0;
    int64_t wireBytes = 0;
    TimeNs launchNs = 0;
    std::atomic<TimeNs> completeNs{0};
};

namespace {

// The gradient accumulator's post-hook fires once the parameter's .grad holds this
// backward's contribution — the instant DDP calls "gradient ready".
struct ReadyHook : torch::autograd::FunctionPostHook {
    std::function<void()> fn;
    explicit ReadyHook(std::function<void()> f) : fn(std::move(f)) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list&) override
    {
        fn();
        return outputs;
    }
};

} // namespace

// Bucket assignment, as torch's compute_bucket_assignment_by_size: walk the parameters in
// reverse registration order (backward produces the last layer's gradients first), add each to
// the open bucket, and close the bucket as soon as its size reaches the cap — so a bucket may
// exceed its cap by its last tensor, and a tensor larger than the cap gets a bucket of its own.
// The first bucket's cap is small (1 MiB by default) so that the first all-reduce starts
// early in backward; later buckets use the large cap, trading launch latency for fewer
// collectives. Buckets launch strictly in index order on every rank, which keeps the
// collectives matched across ranks even when gradients become ready in a different order.
Reducer::Reducer(std::vector<torch::Tensor> params, c10::intrusive_ptr<CommGroup> pg, ReducerOptions options,
                 GradBuffers* grads)
    : m_params(std::move(params)), m_pg(std::move(pg)), m_options(std::move(options)), m_grads(grads)
{
    m_world = m_pg->getSize();
    const int n = static_cast<int>(m_params.size());
    m_paramBucket.assign(n, -1);
    int64_t size = 0;
    int64_t cap = m_options.firstBucketBytes;
    std::vector<int32_t> open;
    for (int i = n - 1; i >= 0; --i) {
        open.push_back(i);
        size += m_params[i].numel() * static_cast<int64_t>(m_params[i].element_size());
        if (size >= cap) {
            m_bucketParams.push_back(std::move(open));
            open.clear();
            size = 0;
            cap = m_options.bucketBytes;
        }
    }
    if (!open.empty())
        m_bucketParams.push_back(std::move(open));

    // The buckets live where the parameters do (a GPU's memory on --device cuda).
    const torch::TensorOptions on = torch::TensorOptions().device(n > 0 ? m_params[0].device() : torch::Device(torch::kCPU));
    m_views.resize(n);
    for (size_t b = 0; b < m_bucketParams.size(); ++b) {
        auto bucket = std::make_unique<Bucket>();
        int64_t numel = 0;
        for (int32_t p : m_bucketParams[b])
            numel += m_params[p].numel();
        bucket->flat = torch::zeros({numel}, on.dtype(torch::kFloat32));
        int64_t offset = 0;
        for (int32_t p : m_bucketParams[b]) {
            m_paramBucket[p] = static_cast<int32_t>(b);
            m_views[p] = bucket->flat.narrow(0, offset, m_params[p].numel()).view(m_params[p].sizes());
            offset += m_params[p].numel();
        }
        switch (m_options.compress) {
        case Compress::None:
            bucket->wire = bucket->flat;
            break;
        case Compress::Fp16:
            bucket->wire = torch::zeros({numel}, on.dtype(torch::kHalf));
            break;
        case Compress::Bf16:
            // gloo (1.13) cannot sum bfloat16: every rank's bf16 payload is all-gathered
            // (as 2-byte elements) and summed locally in float32.
            bucket->wire = torch::zeros({numel}, on.dtype(torch::kBFloat16));
            for (int r = 0; r < m_world; ++r)
                bucket->gathered.push_back(torch::zeros({numel}, on.dtype(torch::kHalf)));
            break;
        }
        bucket->wireBytes = numel * static_cast<int64_t>(bucket->wire.element_size());
        m_buckets.push_back(std::move(bucket));
    }
    // Two ranks need no ring: each sends its (pre-divided) bucket to the other and adds what
    // it receives — one round trip where gloo's ring makes two (reduce-scatter, all-gather),
    // same bytes. a + b == b + a in IEEE arithmetic, so both ranks hold identical sums. CPU only:
    // on a GPU the collective and the sum belong on the device's streams (NCCL's all-reduce).
    m_pairwise = m_options.pairwise && m_world == 2 && m_options.compress == Compress::None && on.device().is_cpu();
    if (m_pairwise) {
        m_peer = 1 - m_pg->getRank();
        for (auto& b : m_buckets)
            b->peer = torch::empty_like(b->flat);
        m_exchangeThread = std::thread([this] { exchangeLoop(); });
    }

    // Gradients live in the buckets (DDP's gradient_as_bucket_view): each .grad is made a view
    // of its bucket, AccumulateGrad adds into it in place, the all-reduce averages it in place,
    // and neither the copy into the bucket at ready time nor the copy back at the end of
    // backward is needed. If something replaces a .grad, the hooks fall back to copying.
    {
        torch::NoGradGuard noGrad;
        for (int i = 0; i < n; ++i) {
            m_views[i].zero_();
            m_params[i].mutable_grad() = m_views[i];
        }
    }
    for (int i = 0; i < n; ++i) {
        if (!m_params[i].requires_grad())
            throw std::invalid_argument("parameter " + std::to_string(i) + " does not require grad");
        auto acc = torch::autograd::impl::grad_accumulator(m_params[i]);
        if (!acc)
            throw std::runtime_error("no gradient accumulator for parameter " + std::to_string(i));
        m_hookKeys.push_back(acc->add_post_hook(std::make_unique<ReadyHook>([this, i] { onGradReady(i); })));
        m_accumulators.push_back(std::move(acc)); // the variable only holds it weakly
    }
}

Reducer::~Reducer()
{
    if (m_exchangeThread.joinable()) {
        {
            std::lock_guard lock(m_exchangeMutex);
            m_stop = true;
        }
        m_exchangeCv.notify_all();
        m_exchangeThread.join();
    }
    for (size_t i = 0; i < m_accumulators.size(); ++i)
        m_accumulators[i]->del_post_hook(m_hookKeys[i]);
    for (auto& b : m_buckets)
        if (b->work && !b->work->isCompleted()) {
            try {
                b->work->wait(std::chrono::milliseconds(1000));
            } catch (...) {
            }
        }
}

int64_t Reducer::bucketBytes(int b) const { return m_buckets[b]->wireBytes; }

void Reducer::broadcastParameters()
{
    if (m_world == 1)
        return;
    torch::NoGradGuard noGrad;
    std::vector<torch::Tensor> flat;
    for (auto& p : m_params)
        flat.push_back(p.detach().reshape({-1}));
    std::vector<torch::Tensor> one{torch::cat(flat)};
    c10d::BroadcastOptions opts;
    opts.rootRank = 0;
    m_pg->broadcast(one, opts)->wait();
    int64_t offset = 0;
    for (auto& p : m_params) {
        p.detach().view({-1}).copy_(one[0].narrow(0, offset, p.numel()));
        offset += p.numel();
    }
}

void Reducer::zeroGrads()
{
    torch::NoGradGuard noGrad;
    for (auto& b : m_buckets)
        b->flat.zero_();
    for (size_t i = 0; i < m_params.size(); ++i) {
        torch::Tensor& g = m_params[i].mutable_grad();
        if (!g.defined())
            g = m_views[i];
        else if (g.data_ptr() != m_views[i].data_ptr())
            g.zero_();
    }
}

void Reducer::prepareForBackward(bool sync)
{
    std::lock_guard lock(m_mutex);
    m_sync = sync;
    m_started = false;
    m_nextLaunch = 0;
    m_waitStart = m_waitEnd = 0;
    for (size_t b = 0; b < m_buckets.size(); ++b) {
        m_buckets[b]->pending = static_cast<int>(m_bucketParams[b].size());
        m_buckets[b]->work.reset();
        m_buckets[b]->launchNs = 0;
        m_buckets[b]->completeNs.store(0, std::memory_order_relaxed);
    }
}

void Reducer::onGradReady(int32_t param)
{
    std::lock_guard lock(m_mutex);
    if (!m_started) {
        m_started = true;
        if (m_options.firstGradHook)
            m_options.firstGradHook();
        if (m_sync)
            torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize(); });
    }
    m_grads->local().push_back(GradEvent{param, nowNs()});
    if (!m_sync)
        return;
    const int b = m_paramBucket[param];
    const torch::Tensor& g = m_params[param].grad();
    if (!g.defined())
        m_views[param].zero_();
    else if (!g.is_same(m_views[param]) && g.data_ptr() != m_views[param].data_ptr())
        m_views[param].copy_(g);
    if (--m_buckets[b]->pending == 0)
        launchReady();
}

void Reducer::launchReady()
{
    while (m_nextLaunch < static_cast<int>(m_buckets.size()) && m_buckets[m_nextLaunch]->pending == 0)
        launch(m_nextLaunch++);
}

// Averaging divides before the sum, as DDP's default hook does: the fp16 wire format would
// otherwise risk overflow in the sum.
void Reducer::launch(int b)
{
    Bucket& bk = *m_buckets[b];
    if (m_world > 1)
        bk.flat.div_(m_world);
    if (m_options.compress != Compress::None)
        bk.wire.copy_(bk.flat);
    bk.launchNs = nowNs();
    if (m_options.launchBegin)
        m_options.launchBegin(b);
    struct End {
        const std::function<void(int)>& f;
        int b;
        ~End()
        {
            if (f)
                f(b);
        }
    } end{m_options.launchEnd, b};
    if (m_pairwise) {
        std::vector<torch::Tensor> out{bk.flat}, in{bk.peer};
        bk.sendWork = m_pg->send(out, m_peer, b);
        bk.work = m_pg->recv(in, m_peer, b);
        {
            std::lock_guard lock(m_exchangeMutex);
            bk.exchanged = false;
            bk.exchangeError = nullptr;
            m_exchangeQueue.push_back(b);
        }
        m_exchangeCv.notify_one();
        return;
    }
    if (m_options.compress == Compress::Bf16) {
        std::vector<std::vector<torch::Tensor>> out{bk.gathered};
        std::vector<torch::Tensor> in{bk.wire.view(torch::kHalf)};
        bk.work = m_pg->allgather(out, in);
    } else {
        std::vector<torch::Tensor> t{bk.wire};
        bk.work = m_pg->allreduce(t);
    }
    // The completion instant is stamped by whichever thread completes the work's future (a
    // gloo worker thread), not by the waiter, whose wake-up may come much later.
    if (m_options.hostCompletion)
        bk.work->getFuture()->addCallback([&bk](c10::ivalue::Future&) { bk.completeNs.store(nowNs()); });
}

// The startup probe (runtime_torch.h). It runs before the first backward, so the buckets, the
// exchange thread and the tags 0..buckets-1 are idle; its own tags start above any bucket's.
std::vector<std::pair<int64_t, TimeNs>> Reducer::probeLink(const std::vector<int64_t>& bucketBytes, int repeats)
{
    std::vector<std::pair<int64_t, TimeNs>> out;
    if (m_world < 2 || repeats < 1)
        return out;
    torch::NoGradGuard noGrad;
    int tag = static_cast<int>(m_buckets.size()) + 1000;
    struct Probe {
        torch::Tensor flat, peer, wire;
        std::vector<torch::Tensor> gathered;
        TimeNs best = std::numeric_limits<TimeNs>::max();
    };
    std::vector<Probe> probes;
    for (int64_t bytes : bucketBytes) {
        const int64_t numel = std::max<int64_t>(1, bytes / 4);
        // The buckets' own device and type (float32).
        const auto options = m_buckets.empty() ? torch::TensorOptions().dtype(torch::kFloat32) : m_buckets.front()->flat.options();
        Probe p;
        p.flat = torch::ones({numel}, options);
        p.peer = torch::empty_like(p.flat);
        p.wire = p.flat;
        if (m_options.compress == Compress::Fp16)
            p.wire = p.flat.to(torch::kHalf);
        if (m_options.compress == Compress::Bf16) {
            p.wire = p.flat.to(torch::kBFloat16);
            for (int r = 0; r < m_world; ++r)
                p.gathered.push_back(torch::zeros({numel}, options.dtype(torch::kHalf)));
        }
        probes.push_back(std::move(p));
    }
    // The sizes take turns, so that a burst of load beside the job hits each of them alike rather
    // than all the repetitions of one; the fastest per size is kept: on a shared machine noise
    // only ever adds (a rank descheduled between the barrier and its send), and under load even
    // the median of nine was seen at 3.7 ms for 4 KiB that takes 0.16 ms undisturbed.
    for (int i = 0; i < repeats; ++i) {
        for (Probe& p : probes) {
            m_pg->barrier()->wait(m_options.timeout);
            const TimeNs start = nowNs();
            if (m_pairwise) {
                std::vector<torch::Tensor> o{p.flat}, in{p.peer};
                auto sent = m_pg->send(o, m_peer, tag);
                auto received = m_pg->recv(in, m_peer, tag);
                ++tag;
                received->wait(m_options.timeout);
                sent->wait(m_options.timeout);
                p.flat.add_(p.peer);
            } else if (m_options.compress == Compress::Bf16) {
                std::vector<std::vector<torch::Tensor>> o{p.gathered};
                std::vector<torch::Tensor> in{p.wire.view(torch::kHalf)};
                m_pg->allgather(o, in)->wait(m_options.timeout);
            } else {
                std::vector<torch::Tensor> t{p.wire};
                m_pg->allreduce(t)->wait(m_options.timeout);
            }
            // On a GPU wait() only orders the streams: the host waits for the device here.
            if (!p.flat.is_cpu())
                torch::cuda::synchronize(p.flat.device().index());
            p.best = std::min(p.best, nowNs() - start);
        }
    }
    // Bytes on the wire, as the bucket table's (bucketBytes): float32, or the fp16/bf16 copy.
    for (const Probe& p : probes)
        out.emplace_back(p.wire.numel() * static_cast<int64_t>(p.wire.element_size()), p.best);
    return out;
}

// The pairwise exchange's completion thread: buckets in launch order; the sum happens here, on
// this thread, so it overlaps the rest of backward like the ring's reduction would.
void Reducer::exchangeLoop()
{
    for (;;) {
        int b = 0;
        {
            std::unique_lock lock(m_exchangeMutex);
            m_exchangeCv.wait(lock, [this] { return m_stop || !m_exchangeQueue.empty(); });
            if (m_exchangeQueue.empty())
                return;
            b = m_exchangeQueue.front();
            m_exchangeQueue.pop_front();
        }
        Bucket& bk = *m_buckets[b];
        std::exception_ptr error;
        try {
            bk.work->wait(m_options.timeout);
            bk.sendWork->wait(m_options.timeout);
            torch::NoGradGuard noGrad;
            bk.flat.add_(bk.peer);
        } catch (...) {
            error = std::current_exception();
        }
        bk.completeNs.store(nowNs());
        {
            std::lock_guard lock(m_exchangeMutex);
            bk.exchanged = true;
            bk.exchangeError = error;
        }
        m_exchangedCv.notify_all();
    }
}

void Reducer::waitBucket(int b)
{
    Bucket& bk = *m_buckets[b];
    if (!m_pairwise) {
        bk.work->wait(m_options.timeout);
        return;
    }
    std::unique_lock lock(m_exchangeMutex);
    // The exchange thread's own waits time out first; the margin only guards against a bug.
    if (!m_exchangedCv.wait_for(lock, m_options.timeout + std::chrono::seconds(5), [&bk] { return bk.exchanged; }))
        throw std::runtime_error("timed out waiting for the exchange");
    if (bk.exchangeError)
        std::rethrow_exception(bk.exchangeError);
}

// Runs on the autograd engine once backward has finished (queued by the first ready hook):
// waits for every bucket in order, applies the emulated link, and writes the averaged
// gradients back into .grad.
//
// Link emulation (--link-gbps X): the link is modelled as one serial pipe. Bucket b can start
// transmitting at max(its launch, the end of bucket b-1 on the link) and needs bytes*8/X ns,
// so its completion is held until max(real completion, that emulated end). Holding happens
// here, at the one place DDP waits for communication, which gives a slow link exactly its
// visible effect: less of the communication hides behind backward and more is exposed.
void Reducer::finalize()
{
    m_waitStart = nowNs();
    for (size_t b = 0; b < m_buckets.size(); ++b)
        if (m_buckets[b]->pending != 0 || !m_buckets[b]->work)
            throw std::runtime_error("bucket " + std::to_string(b)
                                     + " never became ready: some parameter got no gradient in this backward");
    TimeNs linkFree = 0;
    TimeNs holdUntil = 0;
    for (auto& bp : m_buckets) {
        Bucket& bk = *bp;
        try {
            waitBucket(static_cast<int>(&bp - m_buckets.data()));
        } catch (const c10::Error& e) {
            throw std::runtime_error("all-reduce of bucket " + std::to_string(&bp - m_buckets.data()) + " failed ("
                                     + std::to_string(m_options.timeout.count() / 1000.0) + " s collective timeout): "
                                     + e.what_without_backtrace());
        } catch (const std::exception& e) {
            throw std::runtime_error("all-reduce of bucket " + std::to_string(&bp - m_buckets.data()) + " failed: "
                                     + e.what());
        }
        TimeNs done = bk.completeNs.load();
        if (done == 0 && m_options.hostCompletion) {
            done = nowNs();
            bk.completeNs.store(done);
        }
        if (m_options.linkGbps > 0) {
            const auto xfer = static_cast<TimeNs>(static_cast<double>(bk.wireBytes) * 8.0 / m_options.linkGbps);
            const TimeNs emulated = std::max(bk.launchNs, linkFree) + xfer;
            linkFree = emulated;
            if (emulated > done) {
                done = emulated;
                bk.completeNs.store(done);
            }
        }
        holdUntil = std::max(holdUntil, done);
    }
    if (m_options.linkGbps > 0) {
        const TimeNs now = nowNs();
        if (holdUntil > now)
            std::this_thread::sleep_for(std::chrono::nanoseconds(holdUntil - now));
    }
    torch::NoGradGuard noGrad;
    for (size_t b = 0; b < m_buckets.size(); ++b) {
        Bucket& bk = *m_buckets[b];
        if (m_options.compress == Compress::Fp16) {
            bk.flat.copy_(bk.wire);
        } else if (m_options.compress == Compress::Bf16) {
            bk.flat.zero_();
            for (auto& g : bk.gathered)
                bk.flat.add_(g.view(torch::kBFloat16).to(torch::kFloat32));
        }
        for (int32_t p : m_bucketParams[b]) {
            torch::Tensor& g = m_params[p].mutable_grad();
            if (!g.defined())
                g = m_views[p];
            else if (g.data_ptr() != m_views[p].data_ptr())
                g.copy_(m_views[p]);
        }
    }
    m_waitEnd = nowNs();
}

void Reducer::takeCommRecords(std::vector<CommRecord>& out, TimeNs* waitStart, TimeNs* waitEnd)
{
    std::lock_guard lock(m_mutex);
    out.clear();
    if (!m_sync)
        return;
    for (size_t b = 0; b < m_buckets.size(); ++b) {
        const Bucket& bk = *m_buckets[b];
        out.push_back(CommRecord{static_cast<int32_t>(b), bk.launchNs, bk.completeNs.load(), bk.wireBytes});
    }
    *waitStart = m_waitStart;
    *waitEnd = m_waitEnd;
}

} // namespace lockstep::rt
