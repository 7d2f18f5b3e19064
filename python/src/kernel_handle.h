// The Python face of a kernel context (kernels::Kernel): valid only while build_program runs that core's
// kernel function; any use afterwards is a RuntimeError instead of a dangling pointer.
#pragma once

#include <pybind11/pybind11.h>

#include "kernels/api/kernel.h"

namespace trnsim::py {

class KernelHandle {
 public:
  explicit KernelHandle(kernels::Kernel& k) : serial_(k.serial()) {}
  kernels::Kernel& get() const {
    kernels::Kernel* k = kernels::Kernel::current();
    if (k == nullptr || k->serial() != serial_)
      throw pybind11::value_error(
          "this kernel context is used outside its build (its core's kernel call ended)");
    return *k;
  }
  uint64_t serial() const { return serial_; }

 private:
  uint64_t serial_;
};

}  // namespace trnsim::py
