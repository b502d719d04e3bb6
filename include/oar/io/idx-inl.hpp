// oar/io/idx-inl.hpp: the implementation of idx.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/io/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "oar/core/error.hpp"

namespace oar::io {

OAR_FUNC int64_t IdxData::numel() const {
  int64_t n = 1;
  for (int d : dims) n *= d;
  return n;
}

namespace detail {

/// A gzFile that closes itself.
struct GzFile {
  gzFile f = nullptr;
  explicit GzFile(gzFile g) : f(g) {}
  ~GzFile() {
    if (f) gzclose(f);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
};

/// Reads up to `n` bytes; returns how many were read (fewer only at the end of the data).
inline size_t gz_read_some(gzFile f, void* dst, size_t n, const std::string& path) {
  size_t got = 0;
  auto* p = static_cast<char*>(dst);
  while (got < n) {
    unsigned chunk = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
    int r = gzread(f, p + got, chunk);
    if (r < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      throw Error(fmt::format("IDX file '{}' is corrupted or truncated: {} (after {} bytes of data)", path,
                              msg ? msg : "read error", got));
    }
    if (r == 0) {
      // NOTE: gzread reports a stream cut short (even in its trailer) as end-of-data plus Z_BUF_ERROR.
      int errnum = Z_OK;
      const char* msg = gzerror(f, &errnum);
      if (errnum != Z_OK)
        throw Error(fmt::format("IDX file '{}' is corrupted or truncated: {} (after {} bytes of data)", path,
                                msg && *msg ? msg : "read error", got));
      break;
    }
    got += size_t(r);
  }
  return got;
}

}  // namespace detail

OAR_FUNC IdxData read_idx(const std::filesystem::path& path, uint32_t expect_magic) {
  const std::string p = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(fmt::format("IDX file '{}' does not exist or is not a regular file", p));
  detail::GzFile gz(gzopen(p.c_str(), "rb"));
  if (!gz.f) throw Error(fmt::format("cannot open IDX file '{}': {}", p, std::strerror(errno)));
  gzbuffer(gz.f, 1 << 18);

  unsigned char head[4];
  size_t got = detail::gz_read_some(gz.f, head, 4, p);
  if (got < 4) throw Error(fmt::format("IDX file '{}' is truncated: {} bytes, the header needs at least 4", p, got));
  uint32_t magic = (uint32_t(head[0]) << 24) | (uint32_t(head[1]) << 16) | (uint32_t(head[2]) << 8) | head[3];
  int rank = head[3];
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || rank < 1 || rank > 4)
    throw Error(fmt::format("IDX file '{}' has a bad magic number 0x{:08x} (expected 0x0801 labels or 0x0803 images: "
                            "unsigned bytes, rank 1..4)", p, magic));
  if (expect_magic != 0 && magic != expect_magic)
    throw Error(fmt::format("IDX file '{}' has magic 0x{:04x} but 0x{:04x} was expected ({})", p, magic, expect_magic,
                            expect_magic == idx_magic_labels ? "labels" : expect_magic == idx_magic_images ? "images" : "IDX"));

  unsigned char dimbuf[16];
  got = detail::gz_read_some(gz.f, dimbuf, size_t(4 * rank), p);
  if (got < size_t(4 * rank))
    throw Error(fmt::format("IDX file '{}' is truncated in its header: {} of the {} bytes of dims", p, got, 4 * rank));
  IdxData out;
  uint64_t numel = 1;
  for (int i = 0; i < rank; ++i) {
    const unsigned char* b = dimbuf + 4 * i;
    uint32_t d = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
    if (d > uint32_t(INT32_MAX)) throw Error(fmt::format("IDX file '{}' has an impossible dim {} = {}", p, i, d));
    out.dims.push_back(int(d));
    numel = d == 0 ? 0 : numel;
    if (numel != 0 && numel > (uint64_t(1) << 40) / d)
      throw Error(fmt::format("IDX file '{}' declares an impossible size (dim {} = {})", p, i, d));
    numel *= d;
  }

  // NOTE: the allocation grows with the data actually read, so a corrupted header cannot ask for terabytes.
  const size_t want = size_t(numel);
  size_t have = 0;
  out.data.resize(std::min<size_t>(want, size_t(1) << 24));
  while (have < want) {
    if (have == out.data.size()) out.data.resize(std::min(want, out.data.size() * 2));
    size_t n = detail::gz_read_some(gz.f, out.data.data() + have, out.data.size() - have, p);
    have += n;
    if (n == 0) break;
  }
  if (have < want)
    throw Error(fmt::format("IDX file '{}' is truncated: the header declares {} data bytes ({}), the file holds {}", p,
                            want, fmt::join(out.dims, " x "), have));
  unsigned char extra;
  if (detail::gz_read_some(gz.f, &extra, 1, p) != 0)
    throw Error(fmt::format("IDX file '{}' is corrupted: it holds more than the {} data bytes its header declares", p, want));
  return out;
}

OAR_FUNC void write_idx(const std::filesystem::path& path, const IdxData& d, bool gzip) {
  OAR_CHECK(!d.dims.empty() && d.dims.size() <= 4, "write_idx '{}': rank {} is not in 1..4", path.string(), d.dims.size());
  OAR_CHECK(d.numel() == int64_t(d.data.size()), "write_idx '{}': dims {} need {} bytes, data has {}", path.string(),
            fmt::join(d.dims, " x "), d.numel(), d.data.size());
  std::string bytes = {0, 0, 0x08, char(d.dims.size())};
  for (int v : d.dims) {
    uint32_t u = uint32_t(v);
    bytes += {char(u >> 24), char(u >> 16), char(u >> 8), char(u)};
  }
  bytes.append(reinterpret_cast<const char*>(d.data.data()), d.data.size());
  const std::string p = path.string();
  detail::GzFile f(gzopen(p.c_str(), gzip ? "wb6" : "wbT"));
  if (!f.f) throw Error(fmt::format("cannot write IDX file '{}': {}", p, std::strerror(errno)));
  size_t off = 0;
  while (off < bytes.size()) {
    unsigned chunk = unsigned(std::min<size_t>(bytes.size() - off, size_t(1) << 30));
    int w = gzwrite(f.f, bytes.data() + off, chunk);
    if (w <= 0) throw Error(fmt::format("cannot write IDX file '{}'", p));
    off += size_t(w);
  }
  gzFile g = f.f;
  f.f = nullptr;
  if (gzclose(g) != Z_OK) throw Error(fmt::format("cannot finish IDX file '{}'", p));
}

}  // namespace oar::io
