// The options of one training rank: the struct the runtime consumes. It is filled only through
// the flags table (flags.h), by `lockstep run`, `lockstep sweep`, `lockstep-worker` and the app's
// Launch panel alike, so every part has the same defaults, ranges and rules. The defaults below
// are the one place defaults are written.
//
// Torch-free and Qt-free on purpose: the runtime's public header (lockstep/rt/worker.h) uses it,
// and the CLI and the app must compile it without LibTorch.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::job {

struct TrainingOptions {
    // The model (what each rank trains).
    std::string model = "mlp";    // mlp | transformer | convnet
    int layers = 4;               // layers / blocks
    int width = 256;              // hidden width / channels
    int heads = 4;                // attention heads (transformer)
    int seq = 32;                 // sequence length (transformer)
    // Data and schedule.
    int batch = 32;               // samples per rank per micro-batch
    int steps = 20;
    int warmup = 3;               // steps left out of run-level numbers
    int accumulate = 1;           // micro-batches per step (synchronized on the last)
    int64_t datasetSize = 65536;  // synthetic samples per epoch
    uint64_t seed = 1;
    // Gradients: buckets, compression, optimizer.
    double bucketMb = 25.0;
    double firstBucketMb = 1.0;
    std::string compress = "none"; // none | fp16 | bf16
    std::string optimizer = "sgd"; // sgd (momentum kMomentum) | adamw
    double lr = 0.01;
    // Process group and machine.
    std::string backend = "gloo";  // gloo | nccl
    std::string device = "cpu";    // cpu | cuda
    int threads = 0;               // intra-op threads; 0 = cores / local ranks
    double timeoutS = 30.0;        // collective and rendezvous timeout
    // Fault injection and checks.
    int stragglerRank = -1;        // -1: none
    double stragglerMs = 0.0;
    double linkGbps = 0.0;         // 0: not emulated
    int crashRank = -1;            // -1: none
    int crashStep = -1;
    bool record = true;            // false: --no-record
    int checkEvery = 0;            // replica check period in steps (0 = off)
    // Where and how this rank writes (worker only; the launcher sets them through the
    // environment, see launcher.h).
    std::string outDir;            // shard folder ("" = $LOCKSTEP_SHARD_DIR, else the current folder)
    std::string runName;           // "" = $LOCKSTEP_RUN_NAME
    std::string dumpParams;        // raw float32 of all parameters at the end ("{rank}" expands)
    bool quiet = false;            // no per-step progress lines
    bool force = false;            // replace an existing shard rank-<r>.db in the shard folder
};

// SGD's momentum: fixed, not a flag (recorded in the run's configuration all the same).
inline constexpr double kMomentum = 0.9;

} // namespace lockstep::job
