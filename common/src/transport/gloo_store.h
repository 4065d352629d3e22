// Adapts StoreClient to gloo::rendezvous::Store so Gloo's own rendezvous (connectFullMesh)
// runs over tuttirun's store. Gloo's interface has no error values, so failures are thrown
// as std::runtime_error with the store client's message.
#ifndef TUTTI_SRC_GLOO_STORE_H_
#define TUTTI_SRC_GLOO_STORE_H_

#include <gloo/rendezvous/store.h>

#include <string>
#include <vector>

#include "transport/store_client.h"

namespace tutti {

class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(StoreClient* client) : client_(client) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  // The client's configured timeout (TUTTI_GLOO_TIMEOUT_SECONDS) applies, not Gloo's.
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override;

 private:
  StoreClient* client_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_GLOO_STORE_H_
