// tests/compile_fail/deprecated_pool2d.cpp: an old spelling kept for one release compiles with a warning that
// names its replacement. run.cmake compiles this file with -Werror=deprecated-declarations twice: as is (the
// new spelling, it must compile) and with -DOAR_OLD_SPELLING (it must fail, the message naming
// oar::PoolType). That both spellings compute the same is tests/layers/options.cpp's.
#include <oar/oar.hpp>

oar::Var build(const oar::Var& x) {
#ifdef OAR_OLD_SPELLING
  return oar::pool2d(x, 2, "max");
#else
  return oar::pool2d(x, 2, oar::PoolType::max);
#endif
}
