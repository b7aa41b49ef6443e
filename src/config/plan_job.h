// The planner's inputs for a trainer configuration: the Job and Layout of a run of `cfg` on
// `device` (parallel.*, train.*, model.recompute). The bridge from the aggregate Config to the
// planner's own inputs (plan/job.h), so that the planner's cost model (ft_plan) reads no Config
// and links no trainer; the dry run, `fluxtrain plan --config` and calibration call it.
//
//   plan::Job job = plan::job_for_run(cfg, plan::find_gpu("cpu"));
//   plan::Layout l = plan::layout_for_run(cfg);
//   plan::PlanResult r = plan::evaluate(job, l);
#pragma once

#include "config/config.h"
#include "plan/catalog.h"
#include "plan/job.h"

namespace ft::plan {

Job job_for_run(const Config& cfg, const GpuSpec& device);
Layout layout_for_run(const Config& cfg);

}  // namespace ft::plan
