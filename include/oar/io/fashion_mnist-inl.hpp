// oar/io/fashion_mnist-inl.hpp: the implementation of fashion_mnist.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/io/fashion_mnist.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "oar/core/error.hpp"
#include "oar/io/idx.hpp"

namespace oar::io {

OAR_FUNC std::filesystem::path fashion_mnist_dir(const std::filesystem::path& dir) {
  if (!dir.empty()) return dir;
  if (const char* env = std::getenv("OAR_FASHION_MNIST_DIR"); env && *env) return env;
  return std::filesystem::path(fashion_mnist_default_dir);
}

namespace detail {

inline std::shared_ptr<const FashionMnistData> fashion_mnist_read(std::string_view split, const std::filesystem::path& dir_arg) {
  namespace fs = std::filesystem;
  OAR_CHECK(split == "train" || split == "t10k", "Fashion-MNIST split '{}' is neither 'train' nor 't10k'", split);
  fs::path dir = fashion_mnist_dir(dir_arg);
  std::string from = !dir_arg.empty() ? "the directory given"
                     : (std::getenv("OAR_FASHION_MNIST_DIR") && *std::getenv("OAR_FASHION_MNIST_DIR")) ? "$OAR_FASHION_MNIST_DIR"
                                                                                                       : "the default directory";
  std::vector<std::string> looked, missing;
  auto find = [&](const std::string& base) -> fs::path {
    fs::path found;
    for (const std::string& name : {base + ".gz", base}) {
      fs::path p = dir / name;
      looked.push_back(p.string());
      std::error_code ec;
      if (found.empty() && fs::is_regular_file(p, ec)) found = p;
    }
    if (found.empty()) missing.push_back(base);
    return found;
  };
  fs::path img_path = find(std::string(split) + "-images-idx3-ubyte");
  fs::path lbl_path = find(std::string(split) + "-labels-idx1-ubyte");
  if (!missing.empty())
    throw Error(fmt::format("Fashion-MNIST {} files not found in '{}' ({}); looked at: {}. Install them with "
                            "`apt-get install dataset-fashion-mnist` (they go to {}), or point $OAR_FASHION_MNIST_DIR "
                            "at a directory holding {}",
                            split, dir.string(), from, fmt::join(looked, ", "), fashion_mnist_default_dir, fmt::join(missing, " and ")));
  IdxData img = read_idx(img_path, idx_magic_images);
  IdxData lbl = read_idx(lbl_path, idx_magic_labels);
  if (img.dims[1] != 28 || img.dims[2] != 28)
    throw Error(fmt::format("Fashion-MNIST images in '{}' are {} x {}, not 28 x 28", img_path.string(), img.dims[1], img.dims[2]));
  if (img.dims[0] != lbl.dims[0])
    throw Error(fmt::format("Fashion-MNIST files disagree: '{}' holds {} images but '{}' holds {} labels", img_path.string(),
                            img.dims[0], lbl_path.string(), lbl.dims[0]));
  for (size_t i = 0; i < lbl.data.size(); ++i)
    if (lbl.data[i] > 9) throw Error(fmt::format("Fashion-MNIST labels in '{}': label {} is {}, not in 0..9", lbl_path.string(), i, lbl.data[i]));
  auto d = std::make_shared<FashionMnistData>();
  d->count = img.dims[0];
  d->images = std::move(img.data);
  d->labels = std::move(lbl.data);
  return d;
}

inline Reader fashion_mnist_reader(std::string_view split, const std::filesystem::path& dir) {
  auto data = fashion_mnist_load(split, dir);
  return Reader::from_indexed(data->count, [data](int64_t i) {
    Tensor img(Shape{784}, f32);
    float* px = img.data<float>();
    const uint8_t* src = data->images.data() + size_t(i) * 784;
    for (int j = 0; j < 784; ++j) px[j] = float(src[j]) * (1.0f / 255.0f);
    Tensor label(Shape{1}, i64);
    label.data<int64_t>()[0] = int64_t(data->labels[size_t(i)]);
    return Sample{std::move(img), std::move(label)};
  });
}

}  // namespace detail

OAR_FUNC std::shared_ptr<const FashionMnistData> fashion_mnist_load(std::string_view split, const std::filesystem::path& dir) {
  // NOTE: a cache of what is loaded now (weak pointers), so train and test readers made twice read the files once.
  static std::mutex m;
  static std::map<std::string, std::weak_ptr<const FashionMnistData>> cache;
  std::string key = (fashion_mnist_dir(dir) / std::string(split)).string();
  std::lock_guard lock(m);
  if (auto d = cache[key].lock()) return d;
  auto d = detail::fashion_mnist_read(split, dir);
  cache[key] = d;
  return d;
}

OAR_FUNC Reader fashion_mnist_train(const std::filesystem::path& dir) { return detail::fashion_mnist_reader("train", dir); }
OAR_FUNC Reader fashion_mnist_test(const std::filesystem::path& dir) { return detail::fashion_mnist_reader("t10k", dir); }

}  // namespace oar::io
