// kernels/cuda/optim_launch.hpp: the launchers optim.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"
#include "oar/ops/lr_formula.hpp"

namespace oar::cuda_kernels {

// lr is a device scalar of the parameter's type; `skip`, where given, a device bool: the op's SkipUpdate, which
// when true leaves every output as it is, a power's output receiving the power itself.
/// pow_out[0] = pow[0] * beta (Adam's running powers), or pow[0] when skipped.
int scale_scalar(Elem t, const void* pow, void* pow_out, float beta, const bool* skip, Stream s);
/// A SelectedRows gradient's rows grouped by Param row, as one device array `plan`: rows [k] (each Param row
/// once, in the order of first appearance, as cpu_kernels::param_update::merge_rows lists them) | start [k + 1] |
/// src [n] (group i is the value rows src[start[i] .. start[i + 1]), in their order). value: [n, width].
/// sgd: p[rows[i]] -= lr value[src[e]] for each e of group i in order (the CPU's sequential sum).
int sparse_sgd(Elem t, void* p, const void* value, const int64_t* plan, int64_t k, int64_t width, const void* lr, const bool* skip, Stream s);
/// merged[at(i)] = 0 + value[src[e]] over group i's e in order (merge_rows's sums), at(i) = i (`compact`: [k, width])
/// or rows[i] (into a zeroed [height, width], which then is the dense gradient).
int sparse_merge(Elem t, const void* value, const int64_t* plan, int64_t k, int64_t width, bool compact, void* merged, Stream s);
/// adam (adamw: coeff, the group's adam below) on the listed rows alone (lazy_mode): element j of row rows[i]
/// with g = merged[i, j].
int sparse_adam(Elem t, void* p, void* m, void* v, const void* merged, const int64_t* rows, int64_t k, int64_t width, const void* lr,
                const void* beta1_pow, const void* beta2_pow, float beta1, float beta2, float epsilon, float coeff, const bool* skip, Stream s);
/// Several parameters of one dtype updated by one rule in one launch (the update ops' eval_cuda_group, and their
/// eval_cuda as a group of one): each tensor's arrays and device scalars. sgd: p -= lr g. momentum: v = mu v + g;
/// p -= lr (g + mu v) (nesterov) or lr v. adam (with coeff != 0 adamw: p -= lr coeff p first): m = b1 m + (1 - b1)
/// g; v = b2 v + (1 - b2) g^2; p -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps). adagrad (decay < 0: m += g^2) and
/// decayed_adagrad (m = decay m + (1 - decay) g^2): p -= lr g / (sqrt(m) + eps). adamax: m = b1 m + (1 - b1) g;
/// u = max(b2 u + eps, |g|); p -= lr / (1 - b1^t) m / u. rmsprop: ms = rho ms + (1 - rho) g^2; centered (w not
/// null): w = rho w + (1 - rho) g; mom = mu mom + lr g / sqrt(ms [- w^2] + eps); p -= mom. adadelta: eg = rho eg
/// + (1 - rho) g^2; d = -sqrt((edx + eps) / (eg + eps)) g; edx = rho edx + (1 - rho) d^2; p += d. lamb: the
/// moments as adam's, r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + coeff p, then p -= lr trust r with trust
/// = ||p|| / ||r|| per tensor (1 when either is 0), the norms summed in double on the device in a fixed order. For
/// adam, adamax and lamb the powers are read by those launches and advanced by one more (pow_out = pow * beta; in
/// place allowed). A tensor whose `skip` holds true is left as it is (its powers copied to their outputs).
enum class UpdateRule : int { sgd, momentum, adam, adagrad, adamax, rmsprop, adadelta, lamb };
struct UpdateTensor {
  void* p = nullptr;
  void* m = nullptr;  ///< momentum's velocity, adam's first moment, adagrad's moment, adamax's m, rmsprop's ms, adadelta's eg, lamb's m1
  void* v = nullptr;  ///< adam's second moment, adamax's u, rmsprop's mom, adadelta's edx, lamb's m2
  void* w = nullptr;  ///< rmsprop's mean gradient (centered; null otherwise)
  const void* g = nullptr;
  const void* lr = nullptr;
  const void* beta1_pow = nullptr;
  const void* beta2_pow = nullptr;
  void* beta1_pow_out = nullptr;  ///< null: not advanced
  void* beta2_pow_out = nullptr;
  const bool* skip = nullptr;  ///< SkipUpdate (null: never skipped)
  int64_t n = 0;
};
struct UpdateArgs {
  UpdateRule rule = UpdateRule::sgd;
  float mu = 0;  ///< momentum
  bool nesterov = false;
  float beta1 = 0, beta2 = 0, epsilon = 0, coeff = 0;  ///< adam (coeff: adamw's decay), adamax, lamb (coeff: its weight decay)
  float decay = -1;                                    ///< decayed_adagrad's decay (< 0: adagrad), rmsprop's and adadelta's rho
};
/// Tensors per launch (the launch's arguments stay under the 4 KiB every device takes).
inline constexpr int max_update_tensors = 32;
/// `scratch`: update_group_scratch_bytes(...) bytes of device memory (lamb's norms and directions; 0 for the others).
int update_group(Elem t, const UpdateArgs& a, const UpdateTensor* tensors, int count, void* scratch, Stream s);
size_t update_group_scratch_bytes(Elem t, const UpdateArgs& a, const UpdateTensor* tensors, int count);
/// lr[0] = f.at(step[0]) for a one-value step of type `step_type`; piecewise with at most lr_max_pieces
/// boundaries (f's host arrays are copied into the launch).
inline constexpr int lr_max_pieces = 16;
int lr_schedule(const ops::LrFormula& f, Elem step_type, const void* step, float* lr, Stream s);

}  // namespace oar::cuda_kernels
