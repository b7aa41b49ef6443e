#include "ckpt/ckpt_config.h"

#include "util/config_binder.h"
#include "util/error.h"

namespace ft {

void CkptConfig::bind(ConfigBinder& b) {
  b.add("ckpt.interval", &interval, "save a checkpoint every N steps and after the last step (0 = never)");
  b.add("ckpt.keep", &keep, "newest committed checkpoints kept; older ones are deleted after a newer commit");
  b.add("ckpt.dir", &dir, "checkpoint root holding step_<N>/ directories (empty = <train.run_dir>/checkpoints)");
  b.add("ckpt.async", &async,
        "copy and write checkpoints on a background thread while training goes on (false: the "
        "training thread saves)");
  b.add("ckpt.encrypt", &encrypt, "encrypt checkpoints with AES-256-GCM (key: ckpt.key_file or FLUXTRAIN_CKPT_KEY)");
  b.add("ckpt.key_file", &key_file, "file holding the 256-bit checkpoint key as 64 hex digits");
  b.add("ckpt.chunk_mb", &chunk_mb, "MiB of plaintext per encrypted chunk");
  b.add("ckpt.part_mb", &part_mb,
        "MiB per part of a checkpoint file's multipart upload to s3:// (a file up to this size is one PUT; "
        "S3 requires parts of at least 5 MiB), and per chunk of its resumable upload to gs://");
  b.add("ckpt.when_busy", &when_busy,
        "a save due while one upload is running and another save is queued behind it: \"wait\" (training waits "
        "for the older upload) or \"skip\" (the save is skipped, logged and counted; never the final one)");
  b.add("ckpt.resume", &resume, "resume from: \"\" (fresh), \"auto\" (newest valid checkpoint) or a checkpoint path");
  b.add("ckpt.allow_plaintext", &allow_plaintext,
        "after resuming from encrypted checkpoints, write plaintext ones (false: a run whose checkpoints are "
        "encrypted stays encrypted, whatever ckpt.encrypt says)");
}

void CkptConfig::validate() const {
  if (interval < 0) throw Error(fmt::format("ckpt.interval = {} must be >= 0", interval), "0 turns checkpoints off");
  if (keep < 1) throw Error(fmt::format("ckpt.keep = {} must be >= 1", keep), "keep at least the newest checkpoint");
  if (allow_plaintext && encrypt)
    throw Error("ckpt.allow_plaintext = true contradicts ckpt.encrypt = true",
                "ckpt.allow_plaintext only lets a run resumed from encrypted checkpoints write plaintext ones");
  if (when_busy != "wait" && when_busy != "skip")
    throw Error(fmt::format("ckpt.when_busy = \"{}\" is not a policy", when_busy),
                "use \"wait\" (training waits for the older upload) or \"skip\" (the due save is skipped)");
  if (chunk_mb < 1 || chunk_mb > 1024) throw Error(fmt::format("ckpt.chunk_mb = {} must be in [1, 1024]", chunk_mb));
  // Below 5 MiB only S3-compatible servers configured for it accept the parts (moto, MinIO in tests).
  if (part_mb < 1 || part_mb > 5120)
    throw Error(fmt::format("ckpt.part_mb = {} must be in [1, 5120]", part_mb), "S3 takes parts of 5 MiB to 5 GiB");
}

}  // namespace ft
