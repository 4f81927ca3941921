// Models (mlp, transformer, convnet) built as sequences of top-level stages, and the
// synthetic data they train on: every sample comes from its index alone, labelled by a fixed
// random teacher, and is split across ranks like torch's DistributedSampler.
#include "runtime_torch.h"

#include <cmath>
#include <stdexcept>

namespace lockstep::rt {

namespace {

constexpr int kClasses = 10;    // mlp and convnet classify into 10 classes
constexpr int kVocab = 64;      // transformer vocabulary: small, so the teacher table fits
constexpr int kImage = 16;      // convnet input: 3 x 16 x 16
constexpr int kChannelsIn = 3;

// splitmix64: a tiny, portable generator; sample i's stream is seeded by (seed, i), so the
// same sample is produced whatever rank or batch asks for it.
struct SplitMix {
    uint64_t s;
    uint64_t next()
    {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // uniform with unit variance: [-sqrt 3, sqrt 3)
    float unit() { return static_cast<float>((static_cast<double>(next() >> 11) * 0x1.0p-53 * 2.0 - 1.0) * 1.7320508075688772); }
};

uint64_t mix(uint64_t a, uint64_t b)
{
    SplitMix m{a * 0x100000001B3ull ^ (b + 0x632BE59BD9B4E019ull)};
    m.next();
    return m.next();
}

struct MlpLayer : Stage {
    torch::nn::Linear fc{nullptr};
    bool relu;
    MlpLayer(int in, int out, bool withRelu) : relu(withRelu) { fc = register_module("fc", torch::nn::Linear(in, out)); }
    torch::Tensor forward(const torch::Tensor& x) override
    {
        auto y = fc->forward(x);
        return relu ? torch::relu(y) : y;
    }
};

struct Embed : Stage {
    torch::nn::Embedding tok{nullptr};
    torch::Tensor pos;
    Embed(int vocab, int seq, int width)
    {
        tok = register_module("tok", torch::nn::Embedding(vocab, width));
        pos = register_parameter("pos", torch::randn({seq, width}) * 0.02);
    }
    torch::Tensor forward(const torch::Tensor& x) override { return tok->forward(x) + pos; }
};

// Pre-norm decoder block: causal self-attention then a 4x MLP, each with a residual.
struct DecoderBlock : Stage {
    torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
    torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
    int heads;
    DecoderBlock(int width, int h) : heads(h)
    {
        ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
        qkv = register_module("qkv", torch::nn::Linear(width, 3 * width));
        proj = register_module("proj", torch::nn::Linear(width, width));
        ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
        fc1 = register_module("fc1", torch::nn::Linear(width, 4 * width));
        fc2 = register_module("fc2", torch::nn::Linear(4 * width, width));
    }
    torch::Tensor forward(const torch::Tensor& x) override
    {
        const int64_t b = x.size(0), s = x.size(1), w = x.size(2), d = w / heads;
        auto t = qkv->forward(ln1->forward(x)).view({b, s, 3, heads, d}).permute({2, 0, 3, 1, 4});
        auto q = t[0], k = t[1], v = t[2];
        auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
        auto mask = torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
        scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
        auto a = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({b, s, w});
        auto y = x + proj->forward(a);
        return y + fc2->forward(torch::gelu(fc1->forward(ln2->forward(y))));
    }
};

struct LmHead : Stage {
    torch::nn::LayerNorm ln{nullptr};
    torch::nn::Linear out{nullptr};
    LmHead(int width, int vocab)
    {
        ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
        out = register_module("out", torch::nn::Linear(width, vocab));
    }
    torch::Tensor forward(const torch::Tensor& x) override { return out->forward(ln->forward(x)); }
};

// GroupNorm with one group normalizes each sample on its own, unlike BatchNorm, so a split
// batch computes exactly what the whole batch computes (the exactness tests rely on it).
torch::nn::GroupNorm groupNorm(int channels) { return torch::nn::GroupNorm(torch::nn::GroupNormOptions(1, channels)); }

struct ConvStem : Stage {
    torch::nn::Conv2d conv{nullptr};
    torch::nn::GroupNorm gn{nullptr};
    explicit ConvStem(int c)
    {
        conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(kChannelsIn, c, 3).padding(1).bias(false)));
        gn = register_module("gn", groupNorm(c));
    }
    torch::Tensor forward(const torch::Tensor& x) override { return torch::relu(gn->forward(conv->forward(x))); }
};

struct ResBlock : Stage {
    torch::nn::Conv2d c1{nullptr}, c2{nullptr};
    torch::nn::GroupNorm g1{nullptr}, g2{nullptr};
    explicit ResBlock(int c)
    {
        c1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(c, c, 3).padding(1).bias(false)));
        g1 = register_module("gn1", groupNorm(c));
        c2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(c, c, 3).padding(1).bias(false)));
        g2 = register_module("gn2", groupNorm(c));
    }
    torch::Tensor forward(const torch::Tensor& x) override
    {
        auto y = torch::relu(g1->forward(c1->forward(x)));
        return torch::relu(x + g2->forward(c2->forward(y)));
    }
};

