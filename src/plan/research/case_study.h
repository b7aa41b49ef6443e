// A customer's case in full: the job a claims file describes (the record schema of
// configs/claims/case-study.json plus "ckpt_every_steps" and "recovery_s"), planned as
// `fluxtrain plan` plans any job, and its claimed figures beside the planned ones, with the
// claim checker's arithmetic for those that cannot be true.
//
//   json claims = json::parse(read_file("configs/claims/case-study.json"));
//   Job job = case_job(claims);                 // model, GPUs, batch, tokens, checkpoint interval
//   PlanResult r = best_layout_or_throw(job, options);
//   puts(format_case(claims, job, r).c_str());  // claimed vs planned, then the violations
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "plan/plan.h"

namespace ft::plan {

// The job: job_from_record's model, GPUs and batch; tokens = tokens_trained, else epochs x
// dataset_tokens; the checkpoint interval from "ckpt_every_steps" and the restart time from
// "recovery_s" when the case states them. Throws ft::Error naming the file's field.
Job case_job(const nlohmann::json& claims);

// Claimed vs planned (tokens/s, step time, MFU, days, the checkpoint interval, recovery), then
// check_claims' verdict with its arithmetic.
std::string format_case(const nlohmann::json& claims, const Job& job, const PlanResult& r);
nlohmann::json case_to_json(const nlohmann::json& claims, const Job& job, const PlanResult& r);

}  // namespace ft::plan
