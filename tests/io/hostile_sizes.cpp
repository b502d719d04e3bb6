// tests/io/hostile_sizes.cpp: files that declare sizes they do not hold (2^40 elements, a million dims, a LoD
// offset past the rows, an IDX or checkpoint header promising more than follows) are refused with an
// oar::Error before anything of the declared size is allocated: the largest allocation stays small.
#include "pch.hpp"
#include "support/heap.hpp"

using namespace oar;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += char((v >> (8 * i)) & 0xff);
}
void varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += char((v & 0x7f) | 0x80);
  out += char(v);
}

/// Fluid's tensor stream with the given LoD, a TensorDesc of f32 and `dims`, and `data_bytes` bytes after it.
std::string stream(const std::vector<std::vector<uint64_t>>& lod, const std::vector<uint64_t>& dims, size_t data_bytes) {
  std::string s;
  put_le(s, 0, 4);  // version
  put_le(s, lod.size(), 8);
  for (auto& level : lod) {
    put_le(s, level.size() * 8, 8);
    for (auto o : level) put_le(s, o, 8);
  }
  put_le(s, 0, 4);  // tensor version
  std::string desc = "\x08\x05";  // data_type = FP32
  for (auto d : dims) desc += '\x10', varint(desc, d);
  put_le(s, desc.size(), 4);
  return s + desc + std::string(data_bytes, '\0');
}

/// The error `f` throws, having checked that no tensor of more than 1 MB and no heap block of more than
/// `heap_limit` bytes was allocated meanwhile.
template <class F>
std::string refused(F&& f, size_t heap_limit = size_t(1) << 20) {
  reset_peak_memory();
  const int64_t before = memory_stats().peak.load();
  oar_test::largest_allocation = 0;
  std::string why;
  try {
    f();
    FAIL("accepted a file that declares more than it holds");
  } catch (const Error& e) {
    why = e.what();
  }
  CHECK_MESSAGE(memory_stats().peak.load() - before < (int64_t(1) << 20), "tensor memory grew by " << memory_stats().peak.load() - before);
  CHECK_MESSAGE(oar_test::largest_allocation.load() < heap_limit, "a heap block of " << oar_test::largest_allocation.load() << " bytes");
  return why;
}

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("oar-hostile-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}

}  // namespace

TEST_CASE("hostile sizes: a tensor stream declaring 2^40 elements, a million dims or a LoD past its rows") {
  std::string huge = stream({}, {uint64_t(1) << 20, uint64_t(1) << 20}, 16);
  auto why = refused([&] {
    std::string_view in = huge;
    io::read_lod_tensor(in, "huge");
  });
  CHECK(contains(why, "huge"));
  CHECK(contains(why, "needs more than the 16 bytes left"));

  // A million dims of 1: the desc's size follows the input (2 MB), so its parse may take a few MB, never 8 MB x dims.
  std::string many = stream({}, std::vector<uint64_t>(1000000, 1), 4);
  why = refused([&] {
    std::string_view in = many;
    io::read_lod_tensor(in, "many dims");
  }, size_t(64) << 20);
  CHECK(contains(why, "many dims"));
  CHECK(contains(why, "dims"));

  // Empty, but its other dims multiply past 2^63 (code that counts a shape's elements would overflow).
  std::string empty = stream({}, {0, uint64_t(1) << 40, uint64_t(1) << 40}, 0);
  why = refused([&] {
    std::string_view in = empty;
    io::read_lod_tensor(in, "empty");
  });
  CHECK(contains(why, "multiply past 2^63"));

  std::string past = stream({{0, 2, 1000}}, {3, 1}, 12);
  why = refused([&] {
    std::string_view in = past;
    io::read_lod_tensor(in, "lod past the rows");
  });
  CHECK(contains(why, "corrupted LoD"));
  std::string levels = stream({}, {1}, 4);
  levels.replace(4, 8, std::string("\xff\xff\xff\xff\xff\xff\xff\x0f", 8));  // 2^60 LoD levels
  why = refused([&] {
    std::string_view in = levels;
    io::read_lod_tensor(in, "levels");
  });
  CHECK(contains(why, "LoD levels cannot fit"));
}

TEST_CASE("hostile sizes: an IDX header of 2^62 bytes and a checkpoint section longer than its file") {
  std::string idx = {0, 0, 8, 3};  // unsigned bytes, rank 3
  for (int i = 0; i < 3; ++i) idx += std::string("\x7f\xff\xff\xff", 4);
  idx += std::string(64, '\x01');
  const fs::path ip = scratch("huge.idx");
  std::ofstream(ip, std::ios::binary).write(idx.data(), std::streamsize(idx.size()));
  auto why = refused([&] { io::read_idx(ip); });
  CHECK(contains(why, ip.string()));

  std::string ck("OARCKPT\n", 8);
  put_le(ck, 1, 8);                      // version
  put_le(ck, 4, 8), ck += "meta";        // a section name
  put_le(ck, uint64_t(1) << 60, 8);      // and a body of 2^60 bytes
  ck += "a=b\n";
  uint64_t h = 1469598103934665603ull;  // the format's FNV-1a over everything before it
  for (unsigned char c : ck) h = (h ^ c) * 1099511628211ull;
  put_le(ck, h, 8);
  const fs::path cp = scratch("huge.ckpt");
  std::ofstream(cp, std::ios::binary).write(ck.data(), std::streamsize(ck.size()));
  why = refused([&] { io::load_checkpoint(cp); }, size_t(4) << 10 << 10);
  CHECK(contains(why, cp.string()));
  fs::remove_all(ip.parent_path());
}
