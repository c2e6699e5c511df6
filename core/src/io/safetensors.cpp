#include <regatta/core/io/safetensors.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/bytes.hpp>
#include <regatta/core/io/detail/decode.hpp>
#include <regatta/core/io/detail/memory.hpp>
#include <regatta/core/io/file_bytes.hpp>

namespace regatta::io {

namespace {

using nlohmann::json;

/// The safetensors dtypes listed without conversion, with numpy's name and the bytes per element.
struct OtherDtype {
  std::string_view tag, name;
  std::size_t size;
};
constexpr OtherDtype other_dtypes[] = {{"BOOL", "bool", 1},
                                       {"U8", "uint8", 1},
                                       {"I8", "int8", 1},
                                       {"U16", "uint16", 2},
                                       {"I16", "int16", 2},
                                       {"U32", "uint32", 4},
                                       {"I32", "int32", 4},
                                       {"U64", "uint64", 8},
                                       {"I64", "int64", 8},
                                       {"F8_E4M3", "float8_e4m3fn", 1},
                                       {"F8_E5M2", "float8_e5m2", 1}};

struct TensorEntry {
  std::string name;
  std::string label;  // "tensor 'name'" for messages
  DType dtype = DType::f64;
  std::string other;     // numpy's name of a dtype listed without conversion; empty for the float types
  std::size_t item = 0;  // bytes per element
  std::vector<std::size_t> shape;
  std::size_t count = 0;
  std::size_t begin = 0, end = 0;
};

std::string_view safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
  }
  return "?";
}

std::string offsets_repr(std::size_t begin, std::size_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

/// Thrown by HeaderSax to stop parsing at once.
struct HeaderLimit {
  std::string problem;
};

/// nlohmann's DOM builder behind a SAX filter that enforces the header limits while parsing: nesting depth
/// (safetensors_max_header_depth), entry count (safetensors_max_tensors) and unique tensor names. Nothing
/// deeper than the limit is ever built, copied, printed or destroyed, so an 80,000-deep array cannot exhaust
/// the stack. (json::parse with a callback would do the same checks but is quadratic in the number of
/// entries: after each object it scans its parent for discarded values.)
class HeaderSax {
 public:
  explicit HeaderSax(json& root) : dom_(root) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) { return enter() && dom_.start_object(n); }
  bool end_object() { return leave() && dom_.end_object(); }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() { return leave() && dom_.end_array(); }
  bool key(json::string_t& k) {
    if (depth_ == 1) {
      if (++entries_ > safetensors_max_tensors + 1)  // + 1: "__metadata__"
        throw HeaderLimit{"header lists more than the limit of " + std::to_string(safetensors_max_tensors) +
                          " tensors"};
      if (!names_.insert(k).second && duplicate_.empty()) duplicate_ = k;
    }
    return dom_.key(k);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);  // throws e
  }

  const std::string& duplicate() const { return duplicate_; }

 private:
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::size_t depth_ = 0;
  std::size_t entries_ = 0;
  std::unordered_set<std::string> names_;
  std::string duplicate_;

  bool enter() {
    if (++depth_ > safetensors_max_header_depth)
      throw HeaderLimit{"header nests arrays or objects more than " +
                        std::to_string(safetensors_max_header_depth) +
                        " levels deep (a safetensors header needs 3)"};
    return true;
  }
  bool leave() {
    --depth_;
    return true;
  }
};

/// Parses the header JSON; rejects syntax errors, invalid UTF-8, hostile nesting or entry counts (see
/// HeaderSax) and duplicate tensor names, in time linear in the header's length.
json parse_header_json(std::string_view text, const std::string& source) {
  if (text.empty() || text.front() != '{') throw InputError(source, "header is not a JSON object");
  json header;
  HeaderSax sax(header);
  try {
    json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const HeaderLimit& limit) {
    throw InputError(source, limit.problem);
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (const auto bracket = what.find("] ");
        what.starts_with("[json.exception") && bracket != std::string::npos)
      what.erase(0, bracket + 2);
    throw InputError(source, "header is not valid JSON: " + detail::printable(what));
  }
  if (!header.is_object()) throw InputError(source, "header is not a JSON object");
  if (!sax.duplicate().empty())
    throw InputError(source, "header names tensor '" + detail::printable(sax.duplicate()) + "' twice");
  return header;
}

