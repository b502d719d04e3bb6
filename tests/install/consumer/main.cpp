// A consumer of an installed oar: builds a program, runs it, prints "consumer ok".
#include <oar/oar.hpp>

#include <cstdio>

int main() {
  oar::Program p;
  auto& b = p.global_block();
  b.create_var("x", {.dtype = oar::f32, .shape = oar::Shape{-1, 3}});
  oar::Operator op("relu");
  op.set_input("X", {"x"}).set_output("Out", {"y"});
  oar::add_op(b, op);
  oar::Scope scope;
  oar::Executor exe;
  auto out = exe.run(p, scope, {{"x", oar::Tensor::from<float>({-1.f, 2.f, -3.f}, {1, 3})}}, {"y"});
  if (out[0].get(1) != 2.0 || out[0].get(0) != 0.0) return 1;
  std::printf("consumer ok (%zu bytes program)\n", oar::serialize(p).size());
  return 0;
}
