#include <regatta/core/io/npy.hpp>

#include <cassert>
#include <cstdint>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/bytes.hpp>
#include <regatta/core/io/detail/decode.hpp>
#include <regatta/core/io/detail/memory.hpp>
#include <regatta/core/io/file_bytes.hpp>

#include "python_literal.hpp"

namespace regatta::io {

namespace {

using detail::PyLiteral;

constexpr std::string_view magic = "\x93NUMPY";
constexpr std::size_t array_align = 64;             // numpy's ARRAY_ALIGN
constexpr std::size_t growth_axis_max_digits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS
constexpr std::string_view supported = "only float16, float32 and float64 arrays can be read";

struct Header {
  DType dtype = DType::f64;
  std::string other;              // numpy's name of an integer or boolean dtype listed without conversion
  bool other_big_endian = false;  // its byte order (irrelevant for 1-byte types)
  std::size_t item = 0;           // bytes per element
  bool fortran_order = false;
  std::vector<std::size_t> shape;
  std::size_t data_offset = 0;  // first byte after the header
};

// Maps a 'descr' value to a DType, or explains why it is not supported. With `list_others`, an integer or
// boolean dtype instead sets `other` (numpy's name) and `other_size` (bytes per element).
DType dtype_from_descr(const PyLiteral& descr, const std::string& source, bool list_others,
                       std::string& other, std::size_t& other_size, bool& other_big_endian) {
  if (descr.kind == PyLiteral::Kind::list)
    throw InputError(source, "structured dtype " + descr.repr() +
                                 " (a record with named fields) is not supported; " + std::string(supported));
  if (descr.kind != PyLiteral::Kind::string)
    throw InputError(source, "header 'descr' is " + descr.repr() + ", not a dtype string");
  const std::string& s = descr.text;
  std::string quoted(1, '\'');  // built by appending: GCC 12 warns falsely on "'" + std::string (PR 105651)
  quoted += detail::printable(s, 60);
  quoted += '\'';
  std::size_t i = 0;
  char order = '=';
  if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) order = s[i++];
  const char kind = i < s.size() ? s[i] : '\0';
  const std::string_view size = i < s.size() ? std::string_view(s).substr(i + 1) : std::string_view();
  const bool size_is_number = !size.empty() && size.find_first_not_of("0123456789") == std::string_view::npos;

