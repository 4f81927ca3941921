// The what-if settings, declared once: what `lockstep predict` / `advise` accept
// (app/cli_predict.cpp), what `lockstep run` accepts for the same knobs (job/src/flags.cpp) and
// what the app's What-if page lets a field take (ui/whatif_panel.cpp). One table, one range each:
// a value one of them takes is a value the others take.
//
// Ranges and why:
//  - bucket caps 1 KiB to 64 GiB: below 1 KiB a cap is a bucket per parameter already (and a
//    typo); above 64 GiB any model's gradients fit one bucket; bytes stay inside int64.
//  - emulated link 1 Mbit/s to 10 Tbit/s, 0 = not emulated: slower is no link (1e-9 hung the
//    runtime); faster is a typo, and would be recorded but not meaningfully applied.
//  - compute scale x0.01 to x100: a device a hundred times faster or slower; beyond it the
//    recorded run says nothing.
//  - world size 1 to 4096: the replay grows with the ranks (a million took 6.7 GB); `lockstep run`
//    starts at most job::kMaxLocalRanks local ranks, a launcher's own limit.
#pragma once

#include <array>

namespace lockstep::core {

struct WhatIfSetting {
    const char* flag;  // the command-line flag (the same in predict and run)
    const char* label; // the app's field
    const char* unit;
    double min;        // the smallest value (0 beside it: see zeroMeansOff)
    double max;
    bool zeroMeansOff; // 0 is accepted as well: "not emulated"
};

inline constexpr WhatIfSetting kBucketCapSetting{"--bucket-mb", "Bucket cap", "MiB", 1.0 / 1024, 65536, false};
inline constexpr WhatIfSetting kFirstBucketCapSetting{"--first-bucket-mb", "First bucket", "MiB", 1.0 / 1024, 65536,
                                                      false};
inline constexpr WhatIfSetting kLinkSetting{"--link-gbps", "Link", "Gbit/s", 0.001, 10'000, true};
inline constexpr WhatIfSetting kComputeScaleSetting{"--compute-scale", "Compute", "x", 0.01, 100, false};
inline constexpr WhatIfSetting kWorldSizeSetting{"--nproc", "World", "ranks", 1, 4096, false};

inline constexpr std::array<const WhatIfSetting*, 5> kWhatIfSettings{
    &kBucketCapSetting, &kFirstBucketCapSetting, &kLinkSetting, &kComputeScaleSetting, &kWorldSizeSetting};

} // namespace lockstep::core
