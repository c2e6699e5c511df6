#include <regatta/core/error.hpp>

#include <cstdint>

namespace regatta {

namespace {

void append_hex(std::string& out, unsigned char byte) {
  static constexpr char digits[] = "0123456789abcdef";
  out += "\\x";
  out += digits[byte >> 4];
  out += digits[byte & 0xf];
}

/// Length of the valid UTF-8 sequence starting at text[i] (1–4), or 0 when the bytes there are not one
/// (overlong forms, surrogates, code points above U+10FFFF and truncated sequences are invalid).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  std::size_t length = 0;
  std::uint32_t code = 0, minimum = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    length = 2, code = b0 & 0x1f, minimum = 0x80;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    length = 3, code = b0 & 0x0f, minimum = 0x800;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    length = 4, code = b0 & 0x07, minimum = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3f);
  }
  if (code < minimum || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return length;
}

std::string cut(std::string message) {
  if (message.size() <= max_message_bytes) return message;
  std::size_t keep = max_message_bytes - 40;
  // Do not cut inside a UTF-8 sequence or an escape: back up to a byte that starts a character.
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xc0) == 0x80) --keep;
  const std::size_t dropped = message.size() - keep;
  message.resize(keep);
  return message + "... (" + std::to_string(dropped) + " more bytes)";
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x20 || b == 0x7f) {
      append_hex(out, b);
      ++i;
    } else if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
    } else if (const std::size_t length = utf8_sequence_length(text, i); length == 0) {
      append_hex(out, b);
      ++i;
    } else if (length == 2 && b == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      append_hex(out, b);  // U+0080..U+009F: C1 control characters (CSI among them)
      append_hex(out, static_cast<unsigned char>(text[i + 1]));
      i += 2;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

std::string quoted(std::string_view text) { return "'" + printable(text) + "'"; }

std::string name_list(std::span<const std::string> names, std::size_t max_shown) {
  std::string out;
  const std::size_t shown = names.size() < max_shown ? names.size() : max_shown;
  for (std::size_t k = 0; k < shown; ++k) {
    if (k > 0) out += ", ";
    out += regatta::quoted(names[k]);  // qualified: std::quoted is found by ADL on std::string
  }
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

InputError::InputError(std::string subject, std::string problem)
    : std::runtime_error(cut(printable(subject) + ": " + printable(problem))),
      subject_(std::move(subject)),
      problem_(std::move(problem)) {}

}  // namespace regatta
