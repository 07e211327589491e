// Names of the convolution's enums: an enum whose values are 0, 1, ... has a table of names in
// that order; enum_name gives a value's name ("?" past the table), enum_value the value of a name.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace gemmkit::cuda::conv_impl {

template <typename E, std::size_t N>
constexpr const char* enum_name(E value, const char* const (&names)[N]) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "?";
}

template <typename E, std::size_t N>
std::optional<E> enum_value(const std::string& name, const char* const (&names)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace gemmkit::cuda::conv_impl
