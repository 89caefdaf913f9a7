// The node's key file and the PSK file: made on first start with mode 0600,
// loaded on later starts, refused with a message saying what to do when they
// are malformed, of another node, or readable (key) or writable (PSK) by others.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <filesystem>
#include <fstream>

#include "common/atomic_file.h"
#include "ipsec/key_store.h"
#include "ipsec/psk.h"
#include "temp_dir.h"

using namespace dpu::ipsec;

namespace {

struct TempDir : dpu::test::TempDir {
  TempDir() : dpu::test::TempDir("ipsec-keys-test") { REQUIRE(!path.empty()); }
};

unsigned modeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

void writeRaw(const std::string& path, const std::string& text, unsigned mode) {
  std::filesystem::remove(path);
  REQUIRE(dpu::writeFileAtomic(path, text, mode));
  ::chmod(path.c_str(), mode);
}

}  // namespace

TEST_CASE("key store: first start makes a key pair in a 0600 file, a later start loads it") {
  TempDir dir;
  const std::string path = dir.path + "/ipsec/keys.json";
  KeyStore first(path, "node-a");
  REQUIRE(first.load());
  CHECK(first.keys().empty());
  auto e = first.addNew();
  REQUIRE(e);
  CHECK(*e == 1);
  CHECK(modeOf(path) == 0600);
  CHECK(modeOf(dir.path + "/ipsec") == 0700);
  KeyStore again(path, "node-a");
  REQUIRE(again.load());
  REQUIRE(again.keys().size() == 1);
  CHECK(again.keys()[0].epoch == 1);
  CHECK(again.keys()[0].pair.private_key == first.keys()[0].pair.private_key);
  CHECK(again.keys()[0].pair.public_key == first.keys()[0].pair.public_key);

  // A rotation adds epoch 2, a retirement removes epoch 1; each rewrite is atomic
  // (nothing but the file is left in the directory).
  REQUIRE(*again.addNew() == 2);
  REQUIRE(again.remove(1));
  KeyStore third(path, "node-a");
  REQUIRE(third.load());
  REQUIRE(third.keys().size() == 1);
  CHECK(third.keys()[0].epoch == 2);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path + "/ipsec"), {}) == 1);
  CHECK(*third.addNew(10) == 10);  // a minimum epoch (past every epoch a lost file used)
}

TEST_CASE("key store: the file format is the documented one") {
  std::vector<OwnKey> keys(1);
  keys[0].epoch = 4;
  for (size_t i = 0; i < 32; ++i) keys[0].pair.private_key[i] = static_cast<uint8_t>(i);
  const std::string text = KeyStore::format("node-a", keys);
  CHECK(text == "{\"version\": 1, \"node\": \"node-a\", \"keys\": [{\"epoch\": 4, \"privateKey\": "
                "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"}]}\n");
  auto back = KeyStore::parse(text, "node-a");
  REQUIRE(back);
  CHECK((*back)[0].pair.private_key == keys[0].pair.private_key);
  CHECK((*back)[0].pair.public_key == *x25519PublicKey(keys[0].pair.private_key));
}