  if (kind == 'f' && (size == "2" || size == "4" || size == "8")) {
    if (order == '>')
      throw InputError(source, "big-endian dtype " + quoted +
                                   " is not supported; convert with arr.astype('<f" + std::string(size) +
                                   "')");
    if (order == '|')
      throw InputError(source, "dtype " + quoted + " has no byte order ('|'), which is ambiguous for float" +
                                   std::to_string(8 * (size[0] - '0')) + "; write it with '<'");
    return size == "2" ? DType::f16 : size == "4" ? DType::f32 : DType::f64;
  }
  std::string what;  // the kind of data, and the numpy name where it helps
  std::string numpy_name;
  if (kind == 'f' && size_is_number) {
    what = "extended-precision float";
  } else if ((kind == 'i' || kind == 'u') && (size == "1" || size == "2" || size == "4" || size == "8")) {
    what = "integer";
    numpy_name = std::string(kind == 'u' ? "uint" : "int") + std::to_string(8 * (size[0] - '0'));
  } else if (kind == 'i' || kind == 'u') {
    what = "integer";
  } else if (kind == 'c') {
    what = "complex";
    if (size == "8" || size == "16") numpy_name = "complex" + std::string(size == "8" ? "64" : "128");
  } else if ((kind == 'b' || kind == '?') && (size.empty() || size == "1")) {
    what = "boolean";
    numpy_name = "bool";
  } else if (kind == 'b' || kind == '?') {
    what = "boolean";
  } else if (kind == 'O') {
    what = "object";
    numpy_name = "pickled Python objects";
  } else if (kind == 'U' || kind == 'S' || kind == 'a') {
    what = "string";
  } else if (kind == 'V') {
    what = "structured or raw-bytes";
  } else if (kind == 'M' || kind == 'm') {
    what = "datetime";
  } else {
    what = "unrecognised";
  }
  if (list_others && (what == "integer" || what == "boolean") && !numpy_name.empty()) {
    other = numpy_name;
    other_big_endian = order == '>';
    other_size = what == "boolean" ? 1 : static_cast<std::size_t>(size[0] - '0');
    return DType::f64;
  }
  if (!numpy_name.empty()) quoted += " (" + numpy_name + ")";
  throw InputError(source, what + " dtype " + quoted + " is not supported; " + std::string(supported));
}

std::vector<std::size_t> shape_from_literal(const PyLiteral& shape, const std::string& source) {
  if (shape.kind != PyLiteral::Kind::tuple)
    throw InputError(source, "header 'shape' is " + shape.repr() + ", not a tuple of integers");
  std::vector<std::size_t> dims;
  for (const PyLiteral& d : shape.items) {
    if (d.kind != PyLiteral::Kind::integer)
      throw InputError(source,
                       "header 'shape' " + shape.repr() + " contains " + d.repr() + ", not an integer");
    if (d.negative && (d.too_large || d.magnitude != 0))
      throw InputError(source, "negative dimension " + d.repr() + " in shape " + shape.repr());
    if (d.too_large || d.magnitude > static_cast<std::uint64_t>(INT64_MAX))
      throw InputError(source, "dimension " + d.repr() + " in shape " + shape.repr() + " is too large");
    dims.push_back(static_cast<std::size_t>(d.magnitude));
  }
  return dims;
}

Header parse_header(std::span<const std::byte> bytes, const std::string& source, bool list_others) {
  if (bytes.empty()) throw InputError(source, "file is empty; expected an .npy array");
  const std::string_view head = detail::as_chars(bytes.first(std::min(bytes.size(), magic.size())));
  if (head != magic.substr(0, head.size()))
    throw InputError(source, "not an .npy file (it does not start with the magic string \\x93NUMPY)");
  if (bytes.size() < magic.size() + 2)
    throw InputError(source,
                     "file is " + std::to_string(bytes.size()) + " bytes, too short for an .npy header");
  const auto major = std::to_integer<unsigned>(bytes[6]);
  const auto minor = std::to_integer<unsigned>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw InputError(source, "unsupported .npy format version " + std::to_string(major) + "." +
                                 std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = magic.size() + 2 + length_bytes;
  if (bytes.size() < prefix)
    throw InputError(source,
                     "file is " + std::to_string(bytes.size()) + " bytes, too short for an .npy header");
  const std::size_t header_length =
      major == 1 ? detail::load_le<std::uint16_t>(bytes, 8) : detail::load_le<std::uint32_t>(bytes, 8);
  if (header_length > bytes.size() - prefix)
    throw InputError(source, "truncated header: it claims " + std::to_string(header_length) +
                                 " bytes but the file has " + std::to_string(bytes.size() - prefix) +
                                 " after the preamble");

  std::string problem;
  const auto dict = detail::parse_py_literal(detail::as_chars(bytes.subspan(prefix, header_length)),
                                             /*allow_long_suffix=*/major < 3, problem);
  if (!dict) throw InputError(source, "header is not a valid Python literal: " + problem);
  if (dict->kind != PyLiteral::Kind::dict) throw InputError(source, "header is not a Python dict");

  const PyLiteral* descr = nullptr;
  const PyLiteral* fortran = nullptr;
  const PyLiteral* shape = nullptr;
  for (std::size_t i = 0; i < dict->items.size(); i += 2) {
    const PyLiteral& key = dict->items[i];
    const PyLiteral* value = &dict->items[i + 1];
    const PyLiteral** slot = key.kind != PyLiteral::Kind::string ? nullptr
                             : key.text == "descr"               ? &descr
                             : key.text == "fortran_order"       ? &fortran
                             : key.text == "shape"               ? &shape
                                                                 : nullptr;
    if (slot == nullptr)
      throw InputError(source, "unexpected key " + key.repr() +
                                   " in header (expected exactly 'descr', 'fortran_order', 'shape')");
    if (*slot != nullptr) throw InputError(source, "duplicate key " + key.repr() + " in header");
    *slot = value;
  }
  if (!descr || !fortran || !shape)
    throw InputError(source, std::string("header has no '") +
                                 (!descr     ? "descr"
                                  : !fortran ? "fortran_order"
                                             : "shape") +
                                 "' key");
  if (fortran->kind != PyLiteral::Kind::boolean)
    throw InputError(source, "header 'fortran_order' is " + fortran->repr() + ", not True or False");

  Header h;
  h.dtype = dtype_from_descr(*descr, source, list_others, h.other, h.item, h.other_big_endian);
  if (h.other.empty()) h.item = dtype_size(h.dtype);
  h.fortran_order = fortran->flag;
  h.shape = shape_from_literal(*shape, source);
  h.data_offset = prefix + header_length;
  return h;
}

// Reorders Fortran-order values (first index fastest) into C order (last index fastest).
std::vector<double> fortran_to_c(const std::vector<double>& f, const std::vector<std::size_t>& shape) {
  const std::size_t rank = shape.size();
  if (rank < 2 || f.empty()) return f;
  std::vector<std::size_t> f_stride(rank);
  std::size_t stride = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    f_stride[k] = stride;
    stride *= shape[k];
  }
  std::vector<double> c(f.size());
  std::vector<std::size_t> index(rank, 0);
  std::size_t offset = 0;  // Fortran offset of `index`
  for (std::size_t i = 0; i < c.size(); ++i) {
    c[i] = f[offset];
    for (std::size_t k = rank; k-- > 0;) {  // increment the C-order multi-index
      if (++index[k] < shape[k]) {
        offset += f_stride[k];
        break;
      }
      offset -= (shape[k] - 1) * f_stride[k];
      index[k] = 0;
    }
  }
  return c;
}

// The values of an integer array as doubles: exact, or InputError at the first entry of magnitude above 2^53.
std::vector<double> integers_exactly(std::span<const std::byte> data, const Header& h, std::size_t count,
                                     const std::string& source) {
  const bool is_signed = h.other.rfind("int", 0) == 0;
  detail::require_memory(count * sizeof(double), source, "the array as float64");
  std::vector<double> out(count);
  constexpr std::uint64_t exact_limit = std::uint64_t{1} << 53;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t raw = 0;
    for (std::size_t b = 0; b < h.item; ++b) {
      const std::size_t at = i * h.item + (h.other_big_endian ? h.item - 1 - b : b);
      raw |= std::uint64_t(std::to_integer<unsigned char>(data[at])) << (8 * b);
    }
    bool negative = false;
    std::uint64_t magnitude = raw;
    if (is_signed && h.item < 8 && (raw >> (8 * h.item - 1)) != 0) raw |= ~std::uint64_t{0} << (8 * h.item);
    if (is_signed && (raw >> 63) != 0) {
      negative = true;
      magnitude = ~raw + 1;
    }
    if (magnitude > exact_limit)
      throw InputError(source, "entry " + std::to_string(i) + " (" + h.other +
                                   ") exceeds 2^53 in magnitude and has no exact float64 value");
    out[i] = negative ? -double(magnitude) : double(magnitude);
  }
  return out;
}

}  // namespace

