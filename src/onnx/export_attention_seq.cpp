// src/onnx/export_attention_seq.cpp: scaled_dot_product_attention over LoD sequences, exported on the padded
// tensors (exporter.hpp): each sequence attends within itself, which in the padded batch is the dense attention
// with the padding keys masked out.
#include "src/onnx/exporter.hpp"

namespace oar::onnx::export_detail {

void Exporter::attention_seq(const Operator& op) {
  for (const char* slot : {"Q", "K", "V"})
    if (!is_seq(op.input(slot).at(0)))
      fail(op, fmt::format("mixes LoD sequences with dense input: its {} '{}' is not a sequence (Q, K and V must all be LoD [N, H, d] or all dense)", slot,
                           op.input(slot).at(0)));
  if (op.has_input("Mask")) fail(op, "has a Mask over LoD sequences, which attend within themselves (only the dense form takes a Mask)");
  const auto& qn = op.input("Q").at(0);
  const Shape& qs = shape(qn);
  if (qs.rank() != 3) fail(op, fmt::format("has a LoD Q {}, which is not [N, H, d]", qs.str()));
  const DType dt = dtype(qn);
  const double scale = attention_scale(op, qs);
  auto heads_first = [&](const std::string& x) {  // [B, T, H, d] <-> [B, H, T, d]
    std::string o = fresh("t");
    attr(node("Transpose", {x}, {o}, op), "perm", std::vector<int64_t>{0, 2, 1, 3});
    return o;
  };
  const auto& kn = op.input("K").at(0);
  const std::string k = value(kn);
  // oar's causal rule is j <= i + Tk_b - Tq_b; with Q and K from one feed Tq_b = Tk_b, and it is the padded
  // j <= i. Across two feeds (a decoder's queries over an encoder's keys) the offset differs per sequence.
  if (op.attr_or<bool>("causal", false) && lengths_of(qn) != lengths_of(kn))
    fail(op, fmt::format("is causal with Q and K from different feeds ({} and {}), whose lengths may differ: not exported", lengths_of(qn),
                         lengths_of(kn)));
  // Key t of sequence b exists when t < K's length b: [B, 1, 1, Tk] over the scores [B, H, Tq, Tk]. A padding
  // query row still sees its sequence's keys (or, in an empty sequence, none: zeros), so its values stay finite
  // for the ops after it that mask padding by a product.
  const std::string keys = apply("Unsqueeze", {step_mask(k, lengths_of(kn), dt, op), ints({1, 2})}, op);
  const std::string o = attend(op, heads_first(value(qn)), heads_first(k), heads_first(value(op.input("V").at(0))), dt, scale, keys);
  const std::string& out = out_var(op, "Out");
  mark_seq(out, qn);
  bind(out, heads_first(o));
}

}  // namespace oar::onnx::export_detail
