"""fluxtrain's S3 client against a real S3-compatible server on loopback (moto in server mode,
with IAM authentication on, so request signatures are checked).

Run by CTest (data_s3) as: .venv/bin/python tests/s3/test_s3.py, with FT_BIN=build/fluxtrain.

Prefixes here have no trailing "/": moto's server checks signatures against the percent-DEcoded
query string (werkzeug's request.url), while AWS requires "/" in query values to be signed as
%2F, which we do (data_s3_sigv4_test checks the encoding rules against AWS's own example).
"""
import gzip
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import boto3

FT_BIN = os.environ.get("FT_BIN", "build/fluxtrain")
MAN_PAGE = b""".TH FROB 1 2024-01-01 "tests" "User Commands"
.SH NAME
frob \\- frobnicate the widgets
.SH DESCRIPTION
frob reads widgets and writes them back.
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ft_s3_")
        cls.port = free_port()
        cls.endpoint = f"http://127.0.0.1:{cls.port}"
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3", MOTO_PORT=str(cls.port))
        cls.log = open(os.path.join(cls.tmp, "moto.log"), "wb")
        cls.server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(cls.port)],
            stdout=cls.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 300  # ended by the port answering: only a hang reaches it (a slow machine may not)
        while True:
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or cls.server.poll() is not None:
                    raise RuntimeError("moto server did not start; see " + cls.log.name)
                time.sleep(0.2)
        # The first three actions run unauthenticated: make a user with full S3 rights and a key.
        iam = boto3.client("iam", endpoint_url=cls.endpoint, region_name="us-east-1",
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="fluxtrain")
        key = iam.create_access_key(UserName="fluxtrain")["AccessKey"]
        iam.put_user_policy(UserName="fluxtrain", PolicyName="s3", PolicyDocument=(
            '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}'))
        cls.key_id, cls.secret = key["AccessKeyId"], key["SecretAccessKey"]
        s3 = boto3.client("s3", endpoint_url=cls.endpoint, region_name="us-east-1",
                          aws_access_key_id=cls.key_id, aws_secret_access_key=cls.secret)
        s3.create_bucket(Bucket="corpus")
        cls.many = {}
        for i in range(25):
            body = f"object {i} " .encode() * (i + 1)
            key = f"many/sub{i % 3}/obj {i:02d}.txt"  # spaces and subfolders exercise URI encoding
            s3.put_object(Bucket="corpus", Key=key, Body=body)
            cls.many[key[len("many/"):]] = body
        cls.big = os.urandom(3 * 1024 * 1024 + 17)
        s3.put_object(Bucket="corpus", Key="big/big.bin", Body=cls.big)
        lines = open(os.path.join(os.path.dirname(__file__), "..", "data", "bilingual.txt"), encoding="utf-8").read()
        for i in range(12):
            s3.put_object(Bucket="corpus", Key=f"docs/d{i:02d}.txt", Body=(lines + f"\nDocument {i}.\n").encode())
        s3.put_object(Bucket="corpus", Key="docs/notes.md", Body="# Заметки\nФайл в формате Markdown.\n".encode())
        s3.put_object(Bucket="corpus", Key="docs/man/frob.1.gz", Body=gzip.compress(MAN_PAGE))

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        try:
            cls.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            cls.server.kill()
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_ft(self, *args, key_id=None, secret=None, expect=0):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key_id or self.key_id,
                   AWS_SECRET_ACCESS_KEY=secret or self.secret, AWS_REGION="us-east-1")
        env.pop("AWS_ENDPOINT_URL", None)
        p = subprocess.run([FT_BIN, *args], capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, expect, f"{args}\nstdout: {p.stdout}\nstderr: {p.stderr}")
        return p.stdout + p.stderr

    def test_pull_with_pagination_and_skip(self):
        out_dir = os.path.join(self.tmp, "many")
        out = self.run_ft("data", "pull", "s3://corpus/many", out_dir, "--s3-endpoint", self.endpoint,
                          "--list-page-size", "7")
        self.assertIn("25 objects fetched", out)
        for rel, body in self.many.items():
            with open(os.path.join(out_dir, rel), "rb") as f:
                self.assertEqual(f.read(), body, rel)
        out = self.run_ft("data", "pull", "s3://corpus/many", out_dir, "--s3-endpoint", self.endpoint)
        self.assertIn("0 objects fetched", out)
        self.assertIn("25 already present", out)

    def test_resume_partial_download_and_etag_check(self):
        out_dir = os.path.join(self.tmp, "big")
        os.makedirs(out_dir, exist_ok=True)
        part = os.path.join(out_dir, "big.bin.part")
        with open(part, "wb") as f:
            f.write(self.big[:1024 * 1024])  # an interrupted earlier transfer
        with open(os.path.join(out_dir, ".fluxtrain-pull"), "w") as f:
            f.write("s3://corpus/big/\n")  # of this URL: a pull into any other non-empty directory is refused
        out = self.run_ft("data", "pull", "s3://corpus/big", out_dir, "--s3-endpoint", self.endpoint)
        self.assertIn("1.00 MiB resumed", out)
        with open(os.path.join(out_dir, "big.bin"), "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).digest(), hashlib.sha256(self.big).digest())
        self.assertFalse(os.path.exists(part))
        # A partial file with the wrong bytes is caught by the ETag (MD5) check and discarded.
        os.remove(os.path.join(out_dir, "big.bin"))
        with open(part, "wb") as f:
            f.write(b"x" * 1000)
        out = self.run_ft("data", "pull", "s3://corpus/big", out_dir, "--s3-endpoint", self.endpoint, expect=2)
        self.assertIn("does not match the ETag", out)
        self.assertFalse(os.path.exists(part))
        self.assertFalse(os.path.exists(os.path.join(out_dir, "big.bin")))

    def test_wrong_credentials_show_the_server_error(self):
        out = self.run_ft("data", "pull", "s3://corpus/many", os.path.join(self.tmp, "x"),
                          "--s3-endpoint", self.endpoint, secret="wrong-secret", expect=2)
        self.assertIn("HTTP 403 SignatureDoesNotMatch", out)
        self.assertIn("The request signature we calculated does not match", out)
        self.assertIn("hint: check AWS_ACCESS_KEY_ID", out)
        out = self.run_ft("data", "pull", "s3://corpus/many", os.path.join(self.tmp, "x"),
                          "--s3-endpoint", self.endpoint, key_id="AKIANOSUCHKEY0000000", expect=2)
        self.assertIn("HTTP 403 InvalidAccessKeyId", out)
        self.assertIn("does not exist in our records", out)

    def test_missing_bucket_and_unreachable_endpoint(self):
        out = self.run_ft("data", "pull", "s3://no-such-bucket/x", os.path.join(self.tmp, "y"),
                          "--s3-endpoint", self.endpoint, expect=2)
        self.assertIn("HTTP 404 NoSuchBucket", out)
        self.assertIn("The specified bucket does not exist", out)
        out = self.run_ft("data", "pull", "s3://corpus/many", os.path.join(self.tmp, "z"),
                          "--s3-endpoint", f"http://127.0.0.1:{free_port()}", "--retries", "1", expect=2)
        self.assertIn("cannot reach", out)

    def test_prepare_from_s3(self):
        out_dir = os.path.join(self.tmp, "ds")
        out = self.run_ft("prepare", "--input", "s3://corpus/docs", "--out", out_dir, "--s3-endpoint", self.endpoint,
                          "--shards", "2", "--vocab-size", "400", "--val-fraction", "0.2",
                          "--near-dup-threshold", "0")  # the documents differ in one line only
        self.assertIn("14 documents: 14 kept", out)
        self.assertIn(" ru ", out)
        self.assertIn(" en ", out)
        out = self.run_ft("data", "verify", out_dir)
        self.assertIn("OK", out)
        self.assertFalse(os.path.exists(os.path.join(out_dir, "s3-input")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
