// tests/compile_fail/misspelt_option.cpp: a typed layer option is a member function, so a misspelt one is a
// compile error naming it. run.cmake compiles this file twice: as is (it must compile) and with
// -DOAR_MISSPELT (it must fail, and the compiler must mention `paddin`).
#include <oar/oar.hpp>

oar::Var build(const oar::Var& x) {
#ifdef OAR_MISSPELT
  return oar::conv2d(x, 16, 3).paddin(1).act(oar::relu);
#else
  return oar::conv2d(x, 16, 3).padding(1).act(oar::relu);
#endif
}
