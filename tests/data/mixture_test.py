"""Weighted mixtures and per-language validation end to end, on a real RU+EN dataset prepared from
Debian's manual pages (prepare cuts shards per language):

- `fluxtrain data inspect` shows each source's exact share of every train.batch_size x 100
  samples, and its tokens and epochs over the run;
- training with data.mixture = "ru=0.5, en=0.5" logs val_loss_ru / val_bpc_ru / val_loss_en /
  val_bpc_en (and a plain dataset with both languages logs them too), and the report draws them;
- resuming at another dp (2 -> 1) continues the same global order: every step's data_hash equals
  the uninterrupted run's;
- new weights at a resume hold from that step on (the batches after it differ, those before are
  the same) and the checkpoint records both weight sets with the sample they took effect from.

usage: mixture_test.py FLUXTRAIN CONFIG
"""
import json
import os
import subprocess
import sys
import tempfile

FT, CONFIG = sys.argv[1], sys.argv[2]
MANPAGES = ["/usr/share/man/man1/[a-b]*.gz", "/usr/share/man/ru/man1/[a-f]*.gz"]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args, **kw):
    p = subprocess.run([FT, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, **kw)
    if p.returncode != 0:
        sys.exit(f"fluxtrain {' '.join(args[:2])} exited with {p.returncode}:\n{p.stdout[-3000:]}")
    return p.stdout


def rows(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "ds")
        run(["prepare", "--input", *MANPAGES, "--out", data, "--shards", "4", "--vocab-size", "512",
             "--val-fraction", "0.1"])
        common = ["--set", 'data.source="dataset"', "--set", f'data.path="{data}"', "--set", "model.vocab_size=512",
                  "--set", "train.eval_interval=6", "--set", "train.eval_batches=1"]
        mix = ["--set", 'data.mixture="ru=0.5, en=0.5"']

        out = run(["data", "inspect", "--config", CONFIG, *common, *mix, "--set", "train.steps=1000"])
        print(out)
        lines = {l.split()[0]: l.split() for l in out.splitlines()[2:] if l.strip()}
        check(lines.get("ru", [None] * 4)[3] == "400/800" and lines.get("en", [None] * 4)[3] == "400/800",
              "inspect: ru and en each get 400 of every 800 samples")
        check(lines["ru"][6] == "4000" and lines["en"][6] == "4000", "inspect: 4000 samples of each over 1000 steps")

        full = os.path.join(tmp, "full")
        run(["train", "--config", CONFIG, "--run-dir", full, *common, *mix, "--set", "train.steps=12"])
        a = rows(full)
        last = a[-1]
        check(all(k in last for k in ("val_loss_ru", "val_bpc_ru", "val_loss_en", "val_bpc_en", "val_bpc")),
              "mixture: metrics.jsonl has val_loss/val_bpc for ru and en")
        check(abs(last["val_loss"] - 0.5 * (last["val_loss_ru"] + last["val_loss_en"])) < 1e-9,
              "mixture: val_loss is the weighted mean of the sources'")
        report = run(["report", full])
        html = open(os.path.join(full, "report.html"), encoding="utf-8").read() if os.path.exists(
            os.path.join(full, "report.html")) else report
        check("validation bits/char, ru" in html and "validation bits/char, en" in html,
              "report: per-language bits/char")

        # dp 2 for 6 steps, then resumed at dp 1: the same batches as the uninterrupted run.
        split = os.path.join(tmp, "split")
        run(["train", "--config", CONFIG, "--run-dir", split, *common, *mix, "--set", "train.steps=6",
             "--set", "parallel.dp=2", "--nproc", "2", "--set", "ckpt.interval=6"])
        run(["train", "--config", CONFIG, "--run-dir", split, *common, *mix, "--set", "train.steps=12",
             "--set", "ckpt.interval=6", "--set", 'ckpt.resume="auto"'])
        b = rows(split)
        check([r["data_hash"] for r in b] == [r["data_hash"] for r in a],
              "resume at another dp (2 -> 1) continues the same global order (data_hash per step)")

        # New weights at the resume: same first 6 batches, different later ones, recorded.
        rew = os.path.join(tmp, "reweighted")
        run(["train", "--config", CONFIG, "--run-dir", rew, *common, *mix, "--set", "train.steps=6",
             "--set", "ckpt.interval=6"])
        out = run(["train", "--config", CONFIG, "--run-dir", rew, *common, "--set",
                   'data.mixture="ru=0.1, en=0.9"', "--set", "train.steps=12", "--set", "ckpt.interval=6",
                   "--set", 'ckpt.resume="auto"'])
        check("weights change at step 6" in out, "the weight change is logged")
        c = rows(rew)
        check([r["data_hash"] for r in c[:6]] == [r["data_hash"] for r in a[:6]] and
              [r["data_hash"] for r in c[6:]] != [r["data_hash"] for r in a[6:]],
              "new weights hold from the resumed step on")
        with open(os.path.join(rew, "checkpoints", "step_00000012", "manifest.json")) as f:
            mixture = json.load(f)["loader"]["mixture"]
        check(mixture == [{"from_sample": 0, "weights": {"en": 0.5, "ru": 0.5}},
                          {"from_sample": 48, "weights": {"en": 0.9, "ru": 0.1}}],
              f"the checkpoint records the weights and when they changed: {mixture}")

        # A plain dataset with two languages reports both too (the demo's case).
        plain = os.path.join(tmp, "plain")
        run(["train", "--config", CONFIG, "--run-dir", plain, *common, "--set", "train.steps=6"])
        p = rows(plain)[-1]
        check("val_bpc_ru" in p and "val_bpc_en" in p and "val_bpc" in p, "plain dataset: val_bpc_ru and val_bpc_en")
    print(f"{len(failures)} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
