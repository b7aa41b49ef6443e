#include "ckpt/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace ft {

CkptKey::CkptKey() = default;
CkptKey::~CkptKey() {
  release();
}
CkptKey::CkptKey(CkptKey&& o) noexcept : key_(o.key_), page_(o.page_) {
  o.key_ = nullptr, o.page_ = nullptr;
}
CkptKey& CkptKey::operator=(CkptKey&& o) noexcept {
  if (this != &o) {
    release();
    key_ = o.key_, page_ = o.page_;
    o.key_ = nullptr, o.page_ = nullptr;
  }
  return *this;
}

void CkptKey::release() {
  if (!page_) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  OPENSSL_cleanse(page_, page);
  ::munlock(page_, page);
  ::munmap(page_, page);
  page_ = nullptr;
  key_ = nullptr;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

CkptKey CkptKey::from_hex(const std::string& text, const std::string& source) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  const size_t n = e - b;
  const char* hint = "give 64 hex digits (256 bits), e.g. from `openssl rand -hex 32`";
  if (n != 64)
    throw Error(fmt::format("{}: the checkpoint key must be 64 hex digits, found {} characters", source, n), hint);
  CkptKey k;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw Error("cannot map a page for the checkpoint key");
  if (::mlock(p, page) != 0) {
    ::munmap(p, page);
    throw Error(fmt::format("{}: cannot lock the key's page in memory (mlock: {})", source, std::strerror(errno)),
                "raise the locked-memory limit (ulimit -l) to at least one page");
  }
  ::madvise(p, page, MADV_DONTDUMP);  // keep the key out of core dumps
  k.page_ = p;
  k.key_ = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < 32; ++i) {
    int hi = hex_value(text[b + 2 * i]), lo = hex_value(text[b + 2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw Error(fmt::format("{}: the checkpoint key has a character that is not a hex digit", source), hint);
    k.key_[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return k;
}

CkptKey CkptKey::load(const std::string& key_file) {
  if (!key_file.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(key_file, ec))  // it would open, then fail at the first read
      throw Error(fmt::format("ckpt.key_file = {}: is a directory, not a key file", key_file),
                  "point ckpt.key_file at a file holding 64 hex digits, or set FLUXTRAIN_CKPT_KEY");
    std::ifstream in(key_file, std::ios::binary);
    if (!in) {
      throw Error(fmt::format("ckpt.key_file = {}: cannot open: {}", key_file, std::strerror(errno)),
                  "point ckpt.key_file at a file holding 64 hex digits, or set FLUXTRAIN_CKPT_KEY");
    }
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CkptKey k = from_hex(text, "ckpt.key_file " + key_file);
    OPENSSL_cleanse(text.data(), text.size());
    return k;
  }
  const char* env = std::getenv("FLUXTRAIN_CKPT_KEY");
  if (!env || !*env) {
    throw Error("checkpoint encryption needs a key: neither ckpt.key_file nor FLUXTRAIN_CKPT_KEY is set",
                "set FLUXTRAIN_CKPT_KEY to 64 hex digits (openssl rand -hex 32) or ckpt.key_file to a file "
                "holding them");
  }
  return from_hex(env, "FLUXTRAIN_CKPT_KEY");
}

void CkptKey::derive(const std::string& purpose, uint8_t out[32]) const {
  FT_CHECK(key_, "no key");
  unsigned int len = 32;
  std::string msg = "fluxtrain checkpoint " + purpose;
  HMAC(EVP_sha256(), key_, 32, reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &len);
}

std::string CkptKey::id() const {
  uint8_t d[32];
  derive("key id", d);
  std::string s;
  for (int i = 0; i < 8; ++i) s += fmt::format("{:02x}", d[i]);
  OPENSSL_cleanse(d, sizeof d);
  return s;
}

struct ChunkCipher::Ctx {
  EVP_CIPHER_CTX* enc = nullptr;
  EVP_CIPHER_CTX* dec = nullptr;
  ~Ctx() {
    EVP_CIPHER_CTX_free(enc);
    EVP_CIPHER_CTX_free(dec);
  }
};

ChunkCipher::ChunkCipher(const CkptKey& key) : ctx_(std::make_unique<Ctx>()), key_(key) {
  FT_CHECK(!key.empty(), "ChunkCipher needs a key");
  ctx_->enc = EVP_CIPHER_CTX_new();
  ctx_->dec = EVP_CIPHER_CTX_new();
  if (!ctx_->enc || !ctx_->dec || EVP_EncryptInit_ex(ctx_->enc, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx_->dec, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1)
    throw Error("OpenSSL: cannot set up AES-256-GCM");
}

ChunkCipher::~ChunkCipher() = default;

void ChunkCipher::seal(uint8_t* out, uint8_t tag[kGcmTagBytes], const uint8_t* in, size_t n,
                       const uint8_t nonce[kGcmNonceBytes], const uint8_t* aad, size_t aad_n) {
  EVP_CIPHER_CTX* c = ctx_->enc;
  int len = 0;
  bool ok = EVP_EncryptInit_ex(c, nullptr, nullptr, key_.bytes(), nonce) == 1 &&
            EVP_EncryptUpdate(c, nullptr, &len, aad, static_cast<int>(aad_n)) == 1;
  // EVP lengths are ints: feed large chunks in pieces.
  size_t done = 0;
  while (ok && done < n) {
    int piece = static_cast<int>(std::min<size_t>(n - done, size_t{1} << 30));
    ok = EVP_EncryptUpdate(c, out + done, &len, in + done, piece) == 1;
    done += static_cast<size_t>(piece);
  }
  ok = ok && EVP_EncryptFinal_ex(c, out + n, &len) == 1 &&
       EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kGcmTagBytes), tag) == 1;
  if (!ok) throw Error("OpenSSL: AES-256-GCM encryption failed");
}

bool ChunkCipher::open(uint8_t* out, const uint8_t* in, size_t n, const uint8_t tag[kGcmTagBytes],
                       const uint8_t nonce[kGcmNonceBytes], const uint8_t* aad, size_t aad_n) {
  EVP_CIPHER_CTX* c = ctx_->dec;
  int len = 0;
  bool ok = EVP_DecryptInit_ex(c, nullptr, nullptr, key_.bytes(), nonce) == 1 &&
            EVP_DecryptUpdate(c, nullptr, &len, aad, static_cast<int>(aad_n)) == 1;
  size_t done = 0;
  while (ok && done < n) {
    int piece = static_cast<int>(std::min<size_t>(n - done, size_t{1} << 30));
    ok = EVP_DecryptUpdate(c, out + done, &len, in + done, piece) == 1;
    done += static_cast<size_t>(piece);
  }
  uint8_t t[kGcmTagBytes];
  std::memcpy(t, tag, kGcmTagBytes);
  ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kGcmTagBytes), t) == 1 &&
       EVP_DecryptFinal_ex(c, out + n, &len) == 1;
  if (!ok) OPENSSL_cleanse(out, n);  // never hand out unauthenticated plaintext
  return ok;
}

bool has_key_env() {
  const char* e = std::getenv("FLUXTRAIN_CKPT_KEY");
  return e && *e;
}

std::string hmac_sha256_hex(const uint8_t key[32], const std::string& data) {
  uint8_t d[32];
  unsigned int len = 32;
  HMAC(EVP_sha256(), key, 32, reinterpret_cast<const unsigned char*>(data.data()), data.size(), d, &len);
  std::string s;
  for (unsigned i = 0; i < len; ++i) s += fmt::format("{:02x}", d[i]);
  return s;
}

void random_bytes(void* out, size_t n) {
  if (RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(n)) != 1)
    throw Error("OpenSSL: RAND_bytes failed (no entropy source?)");
}

bool equal_constant_time(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ft
