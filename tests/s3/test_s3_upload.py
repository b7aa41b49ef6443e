"""S3Client's uploads (tests/unit/data_s3_upload_test.cpp) against a real S3 server: moto with
signature checks on, and a Front before it that cuts the first PUT of one multipart part (a
connection dropped mid-upload). Afterwards the bucket must hold no unfinished multipart upload:
a failed upload is aborted, not left behind.

Run by CTest (data_s3_upload) as: .venv/bin/python tests/s3/test_s3_upload.py TEST_BINARY
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "objstore"))
import servers  # noqa: E402


def main():
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ft_s3_upload_")
    moto = servers.Moto(tmp)
    front = servers.Front(moto.port, drop_parts=1)
    try:
        moto.s3.create_bucket(Bucket="ckpt")
        env = dict(os.environ, **moto.env(), FT_TEST_S3_ENDPOINT=moto.endpoint, FT_TEST_S3_FRONT=front.endpoint,
                   FT_TEST_S3_BUCKET="ckpt")
        env.pop("AWS_ENDPOINT_URL", None)
        p = subprocess.run([binary], env=env, timeout=600)
        if p.returncode != 0:
            print(f"FAIL: {binary} exited {p.returncode}")
            return 1
        uploads = moto.s3.list_multipart_uploads(Bucket="ckpt").get("Uploads", [])
        if uploads:
            print(f"FAIL: multipart uploads left behind: {[u['Key'] for u in uploads]}")
            return 1
        if len(front.dropped_parts) != 1:
            print(f"FAIL: the front cut {len(front.dropped_parts)} part uploads, expected 1")
            return 1
        print("OK: uploads, a retried dropped part, no multipart upload left behind")
        return 0
    finally:
        front.stop()
        moto.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
