// One rank of a Lockstep DDP run: the torch-free entry point of the runtime.
// `lockstep worker` fills WorkerOptions from its flags and calls runWorker(); rank, world size
// and rendezvous come from the environment (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, Slurm's
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID as fallback; none at all: a world of one).
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::rt {

struct WorkerOptions {
    std::string outDir;           // shard goes to outDir/rank-<r>.db ("" = current directory)
    std::string runName;
    std::string model = "mlp";    // mlp | transformer | convnet
    int layers = 4;
    int width = 256;
    int heads = 4;
    int seq = 32;
    int batch = 32;               // per rank, per micro-batch
    int steps = 20;
    int warmup = 3;
    double bucketMb = 25.0;
    double firstBucketMb = 1.0;
    std::string compress = "none"; // none | fp16 | bf16
    int accumulate = 1;
    std::string optimizer = "sgd"; // sgd (momentum 0.9) | adamw
    double lr = 0.01;
    double momentum = 0.9;
    uint64_t seed = 1;
    int64_t datasetSize = 65536;
    double timeoutS = 30.0;
    int threads = 0;               // intra-op threads; 0 = cores / local ranks
    // Fault injection.
    int stragglerRank = -1;
    double stragglerMs = 0.0;
    double linkGbps = 0.0;
    int crashRank = -1;
    int crashStep = -1;
    bool record = true;
    int checkEvery = 0;            // replica check period in steps (0 = off)
    std::string dumpParams;        // raw float32 of all parameters at the end ("{rank}" expands)
    std::string backend = "gloo";
    std::string device = "cpu";
    bool quiet = false;            // no per-step progress lines
};

// Parses "RANK:VALUE" (e.g. --straggler 1:50). Returns false on malformed text.
bool parseRankValue(const std::string& text, int* rank, double* value);

// Runs one rank to the end. Returns the process exit status (0 = completed). Never throws:
// every failure is printed as `LOCKSTEP failed rank=<r> cause=<text>` and recorded in the shard.
int runWorker(const WorkerOptions& options);

} // namespace lockstep::rt
