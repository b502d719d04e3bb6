// oar/io/fashion_mnist.hpp: Fashion-MNIST readers over the Debian package dataset-fashion-mnist (gzipped IDX files).
// A sample is {image f32 [784] in [0, 1], label i64 [1] in 0..9}.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "oar/config.hpp"
#include "oar/io/dataset.hpp"

namespace oar::io {

/// Where the Debian package dataset-fashion-mnist puts the files.
inline constexpr std::string_view fashion_mnist_default_dir = "/usr/share/datasets/fashion-mnist";

/// The ten class names, by label.
inline constexpr std::array<std::string_view, 10> fashion_mnist_classes = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

/// One split in memory: `count` images of 28 x 28 bytes (row-major) and `count` labels.
struct FashionMnistData {
  int64_t count = 0;
  std::vector<uint8_t> images;  ///< count * 784 bytes
  std::vector<uint8_t> labels;  ///< count bytes, 0..9
};

/// The directory used: `dir` when not empty, else $OAR_FASHION_MNIST_DIR when set, else the Debian one.
std::filesystem::path fashion_mnist_dir(const std::filesystem::path& dir = {});

/// Loads split "train" (60000) or "t10k" (10000) from `dir` (see fashion_mnist_dir). Each file is looked for
/// as NAME.gz, then NAME. Loaded data is shared while any reader holds it. oar::Error naming every path
/// looked at when files are missing (install them with `apt-get install dataset-fashion-mnist`), and
/// naming the file when one is corrupted.
std::shared_ptr<const FashionMnistData> fashion_mnist_load(std::string_view split, const std::filesystem::path& dir = {});

/// A reader over the 60000 training samples {image f32 [784] in [0, 1], label i64 [1]}, in file order.
///   auto train = oar::io::fashion_mnist_train().shuffle(8192, 1).batch(64);  // {[64, 784] f32, [64, 1] i64}
Reader fashion_mnist_train(const std::filesystem::path& dir = {});
/// A reader over the 10000 test samples, same fields.
Reader fashion_mnist_test(const std::filesystem::path& dir = {});

}  // namespace oar::io

#if OAR_HEADER_ONLY
#include "oar/io/fashion_mnist-inl.hpp"
#endif
