// CUDA_OK / CUBLAS_OK: a failed CUDA or cuBLAS call is a bug or a lost device; abort with the
// call, file and the library's message (BEAM_CHECK style).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/check.h"

#define CUDA_OK(call)                                                                       \
  do {                                                                                      \
    cudaError_t beam_cuda_err_ = (call);                                                    \
    BEAM_CHECK(beam_cuda_err_ == cudaSuccess)                                               \
        << #call << ": " << cudaGetErrorName(beam_cuda_err_) << " (" << cudaGetErrorString(beam_cuda_err_) << ")"; \
  } while (0)

#define CUBLAS_OK(call)                                                                     \
  do {                                                                                      \
    cublasStatus_t beam_cublas_st_ = (call);                                                \
    BEAM_CHECK(beam_cublas_st_ == CUBLAS_STATUS_SUCCESS)                                    \
        << #call << ": cuBLAS status " << static_cast<int>(beam_cublas_st_);                \
  } while (0)

// After a kernel launch: reports a bad launch configuration at the launch site.
#define CUDA_LAUNCH_OK() CUDA_OK(cudaGetLastError())
