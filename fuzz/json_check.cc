#include "fuzz/json_check.h"

#include "nlohmann/json.hpp"

namespace ddp::fuzz {
namespace {

using Json = nlohmann::ordered_json;

// Keys and string values in document order (an ordered object keeps its keys' order).
void Collect(const Json& j, std::vector<std::string>* strings) {
  if (j.is_string()) {
    strings->push_back(j.get<std::string>());
  } else if (j.is_array()) {
    for (const Json& e : j) Collect(e, strings);
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      strings->push_back(key);
      Collect(value, strings);
    }
  }
}

}  // namespace

bool CheckJson(std::string_view text, std::vector<std::string>* strings, std::string* error) {
  const Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *error = "not one valid JSON value (nlohmann/json's strict parser refused it)";
    return false;
  }
  if (strings != nullptr) Collect(j, strings);
  return true;
}

}  // namespace ddp::fuzz
