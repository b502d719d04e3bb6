// oar/ir/print.hpp: a human-readable listing of a Program: per block its variables, then one line per op in
// an SSA-like form (`out = mul(X=x, Y=w) {x_num_col_dims=1}  # model.cpp:12 (fc)`), sub-blocks nested under
// the op that owns them. `to_string`, `operator<<` and fmt formatters print the same text.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "oar/config.hpp"
#include "oar/ir/program.hpp"

namespace oar {

/// The whole program: every block with its variables and ops; a sub-block is printed, indented, right under
/// the op that refers to it, and blocks no op refers to come after block 0. Attributes are sorted by name,
/// so the text is deterministic.
///   block 0 (parent -1)
///     var x : f32[?, 3]
///     var w : f32[3, 4] param
///     y = mul(X=x, Y=w) {x_num_col_dims=1, y_num_col_dims=1}  # model.cpp:12 (fc)
std::string to_string(const Program& p);
/// One block (and, nested, the sub-blocks its ops refer to).
std::string to_string(const Block& b);
/// One op on one line, without its sub-block.
std::string to_string(const Operator& op);
/// `var x : f32[?, 3] lod_level=1`, `var w : f32[3, 4] param(lr=0.5, regularizer=l2(0.0005))`.
std::string to_string(const Variable& v);

inline std::ostream& operator<<(std::ostream& os, const Program& p) { return os << to_string(p); }
inline std::ostream& operator<<(std::ostream& os, const Block& b) { return os << to_string(b); }
inline std::ostream& operator<<(std::ostream& os, const Operator& op) { return os << to_string(op); }
inline std::ostream& operator<<(std::ostream& os, const Variable& v) { return os << to_string(v); }

/// The name of a variable kind as the printer writes it ("lod_tensor", "feed_minibatch", ...).
const char* kind_name(VarKind k);

namespace detail {

/// Sub-blocks an op refers to (BLOCK and BLOCKS attributes), in attribute order.
std::vector<int> sub_blocks_of(const Operator& op);
/// A variable's type as printed: `f32[?, 3]`, `selected_rows<f32[10, 4]>`, or its kind's name.
std::string var_type_str(const Variable& v);

}  // namespace detail

}  // namespace oar

template <> struct fmt::formatter<oar::Program> : fmt::formatter<std::string_view> {
  auto format(const oar::Program& p, format_context& ctx) const { return fmt::formatter<std::string_view>::format(oar::to_string(p), ctx); }
};
template <> struct fmt::formatter<oar::Block> : fmt::formatter<std::string_view> {
  auto format(const oar::Block& b, format_context& ctx) const { return fmt::formatter<std::string_view>::format(oar::to_string(b), ctx); }
};
template <> struct fmt::formatter<oar::Operator> : fmt::formatter<std::string_view> {
  auto format(const oar::Operator& op, format_context& ctx) const { return fmt::formatter<std::string_view>::format(oar::to_string(op), ctx); }
};
template <> struct fmt::formatter<oar::Variable> : fmt::formatter<std::string_view> {
  auto format(const oar::Variable& v, format_context& ctx) const { return fmt::formatter<std::string_view>::format(oar::to_string(v), ctx); }
};

#if OAR_HEADER_ONLY
#include "oar/ir/print-inl.hpp"
#endif
