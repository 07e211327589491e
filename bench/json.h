// A small streaming JSON writer (objects, arrays, strings, numbers, booleans). Header-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gemmkit::bench {

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  // Inside an object: the next value's key.
  JsonWriter& key(const std::string& name) {
    separate();
    out_ += quote(name) + ": ";
    after_key_ = true;
    return *this;
  }

  JsonWriter& value(const std::string& text) { return raw(quote(text)); }
  JsonWriter& value(const char* text) { return raw(quote(text)); }
  JsonWriter& value(bool flag) { return raw(flag ? "true" : "false"); }
  JsonWriter& value(int64_t number) { return raw(std::to_string(number)); }
  JsonWriter& value(int number) { return raw(std::to_string(number)); }
  // NaN and infinities are not JSON numbers: written as null.
  JsonWriter& value(double number) {
    if (!std::isfinite(number)) return raw("null");
    char text[40];
    std::snprintf(text, sizeof(text), "%.9g", number);
    return raw(text);
  }
  // Short integer lists stay on one line: [3, 3].
  JsonWriter& value(const std::vector<int64_t>& numbers) {
    std::string text = "[";
    for (std::size_t i = 0; i < numbers.size(); ++i)
      text += (i ? ", " : "") + std::to_string(numbers[i]);
    return raw(text + "]");
  }
  JsonWriter& null() { return raw("null"); }

  template <class T>
  JsonWriter& field(const std::string& name, const T& v) {
    key(name);
    return value(v);
  }

  const std::string& str() const { return out_; }

  static std::string quote(const std::string& text) {
    std::string quoted = "\"";
    for (unsigned char ch : text) {
      switch (ch) {
        case '"':
          quoted += "\\\"";
          break;
        case '\\':
          quoted += "\\\\";
          break;
        case '\n':
          quoted += "\\n";
          break;
        case '\r':
          quoted += "\\r";
          break;
        case '\t':
          quoted += "\\t";
          break;
        default:
          if (ch < 0x20) {
            char escape[8];
            std::snprintf(escape, sizeof(escape), "\\u%04x", ch);
            quoted += escape;
          } else {
            quoted += static_cast<char>(ch);
          }
      }
    }
    return quoted + "\"";
  }

 private:
  // Writes the comma and newline before a value that is not the first in its container.
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ",";
      first_.back() = false;
      out_ += "\n" + std::string(2 * first_.size(), ' ');
    }
  }
  JsonWriter& raw(const std::string& text) {
    separate();
    out_ += text;
    return *this;
  }
  JsonWriter& open(char bracket) {
    separate();
    out_ += bracket;
    first_.push_back(true);
    return *this;
  }
  JsonWriter& close(char bracket) {
    const bool empty = first_.back();
    first_.pop_back();
    if (!empty) out_ += "\n" + std::string(2 * first_.size(), ' ');
    out_ += bracket;
    return *this;
  }

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace gemmkit::bench
