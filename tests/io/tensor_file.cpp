// tests/io/tensor_file.cpp: Fluid's LoDTensor stream format: round trips, the exact header bytes, combined
// files, and truncated or corrupted input (every byte offset) giving oar::Error.
#include "pch.hpp"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "oar/io/durable-inl.hpp"
#include "oar/io/tensor_file.hpp"
#include "support/temp_dir.hpp"

using namespace oar;
using namespace oar::io;
namespace fs = std::filesystem;

namespace {

fs::path tf_tmp_dir(const char* name) { return oar::test::fresh_dir("io_tf", name); }

/// A plain (not fsynced) write, for the many small files of the truncation tests.
void spit(const fs::path& p, std::string_view s) {
  std::ofstream o(p, std::ios::binary | std::ios::trunc);
  o.write(s.data(), std::streamsize(s.size()));
}

std::string bytes_of(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s.push_back(char(uint8_t(b)));
  return s;
}

template <class T>
LoDTensor iota_tensor(Shape shape, LoD lod = {}, double scale = 1.5) {
  Tensor t(shape, dtype_of<T>);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = T(double(i) * scale - 3);
  return LoDTensor(t, std::move(lod));
}

void check_same(const LoDTensor& a, const LoDTensor& b) {
  CHECK(a.dtype() == b.dtype());
  CHECK(a.shape() == b.shape());
  CHECK(a.lod() == b.lod());
  REQUIRE(a.bytes() == b.bytes());
  CHECK(std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

/// The f32 [2, 3] tensor 1..6 with LoD {{0, 1, 2}}, and its bytes written out by hand from the spec.
LoDTensor small_tensor() { return LoDTensor(Tensor::from<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}), LoD{{0, 1, 2}}); }
std::string small_tensor_bytes() {
  return bytes_of({
      0, 0, 0, 0,              // uint32 version 0
      1, 0, 0, 0, 0, 0, 0, 0,  // uint64 lod_level 1
      24, 0, 0, 0, 0, 0, 0, 0, // uint64 nbytes of level 0: 3 offsets
      0, 0, 0, 0, 0, 0, 0, 0,  // offsets 0, 1, 2
      1, 0, 0, 0, 0, 0, 0, 0,  //
      2, 0, 0, 0, 0, 0, 0, 0,  //
      0, 0, 0, 0,              // uint32 tensor version 0
      6, 0, 0, 0,              // int32 desc size
      0x08, 5,                 // TensorDesc.data_type = FP32 (5)
      0x10, 2, 0x10, 3,        // TensorDesc.dims = 2, 3
      0, 0, 0x80, 0x3f,        // 1.0f
      0, 0, 0, 0x40,           // 2.0f
      0, 0, 0x40, 0x40,        // 3.0f
      0, 0, 0x80, 0x40,        // 4.0f
      0, 0, 0xa0, 0x40,        // 5.0f
      0, 0, 0xc0, 0x40,        // 6.0f
  });
}

}  // namespace

TEST_CASE("tensor_file: the bytes match Fluid's LoDTensor stream format byte for byte") {
  std::string out;
  write_lod_tensor(out, small_tensor());
  CHECK(out == small_tensor_bytes());
  std::ostringstream os;
  write_lod_tensor(os, small_tensor());
  CHECK(os.str() == small_tensor_bytes());

  const std::string expect = small_tensor_bytes();
  std::string_view in = expect;
  check_same(read_lod_tensor(in), small_tensor());
  CHECK(in.empty());

  // a writer that packs the repeated dims (proto3 style) reads the same
  std::string packed = small_tensor_bytes();
  packed.replace(52, 6, bytes_of({0x08, 5, 0x12, 2, 2, 3}));
  std::string_view pin = packed;
  check_same(read_lod_tensor(pin), small_tensor());

  // no LoD: lod_level 0 and nothing else before the tensor
  std::string nolod;
  write_lod_tensor(nolod, LoDTensor(Tensor::from<int64_t>({7}, Shape{1})));
  CHECK(nolod == bytes_of({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0x08, 3, 0x10, 1, 7, 0, 0, 0, 0, 0, 0, 0}));
}

