// oar/optim/mixed_precision.hpp: mixed-precision training as program transformations. The products and
// convolutions run in a 16-bit float (f16 or bf16) on f32 master weights, and dynamic loss scaling keeps small
// gradients from flushing to zero in 16 bits:
// - cast_to_half: each mul, matmul, conv2d and conv2d_transpose of the global block reads 16-bit casts of its
//   f32 inputs and writes a 16-bit result that is cast back to f32 (so every other op, the loss and the
//   parameters stay f32; the casts' gradients bring the 16-bit gradients back to f32);
// - scale_loss_gradient: the backward pass starts from the loss scale instead of 1 (every gradient scaled);
// - append_unscale: after the backward pass, the gradients divided by the scale in place, and whether any was
//   inf or NaN;
// - append_scaled_update: the update program moves the scale (update_loss_scaling) and passes the overflow flag
//   to every update op as its SkipUpdate, so that a step whose gradients overflowed leaves parameters,
//   accumulators and the schedule untouched, decided on the device (no host read, no control flow: a step
//   stays one CUDA graph).
// Optimizer applies all four for a rule `.with_mixed_precision()`.
#pragma once
#include <string>
#include <vector>

#include "oar/autodiff/backward.hpp"
#include "oar/config.hpp"
#include "oar/core/dtype.hpp"

namespace oar::optim {

struct Rule;

/// Options of mixed-precision training (Rule::with_mixed_precision). The scale starts at init_loss_scaling;
/// with dynamic_loss_scaling it doubles (incr_ratio) after incr_every_n_steps steps without overflow and
/// halves (decr_ratio, not below 1) after decr_every_n_nan_or_inf overflowed steps. An overflowed step is
/// always skipped.
struct MixedPrecision {
  DType dtype = DType::f16;  ///< f16 or bf16
  float init_loss_scaling = 32768.f;
  bool dynamic_loss_scaling = true;
  int32_t incr_every_n_steps = 1000;
  int32_t decr_every_n_nan_or_inf = 2;
  float incr_ratio = 2.f;
  float decr_ratio = 0.5f;
};

/// The persistable state of loss scaling (checkpointed with the parameters) and the step's overflow flag.
inline constexpr const char* kLossScaling = "@LOSS_SCALING@";
inline constexpr const char* kGoodSteps = "@LOSS_SCALING_GOOD_STEPS@";
inline constexpr const char* kBadSteps = "@LOSS_SCALING_BAD_STEPS@";
inline constexpr const char* kFoundInfinite = "@FOUND_INFINITE@";

/// The op types cast_to_half runs in 16 bits.
const std::vector<std::string>& half_op_types();

/// Rewrites `program`'s global block so that each op of half_op_types() whose float inputs are all f32 runs in
/// `t` (f16 or bf16), as the file comment says. Returns how many ops were converted. The program must not have
/// its backward pass yet.
int cast_to_half(Program& program, DType t);

/// After append_backward of `loss`: the fill_constant that seeds `loss@GRAD` with 1 becomes a copy of the
/// loss scale kLossScaling (a persistable [1] f32 declared in the global block).
void scale_loss_gradient(Program& program, const std::string& loss);

/// Appends check_finite_and_unscale over `params_grads`' gradients (in place) writing kFoundInfinite.
void append_unscale(Program& program, const std::vector<ParamGrad>& params_grads);

/// The state variables of loss scaling, declared persistable in `main` and filled in `startup`.
void declare_loss_scaling(Program& main, Program& startup, const MixedPrecision& m);

/// Appends the update of `rule` (append_update) to `main`'s global block with kFoundInfinite as its skip flag,
/// after update_loss_scaling when the scaling is dynamic. Returns the learning-rate variable's name.
std::string append_scaled_update(Program& main, Program& startup, const Rule& rule, const std::vector<ParamGrad>& params_grads);

}  // namespace oar::optim

#if OAR_HEADER_ONLY
#include "oar/optim/mixed_precision-inl.hpp"
#endif
