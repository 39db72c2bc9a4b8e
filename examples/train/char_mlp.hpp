#pragma once
// A character-level language model small enough for a CPU and large enough to matter (1.1 M
// parameters): the embeddings of the last 8 characters, concatenated, through two ReLU layers to the
// logits of the next character; cross-entropy loss. Forward and backward by hand on CBLAS sgemm.
//
//   emb  96 x 48   fc1  384 x 1024 (+1024)   fc2  1024 x 640 (+640)   head  640 x 96 (+96)
//
// Parameters live in two flat vectors, the trainable and the frozen ones (partial training freezes whole
// tensors); each tensor knows its vector and offset, so the PaRO-DP engine can shard the vectors.

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "paro/core/error.hpp"
#include "train/corpus.hpp"

namespace paro::train {

struct Tensor {
  std::string name;
  std::size_t rows, cols;
  bool trainable = true;
  std::size_t offset = 0;  // in its flat vector
  std::size_t size() const { return rows * cols; }
};

class CharMlp {
 public:
  static constexpr std::size_t context = 8, embed = 48, hidden1 = 1024, hidden2 = 640, vocab = Corpus::vocabulary;

  // trainable: "all", or a comma-separated subset of emb, fc1, fc2, head (each with its bias).
  explicit CharMlp(const std::string& trainable) {
    tensors_ = {{"emb", vocab, embed},    {"fc1.weight", context * embed, hidden1},
                {"fc1.bias", 1, hidden1}, {"fc2.weight", hidden1, hidden2},
                {"fc2.bias", 1, hidden2}, {"head.weight", hidden2, vocab},
                {"head.bias", 1, vocab}};
    if (trainable != "all") {
      for (auto& t : tensors_) t.trainable = false;
      std::size_t start = 0;
      while (start <= trainable.size()) {
        const std::size_t end = std::min(trainable.find(',', start), trainable.size());
        const std::string layer = trainable.substr(start, end - start);
        bool known = false;
        for (auto& t : tensors_)
          if (t.name == layer || t.name.rfind(layer + ".", 0) == 0) t.trainable = known = true;
        detail::require(known, "--trainable: unknown layer '", layer, "'; allowed: all, or some of emb fc1 fc2 head");
        start = end + 1;
      }
    }
    for (auto& t : tensors_) {
      t.offset = t.trainable ? trainable_count_ : frozen_count_;
      (t.trainable ? trainable_count_ : frozen_count_) += t.size();
    }
  }

  const std::vector<Tensor>& tensors() const { return tensors_; }
  std::size_t trainable_count() const { return trainable_count_; }
  std::size_t frozen_count() const { return frozen_count_; }

  // Initial values: embeddings N(0, 1), weights N(0, 2 / fan_in) (He), biases 0; from one seed.
  void initialise(std::uint64_t seed, std::vector<float>& trainable, std::vector<float>& frozen) const {
    trainable.assign(trainable_count_, 0.0f);
    frozen.assign(frozen_count_, 0.0f);
    std::mt19937_64 rng(seed);
    for (const Tensor& t : tensors_) {
      if (t.rows == 1) continue;
      std::normal_distribution<float> dist(0.0f, t.name == "emb" ? 1.0f : std::sqrt(2.0f / static_cast<float>(t.rows)));
      float* p = (t.trainable ? trainable.data() : frozen.data()) + t.offset;
      for (std::size_t i = 0; i < t.size(); ++i) p[i] = dist(rng);
    }
  }