TEST_CASE("tensor_file: f32, f64, i64 and other dtypes round trip with and without LoD") {
  fs::path dir = tf_tmp_dir("roundtrip");
  std::vector<LoDTensor> ts = {
      iota_tensor<float>({5, 3}, {{0, 1, 2}, {0, 2, 5}}),
      iota_tensor<double>({4, 2, 2}, {{0, 1, 4}}),
      iota_tensor<int64_t>({6, 1}, {{0, 6}}),
      iota_tensor<float>({17}),
      iota_tensor<double>({}),  // rank 0: one element
      iota_tensor<int32_t>({2, 0, 3}),
      iota_tensor<int8_t>({3, 3}, {}, 1),
      iota_tensor<uint8_t>({3}, {}, 1),
      LoDTensor(Tensor::from<float>({std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()})),
  };
  for (size_t i = 0; i < ts.size(); ++i) {
    CAPTURE(i);
    std::string s;
    write_lod_tensor(s, ts[i]);
    write_lod_tensor(s, ts[i]);
    std::string_view in = s;
    check_same(read_lod_tensor(in), ts[i]);
    check_same(read_lod_tensor(in), ts[i]);
    CHECK(in.empty());
    fs::path p = dir / fmt::format("t{}", i);
    save_tensor(p, ts[i]);
    check_same(load_tensor(p), ts[i]);
  }
  // a view (slice) writes only its own rows
  LoDTensor big = iota_tensor<float>({6, 2});
  LoDTensor rows(big.slice(2, 4));
  save_tensor(dir / "slice", rows);
  LoDTensor back = load_tensor(dir / "slice");
  CHECK(back.shape() == Shape{2, 2});
  CHECK(back.to_vector<float>() == std::vector<float>{3, 4.5, 6, 7.5});
  // overwriting is atomic and leaves no temp files behind: each tensor file and its checksum sidecar
  save_tensor(dir / "slice", ts[0]);
  check_same(load_tensor(dir / "slice"), ts[0]);
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.path().filename().string().starts_with(".") ? 100 : 1;
  CHECK(files == 2 * (int(ts.size()) + 1));
  CHECK(fs::exists(dir / "slice.oarsum"));
  CHECK_THROWS_WITH_AS(save_tensor(dir / "x", LoDTensor()), doctest::Contains("not initialized"), Error);
  fs::remove_all(dir);
}

TEST_CASE("tensor_file: truncation at every byte offset is an oar::Error naming the file") {
  fs::path dir = tf_tmp_dir("trunc");
  std::string full = small_tensor_bytes();
  fs::path p = dir / "w";
  for (size_t n = 0; n < full.size(); ++n) {
    CAPTURE(n);
    std::string_view in = std::string_view(full).substr(0, n);
    CHECK_THROWS_AS(read_lod_tensor(in), Error);
    spit(p, std::string_view(full).substr(0, n));
    CHECK_THROWS_WITH_AS(load_tensor(p), doctest::Contains(p.string().c_str()), Error);
  }
  // a two-level LoD f64 tensor, every offset too
  std::string two;
  write_lod_tensor(two, iota_tensor<double>({5, 1}, {{0, 1, 2}, {0, 2, 5}}));
  for (size_t n = 0; n < two.size(); ++n) {
    std::string_view in = std::string_view(two).substr(0, n);
    CHECK_THROWS_AS(read_lod_tensor(in, "two"), Error);
  }
  std::string_view cut = std::string_view(full).substr(0, full.size() - 1);
  CHECK_THROWS_WITH_AS(read_lod_tensor(cut, "w"), doctest::Contains("w: truncated: shape [2, 3] of f32 needs more than the 23 bytes left"), Error);
  oar::detail::write_file_atomic(p, full + "zz");
  CHECK_THROWS_WITH_AS(load_tensor(p), doctest::Contains("2 bytes follow the tensor"), Error);
  CHECK_THROWS_WITH_AS(load_tensor(dir / "missing"), doctest::Contains((dir / "missing").string().c_str()), Error);
  fs::remove_all(dir);
}

TEST_CASE("tensor_file: corrupted headers are errors, and a huge declared size allocates nothing") {
  auto fails = [](std::string s, const char* why) {
    std::string_view in = s;
    CHECK_THROWS_WITH_AS(read_lod_tensor(in, "c"), doctest::Contains(why), Error);
  };
  const std::string good = small_tensor_bytes();
  std::string s = good;
  s[0] = 1;
  fails(s, "unsupported LoDTensor version 1");
  s = good;
  s[44] = 2;
  fails(s, "unsupported tensor version 2");
  s = good;
  s[4] = char(0xff);  // lod_level 255
  fails(s, "255 LoD levels cannot fit");
  s = good;
  s[12] = 23;  // nbytes not a multiple of 8
  fails(s, "not a multiple of 8");
  s = good;
  s[28] = 5;  // offsets 0, 5, 2
  fails(s, "corrupted LoD: level 0 decreases");
  s = good;
  s[53] = 7;  // data_type LOD_TENSOR (a kind, not an element type)
  fails(s, "unknown data type 7");
  s = good;
  s[53] = 19;  // SIZE_T: in the enum, but no oar dtype
  fails(s, "unknown data type 19");
  s = good;
  s[48] = char(0xff), s[49] = char(0xff), s[50] = char(0xff), s[51] = char(0xff);  // desc size -1
  fails(s, "TensorDesc size -1");
  s = good;
  s[48] = 100;
  fails(s, "truncated: TensorDesc size 100");
  s = good;
  s.replace(52, 6, bytes_of({0x10, 2, 0x10, 3, 0x10, 1}));  // no data_type: the required field is missing
  fails(s, "the TensorDesc has no data_type");
  s = good;
  s[52] = char(0xff);  // not a protobuf message
  fails(s, "TensorDesc does not parse");
  s = good;
  s[55] = 0x7f;  // dims 127 x 3: more data than the file holds
  fails(s, "truncated: shape [127, 3] of f32 needs more than the 24 bytes left");
  // a negative dim: varint of -1 is ten bytes
  s = good.substr(0, 48) + bytes_of({15, 0, 0, 0, 0x08, 5, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x10, 3}) + good.substr(58);
  fails(s, "dim 0 is -1");
  // dims of 2^40 x 2^40: fails on the dims check (their product overflows), long before any allocation
  s = good.substr(0, 48) + bytes_of({16, 0, 0, 0, 0x08, 5, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20}) + good.substr(58);
  int64_t before = memory_stats().current.load();
  fails(s, "dims [1099511627776, 1099511627776] multiply past 2^63");
  CHECK(memory_stats().current.load() == before);
  // the LoD must end at the number of rows
  s = good;
  s[36] = 3;  // offsets 0, 1, 3 but 2 rows
  fails(s, "ends at 3 but 2 rows follow");
}

