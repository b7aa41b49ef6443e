// The pieces of the GCS client that have published answers: CRC-32C against RFC 3720's test
// vectors (B.4) and the JSON API's base64 form, the service-account JWT's RS256 signature
// verified with the public half of a key made here by OpenSSL, and base64url. The client
// itself is tested against a real GCS emulator (tests/gcs/test_gcs.py).
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/objstore/crc32c.h"
#include "data/objstore/gcs.h"
#include "util/error.h"

namespace ft {
namespace {

TEST(Crc32c, Rfc3720Vectors) {
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    dec[static_cast<size_t>(i)] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc.data(), inc.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec.data(), dec.size()), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(Crc32c, ExtendEqualsWhole) {
  std::string s;
  for (int i = 0; i < 1000; ++i) s.push_back(static_cast<char>(i * 37 + 11));
  for (size_t cut : {0, 1, 7, 8, 9, 500, 999, 1000}) {
    uint32_t a = crc32c(s.data(), cut);
    EXPECT_EQ(crc32c_extend(a, s.data() + cut, s.size() - cut), crc32c(s.data(), s.size())) << cut;
  }
}

TEST(Crc32c, Base64FormOfTheJsonApi) {
  // GCS's documentation: the CRC32C of "hello world" is yZRlqg== (0xC99465AA).
  EXPECT_EQ(crc32c("hello world", 11), 0xC99465AAu);
  EXPECT_EQ(crc32c_to_base64(0xC99465AAu), "yZRlqg==");
  EXPECT_EQ(crc32c_from_base64("yZRlqg==").value(), 0xC99465AAu);
  EXPECT_EQ(crc32c_from_base64("AAAAAA==").value(), 0u);
  EXPECT_FALSE(crc32c_from_base64("yZRlqg").has_value());
  EXPECT_FALSE(crc32c_from_base64("yZRl!g==").has_value());
}

TEST(Gcs, Base64Url) {
  EXPECT_EQ(base64url(""), "");
  EXPECT_EQ(base64url("f"), "Zg");
  EXPECT_EQ(base64url("fo"), "Zm8");
  EXPECT_EQ(base64url("foo"), "Zm9v");
  EXPECT_EQ(base64url(std::string("\xfb\xff", 2)), "-_8");
}

std::string b64url_decode(std::string s) {
  for (char& c : s) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (s.size() % 4) s.push_back('=');
  std::string out(s.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  size_t pad = 0;
  for (size_t i = s.size(); i > 0 && s[i - 1] == '='; --i) ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

TEST(Gcs, ServiceAccountJwtVerifiesWithThePublicKey) {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  ASSERT_NE(key, nullptr);
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  std::string pem(p, static_cast<size_t>(n));
  BIO_free(b);

  std::string jwt = service_account_jwt("trainer@project.iam.gserviceaccount.com", pem, "kid-1",
                                        "https://oauth2.googleapis.com/token", "scope-x", 1700000000, 3600);
  size_t d1 = jwt.find('.'), d2 = jwt.rfind('.');
  ASSERT_NE(d1, d2);
  auto header = nlohmann::json::parse(b64url_decode(jwt.substr(0, d1)));
  auto claims = nlohmann::json::parse(b64url_decode(jwt.substr(d1 + 1, d2 - d1 - 1)));
  EXPECT_EQ(header["alg"], "RS256");
  EXPECT_EQ(header["kid"], "kid-1");
  EXPECT_EQ(claims["iss"], "trainer@project.iam.gserviceaccount.com");
  EXPECT_EQ(claims["aud"], "https://oauth2.googleapis.com/token");
  EXPECT_EQ(claims["scope"], "scope-x");
  EXPECT_EQ(claims["iat"], 1700000000);
  EXPECT_EQ(claims["exp"], 1700003600);

  std::string signed_part = jwt.substr(0, d2), sig = b64url_decode(jwt.substr(d2 + 1));
  auto verify = [&](const std::string& msg) {
    EVP_MD_CTX* md = EVP_MD_CTX_new();
    EVP_DigestVerifyInit(md, nullptr, EVP_sha256(), nullptr, key);
    int ok = EVP_DigestVerify(md, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                              reinterpret_cast<const unsigned char*>(msg.data()), msg.size());
    EVP_MD_CTX_free(md);
    return ok == 1;
  };
  EXPECT_TRUE(verify(signed_part));
  EXPECT_FALSE(verify(signed_part + "x"));  // the check can fail
  EVP_PKEY_free(key);
  EXPECT_THROW(service_account_jwt("a", "not a key", "", "aud", "s", 0, 1), Error);
}

}  // namespace
}  // namespace ft
