"""Gradient compression composes with ZeRO 0, 1 and 2 and still trains, on real text.

A small RU+EN dataset is prepared from Debian's manual pages (English man1 pages a-c, Russian
man1 pages a-l; a 1024-piece tokenizer). For bf16 and PowerSGD at dp = 2 with ZeRO 0, 1, 2: the
validation loss after a fixed number of steps stays within 2% of uncompressed training, and the
bytes on the wire per step are reported and must shrink.

usage: compression_test.py FLUXTRAIN CONFIG
"""
import os
import subprocess
import sys
import tempfile

from dist_lib import train

FT, CONFIG = sys.argv[1], sys.argv[2]
STEPS = 40
COMMON = ["--set", f"train.steps={STEPS}", "--set", f"train.eval_interval={STEPS}", "--set", "train.eval_batches=4",
          "--set", "train.batch_size=8", "--set", "train.seq_len=64", "--set", "optim.lr=3e-3",
          "--set", "parallel.dp=2", "--nproc", "2", "--set", "model.dim=128", "--set", "model.ffn_dim=256",
          "--set", "model.n_heads=4", "--set", "model.vocab_size=1024", "--set", 'data.source="dataset"']
MANPAGES = ["/usr/share/man/man1/[a-c]*.gz", "/usr/share/man/ru/man1/[a-l]*.gz"]


def prepare(tmp):
    out = os.path.join(tmp, "manpages")
    subprocess.run([FT, "prepare", "--input", *MANPAGES, "--out", out, "--shards", "2", "--vocab-size", "1024",
                    "--val-fraction", "0.1"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    COMMON.extend(["--set", f'data.path="{out}"'])


def run(tmp, name, extra):
    return train(FT, CONFIG, os.path.join(tmp, name), COMMON + extra)


def val_loss(rows):
    return next(r["val_loss"] for r in reversed(rows) if "val_loss" in r)


def wire_bytes(row):
    return sum(v for k, v in row.items() if k.startswith("comm_") and k.endswith("_bytes"))


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        prepare(tmp)
        print(f"{'mode':>10} {'zero':>4} {'val@' + str(STEPS):>10} {'vs none':>8} {'bytes/step':>11} {'vs none':>8}")
        for zero in (0, 1, 2):
            base = run(tmp, f"none{zero}", ["--set", f"parallel.zero={zero}"])
            b_loss, b_bytes = val_loss(base), wire_bytes(base[-1])
            print(f"{'none':>10} {zero:>4} {b_loss:10.5f} {'':>8} {b_bytes:11d}")
            for mode in ("bf16", "powersgd"):
                rows = run(tmp, f"{mode}{zero}", ["--set", f"parallel.zero={zero}",
                                                  "--set", f'parallel.grad_compression="{mode}"'])
                loss, nbytes = val_loss(rows), wire_bytes(rows[-1])
                rel = (loss - b_loss) / b_loss
                print(f"{mode:>10} {zero:>4} {loss:10.5f} {rel:+8.2%} {nbytes:11d} {nbytes / b_bytes:8.2f}x")
                if abs(rel) > 0.02:
                    failures.append(f"{mode} zero{zero}: validation loss {loss} is {rel:+.2%} from {b_loss}")
                if nbytes >= b_bytes:
                    failures.append(f"{mode} zero{zero}: {nbytes} bytes/step is not below {b_bytes}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("compression: every mode reaches a validation loss within 2% of none and sends fewer bytes")


if __name__ == "__main__":
    main()
