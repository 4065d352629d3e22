// StoreClient against a real server process speaking tuttirun's protocol (store_server.py).
#include "store_client.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace tutti {
namespace {

using std::chrono::milliseconds;

std::string ServerScript() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    return std::string(srcdir) + "/" + workspace + "/common/tests/store_server.py";
  }
  return "common/tests/store_server.py";  // run from the repository root
}

// Runs store_server.py for the duration of a test.
class StoreServer {
 public:
  explicit StoreServer(const std::string& secret) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      execlp("python3", "python3", ServerScript().c_str(), "--secret", secret.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    FILE* stream = fdopen(out[0], "r");
    if (std::fscanf(stream, "PORT %d", &port_) != 1) port_ = 0;
    std::fclose(stream);
  }
  ~StoreServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST(StoreClientTest, SetGetAndMissingKeys) {
  StoreServer server("secret");
  ASSERT_GT(server.port(), 0) << "store_server.py did not start";
  StoreClient client("127.0.0.1", server.port(), "secret", milliseconds(5000));
  std::string value;
  bool found = true;
  ASSERT_TRUE(client.Get("missing", &value, &found).ok());
  EXPECT_FALSE(found);
  const std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(client.Set("k", binary).ok());
  ASSERT_TRUE(client.Get("k", &value, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(value, binary);
  ASSERT_TRUE(client.Set("k", "").ok());  // overwrite with an empty value
  ASSERT_TRUE(client.Get("k", &value, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(value, "");
  const std::string big(1 << 20, 'x');
  ASSERT_TRUE(client.Set("big", big).ok());
  ASSERT_TRUE(client.WaitGet("big", &value).ok());
  EXPECT_EQ(value, big);
}

TEST(StoreClientTest, WaitGetSeesALaterSet) {
  StoreServer server("s");
  ASSERT_GT(server.port(), 0);
  StoreClient waiter("localhost", server.port(), "s", milliseconds(10000));
  StoreClient setter("127.0.0.1", server.port(), "s", milliseconds(10000));
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(200));
    setter.Set("late", "here");
  });
  std::string value;
  Status s = waiter.WaitGet("late", &value);
  later.join();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(value, "here");
}

TEST(StoreClientTest, WaitTimesOutNamingTheKeys) {
  StoreServer server("s");
  ASSERT_GT(server.port(), 0);
  StoreClient client("127.0.0.1", server.port(), "s", milliseconds(300));
  ASSERT_TRUE(client.Set("job/joined/0", "1").ok());
  std::vector<std::string> missing;
  Status s = client.WaitAll({"job/joined/0", "job/joined/1", "job/joined/2"}, &missing);
  EXPECT_EQ(s.code(), TUTTI_ERR_ABORTED);
  EXPECT_NE(s.message().find("job/joined/1"), std::string::npos) << s.message();
  EXPECT_EQ(missing, (std::vector<std::string>{"job/joined/1", "job/joined/2"}));
}

TEST(StoreClientTest, WrongSecretIsRejected) {
  StoreServer server("right");
  ASSERT_GT(server.port(), 0);
  StoreClient client("127.0.0.1", server.port(), "wrong", milliseconds(2000));
  Status s = client.Set("k", "v");
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("TUTTI_GLOO_SECRET"), std::string::npos) << s.message();
}

TEST(StoreClientTest, UnreachableStoreFailsAfterTheTimeout) {
  int port;
  {
    StoreServer server("s");  // find a port that is free once the server is gone
    port = server.port();
  }
  ASSERT_GT(port, 0);
  StoreClient client("127.0.0.1", port, "s", milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  Status s = client.Set("k", "v");
  EXPECT_EQ(s.code(), TUTTI_ERR_ABORTED);
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tutti
