#!/usr/bin/env python3
"""Static check of deploy/k8s/: every manifest parses, and the fields that matter agree with each
other and with the training config. No cluster runs here: this cannot show that a cluster accepts
the manifests, only that they say what docs/operations.md promises.

usage: k8s_manifests_test.py FLUXTRAIN_BINARY DEPLOY_K8S_DIR"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib

import yaml

FT, K8S = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


docs = []
for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
    with open(path) as f:
        for d in yaml.safe_load_all(f):
            if d is not None:
                docs.append((os.path.basename(path), d))
check(len(docs) >= 8, f"{len(docs)} manifests parsed")
for name, d in docs:
    named = d.get("kind") == "Kustomization" or d.get("metadata", {}).get("name")  # kustomize needs no name
    check(all(k in d for k in ("apiVersion", "kind")) and named, f"{name}: {d.get('kind')} has apiVersion, kind and "
          "metadata.name")


def one(kind, name=None):
    found = [d for _, d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    check(len(found) == 1, f"exactly one {kind} {name or ''}".rstrip())
    return found[0] if found else {}


kust = one("Kustomization")
listed = set(kust.get("resources", []))
files = {os.path.basename(p) for p in glob.glob(os.path.join(K8S, "*.yaml"))} - {"kustomization.yaml"}
check(listed == files, f"kustomization lists every manifest file ({sorted(files - listed)} missing)")

# Priorities: training above validation; validation never preempts.
train_pc, val_pc = one("PriorityClass", "fluxtrain-training"), one("PriorityClass", "fluxtrain-validation")
check(train_pc.get("value", 0) > val_pc.get("value", 0), "training PriorityClass value > validation's")
check(val_pc.get("preemptionPolicy") == "Never", "validation never preempts")
check(train_pc.get("preemptionPolicy") == "PreemptLowerPriority", "training may preempt lower priorities")

# The config the pods mount is a valid fluxtrain config.
cm = one("ConfigMap", "fluxtrain-config")
toml_text = cm["data"]["train.toml"]
cfg = tomllib.loads(toml_text)
with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
    f.write(toml_text)
    f.flush()
    r = subprocess.run([FT, "config", "--config", f.name], capture_output=True, text=True)
check(r.returncode == 0, "the ConfigMap's train.toml loads with `fluxtrain config`" + ("" if r.returncode == 0 else ": " + r.stderr))
par = cfg.get("parallel", {})
world = par.get("dp", 1) * par.get("tp", 1) * par.get("pp", 1)
run_dir = cfg["train"]["run_dir"]
metrics_port = cfg.get("metrics", {}).get("port", 9400)
ckpt = cfg.get("ckpt", {})
check(ckpt.get("interval", 0) > 0, "the config writes checkpoints (ckpt.interval > 0): the supervisor restarts from them")
check(ckpt.get("encrypt") is True, "checkpoints are encrypted (their key is the Secret's)")
check(cfg.get("metrics", {}).get("enabled") is True, "the /metrics endpoint is enabled (metrics.enabled)")

pvc = one("PersistentVolumeClaim", "fluxtrain-runs")
check("ReadWriteMany" in pvc.get("spec", {}).get("accessModes", []), "the runs volume is ReadWriteMany (shared)")


def pod_spec(t):
    return t["template"]["spec"]


def container(t):
    return pod_spec(t)["containers"][0]


def mounts_of(t):
    spec = pod_spec(t)
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    out = {}
    for m in container(t).get("volumeMounts", []):
        v = vols.get(m["name"], {})
        claim = v.get("persistentVolumeClaim", {}).get("claimName")
        cmap = v.get("configMap", {}).get("name")
        out[m["mountPath"]] = (claim or cmap or v.get("emptyDir") is not None and "emptyDir", m.get("readOnly", False))
    return out


def key_from_secret(t):
    for e in container(t).get("env", []):
        if e["name"] == "FLUXTRAIN_CKPT_KEY":
            ref = e.get("valueFrom", {}).get("secretKeyRef", {})
            return ref.get("name") == "fluxtrain-ckpt-key" and ref.get("key") == "key"
    return False


def under(path, mount):
    return path == mount or path.startswith(mount.rstrip("/") + "/")


# Training: MPIJob launcher runs the supervisor on the operator's hostfile; workers hold the GPUs.
job = one("MPIJob", "fluxtrain-llama2-7b")
spec = job.get("spec", {})
check(job.get("apiVersion") == "kubeflow.org/v2beta1", "MPIJob is kubeflow.org/v2beta1")
launcher, worker = spec["mpiReplicaSpecs"]["Launcher"], spec["mpiReplicaSpecs"]["Worker"]
cmd = container(launcher)["command"]
check(cmd[:2] == ["fluxtrain", "launch"] and "--hosts" in cmd and cmd[cmd.index("--hosts") + 1] == "/etc/mpi/hostfile",
      "the launcher runs `fluxtrain launch --hosts /etc/mpi/hostfile`")
check(cmd[cmd.index("--config") + 1] == "/etc/fluxtrain/train.toml", "the launcher reads the mounted config")
gpus = int(container(worker)["resources"]["limits"]["nvidia.com/gpu"])
check(gpus == int(container(worker)["resources"]["requests"]["nvidia.com/gpu"]) and gpus > 0, f"workers request {gpus} GPUs")
check(spec.get("slotsPerWorker") == gpus, "slotsPerWorker = GPUs per worker (one rank per GPU)")
check(worker["replicas"] * gpus == world, f"workers × slots = {worker['replicas']} × {gpus} = parallel world size {world}")
for role, t in (("launcher", launcher), ("worker", worker)):
    check(pod_spec(t).get("priorityClassName") == "fluxtrain-training", f"{role} has the training PriorityClass")
    check(key_from_secret(t), f"{role}: FLUXTRAIN_CKPT_KEY comes from Secret fluxtrain-ckpt-key")
    m = mounts_of(t)
    check(m.get("/etc/fluxtrain") == ("fluxtrain-config", True), f"{role} mounts the config read-only")
    runs = [p for p, (claim, ro) in m.items() if claim == "fluxtrain-runs" and not ro]
    check(any(under(run_dir, p) for p in runs), f"{role}: train.run_dir {run_dir} is on the shared volume, writable")
# Stopping on purpose: the launcher resumes, and the pods give the ranks time to checkpoint.
check(cmd[-2:] == ["--resume", "auto"], "a restarted launcher continues the run (--resume auto)")
grace = cfg.get("fault", {}).get("preempt_grace_s", 60)
for role, t in (("launcher", launcher), ("worker", worker)):
    tgp = pod_spec(t).get("terminationGracePeriodSeconds", 30)
    check(tgp > grace, f"{role}: terminationGracePeriodSeconds {tgp} > fault.preempt_grace_s {grace}")
stop = container(worker).get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
check(any("-TERM" in c and "fluxtrain" in c for c in stop), "a worker's preStop sends SIGTERM to its ranks")
# GPUs and NCCL: the ranks run on the GPUs (train.device), the launcher holds none, and NCCL's
# settings are on the launcher, whose mpirun passes them on; a worker's own env would not reach
# ranks started through its sshd.
check(cfg["train"].get("device") in ("cuda", "auto"), f"train.device = {cfg['train'].get('device')!r} runs on the GPUs")
lres = container(launcher).get("resources", {})
check("nvidia.com/gpu" not in {**lres.get("limits", {}), **lres.get("requests", {})}, "the launcher holds no GPU")
lenv = {e["name"]: e.get("value") for e in container(launcher).get("env", [])}
wenv = {e["name"] for e in container(worker).get("env", [])}
check(lenv.get("NCCL_SOCKET_IFNAME") and lenv.get("NCCL_DEBUG") and lenv.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID",
      f"the launcher sets NCCL_SOCKET_IFNAME, NCCL_DEBUG and CUDA_DEVICE_ORDER for the ranks: {lenv}")
check(lenv.get("NCCL_IB_DISABLE") == "1" or lenv.get("NCCL_IB_HCA"), "InfiniBand is named (NCCL_IB_HCA) or off")
check(not any(n.startswith(("NCCL_", "CUDA_")) for n in wenv), "no NCCL/CUDA setting only on the workers (sshd drops it)")
caps = pod_spec(worker)["containers"][0].get("securityContext", {}).get("capabilities", {}).get("add", [])
check("IPC_LOCK" in caps, "workers may lock memory (NCCL's InfiniBand registration)")
ann = worker["template"]["metadata"].get("annotations", {})
check(ann.get("prometheus.io/scrape") == "true", "workers are annotated for Prometheus scraping")
check(ann.get("prometheus.io/port") == str(metrics_port), f"scrape port = metrics.port {metrics_port}")
ports = sorted(p["containerPort"] for p in container(worker).get("ports", []))
check(ports == list(range(metrics_port, metrics_port + gpus)), "one metrics port per local rank (metrics.port + local rank)")
pm = one("PodMonitor", "fluxtrain-workers")
check(len(pm.get("spec", {}).get("podMetricsEndpoints", [])) == gpus, "the PodMonitor scrapes every local rank's port")
check(pm["spec"]["selector"]["matchLabels"].items() <= worker["template"]["metadata"]["labels"].items(),
      "the PodMonitor selects the worker pods")

# Validation: low priority, reads checkpoints from the same volume read-only, evaluates them.
cj = one("CronJob", "fluxtrain-validate")
vt = cj["spec"]["jobTemplate"]["spec"]
check(pod_spec(vt).get("priorityClassName") == "fluxtrain-validation", "validation has the validation PriorityClass")
check(cj["spec"].get("concurrencyPolicy") == "Forbid", "validations do not pile up")
vcmd = container(vt)["command"]
ev = vcmd.index("fluxtrain") if "fluxtrain" in vcmd else 0
check(vcmd[ev:ev + 2] == ["fluxtrain", "eval"] and vcmd[vcmd.index("--ckpt") + 1] == run_dir,
      f"validation runs `fluxtrain eval --ckpt {run_dir}`")
vgpus = int(container(vt)["resources"]["limits"]["nvidia.com/gpu"])
np_ = int(vcmd[vcmd.index("-np") + 1]) if vcmd[0] == "mpirun" else 1
vsets = dict(vcmd[i + 1].split("=", 1) for i in range(len(vcmd) - 1) if vcmd[i] == "--set")
vworld = int(vsets.get("parallel.dp", par.get("dp", 1))) * int(vsets.get("parallel.tp", par.get("tp", 1))) * \
    int(vsets.get("parallel.pp", par.get("pp", 1)))
check(np_ == vgpus == vworld, f"validation: {np_} rank(s) = {vgpus} GPU(s) = its layout's world size {vworld}")
check(int(vsets.get("parallel.tp", par.get("tp", 1))) == par.get("tp", 1),
      "validation keeps the training tensor-parallel degree (its memory per GPU is the training's)")
vm = mounts_of(vt)
check(any(claim == "fluxtrain-runs" and ro and under(run_dir, p) for p, (claim, ro) in vm.items()),
      "validation mounts the runs volume read-only where the checkpoints are")
check(key_from_secret(vt), "validation: FLUXTRAIN_CKPT_KEY comes from the same Secret")
out = vcmd[vcmd.index("--out-dir") + 1]
check(any(under(out, p) and not ro for p, (claim, ro) in vm.items()), "validation writes its metrics to a writable volume")
claims = {c for _, d in docs if d["kind"] == "PersistentVolumeClaim" for c in [d["metadata"]["name"]]}
used = {v["persistentVolumeClaim"]["claimName"] for t in (launcher, worker, vt) for v in pod_spec(t).get("volumes", [])
        if "persistentVolumeClaim" in v}
check(used <= claims, f"every claim used is defined ({sorted(used - claims)} missing)")

# The image: every pod runs what deploy/docker/Dockerfile builds, under the name
# scripts/fresh-machine-check.sh builds (and trains in) it.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(K8S)))
with open(os.path.join(REPO, "scripts", "fresh-machine-check.sh")) as f:
    m = re.search(r"^IMAGE_CPU=(\S+)", f.read(), re.M)
built = m.group(1) if m else "(no IMAGE_CPU= line)"
with open(os.path.join(REPO, "deploy", "docker", "Dockerfile")) as f:
    dockerfile = f.read()
check(f"-f deploy/docker/Dockerfile -t {built} " in dockerfile,
      f"deploy/docker/Dockerfile's build line tags {built}, the name scripts/fresh-machine-check.sh builds")
for role, t in (("launcher", launcher), ("worker", worker), ("validation", vt)):
    image = container(t).get("image")
    check(image == built, f"{role} runs image {built} (found {image})")
entry = re.search(r"^ENTRYPOINT (.*)$", dockerfile, re.M)
check(entry is not None and entry.group(1).strip() == '["fluxtrain"]', "the image's entrypoint is fluxtrain")
wcmd = container(worker).get("command", [])
check(wcmd[:1] == ["/usr/sbin/sshd"] and "-D" in "".join(wcmd[1:]),
      "workers run the image's sshd in the foreground (the launcher's mpirun reaches them with ssh)")
check(re.search(r"apt-get install[^\n]*openssh-server", dockerfile) is not None, "the image installs openssh-server")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all Kubernetes manifest checks passed (static: no cluster was involved)")
