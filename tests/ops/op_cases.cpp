// The op harness's table. Adding an op to kernels/op_decls.inc without a row here fails to compile
// (one static_assert per op names it); the ctest test ops_missing_row_fails_to_build proves it.
#include "ops/op_cases.h"

namespace ft::test {
namespace {

// One row per op, in the order of kernels/op_decls.inc.
constexpr OpRow kOpRows[] = {
    {OpId::matmul, &rows::matmul},
    {OpId::matmul_bf16, &rows::matmul_bf16},
    {OpId::embedding_forward, &rows::embedding_forward},
    {OpId::embedding_backward, &rows::embedding_backward},
    {OpId::rmsnorm_forward, &rows::rmsnorm_forward},
    {OpId::rmsnorm_forward_bf16, &rows::rmsnorm_forward_bf16},
    {OpId::rmsnorm_backward, &rows::rmsnorm_backward},
    {OpId::rope_forward, &rows::rope_forward},
    {OpId::rope_backward, &rows::rope_backward},
    {OpId::rope_tables, &rows::rope_tables},
    {OpId::attention_forward, &rows::attention_forward},
    {OpId::attention_backward, &rows::attention_backward},
    {OpId::kv_cache_write, &rows::kv_cache_write},
    {OpId::attention_decode, &rows::attention_decode},
    {OpId::swiglu_forward, &rows::swiglu_forward},
    {OpId::swiglu_forward_bf16, &rows::swiglu_forward_bf16},
    {OpId::swiglu_backward, &rows::swiglu_backward},
    {OpId::swiglu_backward_bf16, &rows::swiglu_backward_bf16},
    {OpId::xent_forward, &rows::xent_forward},
    {OpId::xent_backward, &rows::xent_backward},
    {OpId::xent_backward_bf16, &rows::xent_backward_bf16},
    {OpId::xent_shard_targets, &rows::xent_shard_targets},
    {OpId::xent_target_logit, &rows::xent_target_logit},
    {OpId::xent_combine_max, &rows::xent_combine_max},
    {OpId::xent_combine_sums, &rows::xent_combine_sums},
    {OpId::xent_combine_finish, &rows::xent_combine_finish},
    {OpId::xent_loss_from_rows, &rows::xent_loss_from_rows},
    {OpId::add_inplace, &rows::add_inplace},
    {OpId::scale_inplace, &rows::scale_inplace},
    {OpId::sum_squares, &rows::sum_squares},
    {OpId::sum_in_order, &rows::sum_in_order},
    {OpId::to_bf16, &rows::to_bf16},
    {OpId::from_bf16, &rows::from_bf16},
    {OpId::to_fp16, &rows::to_fp16},
    {OpId::from_fp16, &rows::from_fp16},
    {OpId::gram_schmidt, &rows::gram_schmidt},
    {OpId::powersgd_error_feedback, &rows::powersgd_error_feedback},
    {OpId::adamw_step, &rows::adamw_step},
};

constexpr bool has_row(OpId id) {
  for (const OpRow& r : kOpRows)
    if (r.id == id) return true;
  return false;
}

constexpr bool every_op_has_a_row() {
  for (size_t i = 0; i < kOpCount; ++i)
    if (!has_row(static_cast<OpId>(i))) return false;
  return true;
}

constexpr bool rows_in_op_order() {
  if (std::size(kOpRows) != kOpCount) return false;
  for (size_t i = 0; i < kOpCount; ++i)
    if (kOpRows[i].id != static_cast<OpId>(i)) return false;
  return true;
}

// One check per op of the list, its name in the message.
#define FT_OP(name, params, args)                                                                  \
  static_assert(has_row(OpId::name),                                                               \
                "op '" #name "' has no row in the op harness: add {OpId::" #name ", &rows::" #name \
                "} to kOpRows in tests/ops/op_cases.cpp and define rows::" #name "()");
#include "kernels/op_decls.inc"
#undef FT_OP
// With every op present: no op twice, and row i is op i.
static_assert(!every_op_has_a_row() || rows_in_op_order(),
              "the op harness's kOpRows (tests/ops/op_cases.cpp) must hold one row per op, in the order of "
              "kernels/op_decls.inc");

}  // namespace

std::span<const OpRow> op_rows() {
  return kOpRows;
}

const OpCase& op_case(OpId id) {
  return kOpRows[static_cast<size_t>(id)].row();
}

}  // namespace ft::test