TensorEntry parse_entry(const std::string& name, const json& info, std::size_t buffer_size,
                        const std::string& source) {
  TensorEntry t;
  t.name = name;
  t.label = "tensor '" + detail::printable(name) + "'";
  auto fail = [&](const std::string& problem) -> InputError {
    return InputError(source, t.label + " " + problem);
  };
  if (!info.is_object()) throw fail("is described by " + std::string(info.type_name()) + ", not an object");

  const auto dtype = info.find("dtype");
  if (dtype == info.end() || !dtype->is_string()) throw fail("has no string 'dtype'");
  const auto& d = dtype->get_ref<const std::string&>();
  if (d == "F64")
    t.dtype = DType::f64;
  else if (d == "F32")
    t.dtype = DType::f32;
  else if (d == "F16")
    t.dtype = DType::f16;
  else if (d == "BF16")
    t.dtype = DType::bf16;
  else {
    const auto other = std::find_if(std::begin(other_dtypes), std::end(other_dtypes),
                                    [&](const OtherDtype& o) { return o.tag == d; });
    if (other == std::end(other_dtypes))
      throw fail("has dtype " + detail::printable(d, 40) +
                 ", which is not a known safetensors dtype (F64, F32, F16 and BF16 are read; BOOL, U8-U64, "
                 "I8-I64, F8_E4M3 and F8_E5M2 are listed)");
    t.other = other->name;
    t.item = other->size;
  }
  if (t.other.empty()) t.item = dtype_size(t.dtype);

  static_assert(sizeof(std::size_t) == sizeof(std::uint64_t));
  auto unsigned_value = [&](const json& value, const std::string& field) -> std::size_t {
    if (value.is_number_unsigned()) return value.get<std::uint64_t>();
    if (value.is_number_integer()) throw fail("has negative value " + value.dump() + " in '" + field + "'");
    throw fail("has '" + field + "' holding " + detail::printable(value.dump(), 60) +
               ", not a non-negative integer");
  };
  const auto shape = info.find("shape");
  if (shape == info.end() || !shape->is_array()) throw fail("has no array 'shape'");
  if (shape->size() > safetensors_max_rank)
    throw fail("has a shape of " + std::to_string(shape->size()) + " dimensions, more than the limit of " +
               std::to_string(safetensors_max_rank));
  for (const json& dim : *shape) t.shape.push_back(unsigned_value(dim, "shape"));
  const auto offsets = info.find("data_offsets");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2)
    throw fail("has no 'data_offsets' pair [begin, end]");
  t.begin = unsigned_value((*offsets)[0], "data_offsets");
  t.end = unsigned_value((*offsets)[1], "data_offsets");

  if (t.end < t.begin)
    throw fail("has data_offsets " + offsets_repr(t.begin, t.end) + " with end before begin");
  if (t.end > buffer_size)
    throw fail("has data_offsets " + offsets_repr(t.begin, t.end) + " outside the data buffer of " +
               std::to_string(buffer_size) + " bytes");
  const auto count = detail::checked_product(t.shape);
  const auto needed = count ? detail::checked_mul(*count, t.item) : std::nullopt;
  if (!needed) throw fail("has shape " + shape_repr(t.shape) + " whose byte count overflows");
  if (*needed != t.end - t.begin)
    throw fail("has shape " + shape_repr(t.shape) + " of " + d + ", which needs " + std::to_string(*needed) +
               " bytes, but data_offsets " + offsets_repr(t.begin, t.end) + " span " +
               std::to_string(t.end - t.begin));
  if (const auto big = detail::oversized_dimension(t.shape))
    throw fail("has shape " + shape_repr(t.shape) + ", empty but with dimension " + std::to_string(*big) +
               ", more than any array read may have (" + std::to_string(detail::max_array_dimension) + ")");
  t.count = *count;
  return t;
}

void check_metadata(const json& metadata, const std::string& source) {
  bool ok = metadata.is_object();
  if (ok)
    for (const auto& [key, value] : metadata.items()) ok = ok && value.is_string();
  if (!ok) throw InputError(source, "'__metadata__' must be an object mapping strings to strings");
}

