use crate::error::RuntimeError;
use eagle_ir::DType;

/// Element types of host tensors.
pub trait Element: Copy + Default + Send + Sync + std::fmt::Debug + 'static {
    /// The IR dtype.
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for f64 {
    const DTYPE: DType = DType::F64;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for i64 {
    const DTYPE: DType = DType::I64;
}
impl Element for u32 {
    const DTYPE: DType = DType::U32;
}
impl Element for u64 {
    const DTYPE: DType = DType::U64;
}

/// A host tensor: a row-major, contiguous array of `T` with a shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor<T: Element> {
    shape: Vec<usize>,
    data: Vec<T>,
}

impl<T: Element> Tensor<T> {
    /// A tensor of zeros.
    pub fn zeros(shape: &[usize]) -> Self {
        Tensor {
            shape: shape.to_vec(),
            data: vec![T::default(); shape.iter().product()],
        }
    }

    /// A tensor holding `data` (row-major).
    ///
    /// # Errors
    /// [`RuntimeError::Argument`] when `data.len()` is not the product of `shape`.
    pub fn from_vec(shape: &[usize], data: Vec<T>) -> Result<Self, RuntimeError> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(RuntimeError::Argument {
                function: "Tensor::from_vec".into(),
                argument: "data".into(),
                expected: format!("{n} elements for shape {shape:?}"),
                found: format!("{} elements", data.len()),
            });
        }
        Ok(Tensor {
            shape: shape.to_vec(),
            data,
        })
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The elements, row-major.
    pub fn data(&self) -> &[T] {
        &self.data
    }
    /// The elements, mutably.
    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
    /// The sub-tensor at index `i` of dim 0, as a slice of elements.
    pub fn row(&self, i: usize) -> &[T] {
        let inner: usize = self.shape.iter().skip(1).product();
        &self.data[i * inner..(i + 1) * inner]
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `T` is one of the plain numeric types implementing `Element` (no padding, any
        // bit pattern valid), so viewing its storage as bytes is sound.
        unsafe {
            std::slice::from_raw_parts(
                self.data.as_ptr().cast::<u8>(),
                std::mem::size_of_val(self.data.as_slice()),
            )
        }
    }
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; every byte pattern written is a valid `T`.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.data.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(self.data.as_slice()),
            )
        }
    }
}