TEST_CASE("tensor_file: save_combined writes the tensors sorted by name; load_combined returns them by name") {
  fs::path dir = tf_tmp_dir("combined");
  LoDTensor w = iota_tensor<float>({3, 2}), b = iota_tensor<float>({2}), step = iota_tensor<int64_t>({1}), emb = iota_tensor<double>({4, 1}, {{0, 3, 4}});
  fs::path p = dir / "params";
  save_combined(p, {{"w", w}, {"b", b}, {"step", step}, {"emb", emb}});
  // the file is the four streams in name order: b, emb, step, w
  std::string want;
  for (const LoDTensor* t : {&b, &emb, &step, &w}) write_lod_tensor(want, *t);
  CHECK(oar::detail::read_file(p) == want);

  auto got = load_combined(p, {"w", "step", "b", "emb"});
  REQUIRE(got.size() == 4);
  check_same(got[0], w);
  check_same(got[1], step);
  check_same(got[2], b);
  check_same(got[3], emb);

  CHECK_THROWS_WITH_AS(load_combined(p, {"w", "b", "emb"}), doctest::Contains("bytes after the 3 tensors"), Error);
  CHECK_THROWS_WITH_AS(load_combined(p, {"w", "b", "emb", "step", "zz"}), doctest::Contains("'zz' is missing"), Error);
  CHECK_THROWS_WITH_AS(load_combined(p, {"w", "w"}), doctest::Contains("appears twice"), Error);
  CHECK_THROWS_WITH_AS(save_combined(p, {{"a", w}, {"a", b}}), doctest::Contains("the name 'a' appears twice"), Error);

  // truncated at every offset: an error naming the file and the tensor being read
  for (size_t n = 0; n < want.size(); n += 3) {
    CAPTURE(n);
    spit(dir / "cut", std::string_view(want).substr(0, n));
    CHECK_THROWS_WITH_AS(load_combined(dir / "cut", {"w", "step", "b", "emb"}), doctest::Contains((dir / "cut").string().c_str()), Error);
  }
  std::string_view body = want;
  read_lod_tensor(body);  // b
  oar::detail::write_file_atomic(dir / "cut", std::string_view(want).substr(0, want.size() - body.size() + 10));
  CHECK_THROWS_WITH_AS(load_combined(dir / "cut", {"w", "step", "b", "emb"}), doctest::Contains("tensor 'emb' (2 of 4)"), Error);
  fs::remove_all(dir);
}

TEST_CASE("tensor_file: the .oarsum sidecar lists each tensor's name, byte length and crc32 in file order") {
  fs::path dir = tf_tmp_dir("sidecar");
  LoDTensor w = iota_tensor<float>({3, 2}), b = iota_tensor<float>({2}), odd = iota_tensor<int64_t>({2});
  fs::path p = dir / "params";
  save_combined(p, {{"w", w}, {"b", b}, {"a name%", odd}});
  std::string want = "oarsum 1 crc32\n";
  for (auto& [n, t] : std::vector<std::pair<std::string, const LoDTensor*>>{{"a%20name%25", &odd}, {"b", &b}, {"w", &w}}) {
    std::string bytes;
    write_lod_tensor(bytes, *t);
    want += fmt::format("{} {} {:08x}\n", n, bytes.size(), ::crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), uInt(bytes.size())));
  }
  CHECK(oar::detail::read_file(dir / "params.oarsum") == want);
  auto got = load_combined(p, {"w", "a name%", "b"});
  check_same(got[0], w);
  check_same(got[1], odd);
  // a single tensor file: one line, named after the file
  save_tensor(dir / "fc_0.w_0", w);
  std::string one;
  write_lod_tensor(one, w);
  CHECK(oar::detail::read_file(dir / "fc_0.w_0.oarsum") ==
        fmt::format("oarsum 1 crc32\nfc_0.w_0 {} {:08x}\n", one.size(), ::crc32(0, reinterpret_cast<const Bytef*>(one.data()), uInt(one.size()))));
  fs::remove_all(dir);
}

