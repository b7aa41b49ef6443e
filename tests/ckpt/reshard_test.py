"""Resharding: a checkpoint saved under one layout resumes under another with the same losses.

Two sources, each a 6-step run of the tiny model (4 ranks) saving at step 3:
  A  dp2 x tp2, ZeRO 1  — resumed under dp4 ZeRO 3, one process, tp2 (sequence parallel) x pp2
     ZeRO 0, tp4 (the 2 kv heads replicated over pairs of ranks), and after an offline
     `fluxtrain ckpt reshard` to one process and to tp2 x pp2 ZeRO 3;
  B  dp2 x pp2, ZeRO 1  — resumed under one process, dp2 x tp2 ZeRO 3, and after an offline
     reshard to one process.
Each resumed run must reproduce the uninterrupted run's losses of steps 4..6 within fp32
tolerance (1e-5 relative: summation orders differ between layouts), continue the token count,
and read exactly the batches the uninterrupted run read at steps 4..6 (metrics.jsonl's data_hash,
a layout-independent hash of each step's global batch): the data order continues without a repeat
or a gap. Offline outputs must pass `fluxtrain ckpt verify`, and an offline reshard to the
source's own layout must reproduce the trainer's files exactly (pieces, geometry, checksums).

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
          "parallel.micro_batches=2", "train.threads=1"]
SOURCES = {
    "A: dp2 x tp2 zero1": (["parallel.dp=2", "parallel.tp=2", "parallel.zero=1"], [
        ("dp4 zero3", 4, ["parallel.dp=4", "parallel.zero=3"], None),
        ("1 process", 1, [], None),
        ("tp2 sp x pp2 zero0", 4, ["parallel.tp=2", "parallel.sequence_parallel=true", "parallel.pp=2"], None),
        ("tp4 (kv heads repl.)", 4, ["parallel.tp=4"], None),
        ("offline -> 1 process", 1, [], ["--dp", "1", "--tp", "1", "--pp", "1", "--zero", "0"]),
        ("offline -> tp2 x pp2 z3", 4, ["parallel.tp=2", "parallel.pp=2", "parallel.zero=3"],
         ["--dp", "1", "--tp", "2", "--pp", "2", "--zero", "3"]),
    ]),
    "B: dp2 x pp2 zero1": (["parallel.dp=2", "parallel.pp=2", "parallel.zero=1"], [
        ("1 process", 1, [], None),
        ("dp2 x tp2 zero3", 4, ["parallel.dp=2", "parallel.tp=2", "parallel.zero=3"], None),
        ("offline -> 1 process", 1, [], ["--dp", "1", "--tp", "1", "--pp", "1", "--zero", "0"]),
    ]),
}


def rows(run_dir):
    return {r["step"]: r for r in (json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")))}


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for si, (source, (src_sets, targets)) in enumerate(SOURCES.items()):
            src = os.path.join(tmp, f"src{si}")
            L.train(FT, CONFIG, src, COMMON + src_sets, nproc=4)
            ref = rows(src)
            step3 = os.path.join(src, "checkpoints", "step_00000003")
            m = json.load(open(os.path.join(step3, "manifest.json")))
            lay = m["layout"]
            print(f"{source}: saved under world {lay['world']} (dp {lay['dp']} x tp {lay['tp']} x pp {lay['pp']}, "
                  f"zero {lay['zero']}): {len(m['files'])} rank files, loader at sample {m['loader']['next_sample']}")
            # Offline, to the source's own layout: the same files, piece geometry and checksums as
            # the trainer wrote (the offline writer places state exactly like the ranks do).
            same = os.path.join(tmp, f"src{si}_same", "step_00000003")
            lay_args = ["--dp", str(lay["dp"]), "--tp", str(lay["tp"]), "--pp", str(lay["pp"]), "--zero", str(lay["zero"])]
            p = L.ckpt(FT, "reshard", step3, same, *lay_args)
            if p.returncode != 0:
                failures.append(f"{source}: reshard to its own layout: {p.stderr[-500:]}")
            else:
                m2 = json.load(open(os.path.join(same, "manifest.json")))
                strip = lambda fs: [{k: f[k] for k in ("name", "rank", "payload_bytes")} for f in fs]  # noqa: E731
                ok = m2["tensors"] == m["tensors"] and strip(m2["files"]) == strip(m["files"])
                print(f"  offline reshard to the same layout: {len(m2['files'])} files, "
                      f"{sum(len(t['pieces']) for t in m2['tensors'])} pieces, "
                      f"{'identical to' if ok else 'DIFFERENT FROM'} the trainer's")
                if not ok:
                    failures.append(f"{source}: offline reshard to the same layout differs from the trainer's files")
            print(f"  {'loaded under':>24}  " + "  ".join(f"step {s:>2}   " for s in (4, 5, 6)) + "  worst rel  data")
            print(f"  {'(uninterrupted)':>24}  " + "  ".join(f"{ref[s]['loss']:.8f}" for s in (4, 5, 6)))
            for ti, (name, nproc, sets, offline) in enumerate(targets):
                run = os.path.join(tmp, f"src{si}_t{ti}")
                if offline:
                    out = os.path.join(run, "checkpoints", "step_00000003")
                    p = L.ckpt(FT, "reshard", step3, out, *offline)
                    v = L.ckpt(FT, "verify", out)
                    if p.returncode != 0 or v.returncode != 0:
                        failures.append(f"{source} {name}: reshard rc {p.returncode} {p.stderr[-500:]} "
                                        f"verify rc {v.returncode} {v.stderr[-500:]}")
                        continue
                else:
                    L.copy_checkpoint(step3, run)
                L.train(FT, CONFIG, run, COMMON + sets, nproc, resume="auto")
                got = rows(run)
                if sorted(got) != [4, 5, 6]:
                    failures.append(f"{source} -> {name}: steps {sorted(got)} after resuming at step 3")
                    continue
                worst = max(abs(got[s]["loss"] - ref[s]["loss"]) / abs(ref[s]["loss"]) for s in (4, 5, 6))
                same_data = all(got[s]["data_hash"] == ref[s]["data_hash"] for s in (4, 5, 6))
                print(f"  {name:>24}  " + "  ".join(f"{got[s]['loss']:.8f}" for s in (4, 5, 6)) +
                      f"  {worst:.1e}    {'same batches' if same_data else 'OTHER BATCHES'}")
                if worst > 1e-5:
                    failures.append(f"{source} -> {name}: losses differ by {worst:.1e}")
                if not same_data:
                    failures.append(f"{source} -> {name}: data hashes {[got[s]['data_hash'] for s in (4, 5, 6)]} vs "
                                    f"{[ref[s]['data_hash'] for s in (4, 5, 6)]}: the data order did not continue")
                if got[4]["tokens"] != ref[4]["tokens"]:
                    failures.append(f"{source} -> {name}: tokens at step 4 {got[4]['tokens']} vs {ref[4]['tokens']}")
        # The data hash tells batches apart: consecutive steps never share one.
        hashes = [ref[s]["data_hash"] for s in sorted(ref)]
        if len(set(hashes)) != len(hashes):
            failures.append(f"data hashes repeat within a run: {hashes}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("reshard: every layout continues with the same losses and the same batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