/// The tensors must tile [0, buffer_size) exactly, as the reference implementation requires.
void check_tiling(std::vector<TensorEntry>& entries, std::size_t buffer_size, const std::string& source) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  std::size_t covered = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& t : entries) {
    if (t.begin < covered)
      throw InputError(source, t.label + " (bytes " + offsets_repr(t.begin, t.end) + ") overlaps " +
                                   previous->label + " (bytes " +
                                   offsets_repr(previous->begin, previous->end) + ")");
    if (t.begin > covered)
      throw InputError(source, "bytes [" + std::to_string(covered) + ", " + std::to_string(t.begin) +
                                   ") of the data buffer belong to no tensor");
    covered = t.end;
    previous = &t;
  }
  if (covered != buffer_size)
    throw InputError(source, "bytes [" + std::to_string(covered) + ", " + std::to_string(buffer_size) +
                                 ") of the data buffer belong to no tensor");
}

}  // namespace

std::map<std::string, Array> parse_safetensors(std::span<const std::byte> bytes,
                                               std::string_view source_view) {
  const std::string source(source_view);
  if (bytes.size() < 8)
    throw InputError(source, "file is " + std::to_string(bytes.size()) +
                                 " bytes, too short for a safetensors header (8-byte length, then JSON)");
  const std::uint64_t header_length = detail::load_le<std::uint64_t>(bytes, 0);
  if (header_length > safetensors_max_header_bytes)
    throw InputError(source, "header length " + std::to_string(header_length) + " exceeds the limit of " +
                                 std::to_string(safetensors_max_header_bytes) + " bytes");
  if (header_length > bytes.size() - 8)
    throw InputError(source, "header length " + std::to_string(header_length) + " exceeds the " +
                                 std::to_string(bytes.size() - 8) + " bytes that follow it");
  const json header =
      parse_header_json(detail::as_chars(bytes.subspan(8, static_cast<std::size_t>(header_length))), source);
  const auto buffer = bytes.subspan(8 + static_cast<std::size_t>(header_length));

  std::vector<TensorEntry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__")
      check_metadata(info, source);
    else
      entries.push_back(parse_entry(name, info, buffer.size(), source));
  }
  check_tiling(entries, buffer.size(), source);

  std::size_t converted_elements = 0;  // bounded by the buffer's size, so this cannot overflow
  for (const TensorEntry& t : entries)
    if (t.other.empty()) converted_elements += t.count;
  detail::require_memory(converted_elements * sizeof(double), source, "the tensors as float64");
  std::map<std::string, Array> arrays;
  for (const TensorEntry& t : entries) {
    Array a;
    a.shape = t.shape;
    a.source_dtype = t.dtype;
    a.source = source + ":" + detail::printable(t.name);
    if (!t.other.empty())
      a.unconverted_dtype = t.other;  // listed with its shape; its bytes were checked but are not converted
    else
      a.data = detail::decode_le(buffer.subspan(t.begin, t.end - t.begin), t.dtype, t.count);
    arrays.emplace(t.name, std::move(a));
  }
  return arrays;
}

std::map<std::string, Array> read_safetensors(const std::filesystem::path& path) {
  return parse_safetensors(read_file_bytes(path), detail::printable(path.string(), 4096));
}

std::vector<std::byte> encode_safetensors(const std::map<std::string, Array>& arrays, DType as) {
  if (as != DType::f32 && as != DType::f64)
    throw InputError("safetensors", "cannot write " + std::string(dtype_name(as)) + " (F32 or F64 only)");
  json header = json::object();
  std::size_t offset = 0;
  for (const auto& [name, a] : arrays) {
    if (name == "__metadata__") throw InputError("safetensors", "'__metadata__' cannot name a tensor");
    const std::size_t bytes = a.data.size() * dtype_size(as);
    header[name] = {{"dtype", safetensors_dtype_name(as)},
                    {"shape", a.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    throw InputError("safetensors", "tensor names must be valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data buffer starts 8-byte aligned

  std::vector<std::byte> out;
  out.reserve(8 + text.size() + offset);
  detail::store_le(out, static_cast<std::uint64_t>(text.size()));
  for (char c : text) out.push_back(static_cast<std::byte>(c));
  for (const auto& [name, a] : arrays) detail::encode_le(a.data, as, out);
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::map<std::string, Array>& arrays,
                       DType as) {
  write_file_atomic(path, encode_safetensors(arrays, as));
}

}  // namespace regatta::io
