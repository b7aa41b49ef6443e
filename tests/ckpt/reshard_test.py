"""Resharding: a checkpoint saved under one layout resumes under another with the same losses.

Saves at step 3 of a dp2 x pp2 ZeRO-1 run (4 ranks, 6 steps), then resumes from it under
dp4 ZeRO-3, dp2 ZeRO-2, pp2 ZeRO-0, one process, and from an offline `fluxtrain ckpt reshard` to
one process — each must reproduce the uninterrupted run's losses of steps 4..6 within fp32
tolerance (1e-5 relative; summation orders differ between layouts), which also shows that the
data order continued without a repeat or a gap (a shifted batch changes the loss by ~1e-2), and
the token count must continue.

usage: reshard_test.py FLUXTRAIN CONFIG
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import ckpt_lib as L  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
COMMON = ["train.steps=6", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32", "ckpt.interval=3",
          "parallel.micro_batches=2"]
SOURCE = ["parallel.dp=2", "parallel.pp=2", "parallel.zero=1"]
TARGETS = [
    ("dp4 zero3", 4, ["parallel.dp=4", "parallel.zero=3"]),
    ("dp2 zero2", 2, ["parallel.dp=2", "parallel.zero=2"]),
    ("pp2 zero0", 2, ["parallel.pp=2"]),
    ("1 process", 1, []),
]


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        L.train(FT, CONFIG, src, COMMON + SOURCE, nproc=4)
        ref = L.losses(src)
        step3 = os.path.join(src, "checkpoints", "step_00000003")
        m = json.load(open(os.path.join(step3, "manifest.json")))
        print(f"saved under world {m['layout']['world']} (dp {m['layout']['dp']} x pp {m['layout']['pp']}, "
              f"zero {m['layout']['zero']}): {len(m['files'])} rank files")
        print(f"{'layout':>22}  " + "  ".join(f"step {s:>2}   " for s in (4, 5, 6)) + "  worst rel")
        print(f"{'uninterrupted':>22}  " + "  ".join(f"{ref[s]:.8f}" for s in (4, 5, 6)))
        # Offline reshard to one process.
        off = os.path.join(tmp, "offline", "checkpoints", "step_00000003")
        p = L.ckpt(FT, "reshard", step3, off, "--dp", "1", "--pp", "1", "--zero", "0")
        if p.returncode != 0:
            failures.append(f"ckpt reshard failed: {p.stderr}")
        runs = [(n, k, s, None) for n, k, s in TARGETS] + [("offline reshard, 1 proc", 1, [], off)]
        for name, nproc, sets, prepared in runs:
            run = os.path.join(tmp, name.replace(" ", "_").replace(",", ""))
            if prepared:
                run = os.path.dirname(os.path.dirname(prepared))
            else:
                L.copy_checkpoint(step3, run)
            L.train(FT, CONFIG, run, COMMON + sets, nproc, resume="auto")
            got = L.losses(run)
            rows = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
            worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in (4, 5, 6))
            print(f"{name:>22}  " + "  ".join(f"{got[s]:.8f}" for s in (4, 5, 6)) + f"  {worst:.1e}")
            if worst > 1e-5:
                failures.append(f"{name}: losses differ by {worst:.1e}")
            if sorted(got) != [4, 5, 6] or rows[0]["tokens"] != 4 * 8 * 32:
                failures.append(f"{name}: steps {sorted(got)}, tokens at step 4 {rows[0]['tokens']}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("reshard: every layout continues with the same losses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
