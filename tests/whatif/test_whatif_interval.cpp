// The interval every what-if prediction carries (whatif_error.h, whatif_interval.cpp), derived by
// hand: its arithmetic, the recording's noise, the kinds of change, and advise's verdict.
#include "lockstep/core/whatif.h"
#include "lockstep/core/whatif_error.h"
#include "lockstep/core/whatif_settings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace lockstep::core;

namespace {

double row(ChangeKind k) { return heldOutError(k).p90AbsPct; }

Run stepsOnly(const std::vector<std::vector<double>>& stepMsPerRank, int32_t warmup)
{
    Run run;
    run.config.warmupSteps = warmup;
    for (size_t r = 0; r < stepMsPerRank.size(); ++r) {
        TimeNs t = 0;
        for (size_t s = 0; s < stepMsPerRank[r].size(); ++s) {
            const auto d = static_cast<TimeNs>(stepMsPerRank[r][s] * 1e6);
            Step st;
            st.rank = static_cast<int32_t>(r);
            st.step = static_cast<int32_t>(s);
            st.start = t;
            st.end = t + d;
            run.steps.push_back(st);
            t += d;
        }
    }
    return run;
}

} // namespace

TEST(WhatIfErrorTable, EveryKindHasOneRowWithItsSource)
{
    // One row per kind, each saying where it came from; measured rows are positive percentages.
    for (ChangeKind k : {ChangeKind::None, ChangeKind::BucketCap, ChangeKind::LinkSpeed, ChangeKind::WorldSize,
                         ChangeKind::ComputeScale, ChangeKind::Compression}) {
        const HeldOutError& e = heldOutError(k);
        EXPECT_EQ(e.kind, k);
        EXPECT_NE(std::string(e.source), "");
        if (e.p90AbsPct >= 0) {
            EXPECT_GT(e.p90AbsPct, 0);
            EXPECT_GT(e.pairs, 0);
        }
    }
    // Never measured: a compute scale cannot be run for real.
    EXPECT_LT(row(ChangeKind::ComputeScale), 0);
}

TEST(WhatIfInterval, HalfWidthIsTheRowAndTheNoiseInQuadrature)
{
    // Noise chosen so that the half-width is exactly 80 %: sqrt(r^2 + (80^2 - r^2)) = 80. The
    // interval inverts |p - m| / m <= 0.8: m in [p / 1.8, p / 0.2] = [55.56, 500] for p = 100.
    // A cap change's row is never below a repeat's (the machine's spread is in every run).
    const double r = std::max(row(ChangeKind::BucketCap), row(ChangeKind::None));
    ASSERT_LT(r, 80);
    const PredictionInterval iv = intervalFor({ChangeKind::BucketCap}, 100, std::sqrt(6400 - r * r));
    EXPECT_NEAR(iv.halfWidthPct, 80, 1e-9);
    EXPECT_NEAR(iv.heldOutPct, r, 1e-9);
    EXPECT_NEAR(iv.lowMs, 100 / 1.8, 1e-9);
    EXPECT_NEAR(iv.highMs, 500, 1e-9);
    EXPECT_TRUE(iv.measured);
    // No noise (a recording of one steady step): the row alone; NaN noise counts as none.
    const PredictionInterval bare = intervalFor({ChangeKind::BucketCap}, 100, std::nan(""));
    EXPECT_NEAR(bare.halfWidthPct, r, 1e-9);
    EXPECT_NEAR(bare.noisePct, 0, 1e-12);
    EXPECT_NEAR(bare.highMs, 100 / (1 - r / 100), 1e-9);
}

TEST(WhatIfInterval, KindsAddInQuadratureAndUnmeasuredKindsSaySo)
{
    // The repeat's spread once, and each kind's excess over it.
    const double caps = row(ChangeKind::BucketCap), world = row(ChangeKind::WorldSize), rep = row(ChangeKind::None);
    const auto excess = [&](double k) { return std::max(0.0, k * k - rep * rep); };
    const PredictionInterval both = intervalFor({ChangeKind::BucketCap, ChangeKind::WorldSize}, 100, 0);
    EXPECT_NEAR(both.heldOutPct, std::sqrt(rep * rep + excess(caps) + excess(world)), 1e-9);
    EXPECT_GE(both.heldOutPct, std::max({caps, world, rep}) - 1e-9);
    EXPECT_EQ(both.kinds.size(), 2u);
    // Nothing changed: the row of a repeat of the recorded configuration.
    const PredictionInterval none = intervalFor({}, 100, 0);
    ASSERT_EQ(none.kinds.size(), 1u);
    EXPECT_EQ(none.kinds[0], ChangeKind::None);
    EXPECT_NEAR(none.halfWidthPct, row(ChangeKind::None), 1e-9);
    // A compute scale was never measured: the widest measured row stands in, and it says so.
    double widest = 0;
    for (const HeldOutError& e : kHeldOutErrors)
        widest = std::max(widest, e.p90AbsPct);
    const PredictionInterval scale = intervalFor({ChangeKind::ComputeScale}, 100, 0);
    EXPECT_FALSE(scale.measured);
    EXPECT_NEAR(scale.halfWidthPct, widest, 1e-9);
    // An error of 100 % or more has no upper bound.
    const PredictionInterval wide = intervalFor({ChangeKind::BucketCap}, 100, 100);
    EXPECT_TRUE(std::isinf(wide.highMs));
}

