// Terminal tables for plans: one layout in detail, or a ranked list of layouts.
//
//   std::fputs(format_plan(job, result).c_str(), stdout);
//   std::fputs(format_search(job, search, RankBy::kTime).c_str(), stdout);
#pragma once

#include <string>

#include "plan/search.h"

namespace ft::plan {

std::string format_job(const Job& job);
std::string format_plan(const Job& job, const PlanResult& r);
std::string format_search(const Job& job, const SearchResult& s, RankBy by);

}  // namespace ft::plan
