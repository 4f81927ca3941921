// Like-for-like runs (docs/design.md "scaling efficiency"): a run's configuration signature, the
// grouping of runs that may share a curve, and scaling efficiency within such a group.
//
// Runs are comparable only when everything but the varied parameter is equal: the model and all
// its sizes, per-rank batch, compression, accumulation, optimizer, threads, link, backend,
// device and injected faults. Scaling curves vary the world size only; bucket-size curves vary
// the bucket caps only. Charts and tables never put runs of different groups on one curve.
#pragma once

#include "lockstep/core/types.h"

#include <string>
#include <utility>
#include <vector>

namespace lockstep::core {

struct RunSummary;

// The configuration of a run as (field, value) pairs in a fixed order: the settings of the run's
// field table (fields.h, kFieldSetting, in its order, as fieldText writes them; model_args with
// its tokens sorted): source, model, model_args, world_size, backend, device, bucket_cap_bytes,
// first_bucket_cap_bytes, batch_per_rank, optimizer, compress, accumulate, link_gbps; then
// global_batch, threads, straggler, crash, imported_from.
// threads: the --threads the run asked for when the recorder wrote it (extra "threads_requested",
// "0" = cores / local ranks), else the threads it used (extra "threads"). imported_from: the
// trace files of an imported run (a trace carries no configuration, so each import is its own
// group).
struct ConfigSignature {
    std::vector<std::pair<std::string, std::string>> fields;
    const std::string* value(const std::string& field) const;
};
ConfigSignature configSignature(const RunConfig& config);

// What a comparison varies; every other field must be equal.
enum class Varied : uint8_t {
    WorldSizeWeak,   // weak scaling: world size varies, per-rank batch equal
    WorldSizeStrong, // strong scaling: world size and per-rank batch vary, global batch equal
    BucketCaps,      // bucket-size curves: bucket_cap_bytes and first_bucket_cap_bytes vary
};
// The signature without the varied fields, as one string: runs with equal keys are comparable.
std::string comparisonKey(const ConfigSignature& signature, Varied varied);
// The fields two signatures differ in (for "why is this run not on the curve").
std::vector<std::string> differingFields(const ConfigSignature& a, const ConfigSignature& b);

// Groups of comparable runs: indices into `runs`, each group in input order, groups ordered by
// their first run. BucketCaps groups leave out 1-rank runs when `needsCommunication` (their
// overlap is not applicable: they add no point to overlap curves).
std::vector<std::vector<size_t>> comparableGroups(const std::vector<RunSummary>& runs, Varied varied,
                                                  bool needsCommunication = false);

// Scaling efficiency (docs/design.md). Runs are grouped by comparableGroups(runs, WorldSizeWeak or
// WorldSizeStrong) first, and each group is scaled on its own: N0 is the smallest world size of
// the group, its baseline the mean over the group's runs at N0; weak E(N) = thr(N) / (N thr(N0)
// / N0), strong E(N) = T(N0) N0 / (T(N) N). An efficiency that cannot be computed is NaN.
enum class ScalingMode { Weak, Strong };
struct ScalingPoint {
    std::string name;
    int32_t worldSize = 0;
    double throughput = 0;     // samples/s
    double stepTimeMs = 0;
    double efficiency = 0;
    int32_t group = 0;         // index of its comparable group (0, 1, ... in order of appearance)
    size_t run = 0;            // index into the input
};
// Points sorted by (group, world size); several runs at one world size each get a point.
std::vector<ScalingPoint> scalingEfficiency(const std::vector<RunSummary>& runs, ScalingMode mode);

} // namespace lockstep::core