struct PoolHead : Stage {
    torch::nn::Linear fc{nullptr};
    explicit PoolHead(int c) { fc = register_module("fc", torch::nn::Linear(c, kClasses)); }
    torch::Tensor forward(const torch::Tensor& x) override { return fc->forward(x.mean({2, 3})); }
};

} // namespace

torch::Tensor Model::loss(const torch::Tensor& out, const torch::Tensor& target) const
{
    if (out.dim() == 3)
        return torch::nn::functional::cross_entropy(out.reshape({-1, out.size(2)}), target.reshape({-1}));
    return torch::nn::functional::cross_entropy(out, target);
}

std::unique_ptr<Model> makeModel(const ModelSpec& spec, uint64_t seed)
{
    if (spec.layers < 1 || spec.width < 1)
        throw std::invalid_argument("--layers and --width must be positive");
    torch::manual_seed(seed);
    auto m = std::make_unique<Model>();
    m->root = std::make_shared<torch::nn::Module>("root");
    auto add = [&](const std::string& name, std::shared_ptr<Stage> s) {
        m->root->register_module(name, s);
        m->stages.push_back(std::move(s));
        m->stageNames.push_back(name);
    };
    if (spec.kind == "mlp") {
        for (int i = 0; i < spec.layers; ++i)
            add("layer" + std::to_string(i), std::make_shared<MlpLayer>(spec.width, spec.width, true));
        add("head", std::make_shared<MlpLayer>(spec.width, kClasses, false));
        m->args = "layers=" + std::to_string(spec.layers) + " width=" + std::to_string(spec.width);
    } else if (spec.kind == "transformer") {
        if (spec.heads < 1 || spec.width % spec.heads != 0)
            throw std::invalid_argument("transformer: --width must be a multiple of --heads");
        if (spec.seq < 1)
            throw std::invalid_argument("transformer: --seq must be positive");
        add("embed", std::make_shared<Embed>(kVocab, spec.seq, spec.width));
        for (int i = 0; i < spec.layers; ++i)
            add("block" + std::to_string(i), std::make_shared<DecoderBlock>(spec.width, spec.heads));
        add("head", std::make_shared<LmHead>(spec.width, kVocab));
        m->args = "layers=" + std::to_string(spec.layers) + " width=" + std::to_string(spec.width)
            + " heads=" + std::to_string(spec.heads) + " seq=" + std::to_string(spec.seq)
            + " vocab=" + std::to_string(kVocab);
    } else if (spec.kind == "convnet") {
        add("stem", std::make_shared<ConvStem>(spec.width));
        for (int i = 0; i < spec.layers; ++i)
            add("block" + std::to_string(i), std::make_shared<ResBlock>(spec.width));
        add("head", std::make_shared<PoolHead>(spec.width));
        m->args = "layers=" + std::to_string(spec.layers) + " channels=" + std::to_string(spec.width)
            + " image=3x16x16";
    } else {
        throw std::invalid_argument("unknown model '" + spec.kind + "' (mlp | transformer | convnet)");
    }
    for (const auto& item : m->root->named_parameters(true)) {
        const std::string& name = item.key();
        const std::string stage = name.substr(0, name.find('.'));
        int32_t idx = 0;
        while (idx < static_cast<int32_t>(m->stageNames.size()) && m->stageNames[idx] != stage)
            ++idx;
        m->paramNames.push_back(name);
        m->params.push_back(item.value());
        m->paramStage.push_back(idx < static_cast<int32_t>(m->stageNames.size()) ? idx : 0);
    }
    return m;
}

