// CUPTI activity collector (see the header for the contract).
//
// How records flow, and why:
//  - CUPTI writes activity records into buffers we hand it (bufferRequested) and gives them
//    back full (bufferCompleted), on its own worker thread, whenever it likes. That callback
//    only copies each record into a compact struct under a mutex and frees the buffer: no
//    allocation per record beyond the vector, no calls back into CUPTI.
//  - flush() forces CUPTI to hand back what is complete (cuptiActivityFlushAll) and turns the
//    compact records into core::Spans. Kernel names are interned locally (a name is shared by
//    thousands of launches) and translated through the caller's interner once per flush.
//  - External correlation: while the trainer has an id pushed, every CUDA API call on that
//    thread yields an EXTERNAL_CORRELATION record mapping CUPTI's correlationId (the same one
//    the kernel record carries) to our id (the innermost pushed id: a bucket's inside its
//    step's). That record is emitted at API-call time, so it is in the same or an earlier
//    buffer than the kernel it names; the map survives across flushes and is pruned once it
//    grows large. This is how device work gets the step that LAUNCHED it: a kernel of step s
//    that runs during step s+1's host window still carries s. A record without an external id
//    was launched while no step was pushed: it keeps kNoStep and is counted, never guessed.
//  - Timestamps: by default CUPTI uses its own normalized clock; registering a CLOCK_REALTIME
//    callback before enabling any activity kind makes device times comparable with the host
//    spans and with other ranks (docs/design.md "Time and clocks").
#include "lockstep/rt/cupti_collector.h"

#include "lockstep/core/diagnostics.h"

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <unordered_map>

namespace lockstep::rt {
namespace {

// Record layouts change between CUPTI releases; pick the one this toolkit defines.
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using MemsetRecord = CUpti_ActivityMemset4;
#elif CUPTI_API_VERSION >= 18
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
using MemsetRecord = CUpti_ActivityMemset4;
#else
#error "the CUPTI collector needs CUDA 12 or newer"
#endif

// 8 MiB per buffer: ~50k kernel records, a few steps of a large model between flushes.
constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kAlign = 8;
// Correlation ids are pruned past this many; a step launches far fewer kernels.
constexpr size_t kMaxCorrelations = 1u << 20;

uint64_t CUPTIAPI realtimeNs()
{
    timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

std::string cuptiError(CUptiResult r)
{
    const char* text = nullptr;
    if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || !text)
        return "CUPTI error " + std::to_string(int(r));
    return text;
}

const char* copyKindName(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "Memcpy PtoP";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "Memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "Memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "Memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "Memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "Memcpy DtoA";
    default: return "Memcpy";
    }
}

struct Record {
    core::TimeNs start = 0;
    core::TimeNs end = 0;
    int64_t bytes = 0;
    int64_t stream = 0;
    int32_t device = 0;
    uint32_t correlation = 0;
    uint32_t name = 0; // local name id
    core::SpanKind kind = core::SpanKind::Kernel;
};

} // namespace

struct CuptiCollector::Impl {
    std::mutex mutex;
    std::vector<Record> records;
    std::unordered_map<uint32_t, uint64_t> external; // CUPTI correlation id -> our id
    std::vector<std::string> names;
    std::unordered_map<std::string, uint32_t> nameIndex;
    Stats stats;

    uint32_t nameId(const char* text)
    {
        std::string key = text ? text : "";
        auto it = nameIndex.find(key);
        if (it != nameIndex.end())
            return it->second;
        const auto id = uint32_t(names.size());
        names.push_back(key);
        nameIndex.emplace(std::move(key), id);
        return id;
    }

    // Kernel, memcpy and memset records share these fields under the same names.
    template <class ActivityRecord>
    void append(const ActivityRecord& a, core::SpanKind kind, uint32_t name, int64_t bytes)
    {
        Record r;
        r.start = core::TimeNs(a.start);
        r.end = core::TimeNs(a.end);
        r.bytes = bytes;
        r.device = int32_t(a.deviceId);
        r.stream = int64_t(a.streamId);
        r.correlation = a.correlationId;
        r.name = name;
        r.kind = kind;
        records.push_back(r);
    }

