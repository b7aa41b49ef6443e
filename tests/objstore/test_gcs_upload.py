"""GcsClient's uploads (tests/unit/data_gcs_upload_test.cpp) against a real GCS emulator:
fake-gcs-server behind servers.Front, which keeps the resumable sessions' committed offsets and
checks the final CRC32C as GCS does, cuts the first two chunks of objects under "dropped/" (after
passing on their first half) and damages one chunk of each object under "damaged/".
Afterwards: each byte of the dropped object reached the front at most twice, the failed uploads
cancelled their sessions, and nothing of them is stored.

Run by CTest (data_gcs_upload) as: .venv/bin/python tests/objstore/test_gcs_upload.py TEST_BINARY
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402


def main():
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ft_gcs_upload_")
    gcs = servers.FakeGcs(tmp)
    front = servers.Front(gcs.port, gcs=True)
    failures = []
    try:
        gcs.create_bucket("ckpt")
        front.drop_chunks, front.chunk_match = 2, "dropped/"
        env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_APPLICATION_CREDENTIALS",
                                                                 "GOOGLE_OAUTH_ACCESS_TOKEN", "STORAGE_EMULATOR_HOST")}
        env.update(FT_TEST_GCS_ENDPOINT=front.endpoint, FT_TEST_GCS_BUCKET="ckpt")
        # The damaged-chunk test runs after the dropped one (gtest's order): arm it by name.
        p = subprocess.run([binary, "--gtest_filter=-*Damaged*"], env=env, timeout=600)
        if p.returncode != 0:
            failures.append(f"{binary} exited {p.returncode}")
        front.corrupt_chunks, front.chunk_match = 1, "damaged/"
        p = subprocess.run([binary, "--gtest_filter=*Damaged*"], env=env, timeout=600)
        if p.returncode != 0:
            failures.append(f"{binary} (damaged chunk) exited {p.returncode}")
        size = 2048 * 1024 + 5
        got = front.upload_bytes.get("dropped/multi.bin", 0)
        print(f"dropped/multi.bin: {size} bytes, {got} reached the front ({front.dropped_chunks} chunks cut)")
        if front.dropped_chunks != 2:
            failures.append(f"the front cut {front.dropped_chunks} chunks, expected 2")
        if not size < got <= 2 * size:
            failures.append(f"bytes sent for the dropped object: {got}, expected in ({size}, {2 * size}]")
        # The damaged upload (refused at its last chunk) and the failed one cancel their sessions.
        if front.cancelled != 2:
            failures.append(f"{front.cancelled} sessions cancelled, expected 2")
    finally:
        front.stop()
        gcs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    if failures:
        return 1
    print("OK: resumable uploads, a session resumed from its committed offset, CRC32C refused, sessions cancelled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