  // Mean cross-entropy of `batch` samples starting at starts[b]; with grads (full trainable vector), adds
  // the gradient of that mean.
  double loss(const float* trainable, const float* frozen, const Corpus& corpus, const std::vector<std::size_t>& starts,
              float* grads) {
    const std::size_t B = starts.size();
    resize(B);
    const float* emb = at(0, trainable, frozen);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t c = 0; c < context; ++c)
        std::copy_n(emb + corpus.data()[starts[b] + c] * embed, embed, x_.data() + b * context * embed + c * embed);
    dense(x_.data(), B, 1, trainable, frozen, z1_.data());
    relu(z1_, a1_);
    dense(a1_.data(), B, 3, trainable, frozen, z2_.data());
    relu(z2_, a2_);
    dense(a2_.data(), B, 5, trainable, frozen, logits_.data());
    double total = 0;
    for (std::size_t b = 0; b < B; ++b) {
      float* row = logits_.data() + b * vocab;
      const float top = *std::max_element(row, row + vocab);
      double sum = 0;
      for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - top));
      const std::size_t target = corpus.data()[starts[b] + context];
      total += std::log(sum) - (row[target] - top);
      if (!grads) continue;
      for (std::size_t v = 0; v < vocab; ++v)  // d loss / d logits = (softmax - onehot) / B
        row[v] = static_cast<float>((std::exp(static_cast<double>(row[v] - top)) / sum - (v == target ? 1.0 : 0.0)) /
                                    static_cast<double>(B));
    }
    if (grads) backward(B, trainable, frozen, corpus, starts, grads);
    return total / static_cast<double>(B);
  }

 private:
  std::vector<Tensor> tensors_;
  std::size_t trainable_count_ = 0, frozen_count_ = 0;
  std::vector<float> x_, z1_, a1_, z2_, a2_, logits_, d1_, d2_, dx_;

  void resize(std::size_t B) {
    x_.resize(B * context * embed);
    z1_.resize(B * hidden1);
    a1_.resize(z1_.size());
    d1_.resize(z1_.size());
    z2_.resize(B * hidden2);
    a2_.resize(z2_.size());
    d2_.resize(z2_.size());
    logits_.resize(B * vocab);
    dx_.resize(x_.size());
  }

  const float* at(std::size_t i, const float* trainable, const float* frozen) const {
    return (tensors_[i].trainable ? trainable : frozen) + tensors_[i].offset;
  }

  // out = in W + b for the weight tensors_[w] and its bias tensors_[w + 1].
  void dense(const float* in, std::size_t B, std::size_t w, const float* trainable, const float* frozen,
             float* out) const {
    const Tensor& W = tensors_[w];
    const float* bias = at(w + 1, trainable, frozen);
    for (std::size_t b = 0; b < B; ++b) std::copy_n(bias, W.cols, out + b * W.cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(B), static_cast<int>(W.cols),
                static_cast<int>(W.rows), 1.0f, in, static_cast<int>(W.rows), at(w, trainable, frozen),
                static_cast<int>(W.cols), 1.0f, out, static_cast<int>(W.cols));
  }

  static void relu(const std::vector<float>& z, std::vector<float>& a) {
    for (std::size_t i = 0; i < z.size(); ++i) a[i] = z[i] > 0 ? z[i] : 0.0f;
  }

  // Given d out (B x cols) for the dense layer w: adds dW and db where trainable; d in where wanted.
  void dense_backward(const float* in, const float* d_out, std::size_t B, std::size_t w, const float* trainable,
                      const float* frozen, float* grads, float* d_in) const {
    const Tensor& W = tensors_[w];
    if (W.trainable)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(W.rows), static_cast<int>(W.cols),
                  static_cast<int>(B), 1.0f, in, static_cast<int>(W.rows), d_out, static_cast<int>(W.cols), 1.0f,
                  grads + W.offset, static_cast<int>(W.cols));
    if (tensors_[w + 1].trainable) {
      float* db = grads + tensors_[w + 1].offset;
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t c = 0; c < W.cols; ++c) db[c] += d_out[b * W.cols + c];
    }
    if (d_in)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(B), static_cast<int>(W.rows),
                  static_cast<int>(W.cols), 1.0f, d_out, static_cast<int>(W.cols), at(w, trainable, frozen),
                  static_cast<int>(W.cols), 0.0f, d_in, static_cast<int>(W.rows));
  }

  // Whether any tensor before index i trains (then the gradient must flow back past it).
  bool trains_below(std::size_t i) const {
    for (std::size_t k = 0; k < i; ++k)
      if (tensors_[k].trainable) return true;
    return false;
  }

  void backward(std::size_t B, const float* trainable, const float* frozen, const Corpus& corpus,
                const std::vector<std::size_t>& starts, float* grads) {
    dense_backward(a2_.data(), logits_.data(), B, 5, trainable, frozen, grads, trains_below(5) ? d2_.data() : nullptr);
    if (!trains_below(5)) return;
    for (std::size_t i = 0; i < d2_.size(); ++i) d2_[i] = z2_[i] > 0 ? d2_[i] : 0.0f;
    dense_backward(a1_.data(), d2_.data(), B, 3, trainable, frozen, grads, trains_below(3) ? d1_.data() : nullptr);
    if (!trains_below(3)) return;
    for (std::size_t i = 0; i < d1_.size(); ++i) d1_[i] = z1_[i] > 0 ? d1_[i] : 0.0f;
    dense_backward(x_.data(), d1_.data(), B, 1, trainable, frozen, grads, trains_below(1) ? dx_.data() : nullptr);
    if (!trains_below(1)) return;
    float* demb = grads + tensors_[0].offset;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t c = 0; c < context; ++c) {
        const float* d = dx_.data() + b * context * embed + c * embed;
        float* row = demb + corpus.data()[starts[b] + c] * embed;
        for (std::size_t e = 0; e < embed; ++e) row[e] += d[e];
      }
  }
};

}  // namespace paro::train
