// tests/io/fashion_mnist.cpp: Fashion-MNIST readers: sizes, labels and pixels against an independent parser,
// batching, the directory override, and the error when the files are missing.
#include "pch.hpp"

#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>

#include "oar/io/fashion_mnist.hpp"

using namespace oar;
using namespace oar::io;
namespace fs = std::filesystem;

namespace {

/// The whole decompressed file, with nothing but zlib (independent of oar::io::read_idx).
std::string gunzip_all(const fs::path& p) {
  gzFile f = gzopen(p.string().c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  gzclose(f);
  return out;
}

bool have_fashion_mnist() {
  std::error_code ec;
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    if (!fs::is_regular_file(fs::path(fashion_mnist_default_dir) / f, ec)) return false;
  return true;
}

/// Sets an environment variable for the scope of one test.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::string& v) : name(std::move(n)) {
    if (const char* o = std::getenv(name.c_str())) old = o;
    ::setenv(name.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("fashion_mnist: 60000 / 10000 samples whose labels and pixels match the files") {
  if (!have_fashion_mnist()) {
    MESSAGE("dataset-fashion-mnist is not installed: skipped");
    return;
  }
  ScopedEnv no_override("OAR_FASHION_MNIST_DIR", "");
  fs::path dir(fashion_mnist_default_dir);
  for (std::string split : {"train", "t10k"}) {
    CAPTURE(split);
    std::string labels = gunzip_all(dir / (split + "-labels-idx1-ubyte.gz"));
    std::string images = gunzip_all(dir / (split + "-images-idx3-ubyte.gz"));
    const size_t n = split == "train" ? 60000 : 10000;
    REQUIRE(labels.size() == 8 + n);
    REQUIRE(images.size() == 16 + n * 784);

    Reader r = split == "train" ? fashion_mnist_train() : fashion_mnist_test();
    size_t count = 0;
    float lo = 1, hi = 0;
    for (auto& s : r) {
      REQUIRE(s.size() == 2);
      REQUIRE(s[0].shape() == Shape{784});
      REQUIRE(s[0].dtype() == f32);
      REQUIRE(s[1].shape() == Shape{1});
      REQUIRE(s[1].dtype() == i64);
      const int64_t label = s[1].data<int64_t>()[0];
      if (label != int64_t(uint8_t(labels[8 + count]))) FAIL("label " << count << " is " << label);
      const float* px = s[0].data<float>();
      if (count < 5 || count + 5 > n) {
        for (int j = 0; j < 784; ++j) REQUIRE(px[j] == float(uint8_t(images[16 + count * 784 + size_t(j)])) * (1.0f / 255.0f));
      }
      for (int j = 0; j < 784; ++j) lo = std::min(lo, px[j]), hi = std::max(hi, px[j]);
      ++count;
    }
    CHECK(count == n);
    CHECK(lo == 0.0f);
    CHECK(hi == 1.0f);
    CHECK(r.epoch() == 1);
  }
  // The published first labels (Ankle boot, T-shirt, T-shirt, Dress, ...) and the test set's.
  auto first = [](Reader r, int k) {
    std::vector<int64_t> v;
    for (auto& s : r.take(k)) v.push_back(s[1].data<int64_t>()[0]);
    return v;
  };
  CHECK(first(fashion_mnist_train(), 10) == std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  CHECK(first(fashion_mnist_test(), 10) == std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
  CHECK(fashion_mnist_classes[9] == "Ankle boot");
}

TEST_CASE("fashion_mnist: batches of 64 over the training set: 937 full and one of 32") {
  if (!have_fashion_mnist()) {
    MESSAGE("dataset-fashion-mnist is not installed: skipped");
    return;
  }
  ScopedEnv no_override("OAR_FASHION_MNIST_DIR", "");
  Reader r = fashion_mnist_train().batch(64);
  int64_t batches = 0, rows = 0;
  Batch last;
  for (auto& b : r) {
    ++batches;
    rows += b[0].dim(0);
    last = b;
  }
  CHECK(batches == 938);
  CHECK(rows == 60000);
  CHECK(last[0].shape() == Shape{32, 784});
  CHECK(last[1].shape() == Shape{32, 1});
  CHECK(fashion_mnist_train().batch(64, true).take(1000).skip(1000) == 937);
}

TEST_CASE("fashion_mnist: OAR_FASHION_MNIST_DIR and the dir argument override the location") {
  fs::path dir = fs::temp_directory_path() / fmt::format("oar_io_fmnist_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  IdxData img{{3, 28, 28}, std::vector<uint8_t>(3 * 784)};
  for (size_t i = 0; i < img.data.size(); ++i) img.data[i] = uint8_t(i % 256);
  write_idx(dir / "t10k-images-idx3-ubyte.gz", img, true);
  write_idx(dir / "t10k-labels-idx1-ubyte", IdxData{{3}, {4, 0, 9}}, false);  // a plain file is found too

  auto check = [&](Reader r) {
    std::vector<int64_t> labels;
    for (auto& s : r) {
      labels.push_back(s[1].data<int64_t>()[0]);
      const size_t i = labels.size() - 1;
      CHECK(s[0].data<float>()[300] == float(img.data[i * 784 + 300]) * (1.0f / 255.0f));
    }
    CHECK(labels == std::vector<int64_t>{4, 0, 9});
  };
  check(fashion_mnist_test(dir));
  {
    ScopedEnv env("OAR_FASHION_MNIST_DIR", dir.string());
    check(fashion_mnist_test());
    CHECK(fashion_mnist_dir() == dir);
    // the training files are not there: the error names each path it tried and the package
    auto train = [] { return fashion_mnist_train(); };
    CHECK_THROWS_WITH_AS(train(), doctest::Contains((dir / "train-images-idx3-ubyte.gz").string().c_str()), Error);
    CHECK_THROWS_WITH_AS(train(), doctest::Contains((dir / "train-labels-idx1-ubyte").string().c_str()), Error);
    CHECK_THROWS_WITH_AS(train(), doctest::Contains("$OAR_FASHION_MNIST_DIR"), Error);
    CHECK_THROWS_WITH_AS(train(), doctest::Contains("apt-get install dataset-fashion-mnist"), Error);
  }
  // a label out of range and a count mismatch are errors naming the file
  write_idx(dir / "t10k-labels-idx1-ubyte", IdxData{{3}, {4, 10, 9}}, false);
  CHECK_THROWS_WITH_AS(fashion_mnist_test(dir), doctest::Contains("label 1 is 10"), Error);
  write_idx(dir / "t10k-labels-idx1-ubyte", IdxData{{2}, {4, 1}}, false);
  CHECK_THROWS_WITH_AS(fashion_mnist_test(dir), doctest::Contains("holds 3 images but"), Error);
  fs::remove_all(dir);
}

TEST_CASE("fashion_mnist: a missing directory is an error listing every path looked at") {
  fs::path dir = "/nonexistent/oar-fashion";
  try {
    (void)fashion_mnist_train(dir);
    FAIL("no error");
  } catch (const Error& e) {
    std::string m = e.what();
    for (const char* f : {"train-images-idx3-ubyte.gz", "train-images-idx3-ubyte,", "train-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte."})
      CHECK_MESSAGE(m.find((dir / f).string()) != std::string::npos, m);
    CHECK(m.find("the directory given") != std::string::npos);
    CHECK(m.find("apt-get install dataset-fashion-mnist") != std::string::npos);
  }
}
