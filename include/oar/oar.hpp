// oar/oar.hpp: the one header a user includes.
//
// A model is plain C++: every layer call is recorded on the current oar::Tape; `tape.program(outputs)`
// replays the recording into a Program (protobuf ProgramDesc); a Model holds the program and its
// parameters; an Optimizer trains it, an Evaluator serves it:
//
//   oar::Tape tape;
//   auto img    = oar::data("img", oar::f32, {-1, 784});
//   auto label  = oar::data("label", oar::i64, {-1, 1});
//   auto hidden = oar::fc(img, 200).act(oar::relu);
//   auto pred   = oar::fc(hidden, 10).act(oar::softmax);
//   auto cost   = oar::mean(oar::cross_entropy(pred, label));
//   oar::Model model(tape.program({cost}));
//
// See README.md and docs/ for the whole tour.
#pragma once
#include "oar/config.hpp"
#include "oar/core/dtype.hpp"
#include "oar/core/error.hpp"
#include "oar/core/names.hpp"
#include "oar/core/place.hpp"
#include "oar/core/shape.hpp"
#include "oar/ir/dot.hpp"
#include "oar/ir/print.hpp"
#include "oar/ir/program.hpp"
#include "oar/ir/serialize.hpp"
#include "oar/layers/layers.hpp"
#include "oar/ops/registry.hpp"
#include "oar/device/conv_algorithm.hpp"
#include "oar/runtime/executor.hpp"
#include "oar/runtime/profiler.hpp"
#include "oar/device/scope.hpp"
#include "oar/device/tensor.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/api/evaluator.hpp"
#include "oar/api/fuse.hpp"
#include "oar/api/gradient_machine.hpp"
#include "oar/api/metrics.hpp"
#include "oar/api/model.hpp"
#include "oar/api/optimizer.hpp"
#include "oar/api/sampling.hpp"
#include "oar/autodiff/backward.hpp"
#include "oar/dist/context.hpp"
#include "oar/io/checkpoint.hpp"
#include "oar/io/dataset.hpp"
#include "oar/io/fashion_mnist.hpp"
#include "oar/io/idx.hpp"
#include "oar/io/inference_model.hpp"
#include "oar/io/tensor_file.hpp"
#include "oar/optim/optimizer.hpp"