Array parse_npy(std::span<const std::byte> bytes, std::string_view source_view, NonFloat non_float) {
  const std::string source(source_view);
  const Header h = parse_header(bytes, source, non_float != NonFloat::reject);
  const std::size_t item = h.item;
  const std::string type_name = h.other.empty() ? std::string(dtype_name(h.dtype)) : h.other;
  const auto count = detail::checked_product(h.shape);
  const auto needed = count ? detail::checked_mul(*count, item) : std::nullopt;
  if (!needed)
    throw InputError(source, "shape " + shape_repr(h.shape) + " of " + type_name +
                                 " is too large (its byte count overflows)");
  const std::size_t present = bytes.size() - h.data_offset;
  if (*needed != present)
    throw InputError(source, "shape " + shape_repr(h.shape) + " of " + type_name + " needs " +
                                 std::to_string(*needed) + " bytes of data but the file has " +
                                 std::to_string(present));
  if (const auto big = detail::oversized_dimension(h.shape))
    throw InputError(source, "shape " + shape_repr(h.shape) + " is empty but has dimension " +
                                 std::to_string(*big) + ", more than any array read may have (" +
                                 std::to_string(detail::max_array_dimension) + ")");
  Array a;
  a.shape = h.shape;
  a.source_dtype = h.dtype;
  a.source = source;
  if (!h.other.empty()) {
    if (non_float == NonFloat::integers && h.other != "bool") {
      a.data = integers_exactly(bytes.subspan(h.data_offset), h, *count, source);
      if (h.fortran_order) a.data = fortran_to_c(a.data, a.shape);
      return a;
    }
    a.unconverted_dtype = h.other;  // listed with its shape; not converted
    return a;
  }
  detail::require_memory(*count * sizeof(double), source, "the array as float64");
  a.data = detail::decode_le(bytes.subspan(h.data_offset), h.dtype, *count);
  if (h.fortran_order) a.data = fortran_to_c(a.data, a.shape);
  return a;
}

