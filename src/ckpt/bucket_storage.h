// Checkpoints in a bucket: ckpt.dir = "s3://bucket/prefix" (S3Client: AWS, MinIO, any S3-compatible
// store) or "gs://bucket/prefix" (GcsClient: Google Cloud Storage's JSON API). One implementation
// of CheckpointStorage for both — the spool, the layout, listing, manifest-last commit, retention,
// fetch, set-aside — over the client's own protocol (S3 multipart or GCS resumable uploads); only
// what one store has and the other lacks is per store (S3's unfinished multipart uploads, aborted
// by clean_orphans; a GCS upload that never finished leaves no object and nothing billed).
//
//   std::unique_ptr<CheckpointStorage> st = open_bucket_storage("gs://ckpt/run", run_dir, rank, endpoint, 0);
//
// Objects: <prefix>/step_<N>/rank-<r>.ftckpt and <prefix>/step_<N>/manifest.json, the layout of a
// directory. Ranks write through a local spool (<run_dir>/.ckpt-upload/step_<N>/) and read
// through a cache (<run_dir>/.ckpt-cache/rank-<r>/step_<N>/).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ckpt/ckpt_storage.h"

namespace ft {

// endpoint: data.endpoint ("" = the store's own variables: AWS_ENDPOINT_URL*, STORAGE_EMULATOR_HOST);
// part_bytes: ckpt.part_mb (S3's multipart part, GCS's resumable chunk; 0 = the client's default).
std::unique_ptr<CheckpointStorage> open_bucket_storage(const std::string& root, const std::string& run_dir, int rank,
                                                       const std::string& endpoint, uint64_t part_bytes);

}  // namespace ft
