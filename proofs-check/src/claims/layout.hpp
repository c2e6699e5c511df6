#pragma once
// Internal: the named layout of a claim point. A point is a vector k of discrete coordinates and a vector x
// of continuous ones; instead of decoding both by position (k.at(2), x[base + d + 2·d·d]) a claim names them
// once — Keys for k, Layout for the consecutive blocks of x — and reads, samples, checks and describes its
// points through the names.
//
//   const Keys keys{"m", "d", "mode"};
//   Layout layout(const Point& p) const {
//     const long m = keys.of(p, "m"), d = keys.of(p, "d");
//     return Layout().add("pair", long(mf::pair_size(m, d))).add("A", d, d).add("V", d, d);
//   }
//   ... const Layout l = layout(pt); l.check(pt); const Matrix<S> A = l.matrix<S>(pt, "A");
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/error.hpp>
#include <regatta/proofs/claim.hpp>
#include <regatta/proofs/detail/numeric.hpp>

namespace regatta::proofs::claims {

/// The names of a point's discrete coordinates k, in order.
class Keys {
 public:
  Keys(std::initializer_list<const char*> names) : names_(names.begin(), names.end()) {}

  /// k[i] for the i-th name; throws InputError("point", …) when k is shorter (a contract of the claim, so
  /// never for the points it samples).
  long of(const Point& p, std::string_view name) const {
    const std::size_t i = index(name);
    if (i >= p.k.size()) throw InputError("point", "has no discrete coordinate " + std::string(name));
    return p.k[i];
  }
  std::size_t index(std::string_view name) const {
    for (std::size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return i;
    throw InputError("point layout", "no key named " + std::string(name));
  }
  std::size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
};

/// The name of block i of a repeated kind (per-head weights): indexed("WQ", 1) = "WQ_1".
inline std::string indexed(std::string_view name, long i) {
  return std::string(name) + "_" + std::to_string(i);
}

/// Consecutive named blocks of a point's continuous coordinates x; a block is a rows×cols matrix stored
/// row-major (a vector: cols = 1).
class Layout {
 public:
  /// Appends a block of rows·cols coordinates.
  Layout& add(std::string name, long rows, long cols = 1) {
    blocks_.push_back(Block{std::move(name), rows, cols, size_});
    size_ += static_cast<std::size_t>(rows * cols);
    return *this;
  }
  /// Offset of the first coordinate of a block in x.
  std::size_t at(std::string_view name) const { return block(name).at; }
  /// Coordinates in all (the size of x).
  std::size_t size() const { return size_; }
  /// Throws InputError("point", "wrong size") unless x has exactly size() coordinates.
  void check(const Point& p) const {
    if (p.x.size() != size_) throw InputError("point", "wrong size");
  }
  /// A block as a matrix, lifted exactly to S.
  template <class S>
  Matrix<S> matrix(const Point& p, std::string_view name) const {
    const Block& b = block(name);
    Matrix<S> m(b.rows, b.cols);
    for (long i = 0; i < b.rows; ++i)
      for (long j = 0; j < b.cols; ++j)
        m(i, j) = num::lift<S>(p.x.at(b.at + static_cast<std::size_t>(i * b.cols + j)));
    return m;
  }
  /// Coordinate i (row-major) of a block, as stored.
  double raw(const Point& p, std::string_view name, std::size_t i = 0) const {
    return p.x.at(block(name).at + i);
  }
  /// A block as a vector (its coordinates in order), lifted exactly to S.
  template <class S>
  Vector<S> vector(const Point& p, std::string_view name) const {
    const Block& b = block(name);
    Vector<S> v(b.rows * b.cols);
    for (long i = 0; i < v.size(); ++i) v(i) = num::lift<S>(p.x.at(b.at + static_cast<std::size_t>(i)));
    return v;
  }
  /// Appends rows·cols values of `next()` to x as block `name`, which must be the next block (sampling
  /// writes the blocks in layout order).
  template <class F>
  void fill(std::vector<double>& x, std::string_view name, F next) const {
    const Block& b = block(name);
    if (x.size() != b.at)
      throw InputError("point layout", "block " + std::string(name) + " filled out of order");
    for (long i = 0; i < b.rows * b.cols; ++i) x.push_back(next());
  }
  /// Appends `values` to x as block `name` (exactly its rows·cols coordinates, in order), which must be the
  /// next block.
  void fill(std::vector<double>& x, std::string_view name, const std::vector<double>& values) const {
    const Block& b = block(name);
    if (values.size() != static_cast<std::size_t>(b.rows * b.cols))
      throw InputError("point layout", "block " + std::string(name) + " given the wrong number of values");
    std::size_t i = 0;
    fill(x, name, [&] { return values[i++]; });
  }
  /// A block's coordinates in order, as stored (coordinates beyond x read as 0, as in rows).
  std::vector<double> values(const Point& p, std::string_view name) const {
    const Block& b = block(name);
    std::vector<double> out;
    for (std::size_t i = 0; i < static_cast<std::size_t>(b.rows * b.cols); ++i)
      out.push_back(b.at + i < p.x.size() ? p.x[b.at + i] : 0.0);
    return out;
  }
  /// Every block by name, as rows of numbers (counterexample files).
  nlohmann::json describe(const Point& p) const {
    nlohmann::json out = nlohmann::json::object();
    for (const Block& b : blocks_) out[b.name] = rows(p, b);
    return out;
  }
  /// One block as rows of numbers (coordinates beyond x read as 0).
  nlohmann::json rows(const Point& p, std::string_view name) const { return rows(p, block(name)); }

 private:
  struct Block {
    std::string name;
    long rows = 0, cols = 1;
    std::size_t at = 0;
  };
  const Block& block(std::string_view name) const {
    for (const Block& b : blocks_)
      if (b.name == name) return b;
    throw InputError("point layout", "no block named " + std::string(name));
  }
  static nlohmann::json rows(const Point& p, const Block& b) {
    nlohmann::json out = nlohmann::json::array();
    for (long i = 0; i < b.rows; ++i) {
      nlohmann::json row = nlohmann::json::array();
      for (long j = 0; j < b.cols; ++j) {
        const std::size_t at = b.at + static_cast<std::size_t>(i * b.cols + j);
        row.push_back(at < p.x.size() ? p.x[at] : 0.0);
      }
      out.push_back(row);
    }
    return out;
  }
  std::vector<Block> blocks_;
  std::size_t size_ = 0;
};

}  // namespace regatta::proofs::claims
