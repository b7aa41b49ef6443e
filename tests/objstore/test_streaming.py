"""Training straight from object storage at dp = 2 (data.path = "s3://…" / "gs://…") against real
servers (moto for S3, fake-gcs-server for GCS), compared with training from the local copy:

- the losses (and validation losses) are identical, step for step;
- each rank's data_fetched_bytes (metrics.jsonl per_rank; the same number feeds
  fluxtrain_data_fetched_bytes_total on its /metrics, checked in obs_telemetry_test) equals the
  bytes of exactly the shards of its range, recomputed here from the manifest with the lane
  arithmetic of docs/formats.md (SequencePlan) — also for a mixture of the dataset's languages
  (each rank fetches its range of every source);
- a connection dropped in the middle of each shard's first download (a front that cuts it after
  a few KiB) resumes, and nothing is fetched twice;
- a cache smaller than a rank's range (data.cache_bytes) evicts, never holds more than its size,
  and still gives the local losses.

Run by CTest (data_streaming) as .venv/bin/python tests/objstore/test_streaming.py FLUXTRAIN CONFIG.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import servers  # noqa: E402

FT = sys.argv[1] if len(sys.argv) > 1 else "build/fluxtrain"
CONFIG = sys.argv[2] if len(sys.argv) > 2 else "configs/tiny.toml"
STEPS, BATCH, SEQ = 6, 8, 32
MANPAGES = ["/usr/share/man/man1/[a-b]*.gz", "/usr/share/man/ru/man1/[a-f]*.gz"]


def ranges(manifest, seq_len, batch, world, language=None):
    """Shards [first, last) each rank reads: batch positions [r·B/R, (r+1)·B/R) take lanes of
    sequences [j·S/B, (j+1)·S/B), sequences numbered in shard order (docs/formats.md); with a
    language, over that language's shards only (indices into that list)."""
    shards = [s for s in manifest["splits"]["train"]["shards"] if language in (None, s.get("language"))]
    prefix = [0]
    for s in shards:
        t = s["tokens"]
        prefix.append(prefix[-1] + ((t - 1) // seq_len if t > seq_len else 0))
    total = prefix[-1]

    def shard_of(seq):
        return max(i for i in range(len(shards)) if prefix[i] <= seq)

    out = []
    for r in range(world):
        a, b = r * batch // world, (r + 1) * batch // world
        first_seq, end_seq = a * total // batch, b * total // batch
        out.append((shard_of(first_seq), shard_of(end_seq - 1) + 1))
    return out


class StreamingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ft_stream_")
        cls.stoppers = []
        try:
            cls.data = os.path.join(cls.tmp, "ds")
            subprocess.run([FT, "prepare", "--input", *MANPAGES, "--out", cls.data, "--shards", "6",
                            "--vocab-size", "512", "--val-fraction", "0.1"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
            with open(os.path.join(cls.data, "manifest.json")) as f:
                cls.manifest = json.load(f)
            cls.moto = servers.Moto(cls.tmp)
            cls.stoppers.append(cls.moto.stop)
            cls.moto.s3.create_bucket(Bucket="corpus")
            # No '/' inside S3 prefixes here: moto checks signatures against the percent-decoded query
            # string, while AWS signs '/' in a query value as %2F (tests/s3/test_s3.py says more).
            cls.moto.upload_dir("corpus", "ds", cls.data)
            cls.gcs = servers.FakeGcs(cls.tmp)
            cls.stoppers.append(cls.gcs.stop)
            cls.gcs.create_bucket("corpus")
            cls.gcs.upload_dir("corpus", "datasets/ds", cls.data)
            cls.local = cls.train("local", cls.data)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for stop in reversed(cls.stoppers):
            stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def train(cls, name, path, endpoint=None, env_extra=None, extra=(), dp=2):
        run_dir = os.path.join(cls.tmp, name)
        args = [FT, "train", "--config", CONFIG, "--run-dir", run_dir, "--nproc", str(dp),
                "--set", f"parallel.dp={dp}", "--set", f"train.steps={STEPS}", "--set", f"train.batch_size={BATCH}",
                "--set", f"train.seq_len={SEQ}", "--set", "train.eval_interval=3", "--set", "train.eval_batches=1",
                "--set", "model.vocab_size=512", "--set", 'data.source="dataset"', "--set", f'data.path="{path}"',
                *extra]
        if endpoint:
            args += ["--set", f'data.endpoint="{endpoint}"']
        env = dict(os.environ, **(env_extra or {}))
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=600)
        if p.returncode != 0:
            raise AssertionError(f"{name}: fluxtrain exited with {p.returncode}:\n{p.stdout[-4000:]}")
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        return rows, p.stdout

    def check_against_local(self, rows, log):
        local_rows, _ = self.local
        self.assertEqual([r["loss"] for r in rows], [r["loss"] for r in local_rows])
        self.assertEqual([r.get("val_loss") for r in rows], [r.get("val_loss") for r in local_rows])
        self.assertEqual([r["data_hash"] for r in rows], [r["data_hash"] for r in local_rows])
        shards = self.manifest["splits"]["train"]["shards"]
        want = [sum(s["bytes"] for s in shards[a:b]) for a, b in ranges(self.manifest, SEQ, BATCH, 2)]
        got = rows[-1]["per_rank"]["data_fetched_bytes"]
        print(f"\n  final loss {rows[-1]['loss']:.6f} (local {local_rows[-1]['loss']:.6f}); fetched per rank {got}, "
              f"ranges {ranges(self.manifest, SEQ, BATCH, 2)} = {want} bytes of {sum(s['bytes'] for s in shards)}")
        self.assertEqual(got, want, log[-3000:])
        self.assertLess(max(want), sum(s["bytes"] for s in shards))  # each rank fetched less than the whole
        self.assertEqual(rows[-1]["data_fetched_bytes"], want[0])  # rank 0's own figure

    def test_s3_with_dropped_connections(self):
        front = servers.Front(self.moto.port, drop_after=4096)
        try:
            rows, log = self.train("s3", "s3://corpus/ds", front.endpoint, self.moto.env())
            self.check_against_local(rows, log)
            self.assertIn("resuming from byte 4096", log)
            self.assertGreater(len(front.dropped), 0)
            # Every byte on the wire was used once: the dropped part was kept and continued from.
            shard_bytes = {s["file"]: s["bytes"] for sp in ("train", "validation")
                           for s in self.manifest["splits"][sp]["shards"]}
            for path, served in front.bytes_served.items():
                name = path.rsplit("/", 1)[-1]
                if name in shard_bytes:
                    self.assertEqual(served % shard_bytes[name], 0, path)
        finally:
            front.stop()

    def test_gcs(self):
        front = servers.Front(self.gcs.port, gcs=True, drop_after=4096)
        try:
            rows, log = self.train("gcs", "gs://corpus/datasets/ds", front.endpoint,
                                   {"GOOGLE_APPLICATION_CREDENTIALS": "", "GOOGLE_OAUTH_ACCESS_TOKEN": ""})
            self.check_against_local(rows, log)
            self.assertIn("resuming from byte 4096", log)
        finally:
            front.stop()

    def test_mixture_of_languages_from_gcs(self):
        mix = ["--set", 'data.mixture="ru=0.5, en=0.5"']
        local_rows, _ = self.train("local-mix", self.data, extra=mix)
        rows, log = self.train("gcs-mix", "gs://corpus/datasets/ds", self.gcs.endpoint,
                               {"GOOGLE_APPLICATION_CREDENTIALS": "", "GOOGLE_OAUTH_ACCESS_TOKEN": ""}, extra=mix)
        self.assertEqual([r["loss"] for r in rows], [r["loss"] for r in local_rows])
        self.assertEqual([r.get("val_bpc_ru") for r in rows], [r.get("val_bpc_ru") for r in local_rows])
        want = [0, 0]
        for lang in ("ru", "en"):
            shards = [s for s in self.manifest["splits"]["train"]["shards"] if s.get("language") == lang]
            for r, (a, b) in enumerate(ranges(self.manifest, SEQ, BATCH, 2, lang)):
                want[r] += sum(s["bytes"] for s in shards[a:b])
        self.assertEqual(rows[-1]["per_rank"]["data_fetched_bytes"], want, log[-3000:])
        print(f"\n  mixture from GCS: final loss {rows[-1]['loss']:.6f} (local {local_rows[-1]['loss']:.6f}); "
              f"fetched per rank {want}")

    def test_bounded_cache(self):
        # A rank reading more shards than data.cache_bytes holds (its smallest value, 1 MiB, with
        # ~3.5 MB of generated text in 24 shards, the class dataset's tokenizer): it is warned, evicts, still trains the
        # local losses, and the cache directory never holds more shard bytes than its size.
        data, text = os.path.join(self.tmp, "ds-big"), os.path.join(self.tmp, "text-big")
        os.makedirs(text)
        rng = random.Random(19)
        words = [w for s in self.manifest["splits"]["train"]["shards"] for w in s["file"].split(".")] + \
            "the file system command option value process memory buffer error signal user data".split()
        for i in range(48):  # ~3.5 MB of plain text: quick to prepare, more than 2 MiB of shards
            with open(os.path.join(text, f"doc{i:02d}.txt"), "w") as f:
                f.write("\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(1000)))
        subprocess.run([FT, "prepare", "--input", text, "--out", data, "--shards", "24",
                        "--tokenizer", os.path.join(self.data, "tokenizer.model"), "--val-fraction", "0.05"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        with open(os.path.join(data, "manifest.json")) as f:
            splits = json.load(f)["splits"]
        cap = max(1 << 20, 2 * max(s["bytes"] for sp in ("train", "validation") for s in splits[sp]["shards"]))
        total = sum(s["bytes"] for s in splits["train"]["shards"])
        self.assertGreater(total, 2 * cap)  # the case under test: the rank cannot hold its range
        self.moto.upload_dir("corpus", "dsbig", data)
        steps = ["--set", "train.steps=30"]  # enough batches to cross several shards
        local_rows, _ = self.train("local-big", data, dp=1, extra=steps)
        rows, log = self.train("s3-small-cache", "s3://corpus/dsbig", self.moto.endpoint, self.moto.env(),
                               extra=[*steps, "--set", f"data.cache_bytes={cap}"], dp=1)
        self.assertEqual([r["loss"] for r in rows], [r["loss"] for r in local_rows])
        self.assertIn("fetched again after eviction", log)
        cache_root = os.path.join(self.tmp, "s3-small-cache", "data-cache")
        held = {}
        for d in sorted(os.listdir(cache_root)):
            files = [f for f in os.listdir(os.path.join(cache_root, d)) if f.endswith(".ftshard")]
            held[d] = sum(os.path.getsize(os.path.join(cache_root, d, f)) for f in files)
            self.assertLessEqual(held[d], cap, d)
        print(f"\n  data.cache_bytes = {cap}: the rank's range {total} bytes in {len(splits['train']['shards'])} "
              f"shards; shard bytes held at the end {held}; fetched {rows[-1]['data_fetched_bytes']}; "
              f"final loss {rows[-1]['loss']:.6f} (local {local_rows[-1]['loss']:.6f})")

    def test_missing_dataset_prefix(self):
        with self.assertRaises(AssertionError) as e:
            self.train("missing", "s3://corpus/nothing-here", self.moto.endpoint, self.moto.env())
        self.assertIn("not a fluxtrain dataset", str(e.exception))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
