// The executor's fiber switch (executor.cpp alone includes this): a CUDA thread's context is its
// stack pointer, and a switch saves the callee-saved registers on the old stack and restores them
// from the new one — no system call. swapcontext would also save and restore the signal mask, an
// rt_sigprocmask system call on every __syncthreads and warp operation of every thread.
//
//   vgpu::FiberContext sched, f;
//   vgpu::fiber_make(&f, stack, stack_bytes, entry);   // entry() must never return
//   vgpu::fiber_switch(&sched, &f);                     // runs entry until it switches back
//
// x86-64 (System V) has the hand-written switch below. Other architectures, and builds with
// AddressSanitizer (which must be told of every stack switch, and intercepts swapcontext to do
// so), keep ucontext.
#pragma once

#include <cstddef>
#include <cstdint>

// -DFT_VGPU_FIBER_ASM=0 selects ucontext anywhere (to test that path).
#ifndef FT_VGPU_FIBER_ASM
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define FT_VGPU_FIBER_ASM 1
#else
#define FT_VGPU_FIBER_ASM 0
#endif
#endif
#if !FT_VGPU_FIBER_ASM
#include <ucontext.h>
#endif

namespace vgpu {

#if FT_VGPU_FIBER_ASM

struct FiberContext {
  void* sp = nullptr;  // the suspended fiber's stack, holding its registers (fiber_switch)
};

// Saves the caller's callee-saved registers on its stack, stores the stack pointer in *save_sp,
// loads to_sp and restores the registers found there; `ret` then continues the other fiber where
// it called this (or enters its entry function, for a fiber fiber_make prepared). The stack from
// the pointer up: r15, r14, r13, r12, rbx, rbp, the return address. Every other register is
// caller-saved in the System V ABI. The floating-point control state (MXCSR, the x87 control
// word), callee-saved too, is left alone: the fibers of a thread share it, as nothing a kernel
// can do changes it (CUDA has no rounding-mode state), and restoring it (ldmxcsr, fldcw) would
// cost most of the switch.
__attribute__((naked, noinline)) inline void fiber_switch_stack(void** /*save_sp: rdi*/, void* /*to_sp: rsi*/) {
  asm volatile(
      "pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "movq %rsp, (%rdi)\n\t"  // the old fiber is suspended here
      "movq %rsi, %rsp\n\t"    // the new one resumes from here
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}

// A stack laid out as fiber_switch_stack leaves a suspended fiber, whose return address is entry:
// the registers zero (rbp = 0 ends a debugger's backtrace), and above entry a null slot standing
// for entry's own return address, so that entry starts with the stack alignment of a called
// function (rsp + 8 a multiple of 16).
inline void fiber_make(FiberContext* c, char* stack, size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  auto* slot = reinterpret_cast<uint64_t*>(top);
  *--slot = 0;                                   // entry's return address: none
  *--slot = reinterpret_cast<uintptr_t>(entry);  // where the first switch's `ret` goes
  for (int r = 0; r < 6; ++r) *--slot = 0;       // rbp, rbx, r12, r13, r14, r15
  c->sp = slot;
}

inline void fiber_switch(FiberContext* from, FiberContext* to) {
  fiber_switch_stack(&from->sp, to->sp);
}

#else

struct FiberContext {
  ucontext_t uc;
};

inline void fiber_make(FiberContext* c, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = bytes;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, entry, 0);
}

inline void fiber_switch(FiberContext* from, FiberContext* to) {
  swapcontext(&from->uc, &to->uc);
}

#endif

}  // namespace vgpu
