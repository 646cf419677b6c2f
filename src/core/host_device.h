// BEAM_HOST_DEVICE: an inline function compiled for the host and, under nvcc, for the device too
// (force-inlined there), so kernels and their host tests share one formula.
#pragma once

#ifdef __CUDACC__
#define BEAM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define BEAM_HOST_DEVICE inline
#endif
