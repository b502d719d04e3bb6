// tests/io/idx.cpp: IDX files: round trips (plain and gzipped) and errors for truncated or corrupted files.
#include "pch.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "oar/core/file.hpp"
#include "oar/io/idx.hpp"
#include "support/temp_dir.hpp"

using namespace oar;
using namespace oar::io;
namespace fs = std::filesystem;

namespace {

fs::path idx_tmp_dir(const char* name) { return oar::test::fresh_dir("io_idx", name); }

std::string slurp(const fs::path& p) { return oar::detail::read_file(p); }
void spit(const fs::path& p, std::string_view s) {
  std::ofstream o(p, std::ios::binary | std::ios::trunc);
  o.write(s.data(), std::streamsize(s.size()));
}

IdxData sample_images() {
  IdxData d{{3, 4, 5}, {}};
  for (int i = 0; i < 60; ++i) d.data.push_back(uint8_t(i * 37 + 11));
  return d;
}

}  // namespace

TEST_CASE("idx: images and labels round trip, plain and gzipped") {
  fs::path dir = idx_tmp_dir("roundtrip");
  IdxData img = sample_images();
  IdxData lbl{{7}, {9, 0, 0, 3, 0, 2, 7}};
  for (bool gz : {false, true}) {
    CAPTURE(gz);
    fs::path pi = dir / (gz ? "img.gz" : "img"), pl = dir / (gz ? "lbl.gz" : "lbl");
    write_idx(pi, img, gz);
    write_idx(pl, lbl, gz);
    std::string raw = slurp(pi);
    if (gz) {
      CHECK(uint8_t(raw[0]) == 0x1f);  // gzip magic
      CHECK(uint8_t(raw[1]) == 0x8b);
    } else {
      // the header, written out by hand: magic 0x00000803, then big-endian dims 3, 4, 5
      const unsigned char head[] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5};
      REQUIRE(raw.size() == 16 + 60);
      CHECK(std::memcmp(raw.data(), head, 16) == 0);
      CHECK(uint8_t(raw[16]) == 11);
    }
    IdxData a = read_idx(pi, idx_magic_images);
    CHECK(a.dims == img.dims);
    CHECK(a.data == img.data);
    CHECK(a.numel() == 60);
    IdxData b = read_idx(pl, idx_magic_labels);
    CHECK(b.dims == std::vector<int>{7});
    CHECK(b.data == lbl.data);
    CHECK(read_idx(pl).data == lbl.data);  // any magic accepted when none is expected
  }
  fs::remove_all(dir);
}

TEST_CASE("idx: an empty file set (dim 0) reads as no data") {
  fs::path dir = idx_tmp_dir("empty");
  write_idx(dir / "e", IdxData{{0, 28, 28}, {}});
  IdxData e = read_idx(dir / "e", idx_magic_images);
  CHECK(e.dims == std::vector<int>{0, 28, 28});
  CHECK(e.data.empty());
  fs::remove_all(dir);
}

TEST_CASE("idx: truncated files at every length give an oar::Error naming the path") {
  fs::path dir = idx_tmp_dir("trunc");
  IdxData img = sample_images();
  write_idx(dir / "full", img, false);
  std::string raw = slurp(dir / "full");
  fs::path p = dir / "cut";
  for (size_t n = 0; n < raw.size(); ++n) {
    CAPTURE(n);
    spit(p, std::string_view(raw).substr(0, n));
    CHECK_THROWS_WITH_AS(read_idx(p), doctest::Contains(p.string().c_str()), Error);
  }
  // the data part short by one byte: the message says how many bytes the header declared
  spit(p, std::string_view(raw).substr(0, raw.size() - 1));
  CHECK_THROWS_WITH_AS(read_idx(p), doctest::Contains("truncated: the header declares 60 data bytes (3 x 4 x 5), the file holds 59"), Error);

  write_idx(dir / "full.gz", img, true);
  std::string gz = slurp(dir / "full.gz");
  for (size_t n = 0; n < gz.size(); ++n) {
    CAPTURE(n);
    spit(p, std::string_view(gz).substr(0, n));
    CHECK_THROWS_WITH_AS(read_idx(p), doctest::Contains(p.string().c_str()), Error);
  }
  fs::remove_all(dir);
}

TEST_CASE("idx: bad magic, wrong kind, extra bytes, huge dims and missing files are errors") {
  fs::path dir = idx_tmp_dir("bad");
  fs::path p = dir / "f";
  write_idx(p, sample_images());
  std::string raw = slurp(p);

  CHECK_THROWS_WITH_AS(read_idx(p, idx_magic_labels), doctest::Contains("has magic 0x0803 but 0x0801 was expected (labels)"), Error);

  std::string bad = raw;
  bad[2] = 0x0d;  // float data: not supported
  spit(p, bad);
  CHECK_THROWS_WITH_AS(read_idx(p), doctest::Contains("bad magic number 0x00000d03"), Error);
  bad = raw;
  bad[0] = 'P';
  spit(p, bad);
  CHECK_THROWS_WITH_AS(read_idx(p), doctest::Contains("bad magic"), Error);

  spit(p, raw + "x");
  CHECK_THROWS_WITH_AS(read_idx(p), doctest::Contains("holds more than the 60 data bytes"), Error);

  // dims that multiply to petabytes must fail before any allocation
  std::string huge = {0, 0, 8, 3, char(0x7f), char(0xff), char(0xff), char(0xff), char(0x7f), char(0xff), char(0xff), char(0xff),
                      char(0x7f), char(0xff), char(0xff), char(0xff)};
  spit(p, huge);
  CHECK_THROWS_WITH_AS(read_idx(p), doctest::Contains("impossible size"), Error);
  // a large but possible size with no data: truncated, and no gigabyte allocation
  std::string big = {0, 0, 8, 1, 0x40, 0, 0, 0};
  spit(p, big);
  CHECK_THROWS_WITH_AS(read_idx(p), doctest::Contains("the file holds 0"), Error);

  CHECK_THROWS_WITH_AS(read_idx(dir / "nope.gz"), doctest::Contains((dir / "nope.gz").string().c_str()), Error);
  CHECK_THROWS_WITH_AS(read_idx(dir), doctest::Contains("not a regular file"), Error);
  CHECK_THROWS_AS(write_idx(p, IdxData{{2, 2}, {1, 2, 3}}), Error);
  fs::remove_all(dir);
}
