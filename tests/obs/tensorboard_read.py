#!/usr/bin/env python3
"""TensorBoard's own reader loads the scalar event files fluxtrain writes.

obs_demo_server (rank 0, --tensorboard) runs N steps and writes RUN_DIR/tb/events.out.tfevents.*;
TensorBoard's EventAccumulator must return every scalar with the step and value we wrote
(the demo's loss curve, recomputed here in float32). The reader verifies both CRCs of every
record, so a wrong checksum would fail here; a flipped byte must make it fail, and a truncated
last record must be skipped. Exits 77 (CTest: skipped) when tensorboard is not installed
(it belongs in the test venv: tests/requirements.txt).
"""
import argparse
import glob
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.backend.event_processing import event_file_loader
except ImportError:
    print("tensorboard is not installed in this Python; skipping (add tensorboard to tests/requirements.txt)")
    sys.exit(77)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ft_tb_")
    failures = []

    def check(cond, msg):
        print(("ok   " if cond else "FAIL ") + msg)
        if not cond:
            failures.append(msg)

    try:
        run = os.path.join(tmp, "run")
        steps = 40
        subprocess.run([a.server, "--dump", "--tensorboard", "--steps", str(steps), "--gpu-interval", "0",
                        "--run-dir", run], check=True, stdout=subprocess.DEVNULL)
        files = glob.glob(os.path.join(run, "tb", "events.out.tfevents.*"))
        check(len(files) == 1, f"one event file: {files}")

        acc = EventAccumulator(os.path.join(run, "tb"))
        acc.Reload()
        tags = sorted(acc.Tags()["scalars"])
        want = ["train/grad_norm", "train/learning_rate", "train/loss", "train/mfu", "train/step_s",
                "train/tokens_per_s", "val/bits_per_char", "val/loss"]
        check(tags == want, f"scalar tags {tags}")
        loss = acc.Scalars("train/loss")
        check([e.step for e in loss] == list(range(1, steps + 1)), "train/loss has steps 1..%d" % steps)
        expect = [f32(1.5 + 4.0 * math.exp(-s / 200)) for s in range(1, steps + 1)]
        check(all(e.value == x for e, x in zip(loss, expect)), "train/loss values equal what was written")
        val = acc.Scalars("val/loss")
        check([e.step for e in val] == [10, 20, 30, 40], f"val/loss steps {[e.step for e in val]}")
        check(all(abs(e.wall_time - loss[0].wall_time) < 600 for e in val), "wall times are Unix seconds")

        # The reader checks CRCs: a flipped payload byte must be rejected.
        data = bytearray(open(files[0], "rb").read())
        bad = os.path.join(tmp, "bad")
        os.makedirs(bad)
        corrupt = bytearray(data)
        corrupt[len(corrupt) // 2] ^= 0x40
        open(os.path.join(bad, "events.out.tfevents.1.x"), "wb").write(corrupt)
        try:
            n = sum(1 for _ in event_file_loader.RawEventFileLoader(os.path.join(bad, "events.out.tfevents.1.x")).Load())
            check(n < steps * 6, f"corrupted file stops at the bad record ({n} records read)")
        except Exception as e:  # DataLossError
            check("crc" in str(e).lower(), f"corrupted record rejected: {e}")

        # A truncated last record (a crash mid-write) is skipped, earlier events survive.
        trunc = os.path.join(tmp, "trunc")
        os.makedirs(trunc)
        open(os.path.join(trunc, "events.out.tfevents.1.x"), "wb").write(data[:-7])
        acc2 = EventAccumulator(trunc)
        acc2.Reload()
        check(len(acc2.Scalars("train/loss")) >= steps - 1, "truncated file still readable")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