TEST(WhatIfInterval, ChangeKindsOfAConfiguration)
{
    WhatIfConfig rec;
    EXPECT_TRUE(changeKinds(rec, rec).empty());
    WhatIfConfig c = rec;
    c.firstBucketCapBytes *= 2;
    c.worldSize = 4;
    EXPECT_EQ(changeKinds(rec, c), (std::vector<ChangeKind>{ChangeKind::BucketCap, ChangeKind::WorldSize}));
    c = rec;
    c.linkGbps = 1;
    c.computeScale = 0.5;
    c.compress = "fp16";
    EXPECT_EQ(changeKinds(rec, c),
              (std::vector<ChangeKind>{ChangeKind::LinkSpeed, ChangeKind::ComputeScale, ChangeKind::Compression}));
}

TEST(WhatIfInterval, StepNoiseIsTheStandardErrorOfTheSteadySteps)
{
    // Two ranks; steps 0 (warm-up, 500 ms) left out; steady steps' means over ranks 100, 110, 90,
    // 100 ms: mean 100, sample sd sqrt((0 + 100 + 100 + 0) / 3) = 8.165, standard error
    // 8.165 / 2 = 4.082, times 1.645: 6.715 % of the mean.
    const lockstep::core::Run run = stepsOnly({{500, 90, 120, 80, 100}, {500, 110, 100, 100, 100}}, 1);
    EXPECT_NEAR(stepNoisePct(run), 1.645 * std::sqrt(200.0 / 3) / 2, 1e-6);
    // Steady steps all equal: no noise. One steady step: unknown (NaN).
    EXPECT_NEAR(stepNoisePct(stepsOnly({{500, 100, 100, 100}}, 1)), 0, 1e-12);
    EXPECT_TRUE(std::isnan(stepNoisePct(stepsOnly({{500, 100}}, 1))));
}

TEST(WhatIfInterval, CpuWaitBeyondTheTablesWidensTheNoise)
{
    // Steady steps of 100 ms on both ranks (no sampling noise). Each rank-step waited 40 ms for a
    // CPU: 40 % of the steady time, kTableCpuWaitPct below it counts, the rest is the noise.
    lockstep::core::Run run = stepsOnly({{500, 100, 100, 100}, {500, 100, 100, 100}}, 1);
    for (Step& s : run.steps)
        s.runqNs = s.step == 0 ? 400'000'000 : 40'000'000; // the warm-up step's wait is left out
    EXPECT_NEAR(stepNoisePct(run), 40 - lockstep::core::kTableCpuWaitPct, 1e-9);
    // Sampling noise and the wait combine in quadrature: the 6.715 % run above, waiting 30 % of
    // its steady time (wait weighted by step time: 0.3 of every steady step).
    lockstep::core::Run noisy = stepsOnly({{500, 90, 120, 80, 100}, {500, 110, 100, 100, 100}}, 1);
    for (Step& s : noisy.steps)
        s.runqNs = static_cast<int64_t>(0.3 * static_cast<double>(s.end - s.start));
    EXPECT_NEAR(stepNoisePct(noisy), std::hypot(1.645 * std::sqrt(200.0 / 3) / 2, 30 - lockstep::core::kTableCpuWaitPct),
                1e-6);
    // A wait within the table's machine's adds nothing; unmeasured waits (-1) add nothing.
    for (Step& s : run.steps)
        s.runqNs = 5'000'000;
    EXPECT_NEAR(stepNoisePct(run), 0, 1e-12);
    for (Step& s : run.steps)
        s.runqNs = -1;
    EXPECT_NEAR(stepNoisePct(run), 0, 1e-12);
}

TEST(WhatIfSettings, OneTableOfRanges)
{
    // The table the CLI, the runtime's flags and the app's page read: each range non-empty, the
    // link's 0 = not emulated, caps down to 1 KiB.
    for (const WhatIfSetting* s : kWhatIfSettings) {
        EXPECT_LT(s->min, s->max) << s->flag;
        EXPECT_GT(s->min, 0) << s->flag;
    }
    EXPECT_TRUE(kLinkSetting.zeroMeansOff);
    EXPECT_NEAR(kBucketCapSetting.min * 1024 * 1024, 1024, 1e-9);
    EXPECT_EQ(kWorldSizeSetting.max, 4096);
}
