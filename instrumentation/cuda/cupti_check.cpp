// lockstep-cupti-check: starts the CUPTI collector once and says whether it works here.
// On a GPU machine it also runs a tiny memset + memcpy and prints the activity it recorded;
// without a GPU it prints why the collector cannot start and exits with status 1.
#include "lockstep/rt/cupti_collector.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <map>
#include <string>

int main()
{
    using lockstep::rt::CuptiCollector;
    auto collector = CuptiCollector::start();
    if (!collector) {
        std::fprintf(stderr, "lockstep-cupti-check: %s\n", collector.error().message.c_str());
        return 1;
    }
    std::printf("lockstep-cupti-check: CUPTI collector started\n");
    void* device = nullptr;
    constexpr size_t kBytes = 1 << 20;
    std::string host(kBytes, '\0');
    (*collector)->pushCorrelation(CuptiCollector::encodeCorrelation(7, 2));
    if (cudaMalloc(&device, kBytes) == cudaSuccess) {
        cudaMemset(device, 1, kBytes);
        cudaMemcpy(host.data(), device, kBytes, cudaMemcpyDeviceToHost);
        cudaDeviceSynchronize();
        cudaFree(device);
    }
    (*collector)->popCorrelation();

    std::vector<lockstep::core::Span> spans;
    std::map<std::pair<int32_t, int64_t>, uint32_t> lanes;
    std::vector<std::string> names;
    auto status = (*collector)->flush(
        spans,
        [&](int32_t dev, int64_t stream) {
            auto [it, inserted] = lanes.emplace(std::make_pair(dev, stream), uint32_t(lanes.size()));
            return lockstep::core::LaneId {it->second};
        },
        [&](std::string_view name) {
            names.emplace_back(name);
            return lockstep::core::StringId {uint32_t(names.size() - 1)};
        });
    if (!status) {
        std::fprintf(stderr, "lockstep-cupti-check: flush failed: %s\n", status.error().message.c_str());
        return 1;
    }
    for (const auto& s : spans)
        std::printf("  %-14s lane %u  step %d bucket %d  %lld ns  %lld bytes  start %lld (CLOCK_REALTIME ns)\n",
                    names[s.name.v].c_str(), s.lane.v, s.step, s.bucket, (long long)s.duration(), (long long)s.bytes,
                    (long long)s.start);
    const auto stats = (*collector)->stats();
    std::printf("lockstep-cupti-check: %lld records, %lld correlated, %lld dropped\n", (long long)stats.records,
                (long long)stats.correlated, (long long)stats.dropped);
    return spans.empty() ? 1 : 0;
}
