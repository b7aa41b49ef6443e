"""Tampering with an encrypted checkpoint: every kind of damage is a clear error naming the file,
and `--resume auto` skips a damaged checkpoint (with a warning) for the newest intact one.

Cases (`fluxtrain ckpt verify`): no key, wrong key, a flipped payload bit, a flipped tag bit, a
truncated file, a file from another step, two chunks swapped within a file, two ranks' files
swapped, one rank's chunks under another's header, an edited manifest, a missing manifest. Also:
no 32-byte run of the plaintext payload (from the same run unencrypted) is in the encrypted file;
resuming with the wrong key is refused rather than skipped.

usage: tamper_test.py FLUXTRAIN CONFIG
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import ckpt_lib as L  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
ENV = {"FLUXTRAIN_CKPT_KEY": L.KEY}
WRONG = {"FLUXTRAIN_CKPT_KEY": "ab" * 32}
COMMON = ["train.steps=6", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32", "ckpt.interval=2",
          "ckpt.keep=3", "ckpt.encrypt=true", "train.threads=1", "ckpt.chunk_mb=1"]


def flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x01]))


def main():
    failures = []

    def expect(what, p, *needles):
        err = p.stderr + p.stdout
        ok = p.returncode != 0 and all(n in err for n in needles)
        line = next((l for l in err.splitlines() if l.startswith("error")), err.strip().splitlines()[-1] if err.strip() else "")
        print(f"{what:>28}: {'refused' if ok else 'NOT REFUSED'} -> {line}")
        if not ok:
            failures.append(f"{what}: rc {p.returncode}, wanted {needles} in: {err[-600:]}")

    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        L.train(FT, CONFIG, run, COMMON, env=ENV)
        ref = L.losses(run)
        ck = os.path.join(run, "checkpoints")
        s2, s4, s6 = (os.path.join(ck, f"step_{s:08d}") for s in (2, 4, 6))
        p = L.ckpt(FT, "verify", s6, env=ENV)
        print(p.stdout.strip())
        if p.returncode != 0:
            failures.append(f"verify of an intact checkpoint failed: {p.stderr}")
        p = L.ckpt(FT, "inspect", s6)
        if p.returncode != 0 or "AES-256-GCM" not in p.stdout:
            failures.append(f"inspect without key: {p.stdout} {p.stderr}")
        # The plaintext never reaches the disk: no rank file holds the manifest's own bytes either way,
        # but an unencrypted copy must differ from the encrypted one everywhere past the header.
        expect("no key", L.ckpt(FT, "verify", s6, env={"FLUXTRAIN_CKPT_KEY": ""}), "needs its key")
        expect("wrong key", L.ckpt(FT, "verify", s6, env=WRONG), "encrypted with key id")

        # Damaged copies of step 6.
        def damaged(name, how):
            d = os.path.join(tmp, name, "step_00000006")
            shutil.copytree(s6, d)
            how(d)
            return d
        d = damaged("bit", lambda d: flip(os.path.join(d, "rank-00000.ftckpt"), 64 + 123456))
        expect("flipped bit", L.ckpt(FT, "verify", d, env=ENV), "rank-00000.ftckpt", "does not authenticate")
        d = damaged("tag", lambda d: flip(os.path.join(d, "rank-00000.ftckpt"), 64 + (1 << 20) + 3))
        expect("flipped tag bit", L.ckpt(FT, "verify", d, env=ENV), "rank-00000.ftckpt", "does not authenticate")
        d = damaged("trunc", lambda d: os.truncate(os.path.join(d, "rank-00000.ftckpt"), 100000))
        expect("truncated file", L.ckpt(FT, "verify", d, env=ENV), "rank-00000.ftckpt", "truncated")
        d = damaged("other", lambda d: shutil.copy(os.path.join(s4, "rank-00000.ftckpt"), os.path.join(d, "rank-00000.ftckpt")))
        expect("file of another step", L.ckpt(FT, "verify", d, env=ENV), "rank-00000.ftckpt", "holds step 4")

        def swap_chunks(d):  # chunks 0 and 1 of rank 0's file (1 MiB + 16-byte tag each) trade places
            path = os.path.join(d, "rank-00000.ftckpt")
            data = bytearray(open(path, "rb").read())
            n = (1 << 20) + 16
            data[64:64 + n], data[64 + n:64 + 2 * n] = data[64 + n:64 + 2 * n], data[64:64 + n]
            open(path, "wb").write(bytes(data))
        d = damaged("chunks", swap_chunks)
        expect("swapped chunks", L.ckpt(FT, "verify", d, env=ENV), "rank-00000.ftckpt", "chunk 0 does not authenticate")

        # Two ranks' files swapped (a dp2 run); rank 1's encrypted chunks under rank 0's header.
        dp2 = os.path.join(tmp, "dp2")
        L.train(FT, CONFIG, dp2, COMMON + ["train.steps=2", "parallel.dp=2"], nproc=2, env=ENV)
        d2 = os.path.join(dp2, "checkpoints", "step_00000002")

        def swap_files(d):
            a, b = os.path.join(d, "rank-00000.ftckpt"), os.path.join(d, "rank-00001.ftckpt")
            os.rename(a, a + ".x")
            os.rename(b, a)
            os.rename(a + ".x", b)
        d = os.path.join(tmp, "swapped", "step_00000002")
        shutil.copytree(d2, d)
        swap_files(d)
        expect("swapped rank files", L.ckpt(FT, "verify", d, env=ENV), "rank-0000", "holds rank 1's state")

        def forge(d):
            a, b = os.path.join(d, "rank-00000.ftckpt"), os.path.join(d, "rank-00001.ftckpt")
            data = open(a, "rb").read(64) + open(b, "rb").read()[64:]
            open(a, "wb").write(data)
        d = os.path.join(tmp, "forged", "step_00000002")
        shutil.copytree(d2, d)
        forge(d)
        expect("rank 1's chunks, rank 0's header", L.ckpt(FT, "verify", d, env=ENV), "rank-00000.ftckpt",
               "does not authenticate")

        def edit_manifest(d):
            path = os.path.join(d, "manifest.json")
            text = open(path).read().replace('"tokens": 1536', '"tokens": 1537')
            open(path, "w").write(text)
        d = damaged("manifest", edit_manifest)
        expect("edited manifest", L.ckpt(FT, "verify", d, env=ENV), "manifest.json", "HMAC does not verify")
        d = damaged("nomanifest", lambda d: os.remove(os.path.join(d, "manifest.json")))
        expect("missing manifest", L.ckpt(FT, "verify", d, env=ENV), "no manifest")

        # Plaintext never reaches the disk: the same run unencrypted (same seed, same state) writes the
        # payload in the clear; no 32-byte run of it may appear in the encrypted file.
        plain = os.path.join(tmp, "plain")
        L.train(FT, CONFIG, plain, [c for c in COMMON if not c.startswith("ckpt.encrypt")] + ["train.steps=2"])
        clear = open(os.path.join(plain, "checkpoints", "step_00000002", "rank-00000.ftckpt"), "rb").read()[64:]
        secret = open(os.path.join(s2, "rank-00000.ftckpt"), "rb").read()
        probes = [clear[i:i + 32] for i in range(0, len(clear) - 32, len(clear) // 97)]
        leaked = sum(1 for p in probes if p in secret)
        print(f"{'plaintext on disk':>28}: {leaked} of {len(probes)} 32-byte probes of the clear payload found in the "
              f"encrypted file")
        if leaked or clear[:4096] not in open(os.path.join(plain, "checkpoints", "step_00000002", "rank-00000.ftckpt"),
                                              "rb").read():
            failures.append(f"plaintext probes found in the encrypted file: {leaked}")

        # Resharding an encrypted checkpoint keeps it encrypted (same key) and verifiable.
        rs = os.path.join(tmp, "resharded", "step_00000004")
        p = L.ckpt(FT, "reshard", s4, rs, "--dp", "2", "--zero", "3", env=ENV)
        v = L.ckpt(FT, "verify", rs, env=ENV)
        i = L.ckpt(FT, "inspect", rs)
        print(f"{'reshard encrypted':>28}: {p.stdout.strip()}; {v.stdout.strip()[:60]}...")
        if p.returncode or v.returncode or "AES-256-GCM" not in i.stdout or "world 2" not in i.stdout:
            failures.append(f"reshard of an encrypted checkpoint: {p.stderr} {v.stderr} {i.stdout}")

        # Resuming with the wrong key is refused (not skipped for an older checkpoint).
        wrong = os.path.join(tmp, "wrongkey")
        L.copy_checkpoint(s4, wrong)
        p = L.train(FT, CONFIG, wrong, COMMON, resume="auto", env=WRONG, check=False)
        expect("resume with the wrong key", p, "step_00000004", "key id")

        # Resume skips the damaged newest checkpoint and continues from step 4 bit-identically.
        flip(os.path.join(s6, "rank-00000.ftckpt"), 64 + 99)
        p = L.train(FT, CONFIG, run, COMMON + ["train.steps=6"], resume="auto", env=ENV)
        got = L.losses(run)
        warned = "skipping checkpoint" in p.stderr and "step_00000006" in p.stderr
        same = all(got[s] == ref[s] for s in (5, 6))
        print(f"{'resume auto':>28}: {'skipped step 6 with a warning' if warned else 'NO WARNING'}, "
              f"resumed from step 4, losses 5..6 {'bit-identical' if same else 'DIFFER'}")
        if not warned or not same:
            failures.append(f"resume auto over a damaged checkpoint: warned {warned}, same {same}\n{p.stderr[-1500:]}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("tamper: every damage refused with the file named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
