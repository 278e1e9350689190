//! The backends: [`cpu`] (Cranelift JIT) and [`cuda`] (CUDA C, compiled by NVRTC or, in the
//! emulation, by the host C++ compiler). Each takes the specialized module.

pub mod cpu;
pub mod cuda;