    void consume(uint8_t* buffer, size_t validSize)
    {
        std::lock_guard lock(mutex);
        CUpti_Activity* record = nullptr;
        while (cuptiActivityGetNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
            switch (record->kind) {
            case CUPTI_ACTIVITY_KIND_KERNEL:
            case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
                const auto* k = reinterpret_cast<const KernelRecord*>(record);
                // NCCL's kernels (ncclKernel_*, ncclDevKernel_*) are the communication on a GPU.
                const bool nccl = k->name && std::strncmp(k->name, "nccl", 4) == 0;
                append(*k, nccl ? core::SpanKind::CommKernel : core::SpanKind::Kernel, nameId(k->name), 0);
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMCPY: {
                const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
                append(*m, core::SpanKind::Memcpy, nameId(copyKindName(m->copyKind)), int64_t(m->bytes));
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMSET: {
                const auto* m = reinterpret_cast<const MemsetRecord*>(record);
                append(*m, core::SpanKind::Memset, nameId("Memset"), int64_t(m->bytes));
                break;
            }
            case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
                const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
                if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
                    if (external.size() >= kMaxCorrelations)
                        external.clear(); // old ids belong to steps long flushed
                    external[e->correlationId] = e->externalId;
                }
                break;
            }
            default:
                break;
            }
        }
        size_t dropped = 0;
        if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS)
            stats.dropped += int64_t(dropped);
    }
};

namespace {

// CUPTI's callbacks are plain functions; the process has at most one collector.
std::atomic<CuptiCollector::Impl*> g_active {nullptr};
std::mutex g_startMutex;

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords)
{
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *maxNumRecords = 0; // as many as fit
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validSize)
{
    if (auto* impl = g_active.load())
        impl->consume(buffer, validSize);
    std::free(buffer);
}

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

} // namespace

core::Result<std::unique_ptr<CuptiCollector>> CuptiCollector::start()
{
    std::lock_guard lock(g_startMutex);
    if (g_active.load())
        return core::fail("a CUPTI collector is already running in this process");

    // Ask the runtime first: on a machine without a GPU or driver, CUPTI calls can fail in
    // confusing ways; cudaGetDeviceCount says plainly what is missing.
    int devices = 0;
    const cudaError_t cr = cudaGetDeviceCount(&devices);
    if (cr != cudaSuccess) {
        return core::fail(std::string("no usable NVIDIA GPU for the CUPTI collector: cudaGetDeviceCount failed: ")
                          + cudaGetErrorName(cr) + " (" + cudaGetErrorString(cr)
                          + "); is the NVIDIA driver installed and a GPU visible (CUDA_VISIBLE_DEVICES)?");
    }
    if (devices == 0)
        return core::fail("no usable NVIDIA GPU for the CUPTI collector: cudaGetDeviceCount found 0 devices");

    auto impl = std::make_unique<Impl>();
    g_active.store(impl.get());
    auto undo = [&](const std::string& what, CUptiResult r) {
        for (auto kind : kKinds)
            cuptiActivityDisable(kind);
        g_active.store(nullptr);
        return core::fail("cannot start the CUPTI collector: " + what + ": " + cuptiError(r));
    };
    if (CUptiResult r = cuptiActivityRegisterTimestampCallback(realtimeNs); r != CUPTI_SUCCESS)
        return undo("cuptiActivityRegisterTimestampCallback", r);
    if (CUptiResult r = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted); r != CUPTI_SUCCESS)
        return undo("cuptiActivityRegisterCallbacks", r);
    for (auto kind : kKinds)
        if (CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS)
            return undo("cuptiActivityEnable(" + std::to_string(int(kind)) + ")", r);
    return std::unique_ptr<CuptiCollector>(new CuptiCollector(std::move(impl)));
}

