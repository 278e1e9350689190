//! What a typed `launch` and an execution plan accept for a tensor: a [`Tensor`], or with
//! feature `ndarray` (default) any `ndarray` array or view of the same element type.
//!
//! - **Inputs** ([`AsInput`]): `&Tensor<T>`, `&Array<T, D>`, `&ArrayView<T, D>`,
//!   `ArrayView<T, D>` (any `ndarray` storage, any dimension). A standard-layout (row-major,
//!   C-contiguous) array is borrowed as it is: no element is copied (the argument's bytes are
//!   the array's, [`crate::Arg::data_ptr`]). Any other layout (a transposed or sliced view) is
//!   copied once into row-major order.
//! - **Outputs** ([`AsOutput`]): `&mut Tensor<T>`, `&mut Array<T, D>`, `&mut ArrayViewMut<T, D>`,
//!   `ArrayViewMut<T, D>`. An output is written in place, so it must be in standard layout; any
//!   other layout is refused by name before anything runs (the rule of the seed's plan
//!   outputs, "they must be float64 and C-contiguous", applied to every output), with the fix.

use crate::{Arg, Result, Tensor};
use eagle_runtime::Element;

/// A value a launch or a plan takes as an input tensor of element type `T`.
pub trait AsInput<'a, T: Element> {
    /// The argument, borrowing the caller's storage when its layout is row-major.
    ///
    /// # Errors
    /// None for the types eagle implements this for; the signature lets an implementation
    /// refuse a value (naming `function` and `argument`).
    fn input_arg(self, function: &str, argument: &str) -> Result<Arg<'a>>;
}

/// A value a launch or a plan takes as an output tensor of element type `T` (written in
/// place).
pub trait AsOutput<'a, T: Element> {
    /// The argument, borrowing the caller's storage.
    ///
    /// # Errors
    /// [`crate::Error::Runtime`] ([`eagle_runtime::RuntimeError::Argument`] naming `function` and `argument`) for an
    /// array whose layout is not row-major (C-contiguous), with its strides and the fix.
    fn output_arg(self, function: &str, argument: &str) -> Result<Arg<'a>>;
}

impl<'a, T: Element> AsInput<'a, T> for &'a Tensor<T> {
    fn input_arg(self, _: &str, _: &str) -> Result<Arg<'a>> {
        Ok(Arg::from(self))
    }
}

impl<'a, T: Element> AsOutput<'a, T> for &'a mut Tensor<T> {
    fn output_arg(self, _: &str, _: &str) -> Result<Arg<'a>> {
        Ok(Arg::from(self))
    }
}

#[cfg(feature = "ndarray")]
mod nd {
    use super::*;
    use crate::Error;
    use eagle_runtime::RuntimeError;
    use ndarray::{ArrayBase, ArrayView, ArrayViewMut, Data, DataMut, Dimension};

    fn input<'a, T: Element, D: Dimension>(a: ArrayView<'a, T, D>) -> Arg<'a> {
        let shape = a.shape().to_vec();
        match a.to_slice() {
            Some(s) => Arg::input(&shape, s),
            None => Arg::input_owned(&shape, a.iter().copied().collect()),
        }
    }

    fn output<'a, T: Element, D: Dimension>(
        a: ArrayViewMut<'a, T, D>,
        function: &str,
        argument: &str,
    ) -> Result<Arg<'a>> {
        let shape = a.shape().to_vec();
        let strides = a.strides().to_vec();
        match a.into_slice() {
            Some(s) => Ok(Arg::output(&shape, s)),
            None => Err(Error::Runtime(RuntimeError::Argument {
                function: function.into(),
                argument: argument.into(),
                expected: "an output in standard layout (row-major, C-contiguous), which eagle writes in place; pass a standard-layout array (`Array::zeros(shape)`) and copy it into the view afterwards (`view.assign(&out)`)".into(),
                found: format!("an array of shape {shape:?} with strides {strides:?} (elements)"),
            })),
        }
    }

    impl<'a, T: Element, S: Data<Elem = T>, D: Dimension> AsInput<'a, T> for &'a ArrayBase<S, D> {
        fn input_arg(self, _: &str, _: &str) -> Result<Arg<'a>> {
            Ok(input(self.view()))
        }
    }

    impl<'a, T: Element, D: Dimension> AsInput<'a, T> for ArrayView<'a, T, D> {
        fn input_arg(self, _: &str, _: &str) -> Result<Arg<'a>> {
            Ok(input(self))
        }
    }

    impl<'a, T: Element, S: DataMut<Elem = T>, D: Dimension> AsOutput<'a, T>
        for &'a mut ArrayBase<S, D>
    {
        fn output_arg(self, function: &str, argument: &str) -> Result<Arg<'a>> {
            output(self.view_mut(), function, argument)
        }
    }

    impl<'a, T: Element, D: Dimension> AsOutput<'a, T> for ArrayViewMut<'a, T, D> {
        fn output_arg(self, function: &str, argument: &str) -> Result<Arg<'a>> {
            output(self, function, argument)
        }
    }
}
