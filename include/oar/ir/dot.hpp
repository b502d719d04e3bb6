// oar/ir/dot.hpp: a block of a Program as a Graphviz DOT graph: variables are ellipses, ops are boxes,
// edges run var -> op -> var labelled with the slot, sub-blocks are clusters. Render with
//   dot -Tsvg prog.dot -o prog.svg
#pragma once
#include <string>
#include <string_view>

#include "oar/config.hpp"
#include "oar/ir/print.hpp"

namespace oar {

/// Graphviz DOT text of block `block` and, as clusters, of the sub-blocks its ops refer to. Parameters are
/// orange and labelled "param", other persistable variables grey, data inputs (variables of a drawn block
/// that an op reads, no drawn op writes, and that are not persistable) green and labelled "data"; a variable
/// of an enclosing block that the ops use is drawn outside the clusters. Node IDs are "v<block>:<name>" and
/// "op<block>:<index>". An oar::Error if the program has no block `block`.
///   std::ofstream("prog.dot") << oar::to_dot(program);
std::string to_dot(const Program& p, int block = 0);

/// `s` as a DOT double-quoted string (quotes, backslashes and newlines escaped).
std::string dot_quote(std::string_view s);

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/ir/dot-inl.hpp"
#endif
