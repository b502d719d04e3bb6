// kernels/cuda/all.hpp: the host side of every CUDA kernel (eval_cuda / eval_grad_cuda), for the unit that
// builds the kernel registry (src/kernels.cpp, or a header-only unit) when oar is built with CUDA. The device
// side is the .cu files of this folder, in the oar_cuda library.
#pragma once
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/clip_norm.hpp"
#include "kernels/cuda/collective.hpp"
#include "kernels/cuda/amp.hpp"
#include "kernels/cuda/conv.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/fused.hpp"
#include "kernels/cuda/layer_norm.hpp"
#include "kernels/cuda/logic.hpp"
#include "kernels/cuda/nn.hpp"
#include "kernels/cuda/optim.hpp"
#include "kernels/cuda/random.hpp"
#include "kernels/cuda/reduce.hpp"
#include "kernels/cuda/rnn.hpp"
#include "kernels/cuda/sequence.hpp"
#include "kernels/cuda/sequence_shape.hpp"
#include "kernels/cuda/sequence_conv.hpp"
#include "kernels/cuda/tensor.hpp"