TEST_CASE("tensor_file: a damaged byte is an oar::Error naming the file and the tensor; a file without a sidecar (Fluid's) loads") {
  fs::path dir = tf_tmp_dir("damaged");
  LoDTensor w = iota_tensor<float>({64, 16}), b = iota_tensor<float>({16}), emb = iota_tensor<double>({8, 4});
  fs::path p = dir / "__params__";
  save_combined(p, {{"fc_0.w_0", w}, {"fc_0.b_0", b}, {"emb", emb}});
  const std::string good = oar::detail::read_file(p);
  // file order: emb, fc_0.b_0, fc_0.w_0
  std::string s_emb, s_b;
  write_lod_tensor(s_emb, emb);
  write_lod_tensor(s_b, b);
  const size_t w_at = s_emb.size() + s_b.size(), mid = good.size() / 2;
  REQUIRE(mid > w_at);
  std::string bad = good;
  bad[mid] ^= 0x10;  // inside fc_0.w_0's data: the stream still parses, the weights would be wrong
  spit(p, bad);
  const std::vector<std::string> names = {"fc_0.w_0", "fc_0.b_0", "emb"};
  CHECK_THROWS_WITH_AS(load_combined(p, names),
                       fmt::format("'{}': tensor 'fc_0.w_0' (bytes {}..{}) does not match its checksum in '__params__.oarsum': the file is damaged",
                                   p.string(), w_at, good.size()).c_str(),
                       Error);
  bad = good;
  bad[s_emb.size() + 3] ^= 1;
  spit(p, bad);
  CHECK_THROWS_WITH_AS(load_combined(p, names), doctest::Contains(fmt::format("tensor 'fc_0.b_0' (bytes {}..{})", s_emb.size(), w_at).c_str()), Error);
  spit(p, good.substr(0, good.size() - 4));
  CHECK_THROWS_WITH_AS(load_combined(p, names),
                       fmt::format("'{}' has {} bytes, but its checksum file '__params__.oarsum' lists {}: the file is damaged (cut short or extended)",
                                   p.string(), good.size() - 4, good.size()).c_str(),
                       Error);
  // a save in progress (the sidecar lists the old checksums and the new): either file loads, nothing else
  save_tensor(dir / "t", b);
  const std::string old_bytes = oar::detail::read_file(dir / "t"), old_sum = oar::detail::read_file(dir / "t.oarsum");
  save_tensor(dir / "t", emb);
  const std::string new_sum = oar::detail::read_file(dir / "t.oarsum");
  spit(dir / "t.oarsum", old_sum + "or\n" + new_sum.substr(new_sum.find('\n') + 1));
  check_same(load_tensor(dir / "t"), emb);
  spit(dir / "t", old_bytes);
  check_same(load_tensor(dir / "t"), b);
  bad = old_bytes;
  bad[bad.size() - 1] ^= 1;
  spit(dir / "t", bad);
  CHECK_THROWS_WITH_AS(load_tensor(dir / "t"), doctest::Contains("tensor 't' (bytes 0.."), Error);
  // the next save leaves one list again
  save_tensor(dir / "t", w);
  CHECK(oar::detail::read_file(dir / "t.oarsum").find("\nor\n") == std::string::npos);
  check_same(load_tensor(dir / "t"), w);
  // a damaged sidecar is an error naming it; a missing one means an unchecked file, as Fluid writes them
  spit(p, good);
  const std::string sum = oar::detail::read_file(dir / "__params__.oarsum");
  spit(dir / "__params__.oarsum", sum.substr(0, sum.size() - 3));
  CHECK_THROWS_WITH_AS(load_combined(p, names), doctest::Contains(("checksum file '" + (dir / "__params__.oarsum").string() + "' is damaged: line 4 is cut short").c_str()), Error);
  spit(dir / "__params__.oarsum", "oarsum 2 sha256\n");
  CHECK_THROWS_WITH_AS(load_combined(p, names), doctest::Contains("unknown version or checksum: 'oarsum 2 sha256'"), Error);
  fs::remove(dir / "__params__.oarsum");
  bad = good;
  bad[mid] ^= 0x10;
  spit(p, bad);
  CHECK(load_combined(p, names).size() == 3);  // without a checksum the damage goes unseen: why oar writes one
  fs::remove_all(dir);
}
