#include "transport/gloo_store.h"

#include <stdexcept>

namespace tutti {

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  Status s = client_->Set(key, std::string(data.begin(), data.end()));
  if (!s.ok()) throw std::runtime_error(s.message());
}

std::vector<char> GlooStore::get(const std::string& key) {
  std::string value;
  Status s = client_->WaitGet(key, &value);
  if (!s.ok()) throw std::runtime_error(s.message());
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  Status s = client_->WaitAll(keys, nullptr);
  if (!s.ok()) throw std::runtime_error(s.message());
}

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) {
  wait(keys);
}

}  // namespace tutti
