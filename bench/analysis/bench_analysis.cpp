// Prints `name: value unit` lines for the analyses and level of detail on a synthetic run.
#include "lockstep/core/synthetic.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace lockstep::core;
using Clock = std::chrono::steady_clock;

static double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int main(int argc, char** argv)
{
    const int64_t spans = argc > 1 ? std::atoll(argv[1]) : 10'000'000;
    auto t = Clock::now();
    Run run = makeSyntheticRunWithSpans(spans, 2);
    std::printf("synthetic_%lldspans_s: %.3f s (%zu spans, %zu instants)\n", static_cast<long long>(spans), secondsSince(t), run.spans.size(), run.instants.size());
    return 0;
}