TEST_CASE("key store: refuses a file others may read, of another owner or node, or malformed") {
  TempDir dir;
  const std::string path = dir.path + "/keys.json";
  KeyStore made(path, "node-a");
  REQUIRE(made.load());
  REQUIRE(made.addNew());
  const std::string good = *dpu::readFile(path);

  ::chmod(path.c_str(), 0640);
  KeyStore readable(path, "node-a");
  auto r = readable.load();
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("has mode 0640") && Catch::Contains("chmod 600"));
  CHECK(r.code() == dpu::ErrorCode::kForbidden);
  ::chmod(path.c_str(), 0600);

  KeyStore other(path, "node-b");
  CHECK_THAT(other.load().error(), Catch::Contains("names node \"node-a\", not this node \"node-b\""));

  const std::string link = dir.path + "/link.json";
  REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
  KeyStore via_link(link, "node-a");
  CHECK_THAT(via_link.load().error(), Catch::Contains("is a symbolic link"));

  struct Bad {
    std::string text, why;
  };
  const std::string priv = good.substr(good.find("privateKey") + 14, 44);
  const std::vector<Bad> bad = {
      {"", "is not a JSON object"},
      {"{\"version\": 1, \"node\": \"node-a\", \"keys\": [{\"epoch\": 1, \"privateKey\": \"" + priv + "\"", "is not a JSON object"},
      {"{\"version\": 2, \"node\": \"node-a\", \"keys\": []}", "reads version 1"},
      {"{\"version\": 1, \"node\": \"node-a\", \"keys\": []}", "keys: is empty"},
      {"{\"version\": 1, \"node\": \"node-a\", \"keys\": [{\"epoch\": 0, \"privateKey\": \"" + priv + "\"}]}", "epoch"},
      {"{\"version\": 1, \"node\": \"node-a\", \"keys\": [{\"epoch\": 1, \"privateKey\": \"AAAA\"}]}", "is 3 bytes"},
      {"{\"version\": 1, \"node\": \"node-a\", \"keys\": [{\"epoch\": 1, \"privateKey\": \"" + priv + "\"}, {\"epoch\": 1, "
       "\"privateKey\": \"" + priv + "\"}]}", "listed twice"},
      {"{\"version\": 1, \"node\": \"node-a\", \"keys\": [{\"epoch\": 1, \"privateKey\": \"" + priv + "\", \"x\": 1}]}", "x"},
  };
  for (const auto& b : bad) {
    writeRaw(path, b.text, 0600);
    KeyStore ks(path, "node-a");
    auto loaded = ks.load();
    INFO(b.text);
    REQUIRE_FALSE(loaded);
    CHECK_THAT(loaded.error(), Catch::Contains(b.why));
    CHECK_THAT(loaded.error(), Catch::Contains("delete it to make a new key pair"));
    // A refused file is never quoted: it holds private keys.
    CHECK(loaded.error().find(priv) == std::string::npos);
    CHECK(ks.keys().empty());
  }
}

TEST_CASE("PSK: base64 of 32..64 bytes, an id that names it without revealing it") {
  auto p = parsePsk("  q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=\n");
  REQUIRE(p);
  CHECK(p->bytes.size() == 32);
  CHECK(p->id.size() == 16);
  CHECK(parsePsk("q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=")->id == p->id);
  CHECK(parsePsk("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")->id != p->id);
  CHECK_THAT(parsePsk("c2hvcnQ=").error(), Catch::Contains("decodes to 5 bytes"));
  CHECK_THAT(parsePsk("not base64 at all!!").error(), Catch::Contains("openssl rand -base64 32"));
  CHECK_THAT(parsePsk("\n").error(), Catch::Contains("is empty"));
}

TEST_CASE("PSK file: refused when others may write it, or missing, with what to do") {
  TempDir dir;
  const std::string path = dir.path + "/psk";
  auto missing = loadPsk(path);
  CHECK_THAT(missing.error(), Catch::Contains("openssl rand -base64 32"));
  writeRaw(path, "q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=\n", 0644);
  REQUIRE(loadPsk(path));
  const std::string stamp = pskFileStamp(path);
  ::chmod(path.c_str(), 0666);
  CHECK_THAT(loadPsk(path).error(), Catch::Contains("has mode 0666") && Catch::Contains("defaultMode"));
  writeRaw(path, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", 0400);
  CHECK(pskFileStamp(path) != stamp);
  writeRaw(path, "c2hvcnQ=", 0400);
  auto shortPsk = loadPsk(path);
  CHECK_THAT(shortPsk.error(), Catch::Contains(path) && Catch::Contains("decodes to 5 bytes"));
  CHECK(shortPsk.error().find("c2hvcnQ") == std::string::npos);
}
