// Internal interfaces of the runtime that involve LibTorch: models and synthetic data,
// process groups, the bucketing reducer. Included only by the *_torch.cpp files (each
// inclusion of <torch/torch.h> costs ~15 s of compile time).
#pragma once

#include "recorder.h"

#include <torch/torch.h>

#include "torch_compat.h"
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::rt {

// ---- models and data (models_torch.cpp) ----

struct ModelSpec {
    std::string kind = "mlp";
    int layers = 4, width = 256, heads = 4, seq = 32;
};

// A model is a sequence of top-level stages (children of `root`); the trainer times each
// stage's forward, and parameters are attributed to the stage whose name prefixes them.
struct Stage : torch::nn::Module {
    virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};

struct Model {
    std::shared_ptr<torch::nn::Module> root;
    std::vector<std::shared_ptr<Stage>> stages;
    std::vector<std::string> stageNames;
    std::vector<std::string> paramNames;
    std::vector<torch::Tensor> params;
    std::vector<int32_t> paramStage;
    std::string args; // "layers=4 width=256"
    torch::Tensor loss(const torch::Tensor& out, const torch::Tensor& target) const;
};
// Throws std::invalid_argument on a bad spec.
std::unique_ptr<Model> makeModel(const ModelSpec& spec, uint64_t seed);

// Synthetic samples generated from their index alone (so any rank, any batch split sees the
// same sample), labelled by a fixed random teacher so the loss really falls.
class Dataset {
public:
    Dataset(const ModelSpec& spec, uint64_t seed, int64_t size);
    int64_t size() const { return m_size; }
    // input and target of these samples, in this order
    std::pair<torch::Tensor, torch::Tensor> batch(const std::vector<int64_t>& indices) const;

private:
    ModelSpec m_spec;
    uint64_t m_seed;
    int64_t m_size;
    int64_t m_features = 0;
    std::vector<double> m_teacher; // mlp/convnet: 10 x features; transformer: vocab x vocab table
};

// DistributedSampler's split: each epoch a permutation of [0, size) seeded by (seed, epoch);
// rank r takes every world-th index starting at r; batches are consecutive runs of that shard.
// Rank r's batch j is thus a slice of the same global batch j that one process with the
// world's total batch would see, which is what makes N ranks equal one process.
class Sampler {
public:
    Sampler(int64_t size, uint64_t seed, int rank, int world, int batch);
    std::vector<int64_t> indices(int64_t globalBatch) const; // batch number counted over epochs

private:
    int64_t m_size;
    uint64_t m_seed;
    int m_rank, m_world, m_batch;
    int64_t m_batchesPerEpoch;
    mutable int64_t m_epoch = -1;
    mutable std::vector<int64_t> m_perm;
};

// ---- the bucketing reducer (reducer_torch.cpp) ----

enum class Compress { None, Fp16, Bf16 };

struct ReducerOptions {
    int64_t firstBucketBytes = 1 << 20;
    int64_t bucketBytes = 25 << 20;
    Compress compress = Compress::None;
    double linkGbps = 0;               // 0 = no link emulation
    std::chrono::milliseconds timeout{30000};
    std::function<void()> firstGradHook; // straggler injection: runs before the first gradient is stamped
    bool pairwise = true; // world of 2, no compression, CPU tensors: all-reduce as one send/recv exchange (see launch)
    // Called on the launching thread (autograd's) right before and after bucket b's collective is
    // issued: the trainer tags the device work launched in between with the bucket (CUPTI).
    std::function<void(int)> launchBegin, launchEnd;
    // Whether a collective's completion can be stamped on the host: true for gloo (its worker
    // thread completes the future when the data is there). NCCL's future completes when the
    // kernel is queued, so a host stamp would be the launch; its completion comes from the
    // device (the recorder takes the end of the bucket's NCCL kernels).
    bool hostCompletion = true;
};

class Reducer {
public:
    Reducer(std::vector<torch::Tensor> params, c10::intrusive_ptr<CommGroup> pg, ReducerOptions options,
            GradBuffers* grads);
    ~Reducer();

    // Parameter indices of each bucket (bucket 0 launches first) and its payload in bytes.
    const std::vector<std::vector<int32_t>>& bucketParams() const { return m_bucketParams; }
    const std::vector<int32_t>& paramBucket() const { return m_paramBucket; }
    int64_t bucketBytes(int b) const; // bytes on the wire
    bool pairwise() const { return m_pairwise; }

    // Rank 0's parameters to every rank.
    void broadcastParameters();
    // The link at a few bucket sizes (float32 bytes asked; the bytes on the wire returned, as
    // bucketBytes), before training: each size `repeats`
    // times through the path a bucket of that size takes (the pairwise exchange and its sum, the
    // ring all-reduce, the bf16 all-gather), timed on this rank from a barrier's release to the
    // completion; the fastest per size (whatif.h, kLinkProbeKey). Collective: every rank calls it
    // with the same sizes. Empty on a world of one.
    std::vector<std::pair<int64_t, TimeNs>> probeLink(const std::vector<int64_t>& bucketBytes, int repeats);
    // Before each backward: `sync` = this backward's gradients are averaged (the last micro-batch).
    void prepareForBackward(bool sync);
    // After the optimizer step: every gradient to zero, in place, one pass per bucket (the
    // .grads are views of the buckets; a .grad that was replaced is zeroed on its own).
    void zeroGrads();
    // After backward returned: the last synchronized backward's buckets and wait.
    void takeCommRecords(std::vector<CommRecord>& out, TimeNs* waitStart, TimeNs* waitEnd);

private:
    struct Bucket;
    void onGradReady(int32_t param);
    void launchReady();
    void launch(int b);
    void finalize();
    void waitBucket(int b);
    void exchangeLoop();

    std::vector<torch::Tensor> m_params;
    c10::intrusive_ptr<CommGroup> m_pg;
    ReducerOptions m_options;
    GradBuffers* m_grads;
    int m_world = 1;
    std::vector<std::vector<int32_t>> m_bucketParams;
    std::vector<int32_t> m_paramBucket;
    std::vector<std::unique_ptr<Bucket>> m_buckets;
    std::vector<torch::Tensor> m_views; // each parameter's slice of its bucket
    std::vector<std::shared_ptr<torch::autograd::Node>> m_accumulators;
    std::vector<uintptr_t> m_hookKeys;
    std::mutex m_mutex;
    bool m_sync = false;
    bool m_started = false;
    int m_nextLaunch = 0;
    TimeNs m_waitStart = 0, m_waitEnd = 0;
    std::exception_ptr m_error;
    // Pairwise exchange (world 2): launch posts the send and the receive, this thread waits
    // for both in launch order, adds the peer's half and stamps the completion.
    bool m_pairwise = false;
    int m_peer = 0;
    std::thread m_exchangeThread;
    std::mutex m_exchangeMutex;
    std::condition_variable m_exchangeCv, m_exchangedCv;
    std::deque<int> m_exchangeQueue;
    bool m_stop = false;
};

// ---- process group and clocks (trainer_torch.cpp) ----
} // namespace lockstep::rt
