"""A real S3-compatible server (moto, signatures checked; tests/objstore/servers.py) for shell tests.

    .venv/bin/python tests/objstore/serve_s3.py ENV_FILE BUCKET PREFIX=LOCAL_DIR... &

Uploads each LOCAL_DIR under s3://BUCKET/PREFIX/, then writes ENV_FILE (shell `export` lines:
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, S3_ENDPOINT) and serves until SIGTERM or
SIGINT, when it stops the server. The file appears only once everything is uploaded.
"""
import os
import signal
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402


def main():
    env_file, bucket, uploads = sys.argv[1], sys.argv[2], sys.argv[3:]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    moto = servers.Moto(tempfile.mkdtemp(prefix="ft_serve_s3_"))
    try:
        moto.s3.create_bucket(Bucket=bucket)
        for u in uploads:
            prefix, local = u.split("=", 1)
            moto.upload_dir(bucket, prefix, local)
        env = dict(moto.env(), S3_ENDPOINT=moto.endpoint)
        with open(env_file + ".tmp", "w") as f:
            f.writelines(f"export {k}={v}\n" for k, v in env.items())
        os.rename(env_file + ".tmp", env_file)
        stop.wait()
    finally:
        moto.stop()


if __name__ == "__main__":
    main()
