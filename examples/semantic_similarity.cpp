// examples/semantic_similarity.cpp: the seeds' network that compares two texts in a semantic space: one
// projection shared by both texts (oar::shared), then the cosine similarity. Prints the program: one set of
// projection weights, used twice.
#include <oar/oar.hpp>

#include <iostream>

int main() {
  oar::Tape tape;
  auto text_a = oar::data("text_a", oar::f32, {-1, 100});  // e.g. bag-of-words vectors
  auto text_b = oar::data("text_b", oar::f32, {-1, 100});
  auto project = oar::shared([](const oar::Var& text) { return oar::fc(oar::fc(text, 64).act(oar::tanh), 32); });
  oar::Var a = project(text_a), b = project(text_b);
  // cosine similarity = sum(a b) / sqrt(sum(a^2) sum(b^2)), per row
  oar::Var dot = oar::reduce_sum(a * b, {1}, true);
  oar::Var norms = oar::reduce_sum(a * a, {1}, true) * oar::reduce_sum(b * b, {1}, true);
  oar::Var cosine = (dot / oar::sqrt(norms + 1e-12));
  oar::Topology t = tape.program(cosine);
  std::cout << t.main;
  std::cout << "parameters: " << t.main.parameters().size() << " (2 layers x weight and bias, shared by both texts)\n";
  return t.main.parameters().size() == 4 ? 0 : 1;
}
