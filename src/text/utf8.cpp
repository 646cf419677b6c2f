// UTF-8 decoding with WHATWG replacement semantics (see utf8.h).
#include "text/utf8.h"

#include "core/check.h"
#include "core/utf8_decode.h"

namespace beam::text {

namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The WHATWG "UTF-8 decoder" handler, one byte at a time; a byte that breaks a sequence emits
// U+FFFD and is then processed again from the initial state.
void Utf8Decoder::feed(std::string_view bytes, std::string& out) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const uint8_t byte = static_cast<uint8_t>(bytes[i]);
    if (bytes_needed_ == 0) {
      if (byte < 0x80) {
        out.push_back(static_cast<char>(byte));
      } else if (byte >= 0xC2 && byte <= 0xDF) {
        bytes_needed_ = 1;
        code_point_ = byte & 0x1F;
      } else if (byte >= 0xE0 && byte <= 0xEF) {
        if (byte == 0xE0) lower_ = 0xA0;
        if (byte == 0xED) upper_ = 0x9F;
        bytes_needed_ = 2;
        code_point_ = byte & 0x0F;
      } else if (byte >= 0xF0 && byte <= 0xF4) {
        if (byte == 0xF0) lower_ = 0x90;
        if (byte == 0xF4) upper_ = 0x8F;
        bytes_needed_ = 3;
        code_point_ = byte & 0x07;
      } else {
        out += kReplacement;
      }
      continue;
    }
    if (byte < lower_ || byte > upper_) {
      code_point_ = 0;
      bytes_needed_ = bytes_seen_ = 0;
      lower_ = 0x80;
      upper_ = 0xBF;
      out += kReplacement;
      --i;  // reprocess this byte from the initial state
      continue;
    }
    lower_ = 0x80;
    upper_ = 0xBF;
    code_point_ = (code_point_ << 6) | (byte & 0x3F);
    if (++bytes_seen_ != bytes_needed_) continue;
    append_utf8(out, code_point_);
    code_point_ = 0;
    bytes_needed_ = bytes_seen_ = 0;
  }
}

void Utf8Decoder::flush(std::string& out) {
  if (bytes_needed_ == 0) return;
  code_point_ = 0;
  bytes_needed_ = bytes_seen_ = 0;
  lower_ = 0x80;
  upper_ = 0xBF;
  out += kReplacement;
}

bool is_valid_utf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    // Fast path: 8 ASCII bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i < n && !decode_utf8(bytes, i)) return false;
  }
  return true;
}

std::string to_valid_utf8(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 16);
  Utf8Decoder decoder;
  decoder.feed(bytes, out);
  decoder.flush(out);
  return out;
}

char32_t next_code_point(std::string_view text, size_t& pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const uint8_t b = p[0];
  const int len = utf8_sequence_length(b);
  BEAM_CHECK(pos + len <= text.size()) << "truncated UTF-8 at byte " << pos;
  pos += len;
  switch (len) {
    case 1: return b;
    case 2: return ((b & 0x1F) << 6) | (p[1] & 0x3F);
    case 3: return ((b & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    default: return ((b & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
}

}  // namespace beam::text
