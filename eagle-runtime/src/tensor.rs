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
impl Element for i8 {
    const DTYPE: DType = DType::I8;
}
impl Element for u8 {
    const DTYPE: DType = DType::U8;
}
impl Element for i16 {
    const DTYPE: DType = DType::I16;
}
impl Element for u16 {
    const DTYPE: DType = DType::U16;
}
/// IEEE binary16, as the `half` crate holds it.
impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
}
/// bfloat16, as the `half` crate holds it.
impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
}
/// One byte, 0 or 1: every `bool` a kernel stores is one of the two (a comparison, a cast
/// `x as bool`, a load of a `bool`), so the bytes eagle writes into a `Tensor<bool>` are valid.
impl Element for bool {
    const DTYPE: DType = DType::Bool;
}

/// A host tensor: a row-major, contiguous array of `T` with a shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor<T: Element> {
    shape: Vec<usize>,
    data: Vec<T>,
}

/// The number of elements of `shape`, or `None` when the product overflows `usize`.
pub(crate) fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// The error for a shape whose size this machine cannot hold.
fn too_large(function: &str, shape: &[usize], found: String) -> RuntimeError {
    RuntimeError::Argument {
        function: function.into(),
        argument: "shape".into(),
        expected: format!(
            "a shape whose elements fit in memory (at most {} bytes in all); use a smaller shape",
            isize::MAX
        ),
        found: format!("shape {shape:?}: {found}"),
    }
}

impl<T: Element> Tensor<T> {
    /// A tensor of zeros.
    ///
    /// # Panics
    /// When the shape's size overflows `usize` or its memory cannot be allocated (as
    /// `vec![0; n]` would); [`Tensor::try_zeros`] returns those as errors instead.
    pub fn zeros(shape: &[usize]) -> Self {
        match Self::try_zeros(shape) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// A tensor of zeros, or an error when `shape` is too large for this machine.
    ///
    /// # Errors
    /// [`RuntimeError::Argument`] (argument `shape`) when the product of `shape`, or its size
    /// in bytes, overflows, or when the allocation fails.
    pub fn try_zeros(shape: &[usize]) -> Result<Self, RuntimeError> {
        let f = "Tensor::try_zeros";
        let elem = std::mem::size_of::<T>();
        let n = checked_numel(shape)
            .ok_or_else(|| too_large(f, shape, "the product of its dims overflows usize".into()))?;
        match n.checked_mul(elem) {
            Some(b) if b <= isize::MAX as usize => {}
            _ => {
                return Err(too_large(
                    f,
                    shape,
                    format!("{n} elements of {elem} bytes overflow the address space"),
                ))
            }
        }
        let mut data = Vec::new();
        data.try_reserve_exact(n).map_err(|_| {
            too_large(
                f,
                shape,
                format!("{} bytes could not be allocated", n * elem),
            )
        })?;
        data.resize(n, T::default());
        Ok(Tensor {
            shape: shape.to_vec(),
            data,
        })
    }

    /// A tensor holding `data` (row-major).
    ///
    /// # Errors
    /// [`RuntimeError::Argument`] when `data.len()` is not the product of `shape`, or when
    /// that product overflows `usize`.
    pub fn from_vec(shape: &[usize], data: Vec<T>) -> Result<Self, RuntimeError> {
        let Some(n) = checked_numel(shape) else {
            return Err(too_large(
                "Tensor::from_vec",
                shape,
                "the product of its dims overflows usize".into(),
            ));
        };
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
    ///
    /// # Panics
    /// When `i` is not below the extent of dim 0 (as slice indexing does).
    pub fn row(&self, i: usize) -> &[T] {
        let inner: usize = self.shape.iter().skip(1).product();
        &self.data[i * inner..(i + 1) * inner]
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        as_bytes(&self.data)
    }
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        as_bytes_mut(&mut self.data)
    }
}

/// The bytes of `data`.
pub(crate) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `T` is one of the plain numeric types implementing `Element` (no padding, any
    // bit pattern valid), so viewing its storage as bytes is sound.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// The bytes of `data`, for the runtime to write (only with values of `T`: compiled code
/// stores `T`s, and a `bool` only as 0 or 1).
pub(crate) fn as_bytes_mut<T: Element>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; every byte pattern written is a valid `T`.
    unsafe {
        std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(data))
    }
}

/// `Tensor` <-> `ndarray` (feature `ndarray`): a tensor is a row-major array, so the
/// conversions move the storage (no element is copied) whenever the array's layout is the
/// standard one.
#[cfg(feature = "ndarray")]
mod nd {
    use super::{Element, Tensor};
    use ndarray::{ArrayBase, ArrayD, ArrayViewD, ArrayViewMutD, Dimension, IxDyn, OwnedRepr};

    impl<T: Element> Tensor<T> {
        /// The tensor as an `ndarray` view of its shape (no copy).
        pub fn view(&self) -> ArrayViewD<'_, T> {
            ArrayViewD::from_shape(IxDyn(&self.shape), &self.data)
                .expect("a tensor's data has its shape's element count")
        }
        /// The tensor as a mutable `ndarray` view of its shape (no copy).
        pub fn view_mut(&mut self) -> ArrayViewMutD<'_, T> {
            ArrayViewMutD::from_shape(IxDyn(&self.shape), &mut self.data)
                .expect("a tensor's data has its shape's element count")
        }
        /// The tensor as an owned `ndarray` array of its shape: the storage moves (no copy).
        pub fn into_array(self) -> ArrayD<T> {
            ArrayD::from_shape_vec(IxDyn(&self.shape), self.data)
                .expect("a tensor's data has its shape's element count")
        }
    }

    /// The storage moves when `a` is in standard (row-major, C-contiguous) layout and starts
    /// at its allocation; otherwise the elements are copied into row-major order.
    impl<T: Element, D: Dimension> From<ArrayBase<OwnedRepr<T>, D>> for Tensor<T> {
        fn from(a: ArrayBase<OwnedRepr<T>, D>) -> Tensor<T> {
            let shape = a.shape().to_vec();
            let n = a.len();
            if a.is_standard_layout() {
                let (data, offset) = a.into_raw_vec_and_offset();
                if offset.unwrap_or(0) == 0 && data.len() == n {
                    return Tensor { shape, data };
                }
                let start = offset.unwrap_or(0);
                return Tensor {
                    shape,
                    data: data[start..start + n].to_vec(),
                };
            }
            Tensor {
                shape,
                data: a.iter().copied().collect(),
            }
        }
    }

    impl<T: Element> From<Tensor<T>> for ArrayD<T> {
        fn from(t: Tensor<T>) -> ArrayD<T> {
            t.into_array()
        }
    }
}
