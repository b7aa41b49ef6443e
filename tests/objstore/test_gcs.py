"""fluxtrain's Google Cloud Storage client against a real GCS emulator (fake-gcs-server, GCS's JSON
API) with Google's OAuth2 flow in front of it (servers.Front: a service-account JWT verified with
the key's public half, bearer tokens checked on every request).

Run by CTest (data_gcs) as: .venv/bin/python tests/objstore/test_gcs.py, with FT_BIN=build/fluxtrain.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import servers  # noqa: E402

FT_BIN = os.environ.get("FT_BIN", "build/fluxtrain")


class GcsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ft_gcs_")
        cls.gcs = servers.FakeGcs(cls.tmp)
        cls.fronts = []
        try:
            cls.gcs.create_bucket("corpus")
            cls.many = {}
            for i in range(25):
                body = f"object {i} ".encode() * (i + 1)
                key = f"many/sub{i % 3}/obj {i:02d}.txt"  # spaces and subfolders exercise URL encoding
                cls.gcs.upload("corpus", key, body)
                cls.many[key[len("many/"):]] = body
            cls.big = os.urandom(3 * 1024 * 1024 + 17)
            cls.gcs.upload("corpus", "big/big.bin", cls.big)
            lines = open(os.path.join(os.path.dirname(__file__), "..", "data", "bilingual.txt"),
                         encoding="utf-8").read()
            for i in range(12):
                cls.gcs.upload("corpus", f"docs/d{i:02d}.txt", (lines + f"\nDocument {i}.\n").encode())
            # The authenticated front (token endpoint + bearer checks) and a key it trusts.
            cls.auth = servers.Front(cls.gcs.port, gcs=True, public_key=None)
            cls.fronts.append(cls.auth)
            cls.key_file, pub = servers.make_service_account(cls.tmp, cls.auth.token_uri)
            cls.auth.public_key, cls.auth.check_auth = pub, True
            cls.auth.add_token("static-test-token")
            # A key the server does not know (same email, another RSA key).
            cls.bad_key_file, _ = servers.make_service_account(cls.tmp, cls.auth.token_uri, "bad-key.json")
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for f in cls.fronts:
            f.stop()
        cls.gcs.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_ft(self, *args, env_extra=None, expect=0):
        env = {k: v for k, v in os.environ.items()
               if k not in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN", "STORAGE_EMULATOR_HOST")}
        env["GOOGLE_APPLICATION_CREDENTIALS"] = self.key_file
        env.update(env_extra or {})
        p = subprocess.run([FT_BIN, *args], capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, expect, f"{args}\nstdout: {p.stdout}\nstderr: {p.stderr}")
        return p.stdout + p.stderr

    def test_pull_with_pagination_service_account_and_skip(self):
        out_dir = os.path.join(self.tmp, "many")
        before = self.auth.token_requests
        out = self.run_ft("data", "pull", "gs://corpus/many", out_dir, "--gcs-endpoint", self.auth.endpoint,
                          "--list-page-size", "7")
        self.assertIn("25 objects fetched", out)
        self.assertEqual(self.auth.token_requests, before + 1)  # one token, reused for every request
        for rel, body in self.many.items():
            with open(os.path.join(out_dir, rel), "rb") as f:
                self.assertEqual(f.read(), body, rel)
        out = self.run_ft("data", "pull", "gs://corpus/many", out_dir, "--gcs-endpoint", self.auth.endpoint)
        self.assertIn("0 objects fetched", out)
        self.assertIn("25 already present", out)

    def test_bearer_token_and_emulator_host_variable(self):
        out_dir = os.path.join(self.tmp, "bearer")
        out = self.run_ft("data", "pull", "gs://corpus/many/sub1", out_dir,
                          env_extra={"GOOGLE_OAUTH_ACCESS_TOKEN": "static-test-token",
                                     "STORAGE_EMULATOR_HOST": self.auth.endpoint.replace("http://", "")})
        self.assertIn("8 objects fetched", out)

    def test_wrong_credentials_show_the_server_error(self):
        out = self.run_ft("data", "pull", "gs://corpus/many", os.path.join(self.tmp, "x"), "--gcs-endpoint",
                          self.auth.endpoint, env_extra={"GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.wrong"}, expect=2)
        self.assertIn("error: gs://corpus/many: HTTP 401 authError: Invalid Credentials", out)
        self.assertIn("hint: check GOOGLE_APPLICATION_CREDENTIALS", out)
        self.assertEqual(len([l for l in out.splitlines() if l.startswith("error:")]), 1, out)
        out = self.run_ft("data", "pull", "gs://corpus/many", os.path.join(self.tmp, "x"), "--gcs-endpoint",
                          self.auth.endpoint, env_extra={"GOOGLE_APPLICATION_CREDENTIALS": self.bad_key_file},
                          expect=2)
        self.assertIn("token request to " + self.auth.token_uri + ": HTTP 400 invalid_grant: Invalid JWT Signature.",
                      out)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x", "sub0")))

    def test_missing_bucket_and_unreachable_endpoint(self):
        out = self.run_ft("data", "pull", "gs://no-such-bucket/x", os.path.join(self.tmp, "y"), "--gcs-endpoint",
                          self.auth.endpoint, expect=2)
        self.assertIn("error: gs://no-such-bucket/x: HTTP 404", out)
        self.assertIn("hint: check the bucket and object names", out)
        out = self.run_ft("data", "pull", "gs://corpus/many", os.path.join(self.tmp, "z"), "--gcs-endpoint",
                          f"http://127.0.0.1:{servers.free_port()}", "--retries", "1", expect=2)
        self.assertIn("cannot reach", out)

    def test_dropped_connection_resumes_and_crc32c_catches_corruption(self):
        flaky = servers.Front(self.gcs.port, gcs=True, drop_after=1024 * 1024)
        try:
            out_dir = os.path.join(self.tmp, "big")
            out = self.run_ft("data", "pull", "gs://corpus/big", out_dir, "--gcs-endpoint", flaky.endpoint,
                              env_extra={"GOOGLE_APPLICATION_CREDENTIALS": ""})
            self.assertIn("resuming from byte 1048576", out)
            with open(os.path.join(out_dir, "big.bin"), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).digest(), hashlib.sha256(self.big).digest())
            self.assertEqual(len(flaky.dropped), 1)
            # Bytes on the wire: the dropped first part plus the rest, nothing twice.
            self.assertEqual(sum(flaky.bytes_served.values()), len(self.big))
        finally:
            flaky.stop()
        # A partial file with wrong bytes completes to the right size but fails the CRC32C check.
        out_dir = os.path.join(self.tmp, "big2")
        os.makedirs(out_dir)
        part = os.path.join(out_dir, "big.bin.part")
        with open(part, "wb") as f:
            f.write(b"x" * 1000)
        with open(os.path.join(out_dir, ".fluxtrain-pull"), "w") as f:
            f.write("gs://corpus/big/\n")  # an earlier pull of this URL (any other non-empty directory is refused)
        out = self.run_ft("data", "pull", "gs://corpus/big", out_dir, "--gcs-endpoint", self.auth.endpoint, expect=2)
        self.assertIn("CRC32C", out)
        self.assertIn("does not match", out)
        self.assertFalse(os.path.exists(part))
        self.assertFalse(os.path.exists(os.path.join(out_dir, "big.bin")))

    def test_prepare_from_gcs(self):
        out_dir = os.path.join(self.tmp, "ds")
        out = self.run_ft("prepare", "--input", "gs://corpus/docs", "--out", out_dir, "--gcs-endpoint",
                          self.auth.endpoint, "--shards", "2", "--vocab-size", "400", "--val-fraction", "0.2",
                          "--near-dup-threshold", "0")  # the documents differ in one line only
        self.assertIn("12 documents: 12 kept", out)
        out = self.run_ft("data", "verify", out_dir)
        self.assertIn("OK", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