Dataset::Dataset(const ModelSpec& spec, uint64_t seed, int64_t size) : m_spec(spec), m_seed(seed), m_size(size)
{
    SplitMix g{mix(seed, 0x7EAC4E5ull)};
    if (spec.kind == "transformer") {
        m_features = spec.seq;
        m_teacher.resize(static_cast<size_t>(kVocab) * kVocab);
        for (auto& t : m_teacher)
            t = static_cast<double>(g.next() % kVocab);
    } else {
        m_features = spec.kind == "convnet" ? int64_t{kChannelsIn} * kImage * kImage : spec.width;
        m_teacher.resize(static_cast<size_t>(kClasses) * m_features);
        for (auto& t : m_teacher)
            t = g.unit();
    }
}

std::pair<torch::Tensor, torch::Tensor> Dataset::batch(const std::vector<int64_t>& indices) const
{
    const int64_t n = static_cast<int64_t>(indices.size());
    if (m_spec.kind == "transformer") {
        auto input = torch::empty({n, m_features}, torch::kLong);
        auto target = torch::empty({n, m_features}, torch::kLong);
        int64_t* in = input.data_ptr<int64_t>();
        int64_t* tg = target.data_ptr<int64_t>();
        for (int64_t i = 0; i < n; ++i) {
            SplitMix g{mix(m_seed, static_cast<uint64_t>(indices[i]))};
            int64_t prev = 0;
            for (int64_t j = 0; j < m_features; ++j) {
                const int64_t tok = static_cast<int64_t>(g.next() % kVocab);
                in[i * m_features + j] = tok;
                tg[i * m_features + j] = static_cast<int64_t>(m_teacher[prev * kVocab + tok]);
                prev = tok;
            }
        }
        return {input, target};
    }
    auto input = m_spec.kind == "convnet" ? torch::empty({n, kChannelsIn, kImage, kImage}) : torch::empty({n, m_features});
    auto target = torch::empty({n}, torch::kLong);
    float* x = input.data_ptr<float>();
    int64_t* tg = target.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
        SplitMix g{mix(m_seed, static_cast<uint64_t>(indices[i]))};
        float* row = x + i * m_features;
        for (int64_t f = 0; f < m_features; ++f)
            row[f] = g.unit();
        // The teacher's logits in double, per sample: the label never depends on batching.
        int best = 0;
        double bestScore = -1e300;
        for (int c = 0; c < kClasses; ++c) {
            const double* w = m_teacher.data() + static_cast<size_t>(c) * m_features;
            double s = 0;
            for (int64_t f = 0; f < m_features; ++f)
                s += w[f] * row[f];
            if (s > bestScore) {
                bestScore = s;
                best = c;
            }
        }
        tg[i] = best;
    }
    return {input, target};
}

Sampler::Sampler(int64_t size, uint64_t seed, int rank, int world, int batch)
    : m_size(size), m_seed(seed), m_rank(rank), m_world(world), m_batch(batch)
{
    m_batchesPerEpoch = (size / world) / batch;
    if (m_batchesPerEpoch < 1)
        throw std::invalid_argument("--dataset-size " + std::to_string(size) + " is smaller than one global batch ("
                                    + std::to_string(int64_t{world} * batch) + " samples)");
}

std::vector<int64_t> Sampler::indices(int64_t globalBatch) const
{
    const int64_t epoch = globalBatch / m_batchesPerEpoch;
    const int64_t j = globalBatch % m_batchesPerEpoch;
    if (epoch != m_epoch) {
        // Fisher-Yates with our own generator: std::shuffle's result differs between
        // standard libraries, and every rank (and the reference run) must agree.
        m_perm.resize(m_size);
        for (int64_t i = 0; i < m_size; ++i)
            m_perm[i] = i;
        SplitMix g{mix(m_seed ^ 0x5A3B1E5ull, static_cast<uint64_t>(epoch))};
        for (int64_t i = m_size - 1; i > 0; --i)
            std::swap(m_perm[i], m_perm[static_cast<int64_t>(g.next() % static_cast<uint64_t>(i + 1))]);
        m_epoch = epoch;
    }
    std::vector<int64_t> out(m_batch);
    for (int64_t i = 0; i < m_batch; ++i)
        out[i] = m_perm[(j * m_batch + i) * m_world + m_rank];
    return out;
}

} // namespace lockstep::rt
