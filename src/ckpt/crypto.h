// Checkpoint encryption: AES-256-GCM (OpenSSL EVP) over fixed-size chunks, and HMAC-SHA256 for
// the manifest. The 256-bit key comes from ckpt.key_file or FLUXTRAIN_CKPT_KEY (64 hex digits);
// it lives in one page locked into RAM (mlock: never swapped), and is wiped when dropped.
//
//   CkptKey key = CkptKey::load(cfg.ckpt);                 // throws naming the file / variable
//   ChunkCipher c(key);
//   c.seal(out, tag, in, n, nonce, aad, aad_n);            // ciphertext has the plaintext's length
//   if (!c.open(out, in, n, tag, nonce, aad, aad_n)) ...   // false: wrong key or tampered
//
// Nonces are 96 bits: a random 64-bit prefix drawn per file plus the 32-bit chunk index, so no
// nonce repeats under one key (2^32 files before a prefix collision is likely). The associated
// data binds each chunk to its file's header (name, step, rank, sizes) and index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ft {

class CkptKey {
 public:
  CkptKey();  // an empty key (no encryption)
  ~CkptKey();
  CkptKey(CkptKey&&) noexcept;
  CkptKey& operator=(CkptKey&&) noexcept;
  CkptKey(const CkptKey&) = delete;
  CkptKey& operator=(const CkptKey&) = delete;

  // From `key_file` (64 hex digits, surrounding whitespace ignored) when not empty, otherwise
  // from the FLUXTRAIN_CKPT_KEY variable. Throws ft::Error naming the source when absent or bad.
  static CkptKey load(const std::string& key_file);
  static CkptKey from_hex(const std::string& hex, const std::string& source);

  bool empty() const { return key_ == nullptr; }
  const uint8_t* bytes() const { return key_; }  // 32 bytes
  // 16 hex digits identifying the key (HMAC-SHA256(key, "fluxtrain key id")), stored in files
  // so a wrong key is reported as such; reveals nothing about the key.
  std::string id() const;
  // A 32-byte sub-key for a purpose ("manifest"), derived by HMAC-SHA256.
  void derive(const std::string& purpose, uint8_t out[32]) const;

 private:
  void release();
  uint8_t* key_ = nullptr;  // inside page_
  void* page_ = nullptr;
};

constexpr size_t kGcmTagBytes = 16;
constexpr size_t kGcmNonceBytes = 12;

class ChunkCipher {
 public:
  explicit ChunkCipher(const CkptKey& key);
  ~ChunkCipher();
  ChunkCipher(const ChunkCipher&) = delete;
  ChunkCipher& operator=(const ChunkCipher&) = delete;
  void seal(uint8_t* out, uint8_t tag[kGcmTagBytes], const uint8_t* in, size_t n, const uint8_t nonce[kGcmNonceBytes],
            const uint8_t* aad, size_t aad_n);
  // False when the tag does not verify (wrong key, flipped bit, swapped chunk or file).
  bool open(uint8_t* out, const uint8_t* in, size_t n, const uint8_t tag[kGcmTagBytes],
            const uint8_t nonce[kGcmNonceBytes], const uint8_t* aad, size_t aad_n);

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  const CkptKey& key_;
};

// Whether FLUXTRAIN_CKPT_KEY is set to something (an empty value counts as unset).
bool has_key_env();

// HMAC-SHA256 as 64 lowercase hex digits.
std::string hmac_sha256_hex(const uint8_t key[32], const std::string& data);
// Cryptographically random bytes (OpenSSL RAND_bytes); throws on failure.
void random_bytes(void* out, size_t n);
// Constant-time comparison of equal-length strings.
bool equal_constant_time(const std::string& a, const std::string& b);

}  // namespace ft
