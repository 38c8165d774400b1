// The paper's Table 2 models (§5.2) as lists of float32 variable tensors
// whose sizes add up to the table's model sizes, with the table's
// computation time per step. Shared by perf/zc_ps_train.cpp (zcomm PS and
// allreduce) and perf/peers/grpc_ps/ (the gRPC parameter server baseline),
// so both move exactly the same tensors.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace ps_models {

struct Model {
  std::string name;
  double table_mib;   // Table 2: model size (MB, read as MiB: VGG-16 then matches exactly)
  int table_tensors;  // Table 2: variable tensors
  double compute_ms;  // Table 2: computation time
  std::vector<size_t> elems;  // float32 elements of each variable tensor
};

inline size_t Target(double mib) { return static_cast<size_t>(std::llround(mib * 1048576.0 / 4.0)); }
inline size_t Sum(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t x : v) s += x;
  return s;
}
inline void Conv(std::vector<size_t>* v, size_t k, size_t cin, size_t cout) {
  v->push_back(k * k * cin * cout);
  v->push_back(cout);
}
inline void Fc(std::vector<size_t>* v, size_t in, size_t out) {
  v->push_back(in * out);
  v->push_back(out);
}

inline std::vector<Model> Models() {
  std::vector<Model> ms;
  {  // VGG-16, 10 classes: exactly Table 2's 512.32 MiB in 32 tensors.
    Model m{"vgg16", 512.32, 32, 30.92, {}};
    size_t c[][2] = {{3, 64}, {64, 64}, {64, 128}, {128, 128}, {128, 256}, {256, 256}, {256, 256},
                     {256, 512}, {512, 512}, {512, 512}, {512, 512}, {512, 512}, {512, 512}};
    for (auto& p : c) Conv(&m.elems, 3, p[0], p[1]);
    Fc(&m.elems, 25088, 4096);
    Fc(&m.elems, 4096, 4096);
    Fc(&m.elems, 4096, 10);
    ms.push_back(m);
  }
  {  // AlexNet (tf_cnn_benchmarks layers); fc6's input width fitted to the total.
    Model m{"alexnet", 176.42, 16, 7.61, {}};
    Conv(&m.elems, 11, 3, 64);
    Conv(&m.elems, 5, 64, 192);
    Conv(&m.elems, 3, 192, 384);
    Conv(&m.elems, 3, 384, 256);
    Conv(&m.elems, 3, 256, 256);
    std::vector<size_t> rest;
    Fc(&rest, 4096, 4096);
    Fc(&rest, 4096, 1000);
    size_t fixed = Sum(m.elems) + Sum(rest) + 4096;
    Fc(&m.elems, (Target(m.table_mib) - fixed) / 4096, 4096);
    m.elems.insert(m.elems.end(), rest.begin(), rest.end());
    ms.push_back(m);
  }
  {  // Inception-v3: real stem and heads (main and auxiliary), 94 convolutions
     // each with its batch-norm beta, 196 tensors; the mixed blocks' 89
     // convolutions are given equal shares of the remaining size.
    Model m{"inception3", 92.90, 196, 68.32, {}};
    size_t stem[][3] = {{3, 3, 32}, {3, 32, 32}, {3, 32, 64}, {1, 64, 80}, {3, 80, 192}};
    for (auto& s : stem) Conv(&m.elems, s[0], s[1], s[2]);
    std::vector<size_t> head;
    Conv(&head, 1, 768, 128);
    Conv(&head, 5, 128, 768);
    Fc(&head, 768, 1000);
    Fc(&head, 2048, 1000);
    size_t left = Target(m.table_mib) - Sum(m.elems) - Sum(head);
    const size_t n = 89, cout = 192;
    size_t each = left / n - cout;
    for (size_t i = 0; i < n; ++i) {
      size_t w = i + 1 < n ? each : left - (n - 1) * (each + cout) - cout;
      m.elems.push_back(w);
      m.elems.push_back(cout);
    }
    m.elems.insert(m.elems.end(), head.begin(), head.end());
    ms.push_back(m);
  }
  {  // LSTM, hidden 1024: per gate W_x, W_h (1024x1024) and b; the output
     // layer's width fitted (about 1000 classes).
    Model m{"lstm", 35.93, 14, 33.33, {}};
    for (int g = 0; g < 4; ++g) {
      m.elems.push_back(1024 * 1024);
      m.elems.push_back(1024 * 1024);
      m.elems.push_back(1024);
    }
    size_t out = (Target(m.table_mib) - Sum(m.elems)) / 1025;
    Fc(&m.elems, 1024, out);
    ms.push_back(m);
  }
  {  // GRU, hidden 1024: 3 gates, same construction.
    Model m{"gru", 27.92, 11, 30.44, {}};
    for (int g = 0; g < 3; ++g) {
      m.elems.push_back(1024 * 1024);
      m.elems.push_back(1024 * 1024);
      m.elems.push_back(1024);
    }
    size_t out = (Target(m.table_mib) - Sum(m.elems)) / 1025;
    Fc(&m.elems, 1024, out);
    ms.push_back(m);
  }
  {  // FCN-5: input, three hidden 4096-wide layers, output (5 x (W, b));
     // input and output width fitted.
    Model m{"fcn5", 204.47, 10, 4.88, {}};
    size_t io = (Target(m.table_mib) - 3 * (4096 * 4096 + 4096) - 4096) / (2 * 4096 + 1);
    Fc(&m.elems, io, 4096);
    for (int i = 0; i < 3; ++i) Fc(&m.elems, 4096, 4096);
    Fc(&m.elems, 4096, io);
    // 5 weight matrices: the fifth is 4096 x io, so fix the total with the first.
    m.elems[0] += Target(m.table_mib) - Sum(m.elems);
    ms.push_back(m);
  }
  return ms;
}

}  // namespace ps_models
