// `lockstep worker`: one rank of a DDP run. Flags map 1:1 onto lockstep::rt::WorkerOptions;
// rank and rendezvous come from the environment so the same command runs under
// `lockstep run`, torchrun --no-python and srun.
#include "commands.h"

#include "lockstep/rt/worker.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

namespace lockstep::app {

void registerWorkerCommand(CLI::App& app)
{
    auto opts = std::make_shared<rt::WorkerOptions>();
    auto straggler = std::make_shared<std::string>();
    auto crash = std::make_shared<std::string>();
    auto noRecord = std::make_shared<bool>(false);
    CLI::App* cmd = app.add_subcommand("worker", "run one rank of a recorded DDP training run");
    cmd->add_option("--out-dir", opts->outDir, "directory of the shard (rank-<r>.db)");
    cmd->add_option("--run-name", opts->runName, "name of the run");
    cmd->add_option("--model", opts->model, "mlp | transformer | convnet")
        ->check(CLI::IsMember({"mlp", "transformer", "convnet"}));
    cmd->add_option("--layers", opts->layers, "layers / blocks")->check(CLI::Range(1, 1024));
    cmd->add_option("--width", opts->width, "hidden width / channels")->check(CLI::Range(1, 65536));
    cmd->add_option("--heads", opts->heads, "attention heads (transformer)")->check(CLI::Range(1, 256));
    cmd->add_option("--seq", opts->seq, "sequence length (transformer)")->check(CLI::Range(1, 65536));
    cmd->add_option("--batch", opts->batch, "samples per rank per micro-batch")->check(CLI::Range(1, 1 << 24));
    cmd->add_option("--steps", opts->steps, "optimizer steps")->check(CLI::Range(1, 1 << 30));
    cmd->add_option("--warmup", opts->warmup, "steps excluded from steady-state metrics")->check(CLI::Range(0, 1 << 30));
    cmd->add_option("--bucket-mb", opts->bucketMb, "bucket cap (MiB)")->check(CLI::PositiveNumber);
    cmd->add_option("--first-bucket-mb", opts->firstBucketMb, "first bucket cap (MiB)")->check(CLI::PositiveNumber);
    cmd->add_option("--compress", opts->compress, "none | fp16 | bf16")
        ->check(CLI::IsMember({"none", "fp16", "bf16"}));
    cmd->add_option("--accumulate", opts->accumulate, "micro-batches per step (sync on the last)")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--optimizer", opts->optimizer, "sgd | adamw")->check(CLI::IsMember({"sgd", "adamw"}));
    cmd->add_option("--lr", opts->lr, "learning rate")->check(CLI::PositiveNumber);
    cmd->add_option("--seed", opts->seed, "seed of data, teacher and initialization");
    cmd->add_option("--dataset-size", opts->datasetSize, "synthetic samples per epoch")->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    cmd->add_option("--timeout-s", opts->timeoutS, "collective / rendezvous timeout (s)")->check(CLI::PositiveNumber);
    cmd->add_option("--threads", opts->threads, "intra-op threads (0 = cores / local ranks)")->check(CLI::Range(0, 1024));
    cmd->add_option("--straggler", *straggler, "RANK:MS extra compute in that rank's backward, every step");
    cmd->add_option("--link-gbps", opts->linkGbps, "emulated link speed (Gbit/s)")->check(CLI::PositiveNumber);
    cmd->add_option("--crash", *crash, "RANK:STEP that rank exits (status 3) at the start of STEP");
    cmd->add_flag("--no-record", *noRecord, "do not write a shard");
    cmd->add_option("--check-every", opts->checkEvery, "replica check period in steps (0 = off)")->check(CLI::Range(0, 1 << 30));
    cmd->add_option("--dump-params", opts->dumpParams, "write final parameters as raw float32 ({rank} expands)");
    cmd->add_option("--backend", opts->backend, "gloo | nccl")->check(CLI::IsMember({"gloo", "nccl"}));
    cmd->add_option("--device", opts->device, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    cmd->add_flag("--quiet", opts->quiet, "no per-step progress lines");
    cmd->callback([opts, straggler, crash, noRecord] {
        if (!straggler->empty()) {
            if (!rt::parseRankValue(*straggler, &opts->stragglerRank, &opts->stragglerMs) || opts->stragglerMs < 0) {
                std::cerr << "lockstep worker: --straggler wants RANK:MS, got '" << *straggler << "'\n";
                exitStatus() = 2;
                return;
            }
        }
        if (!crash->empty()) {
            double step = 0;
            if (!rt::parseRankValue(*crash, &opts->crashRank, &step) || step < 0 || step != static_cast<int>(step)) {
                std::cerr << "lockstep worker: --crash wants RANK:STEP, got '" << *crash << "'\n";
                exitStatus() = 2;
                return;
            }
            opts->crashStep = static_cast<int>(step);
        }
        opts->record = !*noRecord;
        exitStatus() = rt::runWorker(*opts);
    });
}

} // namespace lockstep::app