Array read_npy(const std::filesystem::path& path) {
  return parse_npy(read_file_bytes(path), detail::printable(path.string(), 4096));
}

std::vector<std::byte> encode_npy(const Array& a, DType as) {
  if (as != DType::f32 && as != DType::f64)
    throw InputError(a.source,
                     "cannot write " + std::string(dtype_name(as)) + " to .npy (float32 or float64 only)");
  assert(detail::checked_product(a.shape) == a.data.size());
  // The header exactly as numpy 1.24 writes it (numpy/lib/format.py, _write_array_header).
  std::string header = std::string("{'descr': '") + (as == DType::f64 ? "<f8" : "<f4") +
                       "', 'fortran_order': False, 'shape': " + shape_repr(a.shape) + ", }";
  if (!a.shape.empty()) {
    const std::size_t digits = std::to_string(a.shape[0]).size();
    header.append(digits < growth_axis_max_digits ? growth_axis_max_digits - digits : 0, ' ');
  }
  // Pad with spaces and a final newline so that the data starts at a multiple of 64 bytes (numpy's
  // _wrap_header); version 1.0 unless the padded header overflows its 16-bit length, then 2.0.
  const std::size_t hlen = header.size() + 1;
  auto padding_for = [&](std::size_t prefix) { return array_align - (prefix + hlen) % array_align; };
  const std::size_t length_bytes = hlen + padding_for(magic.size() + 4) <= 0xFFFF ? 2 : 4;
  const std::size_t prefix = magic.size() + 2 + length_bytes;
  const std::size_t padding = padding_for(prefix);
  header.append(padding, ' ');
  header += '\n';

  std::vector<std::byte> out;
  out.reserve(prefix + header.size() + a.data.size() * dtype_size(as));
  for (char c : magic) out.push_back(static_cast<std::byte>(c));
  out.push_back(std::byte{length_bytes == 2 ? std::uint8_t{1} : std::uint8_t{2}});
  out.push_back(std::byte{0});
  if (length_bytes == 2)
    detail::store_le(out, static_cast<std::uint16_t>(header.size()));
  else
    detail::store_le(out, static_cast<std::uint32_t>(header.size()));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  detail::encode_le(a.data, as, out);
  return out;
}

void write_npy(const std::filesystem::path& path, const Array& a, DType as) {
  write_file_atomic(path, encode_npy(a, as));
}

void write_npy(const std::filesystem::path& path, const Matrix<double>& m, DType as) {
  write_npy(path, from_matrix(m, path.string()), as);
}

}  // namespace regatta::io
