// StoreClient against a real server process speaking tuttirun's protocol (store_server.py).
#include "transport/store_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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

// A listening socket on loopback that is not a store: it answers every connection with
// `reply` (when given), or never accepts at all.
class OtherService {
 public:
  OtherService(int backlog, std::string reply) : reply_(std::move(reply)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(fd_, backlog);
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    if (!reply_.empty()) {
      server_ = std::thread([this] {
        int conn = accept(fd_, nullptr, nullptr);
        if (conn < 0) return;
        (void)!write(conn, reply_.data(), reply_.size());
        char sink[4096];
        while (read(conn, sink, sizeof(sink)) > 0) {
        }
        close(conn);
      });
    }
  }
  ~OtherService() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    if (server_.joinable()) server_.join();
  }
  int port() const { return port_; }

 private:
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::thread server_;
};

TEST(StoreClientTest, AServiceThatIsNotAStoreIsNamedWithoutAllocatingItsLength) {
  // Status 0 and a "length" of 1.4 GB, as the first bytes of some other protocol may read.
  OtherService service(16, std::string("\x00\x55\x55\x55\x55 some banner\r\n", 18));
  StoreClient client("127.0.0.1", service.port(), "s", milliseconds(2000));
  std::string value;
  bool found = false;
  Status s = client.Get("k", &value, &found);
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT) << s.message();
  EXPECT_NE(s.message().find("is not a tutti rendezvous store"), std::string::npos)
      << s.message();
  EXPECT_LT(value.capacity(), size_t(1) << 20);
}

TEST(StoreClientTest, AnHttpServerIsNotAStore) {
  OtherService service(16, "HTTP/1.1 400 Bad Request\r\n\r\n");
  StoreClient client("127.0.0.1", service.port(), "s", milliseconds(2000));
  Status s = client.Set("k", "v");
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT) << s.message();
  EXPECT_NE(s.message().find("is not a tutti rendezvous store (it answered 'HTTP/...')"),
            std::string::npos)
      << s.message();
}

TEST(StoreClientTest, ConnectGivesUpAfterTheTimeoutWhenSynsAreDropped) {
  // A listener that never accepts, with its backlog full: the kernel drops further SYNs, as
  // a host behind a dropping firewall does. A blocking connect would retry for ~2 minutes.
  OtherService service(0, "");
  int filler = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(service.port());
  ASSERT_EQ(connect(filler, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  int filler2 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  connect(filler2, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  StoreClient client("127.0.0.1", service.port(), "s", milliseconds(1500));
  auto start = std::chrono::steady_clock::now();
  Status s = client.Set("k", "v");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), TUTTI_ERR_ABORTED) << s.message();
  EXPECT_NE(s.message().find("TUTTI_GLOO_TIMEOUT_SECONDS"), std::string::npos) << s.message();
  EXPECT_LT(took, std::chrono::seconds(20));
  close(filler);
  close(filler2);
}

}  // namespace
}  // namespace tutti
