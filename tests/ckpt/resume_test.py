"""Resume: losses after resuming are bit-identical to an uninterrupted run with the same layout.

For each layout (one process; dp2 ZeRO-1; dp2 ZeRO-3; pp2; dp2 x tp2 with sequence parallelism
ZeRO-1; tp2 x pp2 ZeRO-3; one process with encryption), trains the tiny model for 8 steps saving
at steps 4 and 8, then starts a fresh run from the step-4 checkpoint (`--resume auto`) and
compares the losses of steps 5..8 bit for bit, and the batches read (metrics.jsonl's data_hash). Also: the time
from process start to the first resumed step is logged; resuming on a dataset with another
tokenizer, or with another batch size, is refused.

usage: resume_test.py FLUXTRAIN CONFIG
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import ckpt_lib as L  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMON = ["train.steps=8", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32",
          "ckpt.interval=4", "ckpt.keep=3", "train.threads=1"]

LAYOUTS = [
    ("1 process", 1, []),
    ("dp2 zero1", 2, ["parallel.dp=2", "parallel.zero=1"]),
    ("dp2 zero3", 2, ["parallel.dp=2", "parallel.zero=3"]),
    ("pp2", 2, ["parallel.pp=2", "parallel.micro_batches=2"]),
    ("dp2 x tp2 sp zero1", 4, ["parallel.dp=2", "parallel.tp=2", "parallel.sequence_parallel=true", "parallel.zero=1"]),
    ("tp2 x pp2 zero3", 4, ["parallel.tp=2", "parallel.pp=2", "parallel.micro_batches=2", "parallel.zero=3"]),
    ("1 process, encrypted", 1, ["ckpt.encrypt=true"]),
]


def main():
    failures = []
    env = {"FLUXTRAIN_CKPT_KEY": L.KEY}
    with tempfile.TemporaryDirectory() as tmp:
        for name, nproc, sets in LAYOUTS:
            tag = name.replace(" ", "_").replace(",", "")
            full = os.path.join(tmp, tag + "_full")
            L.train(FT, CONFIG, full, COMMON + sets, nproc, env=env)
            ref = L.losses(full)
            ref_data = L.data_hashes(full)
            step4 = os.path.join(full, "checkpoints", "step_00000004")
            if not os.path.exists(os.path.join(step4, "manifest.json")):
                failures.append(f"{name}: no committed checkpoint at step 4")
                continue
            resumed = os.path.join(tmp, tag + "_resumed")
            L.copy_checkpoint(step4, resumed)
            p = L.train(FT, CONFIG, resumed, COMMON + sets, nproc, resume="auto", env=env)
            got = L.losses(resumed)
            same = all(got.get(s) == ref[s] for s in range(5, 9))
            same_data = all(L.data_hashes(resumed).get(s) == ref_data[s] for s in range(5, 9))
            steps = sorted(got)
            print(f"{name:>22}: steps {steps[0]}..{steps[-1]} after resume; losses 5..8 "
                  f"{'bit-identical' if same else 'DIFFER'}: " + " ".join(f"{got.get(s, float('nan')):.9f}" for s in range(5, 9)) +
                  f"; {'same batches' if same_data else 'OTHER BATCHES'}")
            if steps[0] != 5 or not same or not same_data:
                failures.append(f"{name}: resumed losses {[got.get(s) for s in range(5, 9)]} vs {[ref[s] for s in range(5, 9)]}")
            times = [r for r in L.records(resumed) if r.get("event") == "resume"]
            if not times or "from process start to the end of the first resumed step" not in p.stderr:
                failures.append(f"{name}: no resume time logged")
            else:
                print(f"{'':>22}  {times[0]['seconds_from_start']:.2f} s from process start to the first resumed step")
            saves = [r for r in L.records(full) if r.get("event") == "save"]
            if [r["step"] for r in saves if r["ok"]] != [4, 8]:
                failures.append(f"{name}: saves {saves}")
            else:
                print(f"{'':>22}  save at step 4: stall {saves[0]['stall_s'] * 1e3:.1f} ms, background write "
                      f"{saves[0]['write_s'] * 1e3:.1f} ms ({100 * saves[0]['stall_ratio']:.1f}% of a synchronous save)")

        # fp16: the dynamic loss scale is part of the state. An overflow at step 2 halves it; with a
        # window of 3 it grows again after step 5 — only if the checkpoint kept the clean-step count.
        fp16 = ["train.precision=\"fp16\"", "optim.loss_scale_window=3"]
        inject = {"FLUXTRAIN_FAULT_INJECT": "gradinf@2"}
        full = os.path.join(tmp, "fp16_full")
        L.train(FT, CONFIG, full, COMMON + fp16, env=inject)
        resumed = os.path.join(tmp, "fp16_resumed")
        L.copy_checkpoint(os.path.join(full, "checkpoints", "step_00000004"), resumed)
        L.train(FT, CONFIG, resumed, COMMON + fp16, resume="auto", env=inject)
        ref, got = L.column(full, "loss_scale"), L.column(resumed, "loss_scale")
        ref_loss, got_loss = L.losses(full), L.losses(resumed)
        same = all(got.get(s) == ref[s] and got_loss.get(s) == ref_loss[s] for s in range(5, 9))
        print(f"{'1 process, fp16':>22}: loss scale by step {[ref[s] for s in sorted(ref)]}; after resume "
              f"{[got.get(s) for s in range(5, 9)]}; losses 5..8 {'bit-identical' if same else 'DIFFER'}")
        if not same or ref[2] != 65536 or ref[3] != 32768 or ref[5] != 32768 or ref[6] != 65536:
            failures.append(f"fp16 resume: scales {got} vs {ref}, losses {got_loss} vs {ref_loss}")

        # The loss-spike guard's window is part of the state: a spike at step 6 (× 30) is judged against
        # steps 1..5 (fault.spike_min_history = 4). Resumed from step 4 without the saved window the
        # guard would see one step and let the spike through; with it, the resumed run skips it as the
        # uninterrupted one does: the same decisions and bit-identical weights and Adam moments at
        # step 8. Resumed into another layout (dp 2) it keeps the window and skips the spike too.
        spike = ["fault.spike_min_history=4", "fault.spike_window=20"]
        inject = {"FLUXTRAIN_FAULT_INJECT": "spike@6*30"}
        full = os.path.join(tmp, "spike_full")
        L.train(FT, CONFIG, full, COMMON + spike, env=inject)
        for name, nproc, sets in (("1 process", 1, []), ("dp2 zero1", 2, ["parallel.dp=2", "parallel.zero=1"])):
            resumed = os.path.join(tmp, "spike_resumed_" + str(nproc))
            L.copy_checkpoint(os.path.join(full, "checkpoints", "step_00000004"), resumed)
            p = L.train(FT, CONFIG, resumed, COMMON + spike + sets, nproc, resume="auto", env=inject)
            ref, got = L.column(full, "guard"), L.column(resumed, "guard")
            restored = "loss-spike guard restored: 4 step(s) of history" in p.stderr
            same = L.piece_checksums(full, 8) == L.piece_checksums(resumed, 8)
            print(f"{'spike guard, ' + name:>22}: guard decisions {ref} uninterrupted, {got} after resume from step "
                  f"4 ({'window restored' if restored else 'WINDOW NOT RESTORED'}); step-8 weights and moments "
                  + ("bit-identical" if same else "differ" if nproc == 1 else "not compared (another layout)"))
            if ref != {6: "loss_spike"} or got != ref or not restored or (nproc == 1 and not same):
                failures.append(f"spike guard after resume ({name}): {got} vs {ref}, restored {restored}, "
                                f"weights identical {same}")

        # Another batch size: the data order would not continue — refused, naming the key.
        other = os.path.join(tmp, "batch")
        L.copy_checkpoint(os.path.join(tmp, "1_process_full", "checkpoints", "step_00000004"), other)
        p = L.train(FT, CONFIG, other, COMMON + ["train.batch_size=4"], resume="auto", check=False)
        if p.returncode == 0 or "train.batch_size" not in p.stderr:
            failures.append(f"batch size change not refused: {p.stderr[-500:]}")
        else:
            print("batch size change refused:", [l for l in p.stderr.splitlines() if l.startswith("error")][0])

        # Another tokenizer: two datasets of the same text with different vocabularies.
        text = os.path.join(ROOT, "tests", "data", "bilingual.txt")
        for name, vocab in (("ds_a", 400), ("ds_b", 420)):
            subprocess.run([FT, "prepare", "--input", text, "--out", os.path.join(tmp, name), "--shards", "1",
                            "--vocab-size", str(vocab), "--val-fraction", "0"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ds = ["model.vocab_size=512", "data.source=\"dataset\"", "train.steps=2", "ckpt.interval=2",
              "train.eval_interval=0", "train.batch_size=4", "train.seq_len=16", "train.threads=1"]
        a = os.path.join(tmp, "tok_a")
        L.train(FT, CONFIG, a, ds + [f"data.path=\"{tmp}/ds_a\""])
        # Generation from that checkpoint, with the dataset's tokenizer, in English and in Russian.
        for prompt in ("The", "Команда"):
            g = subprocess.run([FT, "generate", "--ckpt", a, "--prompt", prompt, "--max-tokens", "8", "--seed", "3"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            print(f"generate {prompt!r}: {g.stdout.strip()!r}")
            if g.returncode != 0 or not g.stdout.startswith(prompt) or len(g.stdout.strip()) <= len(prompt):
                failures.append(f"generate {prompt!r}: rc {g.returncode} {g.stdout!r} {g.stderr[-400:]}")
        # Hugging Face export carries the dataset's tokenizer (LlamaTokenizer files).
        hf = os.path.join(tmp, "tok_a_hf")
        p = L.ckpt(FT, "export-hf", a, hf)
        same_tok = p.returncode == 0 and open(os.path.join(hf, "tokenizer.model"), "rb").read() == \
            open(os.path.join(tmp, "ds_a", "tokenizer.model"), "rb").read()
        tok_cfg = os.path.join(hf, "tokenizer_config.json")
        print(f"export-hf: tokenizer.model {'is the dataset' + chr(39) + 's' if same_tok else 'MISSING OR DIFFERENT'}; "
              f"tokenizer_config.json {'written' if os.path.exists(tok_cfg) else 'MISSING'}")
        if not same_tok or not os.path.exists(tok_cfg):
            failures.append(f"export-hf without the dataset's tokenizer: {p.stderr[-400:]}")
        b = os.path.join(tmp, "tok_b")
        L.copy_checkpoint(os.path.join(a, "checkpoints", "step_00000002"), b)
        p = L.train(FT, CONFIG, b, ds + [f"data.path=\"{tmp}/ds_b\"", "train.steps=4"], resume="auto", check=False)
        if p.returncode == 0 or "tokenizer" not in p.stderr:
            failures.append(f"tokenizer mismatch not refused: {p.stderr[-800:]}")
        else:
            print("tokenizer mismatch refused:", [l for l in p.stderr.splitlines() if l.startswith("error")][0])
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("resume: all layouts bit-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
