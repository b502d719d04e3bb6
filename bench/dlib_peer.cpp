// bench/dlib_peer.cpp: the dlib side of oar_bench (its own translation unit: dlib/dnn.h is heavy). Built with
// OAR_BENCH_DLIB when find_package(dlib) succeeds; otherwise only stubs.
#include "common.hpp"

#if defined(OAR_BENCH_DLIB)
#include <dlib/dnn.h>
#include <dlib/revision.h>
#endif

#if defined(OAR_WITH_BLAS)
extern "C" void openblas_set_num_threads(int);
#endif

namespace bench::dlib_peer {

#if !defined(OAR_BENCH_DLIB)

bool available() { return false; }
std::string version() { return "not found"; }
std::unique_ptr<Runner> mlp_train(const Synthetic&, int64_t, int) { return nullptr; }
std::unique_ptr<Runner> conv_train(const Synthetic&, int64_t, int) { return nullptr; }

#else

bool available() { return true; }
std::string version() { return std::to_string(DLIB_MAJOR_VERSION) + "." + std::to_string(DLIB_MINOR_VERSION); }

namespace {

using namespace dlib;

// 784 -> fc 200 relu -> fc 10, softmax + log loss (loss_multiclass_log).
using mlp_net = loss_multiclass_log<fc<10, relu<fc<200, input<matrix<float>>>>>>;

// Fluid's book conv net: conv 5x5x20 (no padding) relu, max pool 2x2, batch norm, conv 5x5x50 relu, max pool 2x2,
// fc 10. dlib's con pads "same" by default for stride 1: padding 0 is given explicitly.
template <long N, typename SUBNET>
using con5 = add_layer<con_<N, 5, 5, 1, 1, 0, 0>, SUBNET>;
using conv_net = loss_multiclass_log<fc<10, max_pool<2, 2, 2, 2, relu<con5<50, bn_con<max_pool<2, 2, 2, 2, relu<con5<20, input<matrix<float>>>>>>>>>>>;

template <class Net, class Solver>
struct DlibRunner : Runner {
  Net net;
  std::vector<Solver> solvers;
  double lr;
  int threads;
  resizable_tensor x;
  std::vector<unsigned long> labels;
  DlibRunner(const Synthetic& d, int64_t batch, Solver s, double lr_, int threads_) : lr(lr_), threads(threads_) {
    std::vector<matrix<float>> images(size_t(batch), matrix<float>(28, 28));
    for (int64_t i = 0; i < batch; ++i)
      for (long r = 0; r < 28; ++r)
        for (long c = 0; c < 28; ++c) images[size_t(i)](r, c) = d.images[size_t(i * 784 + r * 28 + c)];
    for (int64_t i = 0; i < batch; ++i) labels.push_back((unsigned long)d.labels[size_t(i)]);
    net.to_tensor(images.begin(), images.end(), x);
    solvers.assign(Net::num_computational_layers, s);
  }
  void enter() override {
#if defined(OAR_WITH_BLAS)
    openblas_set_num_threads(threads);
#endif
  }
  void step() override {
    net.compute_parameter_gradients(x, labels.begin());
    net.update_parameters(solvers, lr);
  }
  void leave() override {
#if defined(OAR_WITH_BLAS)
    openblas_set_num_threads(1);
#endif
    if (threads > 1) settle();
  }
};

}  // namespace

std::unique_ptr<Runner> mlp_train(const Synthetic& d, int64_t batch, int threads) {
  return std::make_unique<DlibRunner<mlp_net, sgd>>(d, batch, sgd(0, 0), 0.1, threads);
}
std::unique_ptr<Runner> conv_train(const Synthetic& d, int64_t batch, int threads) {
  return std::make_unique<DlibRunner<conv_net, adam>>(d, batch, adam(0, 0.9, 0.999), 1e-3, threads);
}

#endif

}  // namespace bench::dlib_peer