CuptiCollector::CuptiCollector(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

CuptiCollector::~CuptiCollector()
{
    for (auto kind : kKinds)
        cuptiActivityDisable(kind);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard lock(g_startMutex);
    g_active.store(nullptr);
}

uint64_t CuptiCollector::encodeCorrelation(int32_t step, int32_t bucket)
{
    // +1 so that 0 (CUPTI's "no id") never names a real (step, bucket); kNoBucket (-1) -> 0.
    return (uint64_t(uint32_t(step + 1)) << 32) | uint64_t(uint32_t(bucket + 1));
}

void CuptiCollector::decodeCorrelation(uint64_t id, int32_t* step, int32_t* bucket)
{
    *step = int32_t(uint32_t(id >> 32)) - 1;
    *bucket = int32_t(uint32_t(id & 0xffffffffu)) - 1;
}

void CuptiCollector::pushCorrelation(uint64_t id)
{
    cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void CuptiCollector::popCorrelation()
{
    uint64_t last = 0;
    cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

void CuptiCollector::deliverCompleted() { cuptiActivityFlushAll(0); }

core::Status CuptiCollector::setEnabled(bool enabled)
{
    for (auto kind : kKinds) {
        if (kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
            continue;
        if (CUptiResult r = enabled ? cuptiActivityEnable(kind) : cuptiActivityDisable(kind); r != CUPTI_SUCCESS)
            return core::fail(std::string(enabled ? "cuptiActivityEnable" : "cuptiActivityDisable") + "("
                              + std::to_string(int(kind)) + "): " + cuptiError(r));
    }
    return {};
}

core::Status CuptiCollector::flush(std::vector<core::Span>& out, const LaneResolver& lane, const Interner& intern)
{
    if (CUptiResult r = cuptiActivityFlushAll(0); r != CUPTI_SUCCESS)
        return core::fail("cuptiActivityFlushAll: " + cuptiError(r));
    // Take the records and resolve their external ids under the lock; call the caller's
    // resolver and interner outside it, so they may take as long as they like.
    std::vector<Record> records;
    std::vector<uint64_t> externalIds;
    std::vector<std::string> names;
    {
        std::lock_guard lock(m_impl->mutex);
        records.swap(m_impl->records);
        externalIds.resize(records.size(), 0);
        for (size_t i = 0; i < records.size(); ++i)
            if (auto it = m_impl->external.find(records[i].correlation); it != m_impl->external.end())
                externalIds[i] = it->second;
        names = m_impl->names;
    }
    std::vector<core::StringId> nameIds(names.size());
    std::vector<bool> nameDone(names.size(), false);
    out.reserve(out.size() + records.size());
    int64_t correlated = 0;
    std::map<std::string, int64_t> outside;
    for (size_t i = 0; i < records.size(); ++i) {
        const Record& r = records[i];
        core::Span s;
        s.start = r.start;
        s.end = r.end;
        s.bytes = r.bytes;
        s.kind = r.kind;
        s.lane = lane(r.device, r.stream);
        if (!nameDone[r.name]) {
            nameIds[r.name] = intern(names[r.name]);
            nameDone[r.name] = true;
        }
        s.name = nameIds[r.name];
        if (externalIds[i] != 0) {
            decodeCorrelation(externalIds[i], &s.step, &s.bucket);
            ++correlated;
        }
        if (s.step == core::kNoStep)
            ++outside[core::spanKindName(s.kind)];
        out.push_back(s);
    }
    std::lock_guard lock(m_impl->mutex);
    m_impl->stats.records += int64_t(records.size());
    m_impl->stats.correlated += correlated;
    for (const auto& [kind, n] : outside)
        m_impl->stats.outsideSteps[kind] += n;
    return {};
}

std::vector<core::Diagnostic> CuptiCollector::diagnostics() const
{
    const Stats s = stats();
    std::vector<core::Diagnostic> out;
    int64_t outside = 0;
    std::string detail;
    for (const auto& [kind, n] : s.outsideSteps) {
        outside += n;
        detail += (detail.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    }
    if (outside > 0)
        out.push_back(core::makeDiagnostic(core::DiagnosticKind::DeviceSpanOutsideSteps, outside, detail));
    if (s.dropped > 0)
        out.push_back(core::makeDiagnostic(core::DiagnosticKind::DeviceRecordsDropped, s.dropped));
    return out;
}

CuptiCollector::Stats CuptiCollector::stats() const
{
    std::lock_guard lock(m_impl->mutex);
    return m_impl->stats;
}

} // namespace lockstep::rt
